// mx_sparse stand-in for CANN's platform/soc_spec.h, included by the asc-devkit's
// tiling/platform/platform_ascendc.h; nothing in it is needed by the declarations we use.
#pragma once
