/* The vdnn command: dispatches subcommands (train, eval, info, plan). */
#include <stdio.h>
int main(void) { puts("vdnn: under construction"); return 1; }
