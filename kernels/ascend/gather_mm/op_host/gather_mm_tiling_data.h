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
    int64_t wsPerAiv;      // bytes of user workspace owned by one AIV (2 slabs)
    int32_t kvol;          // K: kernel volume (columns of nbr)
    int32_t cin;           // input channels (= weight dim 1)
    int32_t cout;          // output channels
    int32_t dtypeKey;      // mxs_ascend::DTypeKey (also the tiling key)
    int32_t usedAiv;       // AIV workers that own rows (<= 2*blockDim)
    int32_t blockDim;      // mix launch: AIC groups
    int32_t tileRows;      // T: output rows per slab (rows of one Matmul)
    int32_t kGroup;        // kernel offsets per Matmul call (kGroup*cin <= 65535; the slab is split by it)
    int32_t ubBytes;       // total UB of the kernel's InitBuffer calls (reported, checked <= UB)
    int32_t pad0;
    WindowGatherTiling wg; // the window gather of a slab tile
    TCubeTiling mm;        // Matmul tiling (M = tileRows, N = cout, K = kGroup*cin)
};
