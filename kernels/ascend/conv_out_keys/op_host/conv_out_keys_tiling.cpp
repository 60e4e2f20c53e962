#include "conv_out_keys_tiling.h"
#include "conv_rules.h"  // kernels/common (an include directory; staged flat by the op build)  // conv_out_extent: the output grid every backend uses

namespace mxs_ascend {
namespace {

int64_t OutExtent(const ConvOutKeysShape& s, int d) {
    return mxs::conv_out_extent(s.spatial[d], s.kernel[d], s.stride[d], s.padding[d], s.dilation[d]);
}

int32_t BytesOf(int64_t maxValue) { return maxValue < 256 ? 1 : maxValue < 65536 ? 2 : 3; }

bool ValidGeometry(const ConvOutKeysShape& s) {
    if (s.numVoxels < 0 || s.ndim < 1 || s.ndim > kCokMaxDims || s.batchSize < 1 || s.batchSize > kCokMaxCoord)
        return false;
    for (int d = 0; d < s.ndim; ++d) {
        if (s.spatial[d] < 1 || s.kernel[d] < 1 || s.stride[d] < 1 || s.dilation[d] < 1 || s.padding[d] < 0) return false;
        if (s.spatial[d] + s.padding[d] >= kCokMaxCoord || (s.kernel[d] - 1) * s.dilation[d] >= kCokMaxCoord) return false;
        const int64_t o = OutExtent(s, d);
        if (o < 1 || o > kCokMaxCoord) return false;
    }
    return true;
}

// Row-major strides S_t of the output key and the per-byte constants of the two key words.
// Returns false when the key volume batch * prod(out) does not stay below INT64_MAX (the sentinel).
bool KeyConstants(const ConvOutKeysShape& s, ConvOutKeysTilingData& t) {
    uint64_t S[kCokTerms];
    uint64_t maxX[kCokTerms];
    S[s.ndim] = 1;
    for (int d = s.ndim - 1; d >= 0; --d) {
        if (S[d + 1] > (uint64_t)INT64_MAX / (uint64_t)t.outShape[d]) return false;
        S[d] = S[d + 1] * (uint64_t)t.outShape[d];
        maxX[d + 1] = (uint64_t)t.outShape[d] - 1;
    }
    maxX[0] = (uint64_t)s.batchSize - 1;
    if (S[0] > (uint64_t)(INT64_MAX - 1) / (uint64_t)s.batchSize) return false;
    const uint64_t volume = S[0] * (uint64_t)s.batchSize;  // < INT64_MAX: every key < sentinel
    t.wide = volume > (1ull << 32) ? 1 : 0;
    for (int term = 0; term <= s.ndim; ++term) {
        t.xBytes[term] = BytesOf((int64_t)maxX[term]);
        t.loMul[term] = (int32_t)(uint32_t)S[term];
        for (int i = 0; i < 3; ++i) {
            // 256^i <= maxX when byte i can be non-zero, so 256^i * S_t <= the largest key: no overflow
            const uint64_t P = i < t.xBytes[term] ? S[term] << (8 * i) : 0;
            t.hiMul[term][i] = (int32_t)(P >> 32);
            for (int j = 0; j < 4; ++j) t.lowByte[term][i][j] = (int32_t)((P >> (8 * j)) & 0xff);
        }
    }
    return true;
}

// Per-axis slot constants (see conv_out_keys_tiling_data.h "Slots").
void SlotConstants(const ConvOutKeysShape& s, int d, ConvOutKeysTilingData& t) {
    const int64_t g = mxs::gcd_positive(s.stride[d], s.dilation[d]);
    const int64_t step = mxs::conv_lattice_step(s.stride[d], s.dilation[d]);
    t.slots[d] = (int32_t)mxs::conv_out_slots(s.kernel[d], s.stride[d], s.dilation[d]);
    t.latticeStep[d] = (int32_t)step;
    t.outStep[d] = (int32_t)(s.dilation[d] / g);
    t.classes[d] = s.stride[d] == 1 || s.dilation[d] == 1 ? 0 : (int32_t)Min64(s.kernel[d], step);
    t.dilModStride[d] = (int32_t)(s.dilation[d] % s.stride[d]);
    t.dilDivStride[d] = (int32_t)(s.dilation[d] / s.stride[d]);
    t.slotSum += t.slots[d];
}

}  // namespace

int64_t ConvOutKeysUbBytes(const ConvOutKeysTilingData& t, int64_t T, int64_t G) {
    const int64_t B = T * 4, cols = t.ndim + 1, V = t.wide ? 7 : 2;
    return AlignUp(T * cols * 4, 32)          // input rows (16 B per row: not worth a second buffer)
           + 3 * B                             // row-offset and interleave tables
           + cols * B                          // batch + coordinate columns
           + 10 * B                            // scratch lanes
           + (1 + t.slotSum) * V * B           // per-(axis, slot) terms, batch term first
           + t.ndim * V * B                    // running sums along the slot odometer
           + 2 * B                             // (lo | hi) words of one slot
           + 2 * G * 2 * B;                    // staged int64 keys of G slots, double buffered
}

namespace {

// Tile T and staged group G. Every vector instruction covers T lanes and costs the scalar unit
// the same to issue whatever T is, so T is as large as UB allows (while staging at least
// min(J, 4) slots per DMA), then shrunk to split N evenly over whole tiles per core.
bool ChooseTile(int64_t n, const AscendPlatform& p, ConvOutKeysTilingData& t) {
    const int64_t budget = (int64_t)p.ubSize - 8192;  // top 8 KiB: library scratch (TMP_UB_OFFSET)
    const int64_t minGroup = Min64(t.slotVol, kCokMinGroup);
    int64_t tMax = kCokMaxTile;
    while (tMax > 64 && ConvOutKeysUbBytes(t, tMax, minGroup) > budget) tMax -= 64;
    if (ConvOutKeysUbBytes(t, tMax, 1) > budget) return false;
    const int64_t tilesPerCore = Max64(1, CeilDiv(n, (int64_t)p.aivNum * tMax));
    const int64_t T = Min64(tMax, Max64(64, AlignUp(CeilDiv(n, (int64_t)p.aivNum * tilesPerCore), 64)));
    t.tileRows = (int32_t)T;
    t.kGroup = (int32_t)Min64(Min64(t.slotVol, kCokMaxGroup), (budget - ConvOutKeysUbBytes(t, T, 0)) / (4 * T * 4));
    return t.kGroup >= 1;
}

}  // namespace

int32_t ConvOutKeysTiling(const ConvOutKeysShape& s, const AscendPlatform& p, ConvOutKeysTilingData& t) {
    t = ConvOutKeysTilingData{};
    if (!ValidGeometry(s)) return TILING_BAD_SHAPE;
    if (p.aivNum == 0 || p.ubSize < 64 * 1024) return TILING_BAD_PLATFORM;
    t.numVoxels = s.numVoxels;
    t.ndim = s.ndim;
    for (int d = 0; d < s.ndim; ++d) {
        t.kernel[d] = (int32_t)s.kernel[d];
        t.stride[d] = (int32_t)s.stride[d];
        t.padding[d] = (int32_t)s.padding[d];
        t.dilation[d] = (int32_t)s.dilation[d];
        t.outShape[d] = (int32_t)OutExtent(s, d);
        t.invStride[d] = 1.0f / (float)s.stride[d];
        SlotConstants(s, d, t);
    }
    // J*N keys are indexed in int32 by the sort/unique steps; the slot-major DMA stride (N - T) * 8 is uint32
    const int64_t slotVol = ConvOutKeysSlotVolume(s.ndim, s.kernel, s.stride, s.dilation);
    if (slotVol * s.numVoxels >= (1ll << 31) - 1 || s.numVoxels >= (1ll << 29)) return TILING_BAD_SHAPE;
    t.slotVol = (int32_t)slotVol;
    if (!KeyConstants(s, t)) return TILING_BAD_SHAPE;
    if (!ChooseTile(s.numVoxels, p, t)) return TILING_BAD_SHAPE;
    t.ubBytes = (int32_t)ConvOutKeysUbBytes(t, t.tileRows, t.kGroup);
    t.numTiles = CeilDiv(s.numVoxels, t.tileRows);
    t.usedAiv = (int32_t)Min64((int64_t)p.aivNum, t.numTiles);
    return TILING_OK;
}

}  // namespace mxs_ascend
