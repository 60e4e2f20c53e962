// Host side of the strided-conv output-key kernel (ConvOutKeys) as plain C++ (no CANN).
//
// Split of the strided-conv map (see docs/en/ascend.md "Strided-conv map"):
//   AscendC ConvOutKeys: for every (slot j, input row n) the int64 key of the output voxel
//     o = (i + p - kpos*d) / s (per axis, exact and in range) that row n reaches through the kernel
//     offset of slot j, or INT64_MAX, written slot-major [J, N]: per axis only the J_d kernel positions
//     of the row's residue class (conv_rules.h conv_out_slots) can reach an output, J = prod(J_d);
//   torch_npu: sort of the J*N keys (at::sort);
//   AscendC UniqueSortedKeys: the distinct valid keys, dense and sorted (= output voxel order);
//   torch_npu: unpacking keys into coordinates and query keys; AscendC SubmMap: the lookup.
#pragma once
#include <cstdint>
#include "tiling_common.h"
#include "conv_out_keys_tiling_data.h"
#include "conv_rules.h"  // kernels/common (an include directory): conv_out_slots

namespace mxs_ascend {

// Coordinates + padding, output extents and the batch size stay below 2^24: the kernel divides
// and splits them into bytes through float, which is exact below 2^24.
constexpr int64_t kCokMaxCoord = 1ll << 24;
constexpr int64_t kCokMaxTile = 1024;  // rows per tile
constexpr int32_t kCokMinGroup = 4;   // fewer staged slots per DMA: take a smaller tile instead
constexpr int32_t kCokMaxGroup = 32;  // slots per DMA: >= 16 KiB per DMA already at T = 64 rows

struct ConvOutKeysShape {
    int64_t numVoxels = 0;
    int64_t batchSize = 1;
    int32_t ndim = 3;
    int64_t spatial[kCokMaxDims] = {1, 1, 1, 1};
    int64_t kernel[kCokMaxDims] = {1, 1, 1, 1};
    int64_t stride[kCokMaxDims] = {1, 1, 1, 1};
    int64_t padding[kCokMaxDims] = {0, 0, 0, 0};
    int64_t dilation[kCokMaxDims] = {1, 1, 1, 1};
};

// J = prod_d conv_out_slots(k_d, s_d, dil_d): output keys per input row (strides, dilations >= 1).
inline int64_t ConvOutKeysSlotVolume(int32_t ndim, const int64_t* kernel, const int64_t* stride,
                                     const int64_t* dilation) {
    int64_t j = 1;
    for (int d = 0; d < ndim; ++d) j *= mxs::conv_out_slots(kernel[d], stride[d], dilation[d]);
    return j;
}
int32_t ConvOutKeysTiling(const ConvOutKeysShape& s, const AscendPlatform& p, ConvOutKeysTilingData& t);
// UB bytes the kernel allocates for tile T and group G (the kernel's InitBuffer calls, in order).
int64_t ConvOutKeysUbBytes(const ConvOutKeysTilingData& t, int64_t T, int64_t G);

}  // namespace mxs_ascend
