#include "subm_map_tiling.h"

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
    t.numTiles = CeilDiv(s.numVoxels, kSubmTile);
    t.kvol = (int32_t)kvol;
    t.groupSize = (int32_t)s.kernel[s.ndim - 1];
    t.usedAiv = (int32_t)Min64((int64_t)p.aivNum, t.numTiles);
    t.auxBytes = (int32_t)((kSubmWindow * kSubmTile + kSubmTile * kvol) * 4);
    // UB: qraw 512 | qlo 256 | qdl 256 | craw 512 | cb, D, G 3 x 16 KiB | bcast 16 KiB |
    //     resAll, trOff, outTile 3 x 64*K*4 | res scratch 4 x 256
    const int64_t kt = AlignUp((int64_t)kSubmTile * kvol * 4, 32);
    t.ubBytes = (int32_t)(512 + 256 + 256 + 512 + 4 * kSubmWindow * kSubmTile * 4 + 3 * kt + 4 * 256);
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
            delta += (kp - s.kernel[d] / 2) * s.dilation[d] * stride;
            stride *= s.paddedShape[d];
        }
        out[k] = delta;
    }
    return out;
}

std::vector<uint32_t> SubmMapAux(int32_t kvol) {
    std::vector<uint32_t> aux(kSubmWindow * kSubmTile + kSubmTile * kvol);
    for (int j = 0; j < kSubmWindow; ++j)
        for (int i = 0; i < kSubmTile; ++i) aux[j * kSubmTile + i] = (uint32_t)(j * 8);
    uint32_t* tr = aux.data() + kSubmWindow * kSubmTile;
    for (int i = 0; i < kSubmTile; ++i)
        for (int k = 0; k < kvol; ++k) tr[i * kvol + k] = (uint32_t)((k * kSubmTile + i) * 4);
    return aux;
}

}  // namespace mxs_ascend
