// What the GatherMmBackpropFilter kernel supports, checked before a launch with the messages of the
// gather ops. Plain C++ (no CANN, no torch): called by the NPU binding's launch and by the CPU
// emulator's entry (tools/ascend_emulator). The dtype check is gather_mm_limits.h's KernelDtypeKey.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include "../../gather_mm/op_host/gather_mm_limits.h"

namespace mxs_ascend {

inline void CheckGatherMmBpfLimits(int64_t cin, int64_t cout) {
    // Cin is the Matmul's M (kGroup * Cin rows) and Cout its N; the binding names Cout only, Cin is
    // bounded by the same Matmul K limit as gather_mm's
    if (cout > kMaxMatmulChannels)
        throw std::invalid_argument("channels: the Ascend kernel supports Cout <= " +
                                    std::to_string(kMaxMatmulChannels) + " per group");
    if (cin > kMaxMatmulChannels)
        throw std::invalid_argument("channels: the Ascend kernel supports Cin <= " +
                                    std::to_string(kMaxMatmulChannels) + " per group");
}

}  // namespace mxs_ascend
