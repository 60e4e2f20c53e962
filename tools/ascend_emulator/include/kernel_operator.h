// Emulator version of CANN's kernel_operator.h: the AscendC basic-API subset used by the
// mx_sparse kernels, executed on CPU with the Atlas A2 rules enforced (see README.md).
#pragma once
#include "ascend_sim/common.h"
#include "ascend_sim/half.h"
#include "ascend_sim/runtime.h"
#include "ascend_sim/tensor.h"
#include "ascend_sim/tpipe.h"
#include "ascend_sim/data_copy.h"
#include "ascend_sim/vector.h"
#include "ascend_sim/cast.h"
#include "ascend_sim/sync.h"
#include "kernel_tiling/kernel_tiling.h"

namespace AscendSim {
template <typename T>
inline T loadTiling(const void* tiling) {
    // Rule J36: a kernel whose tiling is a plain C++ struct registers it (REGISTER_TILING_DEFAULT)
    // so that the op compiler knows the type it parses the tiling bytes as.
    if (!ctx().tilingRegistered)
        warning("J36", "GET_TILING_DATA", "the kernel entry reads its tiling without REGISTER_TILING_DEFAULT(<struct>) "
                                          "before it (CANN cannot parse a plain C++ tiling struct it was not told about)");
    gmCheckAccess(tiling, sizeof(T), GmAccess::Read, "GET_TILING_DATA");
    T t;
    std::memcpy(&t, tiling, sizeof(T));
    return t;
}
}  // namespace AscendSim

// In CANN the tiling struct type is generated per op; on the emulator the op's shared tiling
// header defines the struct and `#define ASCEND_SIM_TILING_TYPE <Struct>` (or use the
// _WITH_STRUCT form). The variable is const, as in the op compiler's generated form.
#define REGISTER_TILING_DEFAULT(type) (void)sizeof(type), ::AscendSim::ctx().tilingRegistered = true
#define REGISTER_TILING_FOR_TILINGKEY(expr, type) REGISTER_TILING_DEFAULT(type)
#define GET_TILING_DATA(var, tiling) \
    const ASCEND_SIM_TILING_TYPE var = ::AscendSim::loadTiling<ASCEND_SIM_TILING_TYPE>(tiling)
#define GET_TILING_DATA_WITH_STRUCT(type, var, tiling) \
    const type var = ::AscendSim::loadTiling<type>(tiling)
#define TILING_KEY_IS(k) (::AscendSim::ctx().tilingKey == static_cast<uint64_t>(k))
#define KERNEL_TASK_TYPE_DEFAULT(type) ::AscendSim::declareKernelType(type)
#define KERNEL_TASK_TYPE(key, type)                               \
    do {                                                          \
        if (TILING_KEY_IS(key)) ::AscendSim::declareKernelType(type); \
    } while (0)
