// Tiling data of the sorted-key neighbour-lookup kernel (submanifold and strided-conv maps),
// shared by host and device.
#pragma once
#include <cstdint>

struct SubmMapTilingData {
    int64_t numVoxels;     // M: query rows (= N for the submanifold map)
    int64_t numCand;       // N: candidate keys (input voxels)
    int64_t numTiles;      // ceil(M / tileQ): tiles of tileQ consecutive SORTED queries
    int32_t kvol;          // K (<= 125)
    int32_t usedAiv;       // AIV-only launch: blockDim = usedAiv
    int32_t ubBytes;       // total UB of the kernel's InitBuffer calls
    int32_t groupSize;     // X: offsets k = g*X + x (x < X) share one staged key range
    int32_t tileQ;         // TQ: queries per tile (lanes = K * TQ)
    int32_t stageKeys;     // candidate keys staged in UB per offset group (the lanes' search range)
    int32_t searchSteps;   // log2 of the power of two >= stageKeys (binary-search steps per lane)
    int32_t sampleStride;  // S: every S-th candidate key is staged once per core as the coarse index
    int32_t numSamples;    // ceil(N / S) <= kSubmMaxSamples
    int32_t exactCompare;  // 0: every key of the launch lies in a range < 2^30 (low-word compares), 1: two-word compares
};
