// Tiling data of gather_mm_backprop_filter, shared by host and device (see gather_mm's header).
#pragma once
#include <cstdint>  // before kernel_tiling.h, which does not include it
#include "kernel_tiling/kernel_tiling.h"
#include "window_gather_tiling.h"

struct GatherMmBpfTilingData {
    int64_t numOut;        // M: rows of nbr and grad
    int64_t numIn;         // rows of features
    int64_t slabElems;     // elements of ONE gather slab (tileRows * K * cin)
    int64_t wsPerAiv;      // bytes of user workspace per AIV (2 slabs)
    int64_t partialOffset; // byte offset (user workspace) of the fp32 partials [usedAiv, K*cin, cout]
    int32_t kvol, cin, cout, dtypeKey;
    int32_t usedAiv;       // AIVs that own rows (phase 1); each writes one fp32 partial of dW
    int32_t blockDim;      // mix launch: AIC groups (every AIV of the launch takes part in the reduce)
    int32_t tileRows;      // T: rows per slab tile (the Matmul K dimension)
    int32_t kGroup;        // offsets per Matmul (kGroup*cin <= 65535; the slab is split by it)
    int32_t castChunk;     // fp32 elements per reduce / cast step
    int32_t redChunks;     // castChunk-sized chunks of dW (K*cin*cout elements)
    int32_t ubBytes;       // total UB of the kernel's InitBuffer calls
    int32_t pad0;
    WindowGatherTiling wg; // the window gather of a slab tile (shared with gather_mm)
    TCubeTiling mm;        // M = kGroup*cin, N = cout, K = tileRows (A transposed)
};
