// What the ConvOutKeys kernel supports, checked before a launch with the messages of the
// strided-conv map builder. Plain C++ (no CANN, no torch): called by the NPU binding's launch and by
// the CPU emulator's entry (tools/ascend_emulator), so both reject the same inputs the same way.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include "conv_out_keys_tiling.h"

namespace mxs_ascend {

constexpr int64_t kCokMaxKvol = 125;  // 5x5x5, as the lookup kernel that consumes its keys

inline void CheckConvOutKeysLimits(int64_t numVoxels, int32_t ndim, const int64_t* spatial, int64_t batchSize,
                                   const int64_t* kernel, const int64_t* stride, const int64_t* padding,
                                   const int64_t* dilation) {
    int64_t kvol = 1;
    for (int d = 0; d < ndim; ++d) kvol *= kernel[d];
    if (kvol > kCokMaxKvol)
        throw std::invalid_argument("kernel_size: the Ascend map kernels support kernel volumes up to " +
                                    std::to_string(kCokMaxKvol) + " (5x5x5), got " + std::to_string(kvol) +
                                    "; build this map on the CPU backend");
    if (batchSize < 1 || batchSize > kCokMaxCoord)
        throw std::invalid_argument("batch_size: the Ascend strided-conv map supports 1 <= batch_size <= 2^24, got " +
                                    std::to_string(batchSize));
    for (int d = 0; d < ndim; ++d)
        if (spatial[d] + padding[d] >= kCokMaxCoord || (kernel[d] - 1) * dilation[d] >= kCokMaxCoord)
            throw std::invalid_argument("spatial_shape: the Ascend strided-conv map needs extent + padding < 2^24 on "
                                        "every axis; build this map on the CPU backend");
    for (int d = 0; d < ndim; ++d)
        if (stride[d] < 1 || dilation[d] < 1)
            throw std::invalid_argument("stride, dilation: the Ascend strided-conv map needs every value >= 1");
    // J keys per input row (slots, conv_rules.h conv_out_slots; J = K at stride 1)
    const int64_t slots = ConvOutKeysSlotVolume(ndim, kernel, stride, dilation);
    if (numVoxels * slots >= INT32_MAX || numVoxels >= (int64_t{1} << 29))
        throw std::invalid_argument("indices: the Ascend strided-conv map supports N * slots per row < 2^31 keys, "
                                    "got " + std::to_string(numVoxels) + " x " + std::to_string(slots));
}

}  // namespace mxs_ascend
