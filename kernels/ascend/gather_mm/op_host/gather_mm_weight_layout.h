// How GatherMm reads its weight operand (the op's weight_layout attribute): plain C++ shared by the
// host tiling, the CANN glue, the NPU binding and the CPU emulator's entry.
//
// GMM_WEIGHT_AS_IS: weight [K, Cin, Cout], out[m] = sum_k features[nbr[m, k]] @ weight[k] (the
//   forward; the kernel multiplies a k-group of offsets at once, W[k0*Cin:(k0+kGroup)*Cin, :] being
//   one ND matrix).
// GMM_WEIGHT_T / GMM_WEIGHT_T_REVERSED: weight is a layer's own [K, Cout, Cin] (this op's Cout and
//   Cin the other way round) and offset k multiplies weight[k']^T, k' = k / K-1-k: the input gradient
//   of a convolution (mx_sparse::_gather_mm_transposed) without the transposed -- for a submanifold
//   map also offset-reversed -- copy of the weight that autograd would otherwise make per backward.
//   Consecutive W[k']^T do not form one ND matrix, so the kernel runs one Matmul per offset with B =
//   W[k'] read transposed (MatmulType ISTRANS = true, SetTensorB(..., true)): another instantiation,
//   selected by the tiling key (GatherMmTilingKey).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace mxs_ascend {

enum GatherMmWeightLayout : int32_t { GMM_WEIGHT_AS_IS = 0, GMM_WEIGHT_T = 1, GMM_WEIGHT_T_REVERSED = 2 };

// Tiling keys: the dtype key (DTypeKey: 0 fp32, 1 fp16, 2 bf16) for the as-is weight, plus this for
// a weight read transposed (keys 10, 11, 12).
constexpr int32_t kGmmWeightTKeyBase = 10;

inline bool GatherMmWeightTransposed(int64_t layout) { return layout == GMM_WEIGHT_T || layout == GMM_WEIGHT_T_REVERSED; }

// The layout of _gather_mm_transposed(..., reverse_offsets).
inline int32_t GatherMmTransposedLayout(bool reverseOffsets) {
    return reverseOffsets ? GMM_WEIGHT_T_REVERSED : GMM_WEIGHT_T;
}

inline void CheckGatherMmWeightLayout(int64_t layout) {
    if (layout != GMM_WEIGHT_AS_IS && !GatherMmWeightTransposed(layout))
        throw std::invalid_argument("weight_layout: expected 0 (weight [K, Cin, Cout]), 1 ([K, Cout, Cin] read "
                                    "transposed) or 2 (the same, offsets reversed), got " + std::to_string(layout));
}

}  // namespace mxs_ascend
