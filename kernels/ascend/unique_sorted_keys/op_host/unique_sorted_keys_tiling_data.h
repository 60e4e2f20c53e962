// Tiling data of the unique-of-sorted-keys kernel (UniqueSortedKeys), shared by host and device.
#pragma once
#include <cstdint>

struct UniqueSortedKeysTilingData {
    int64_t numKeys;      // C sorted int64 keys (INT64_MAX sentinels last)
    int64_t numTiles;     // ceil(C / tileKeys)
    int64_t countOffset;  // byte offset of the per-core count slots in the user workspace
    int32_t tileKeys;     // T keys per tile (multiple of 64)
    int32_t usedAiv;      // blockDim; every launched core takes part in the SyncAll
    int32_t ubBytes;      // total UB of the kernel's InitBuffer calls
    int32_t reserved;
};
