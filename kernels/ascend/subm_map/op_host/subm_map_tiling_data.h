// Tiling data of the sorted-key neighbour-lookup kernel (submanifold and strided-conv maps),
// shared by host and device.
#pragma once
#include <cstdint>

struct SubmMapTilingData {
    int64_t numVoxels;     // M: query rows (= N for the submanifold map)
    int64_t numCand;       // N: candidate keys (input voxels)
    int64_t numTiles;      // ceil(N / 64): tiles of 64 consecutive SORTED voxels
    int32_t kvol;          // K (<= 125)
    int32_t usedAiv;       // AIV-only launch: blockDim = usedAiv
    int32_t auxBytes;      // bytes of the constant aux table (transpose + broadcast offsets)
    int32_t ubBytes;       // total UB of the kernel's InitBuffer calls
    int32_t groupSize;     // kernel size of the last axis: offsets k = g*groupSize + x share one search/window
    int32_t window;        // candidates per vector rank step (64 or 128; wider windows bisect the tile)
};
