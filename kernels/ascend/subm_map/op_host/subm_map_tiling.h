// Host side of the submanifold neighbor-map kernel as plain C++ (no CANN).
//
// Split of the work (see docs/en/ascend.md "subm_map"):
//   host / torch_npu ops: pack coordinates into int64 keys on a grid padded by kernel_size//2 *
//     dilation on every side (so an out-of-range neighbour can never alias another voxel), stable
//     sort (torch.sort), offsets delta_k (this file), and the final un-permutation
//     nbr[perm[s], k] = perm[nbrS[s, k]] (two torch index ops);
//   AscendC kernel: for every tile of 64 sorted voxels and every offset k, the exact match of the
//     64 query keys S[s] + delta_k in the sorted key array -- vector rank counting in int32 lanes
//     (no int64 vector arithmetic on A2), scalar work only for two galloping searches per
//     (tile, k) that bound the candidate window.
#pragma once
#include <cstdint>
#include <vector>
#include "../../common/op_host/tiling_common.h"
#include "subm_map_tiling_data.h"

namespace mxs_ascend {

constexpr int32_t kSubmTile = 64;     // queries per tile (one int32 vector repeat)
constexpr int32_t kSubmWindowMax = 128;  // candidates per vector rank step for K <= 27 (64 above; wider windows split the tile)
constexpr int32_t kSubmMaxK = 125;    // K <= 5^3 (UB budget of the transpose tables)

struct SubmMapShape {
    int64_t numVoxels = 0;                  // query rows M
    int64_t numCand = -1;                   // candidate rows N (-1: = numVoxels, submanifold)
    bool centered = true;                   // submanifold: offsets (kpos - k/2)*dil; conv: kpos*dil
    int32_t ndim = 3;
    int64_t paddedShape[4] = {0, 0, 0, 0};  // spatial shape + 2 * (kernel//2) * dilation per axis
    int64_t kernel[4] = {1, 1, 1, 1};
    int64_t dilation[4] = {1, 1, 1, 1};
};

int32_t SubmMapTiling(const SubmMapShape& s, const AscendPlatform& p, SubmMapTilingData& t);
// Key offsets delta_k = sum_d (kpos_d [- kernel_d/2 if centered]) * dilation_d * stride_d on the
// padded grid (k row-major over kernel_size, like the CPU backend). int64, increasing in k.
std::vector<int64_t> SubmMapDeltas(const SubmMapShape& s);
// Constant aux table (uint32): [window*64] broadcast offsets j*8 | [64*K] transpose offsets (k*64+i)*4.
std::vector<uint32_t> SubmMapAux(int32_t kvol, int32_t window);

}  // namespace mxs_ascend
