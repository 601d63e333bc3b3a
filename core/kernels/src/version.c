/* The ABI version the Python side checks before it calls anything else. */
#include "sinew_kernels.h"

int32_t sinew_abi_version(void) { return SINEW_ABI_VERSION; }
