/* The loaded library's version, from the header's macros (the one place the number lives). */
#include "vdnn/base.h"

#define VDNN_STR2(x) #x
#define VDNN_STR(x) VDNN_STR2(x)

const char *vdnn_version(void)
{
    return VDNN_STR(VDNN_VERSION_MAJOR) "." VDNN_STR(VDNN_VERSION_MINOR) "." VDNN_STR(VDNN_VERSION_PATCH);
}
