// Host side of the sorted-key neighbour lookup (submanifold map; also the strided-conv map) as
// plain C++ (no CANN).
//
// Split of the work (see docs/en/ascend.md "subm_map"):
//   host / torch_npu ops: pack coordinates into int64 keys on a grid padded by kernel_size//2 *
//     dilation on every side (so an out-of-range neighbour can never alias another voxel), stable
//     sort (torch.sort), offsets delta_k (this file), and the final un-permutation
//     nbr[perm[s], k] = perm[nbrS[s, k]] (two torch index ops);
//   AscendC kernel: for every tile of TQ sorted queries and every offset k, the exact position of
//     query + delta_k in the sorted candidate keys -- a per-lane vector binary search (vector Gather
//     + compares) over candidate keys staged in UB, one lane per (query, offset).
#pragma once
#include <cstdint>
#include <vector>
#include "tiling_common.h"
#include "subm_map_tiling_data.h"

namespace mxs_ascend {

constexpr int32_t kSubmMaxK = 125;       // K <= 5^3
constexpr int32_t kSubmStageKeys = 512;  // candidate keys staged per offset group (wider ranges bisect the tile; 256 if UB is short)
constexpr int32_t kSubmMaxSamples = 512; // coarse index entries per core (32 B of UB each)
constexpr int32_t kSubmMinStride = 64;   // coarse index: at least every 64th key

struct SubmMapShape {
    int64_t numVoxels = 0;                  // query rows M
    int64_t numCand = -1;                   // candidate rows N (-1: = numVoxels, submanifold)
    bool centered = true;                   // submanifold: offsets (kpos - k/2)*dil; conv: kpos*dil
    int32_t ndim = 3;
    int64_t paddedShape[4] = {0, 0, 0, 0};  // spatial shape + 2 * (kernel//2) * dilation per axis
    int64_t kernel[4] = {1, 1, 1, 1};
    int64_t dilation[4] = {1, 1, 1, 1};
    int64_t keyBound = 0;                   // every query and candidate key lies in [0, keyBound); 0 = unknown
};

int32_t SubmMapTiling(const SubmMapShape& s, const AscendPlatform& p, SubmMapTilingData& t);
// Key offsets delta_k = sum_d (kpos_d [- kernel_d/2 if centered]) * dilation_d * stride_d on the
// padded grid (k row-major over kernel_size, like the CPU backend). int64, increasing in k.
std::vector<int64_t> SubmMapDeltas(const SubmMapShape& s);
// UB bytes of a tiling (the same sum as the kernel's InitBuffer calls).
int64_t SubmMapUbBytes(const SubmMapTilingData& t);

}  // namespace mxs_ascend
