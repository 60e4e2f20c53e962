#include "unique_sorted_keys_tiling.h"

namespace mxs_ascend {

int64_t UniqueSortedKeysUbBytes(int64_t T, int64_t usedAiv) {
    const int64_t B = T * 4;
    return 2 * AlignUp((T + 1) * 8, 32)  // keys [s0 - 1, s0 + T) of a tile, double-buffered VECIN
           + 3 * B                    // predecessor-offset and interleave tables
           + 4 * B                    // current / previous key words (lo, hi)
           + 4 * B                    // flags and temporaries
           + AlignUp(T / 8, 32)       // keep bitmap (GatherMask pattern)
           + 2 * B                    // compacted lo | hi words
           + 2 * 2 * B                // interleaved survivors, double-buffered VECOUT
           + 2 * 2 * B                // phase-2 copy, double-buffered VECIN->VECOUT
           + AlignUp(usedAiv * 32, 32);  // per-core counts
}

int32_t UniqueSortedKeysTiling(int64_t numKeys, const AscendPlatform& p, UniqueSortedKeysTilingData& t) {
    t = UniqueSortedKeysTilingData{};
    if (numKeys < 0 || numKeys >= (1ll << 31) - 1) return TILING_BAD_SHAPE;
    if (p.aivNum == 0 || p.ubSize < 64 * 1024) return TILING_BAD_PLATFORM;
    t.numKeys = numKeys;
    // one core's share rounded to whole vector repeats, capped by UB
    int64_t T = Max64(64, AlignUp(CeilDiv(numKeys, p.aivNum), 64));
    T = Min64(T, kUskMaxTile);
    while (T > 64 && UniqueSortedKeysUbBytes(T, p.aivNum) > (int64_t)p.ubSize) T -= 64;
    t.tileKeys = (int32_t)T;
    t.numTiles = CeilDiv(numKeys, T);
    t.usedAiv = (int32_t)Min64((int64_t)p.aivNum, t.numTiles);
    t.countOffset = AlignUp(numKeys * 8, 32);
    t.ubBytes = (int32_t)UniqueSortedKeysUbBytes(T, t.usedAiv);
    if (t.ubBytes > (int64_t)p.ubSize) return TILING_BAD_SHAPE;
    return TILING_OK;
}

uint64_t UniqueSortedKeysWorkspaceBytes(const UniqueSortedKeysTilingData& t) {
    return kSysWorkspace + (uint64_t)t.countOffset + (uint64_t)Max64(t.usedAiv, 1) * 32;
}

}  // namespace mxs_ascend
