// What the GatherMm kernel supports, checked before a launch with the messages of the gather ops.
// Plain C++ (no CANN, no torch): called by the NPU binding's launch and by the CPU emulator's entry
// (tools/ascend_emulator), so both reject the same inputs the same way.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include "../../common/op_host/tiling_common.h"

namespace mxs_ascend {

constexpr int64_t kMaxMatmulChannels = 65535;  // Cin and Cout per group (Matmul ND K / N)

// The kernels' dtype key of a floating dtype name (torch's "float32"/"float16"/"bfloat16" or c10's
// "Float"/"Half"/"BFloat16"); any other dtype (float64 included: the NPU has no fp64 path) is
// rejected naming the argument.
inline int32_t KernelDtypeKey(const char* arg, const char* dtype) {
    if (!std::strcmp(dtype, "float32") || !std::strcmp(dtype, "Float")) return DT_KEY_FP32;
    if (!std::strcmp(dtype, "float16") || !std::strcmp(dtype, "Half")) return DT_KEY_FP16;
    if (!std::strcmp(dtype, "bfloat16") || !std::strcmp(dtype, "BFloat16")) return DT_KEY_BF16;
    throw std::invalid_argument(std::string(arg) + ": the Ascend kernels support float32, float16 and bfloat16, got " +
                                dtype);
}

inline void CheckGatherMmLimits(int64_t cin, int64_t cout) {
    if (cin > kMaxMatmulChannels || cout > kMaxMatmulChannels)
        throw std::invalid_argument("channels: the Ascend gather_mm supports Cin, Cout <= " +
                                    std::to_string(kMaxMatmulChannels) + " per group");
}

}  // namespace mxs_ascend
