#include "subm_map_tiling.h"
#include <cstddef>
#include "conv_rules.h"  // kernels/common (an include directory; staged flat by the op build)  // kernel_offset_key_delta: the key deltas every backend uses

namespace mxs_ascend {

namespace {
// int32 vectors of TQ*Kp lanes (constants, search state, temporaries, results): low-word compares / two-word
constexpr int32_t kLaneVectorsCompact = 14, kLaneVectorsExact = 19;
constexpr int64_t kCompactSpan = 1ll << 30;
int64_t LanesPerQuery(int64_t kvol) { return AlignUp(kvol, 8); }
}

int64_t SubmMapUbBytes(const SubmMapTilingData& t) {
    const int64_t lanes = LanesPerQuery(t.kvol) * t.tileQ;
    const int64_t groups = t.kvol / t.groupSize;
    return (t.exactCompare ? kLaneVectorsExact : kLaneVectorsCompact) * AlignUp(lanes * 4, 32)  // lane vectors
           + AlignUp((int64_t)t.tileQ * 8, 32)            // the tile's query keys
           + 3 * AlignUp(groups * 4, 32)                  // per-group staging state (lanes gather it)
           + groups * t.stageKeys * 8                     // staged candidate keys per group
           + (int64_t)t.numSamples * 32                   // coarse index (one 32 B block per sample)
           + AlignUp((int64_t)t.kvol * 8, 32);            // deltas
}

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
    t.kvol = (int32_t)kvol;
    t.groupSize = (int32_t)s.kernel[s.ndim - 1];
    // compares on the low 32-bit words are exact when every target (key + delta) and candidate lies
    // in one range shorter than 2^30
    const std::vector<int64_t> deltas = SubmMapDeltas(s);
    const int64_t dlo = deltas.empty() ? 0 : deltas.front(), dhi = deltas.empty() ? 0 : deltas.back();
    t.exactCompare = !(s.keyBound > 0 && s.keyBound < kCompactSpan && s.keyBound + dhi - (dlo < 0 ? dlo : 0) < kCompactSpan);
    const int64_t stride = Max64(kSubmMinStride, CeilDiv(t.numCand, kSubmMaxSamples));
    t.sampleStride = (int32_t)stride;
    t.numSamples = (int32_t)Max64(1, CeilDiv(t.numCand, stride));
    // queries per tile: as many lanes as UB allows (the per-tile scalar work is amortised over them),
    // a multiple of 8 up to 128; the larger staging (fewer restages) while a tile keeps >= 64 queries
    for (int32_t stage : {kSubmStageKeys, kSubmStageKeys / 2}) {
        t.stageKeys = stage;
        t.tileQ = 128;
        while (t.tileQ > 8 && SubmMapUbBytes(t) > (int64_t)p.ubSize) t.tileQ -= 8;
        if (t.tileQ >= 64) break;
    }
    int32_t steps = 0;
    while ((1 << steps) < t.stageKeys) ++steps;
    t.searchSteps = steps;
    t.ubBytes = (int32_t)SubmMapUbBytes(t);
    if (t.ubBytes > (int64_t)p.ubSize) return TILING_BAD_SHAPE;
    t.numTiles = CeilDiv(s.numVoxels, t.tileQ);
    t.usedAiv = (int32_t)Min64((int64_t)p.aivNum, t.numTiles);
    return TILING_OK;
}

std::vector<int64_t> SubmMapDeltas(const SubmMapShape& s) {
    mxs::ConvGeometry g{};
    mxs::Grid padded{};
    g.ndim = padded.ndim = s.ndim;
    for (int d = 0; d < s.ndim; ++d) {
        g.kernel[d] = s.kernel[d];
        g.dilation[d] = s.dilation[d];
        g.stride[d] = 1;
        padded.shape[d] = s.paddedShape[d];
    }
    std::vector<int64_t> out(mxs::kernel_volume(g));
    for (int64_t k = 0; k < (int64_t)out.size(); ++k) out[k] = mxs::kernel_offset_key_delta(g, padded, k, s.centered);
    return out;
}

}  // namespace mxs_ascend
