#include "subm_map_tiling.h"
#include <cstddef>

namespace mxs_ascend {

int32_t SubmMapTiling(const SubmMapShape& s, const AscendPlatform& p, SubmMapTilingData& t) {
    t = SubmMapTilingData{};
    if (s.numVoxels < 0 || s.numVoxels >= (1ll << 31) - 1 || s.ndim < 1 || s.ndim > 4) return TILING_BAD_SHAPE;
    int64_t kvol = 1;
    for (int d = 0; d < s.ndim; ++d) {
        if (s.kernel[d] < 1 || s.dilation[d] < 1 || s.paddedShape[d] < 1) return TILING_BAD_SHAPE;
        kvol *= s.kernel[d];
    }
    if (kvol > kSubmMaxK) return TILING_BAD_SHAPE;
    if (p.aivNum == 0 || p.ubSize < 64 * 1024) return TILING_BAD_PLATFORM;
    t.numVoxels = s.numVoxels;
    t.numCand = s.numCand < 0 ? s.numVoxels : s.numCand;
    if (t.numCand >= (1ll << 31) - 1) return TILING_BAD_SHAPE;
    t.numTiles = CeilDiv(s.numVoxels, kSubmTile);
    t.kvol = (int32_t)kvol;
    t.groupSize = (int32_t)s.kernel[s.ndim - 1];
    t.usedAiv = (int32_t)Min64((int64_t)p.aivNum, t.numTiles);
    t.window = kvol <= 27 ? kSubmWindowMax : kSubmWindowMax / 2;
    t.auxBytes = (int32_t)((t.window * kSubmTile + kSubmTile * kvol) * 4);
    // UB: qraw 512 | qlo 256 | qdl 256 | craw window*8 | cb, D, G, bcast 4 x window*64*4 |
    //     resAll, trOff, outTile 3 x 64*K*4 | res scratch 4 x 256 | staged key block 256*8 |
    //     per-offset rank/found accumulators 2 x X x 64 x 4
    const int64_t kt = AlignUp((int64_t)kSubmTile * kvol * 4, 32);
    t.ubBytes = (int32_t)(512 + 256 + 256 + t.window * 8 + 4 * (int64_t)t.window * kSubmTile * 4 + 3 * kt + 4 * 256 +
                         256 * 8 + 2 * (int64_t)t.groupSize * kSubmTile * 4);
    if (t.ubBytes > (int64_t)p.ubSize) return TILING_BAD_SHAPE;
    return TILING_OK;
}

std::vector<int64_t> SubmMapDeltas(const SubmMapShape& s) {
    int64_t kvol = 1;
    for (int d = 0; d < s.ndim; ++d) kvol *= s.kernel[d];
    std::vector<int64_t> out(kvol);
    for (int64_t k = 0; k < kvol; ++k) {
        int64_t rem = k, delta = 0, stride = 1;
        for (int d = s.ndim - 1; d >= 0; --d) {
            const int64_t kp = rem % s.kernel[d];
            rem /= s.kernel[d];
            delta += (kp - (s.centered ? s.kernel[d] / 2 : 0)) * s.dilation[d] * stride;
            stride *= s.paddedShape[d];
        }
        out[k] = delta;
    }
    return out;
}

std::vector<uint32_t> SubmMapAux(int32_t kvol, int32_t window) {
    std::vector<uint32_t> aux((std::size_t)window * kSubmTile + kSubmTile * kvol);
    for (int j = 0; j < window; ++j)
        for (int i = 0; i < kSubmTile; ++i) aux[j * kSubmTile + i] = (uint32_t)(j * 8);
    uint32_t* tr = aux.data() + (std::size_t)window * kSubmTile;
    for (int i = 0; i < kSubmTile; ++i)
        for (int k = 0; k < kvol; ++k) tr[i * kvol + k] = (uint32_t)((k * kSubmTile + i) * 4);
    return aux;
}

}  // namespace mxs_ascend
