// mx_sparse stand-in for the per-op header that CANN's op compiler generates and force-includes
// into a kernel TU (GET_TILING_DATA*, from the op's registered tiling struct). Force-included by
// real_api_check.py. The tiling struct is `const`, as in the generated form, so a kernel that
// writes to its tiling data is rejected. KERNEL_TASK_TYPE_DEFAULT expands to nothing in the real
// headers outside the op compiler's pre-compile pass; here it names its argument, so a misspelt
// kernel type fails the check.
#pragma once
#define GET_TILING_DATA_WITH_STRUCT(tiling_struct, tiling_data, tiling_arg) \
    const tiling_struct tiling_data = *reinterpret_cast<const tiling_struct*>(tiling_arg)
#define GET_TILING_DATA(tiling_data, tiling_arg) GET_TILING_DATA_WITH_STRUCT(TilingData, tiling_data, tiling_arg)
#define __PLUGIN__KERNEL_TASK_TYPE_DEFAULT_DEFINED__
#define KERNEL_TASK_TYPE_DEFAULT(value) static_cast<void>(value)
