// Tiling data of the gather_mm kernel, shared verbatim by host (op_host/gather_mm_tiling.cpp)
// and device (op_kernel/gather_mm.cpp). Fields are ordered so that each sits at a multiple of
// its size (rule I31). All row/element counts that can exceed 2^31 are int64.
#pragma once
#include <cstdint>  // before kernel_tiling.h, which does not include it
#include "kernel_tiling/kernel_tiling.h"
#include "window_gather_tiling.h"

struct GatherMmTilingData {
    int64_t numOut;        // M: output rows (rows of nbr)
    int64_t numIn;         // N_in: rows of features
    int64_t slabElems;     // elements of ONE gather slab in the per-AIV workspace (tileRows*K*cin)
    int64_t wsPerAiv;      // bytes of user workspace owned by one AIV (2 slabs; + the fp32 tile, accOffset)
    int64_t accOffset;     // fp16/bf16 with the weight read transposed: byte offset, in an AIV's workspace,
                           // of its fp32 sums [tileRows, cout]; 0 (none) otherwise
    int32_t kvol;          // K: kernel volume (columns of nbr)
    int32_t cin;           // input channels (= features dim 1)
    int32_t cout;          // output channels
    int32_t dtypeKey;      // mxs_ascend::DTypeKey (also the tiling key)
    int32_t usedAiv;       // AIV workers that own rows (<= 2*blockDim)
    int32_t blockDim;      // mix launch: AIC groups
    int32_t tileRows;      // T: output rows per slab (rows of one Matmul)
    int32_t kGroup;        // kernel offsets per slab k-group (kGroup*cin <= 65535): the offsets of one Matmul
                           // call, except with the weight read transposed (one Matmul per offset)
    int32_t ubBytes;       // total UB of the kernel's InitBuffer calls (reported, checked <= UB)
    int32_t tilingKey;     // dtypeKey, + kGmmWeightTKeyBase with the weight read transposed (gather_mm_weight_layout.h)
    int32_t kFirst;        // weight read transposed: offset k multiplies weight[kFirst + kStep*k]^T
    int32_t kStep;         //   (0, 1) in order, (K-1, -1) reversed; (0, 1) and unused otherwise
    int32_t castChunk;     // fp32 elements per cast step of those sums (with accOffset), else 0
    int32_t pad0;
    WindowGatherTiling wg; // the window gather of a slab tile
    TCubeTiling mm;        // Matmul tiling (M = tileRows, N = cout, K = kGroup*cin; K = cin, Kb = cin with the
                           // weight read transposed, Ka = kGroup*cin the slab's row pitch)
};
