// What the AscendC GatherMm and GatherMmBackpropFilter kernels (primitives _gather_mm_one_group,
// _gather_mm_backprop_filter_one_group) support, checked before every launch by their two callers:
// the NPU binding (kernels/ascend/binding/mx_sparse_npu.cpp) and the CPU emulator's entry
// (MXS_NPU_ON_CPU=1). Plain C++, no torch, no CANN: "" when the launch is supported, else the
// ValueError message both callers raise. Both kernels run one group; the matmul's reduction
// width limit is kMatmulMaxK of common/op_host/tiling_common.h.
#pragma once
#include <cstdint>
#include <string>

namespace mxs_ascend {

constexpr int64_t kGatherMaxChannels = 65535;

// dtype_code as the kernels' tiling takes it: 0 float32, 1 float16, 2 bfloat16, -1 anything else
// (dtype_name then names it in the message).
inline std::string GatherFloatLimits(const char* operand, int dtype_code, const std::string& dtype_name) {
    if (dtype_code >= 0 && dtype_code <= 2) return "";
    return std::string(operand) + ": the Ascend kernels support float32, float16 and bfloat16, got " + dtype_name;
}

inline std::string GatherChannelLimits(const char* op, int64_t cin, int64_t cout) {
    if (cin <= kGatherMaxChannels && cout <= kGatherMaxChannels) return "";
    return std::string("channels: the Ascend ") + op + " supports Cin, Cout <= " +
           std::to_string(kGatherMaxChannels) + " per group, got Cin " + std::to_string(cin) + ", Cout " +
           std::to_string(cout);
}

}  // namespace mxs_ascend
