// Tiling of the window gather (common/op_kernel/window_gather.h), shared by gather_mm and
// gather_mm_backprop_filter: the struct is embedded verbatim in both tiling structs (host and
// device), the function that fills it is plain C++ (no CANN).
#pragma once
#include <cstdint>

struct WindowGatherTiling {
    int32_t kvol;        // K: columns of the neighbour map
    int32_t cin;         // channels of a gathered row
    int32_t group;       // X: consecutive offsets that share one window (kernel size of the last axis, or 1)
    int32_t tileRows;    // T: rows of a slab tile (rows of the nbr tile in UB)
    int32_t chunkRows;   // Tg: rows gathered per pass (T is a multiple of Tg, or T < Tg)
    int32_t windowRows;  // Wmax: input rows one window DMA may bring into UB
    int32_t colChunk;    // columns gathered per pass: cin, or 512 B worth of them for wider rows
    int32_t pitch;       // bytes between window rows in UB: colChunk*esz (compact) or 32 B-aligned (chunked)
    int32_t wordBytes;   // 4 when a row chunk is a whole number of 32-bit words, else 2 (the Gather element)
    int32_t rowWords;    // words per row chunk (colChunk * esz / wordBytes)
    int32_t subRowWords; // words between the X sub-rows of a chunk row in UB (rowWords, or pitch / wordBytes)
    int32_t segWords;    // words per chunk row in UB: X sub-rows, padded to 32 B (DMA row granularity)
    int32_t entryLanes;  // lanes of the per-entry vectors: power of two >= Tg * X, >= 8
    int32_t ubBytes;     // UB the gatherer takes (all its InitBuffer calls)
};

namespace mxs_ascend {

// Fills `g` for rows of `cin` elements of `esz` bytes, K offsets in groups of `group` (1 if it does
// not divide K), slab tiles of `tileRows` rows, using at most `ubBudget` bytes of UB. False when even
// the smallest configuration does not fit.
bool WindowGatherTilingFor(int64_t kvol, int64_t cin, int64_t esz, int64_t group, int64_t tileRows, int64_t ubBudget,
                           WindowGatherTiling& g);

// UB bytes of a configuration (the same sum as the kernel's InitBuffer calls).
int64_t WindowGatherUbBytes(const WindowGatherTiling& g);

}  // namespace mxs_ascend
