// What the AscendC SubmMap kernel (the sorted-key lookup, primitive _sorted_key_lookup) supports,
// checked before every launch by its two callers: the NPU binding (kernels/ascend/binding/
// mx_sparse_npu.cpp) and the CPU emulator's entry (MXS_NPU_ON_CPU=1). Plain C++, no torch, no
// CANN: "" when the launch is supported, else the ValueError message both callers raise.
#pragma once
#include <cstdint>
#include <string>

namespace mxs_ascend {

constexpr int64_t kSubmMapMaxKernelVolume = 125;  // 5x5x5 = kSubmMaxK of subm_map_tiling.h

inline std::string SubmMapLimits(int64_t kvol) {
    if (kvol <= kSubmMapMaxKernelVolume) return "";
    return "kernel_size: the Ascend map kernel supports kernel volumes up to " +
           std::to_string(kSubmMapMaxKernelVolume) + " (5x5x5), got " + std::to_string(kvol) +
           "; build this map on the CPU backend";
}

}  // namespace mxs_ascend
