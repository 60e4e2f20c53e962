// Tiling data of gather_mm_backprop_filter, shared by host and device (see gather_mm's header).
#pragma once
#include <cstdint>  // before kernel_tiling.h, which does not include it
#include "kernel_tiling/kernel_tiling.h"

struct GatherMmBpfTilingData {
    int64_t numOut;        // M: rows of nbr and grad
    int64_t numIn;         // rows of features
    int64_t slabElems;     // elements of ONE gather slab (tileRows * cinBlock)
    int64_t wsPerAiv;      // bytes of user workspace per AIV (2 slabs + fp32 accumulator)
    int64_t accOffset;     // byte offset of the fp32 accumulator [cinBlock, cout] in an AIV's workspace
    int64_t partialOffset; // byte offset (user workspace) of the fp32 partials [numUnits, cinBlock, cout]
    int32_t kvol, cin, cout, dtypeKey;
    int32_t cinBlock;      // input channels per work item
    int32_t numCinBlocks;
    int32_t numItems;      // kvol * numCinBlocks work items (k, cin block); each owns dW[k][block, :]
    int32_t usedAiv, blockDim;
    int32_t tileRows;      // Tm: rows of grad per Matmul call (the Matmul K dimension)
    int32_t segsPerFill;   // rows gathered per UB fill (per buffer)
    int32_t segPitch;      // bytes of one gathered row in UB (cinBlock*elem rounded up to 32)
    int32_t nbrBufBytes;   // UB bytes of the strided nbr column buffer (tileRows * 32)
    int32_t castChunk;     // fp32 elements per cast / reduce step (0: no cast and no split)
    int32_t ubBytes;       // total UB of the kernel's InitBuffer calls
    int32_t numParts;      // P: row ranges per item (P > 1: fp32 partials + SyncAll + reduce phase)
    int32_t numUnits;      // numItems * P work units
    int32_t redChunks;     // castChunk-sized chunks per item in the reduce phase
    int32_t pad0;
    TCubeTiling mm;        // M = cinBlock, N = cout, K = tileRows (A transposed)
};
