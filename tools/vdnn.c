/* The vdnn command: dispatches to its subcommands. */
#include <stdio.h>
#include <string.h>

int vdnn_cmd_train(int argc, char **argv);
int vdnn_cmd_eval(int argc, char **argv);
int vdnn_cmd_info(int argc, char **argv);
int vdnn_cmd_plan(int argc, char **argv);
int vdnn_cmd_simulate(int argc, char **argv);
int vdnn_cmd_plot(int argc, char **argv);
int vdnn_cmd_profile(int argc, char **argv);
int vdnn_cmd_project(int argc, char **argv);
int vdnn_cmd_export(int argc, char **argv);
int vdnn_cmd_sample(int argc, char **argv);

static const char usage[] =
    "usage: vdnn COMMAND [flags]   (vdnn COMMAND --help for its flags)\n"
    "  train   train a model (default: lenet on Fashion-MNIST) and report test accuracy\n"
    "  eval    evaluate a checkpoint on the test split\n"
    "  info    layer shapes, parameters, FLOPs and the memory a training step needs\n"
    "  plan    the memory plan of one training iteration under a policy and budget (dry run)\n"
    "  profile measure per-layer times and the copy link on this device (for the planners)\n"
    "  simulate  predicted time, stalls and memory of one iteration of a plan, from a profile or an estimate\n"
    "  plot    SVG charts of memory over an iteration and of the compute/copy lanes, for several policies\n"
    "  project projected time to train on N devices: data parallelism alone vs hybrid data + model parallelism\n"
    "  export  write an ONNX model back with a checkpoint's trained parameters\n"
    "  sample  continue a text prompt with a trained sequence model (gpt-mini)\n";

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    static const struct { const char *name; int (*run)(int, char **); } cmds[] = {
        {"train", vdnn_cmd_train}, {"eval", vdnn_cmd_eval}, {"info", vdnn_cmd_info}, {"plan", vdnn_cmd_plan},
        {"simulate", vdnn_cmd_simulate}, {"profile", vdnn_cmd_profile}, {"plot", vdnn_cmd_plot},
        {"project", vdnn_cmd_project}, {"export", vdnn_cmd_export}, {"sample", vdnn_cmd_sample}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) return cmds[i].run(argc, argv);
    fprintf(stderr, "vdnn: unknown command '%s'\n%s", argv[1], usage);
    return 2;
}
