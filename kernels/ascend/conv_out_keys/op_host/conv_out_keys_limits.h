// What the AscendC ConvOutKeys kernel (primitive _conv_out_keys) supports, checked before every
// launch by its two callers: the NPU binding (kernels/ascend/binding/mx_sparse_npu.cpp) and the
// CPU emulator's entry (MXS_NPU_ON_CPU=1). Plain C++, no torch, no CANN: "" when the launch is
// supported, else the ValueError message both callers raise. The kernel computes coordinates in
// float-exact range (kCokMaxCoord of conv_out_keys_tiling.h) and indexes the [K, N] pairs in int32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mxs_ascend {

constexpr int64_t kConvOutKeysMaxKernelVolume = 125;       // 5x5x5
constexpr int64_t kConvOutKeysMaxCoord = int64_t{1} << 24;  // = kCokMaxCoord
constexpr int64_t kConvOutKeysMaxRows = int64_t{1} << 29;

inline std::string ConvOutKeysLimits(int64_t num_rows, const std::vector<int64_t>& spatial_shape, int64_t batch_size,
                                     const std::vector<int64_t>& kernel_size, const std::vector<int64_t>& padding,
                                     const std::vector<int64_t>& dilation) {
    int64_t kvol = 1;
    for (int64_t k : kernel_size) kvol *= k;
    if (kvol > kConvOutKeysMaxKernelVolume)
        return "kernel_size: the Ascend map kernels support kernel volumes up to " +
               std::to_string(kConvOutKeysMaxKernelVolume) + " (5x5x5), got " + std::to_string(kvol) +
               "; build this map on the CPU backend";
    if (batch_size < 1 || batch_size > kConvOutKeysMaxCoord)
        return "batch_size: the Ascend strided-conv map supports 1 <= batch_size <= 2^24, got " +
               std::to_string(batch_size);
    for (size_t d = 0; d < spatial_shape.size(); ++d)
        if (spatial_shape[d] + padding[d] >= kConvOutKeysMaxCoord ||
            (kernel_size[d] - 1) * dilation[d] >= kConvOutKeysMaxCoord)
            return "spatial_shape: the Ascend strided-conv map needs extent + padding < 2^24 on every axis; "
                   "build this map on the CPU backend";
    if (num_rows * kvol >= INT32_MAX || num_rows >= kConvOutKeysMaxRows)
        return "indices: the Ascend strided-conv map supports N * kernel volume < 2^31 pairs, got " +
               std::to_string(num_rows) + " x " + std::to_string(kvol);
    return "";
}

}  // namespace mxs_ascend
