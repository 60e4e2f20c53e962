// Host tiling of gather_mm (see gather_mm_tiling.h and docs/en/ascend.md for the design).
//
// Design: output-stationary, deterministic. Each AIV owns a contiguous range of output rows
// (big/small split over the AIVs the platform reports). For a tile of T rows it gathers the
// rows features[nbr[m, k]] (zeros for -1) of all K offsets into a [T, K*Cin] slab of its own
// workspace with the window gather (common/op_kernel/window_gather.h: one DMA per window of input
// rows, vector Gather in UB, one DMA per slab segment), then one Cube Matmul per k-group
// slab @ W[k0:k0+kGroup] (W is [K*Cin, Cout] contiguous) writes/accumulates its own rows.
// Two slabs alternate so the AIV gathers tile i+1 while the AIC multiplies tile i.
//
// Weight read transposed (gather_mm_weight_layout.h: a layer's [K, Cout, Cin] for the input
// gradient): the gather and the slab are the same, but each offset is its own Matmul, A = the
// offset's [T, Cin] columns of its k-group (row pitch Ka = kGroup*Cin), B = W[k'] [Cout, Cin] read
// transposed (Kb = Cin), k' = kFirst + kStep*k; the tiling key selects that instantiation. For
// fp16/bf16 the offsets add up in an fp32 tile [T, Cout] after the AIV's slabs (T capped so that
// it stays within the slab budget), cast to T through two UB buffers of kGmmCastChunk elements
// taken from the gather's UB budget.
#include "gather_mm_tiling.h"

namespace mxs_ascend {

int64_t WindowGroupOf(int64_t kvol) {
    for (int64_t x = 2; x * x * x <= kvol; ++x)
        if (x * x * x == kvol) return x;
    return 1;
}

int32_t GatherMmTiling(const GatherMmShape& s, const AscendPlatform& p, GatherMmTilingData& t) {
    t = GatherMmTilingData{};
    if (s.numOut < 0 || s.numIn < 0 || s.kvol <= 0 || s.cin <= 0 || s.cout <= 0) return TILING_BAD_SHAPE;
    if (s.kvol > (1 << 20) || s.cin > (1 << 20) || s.cout > (1 << 20)) return TILING_BAD_SHAPE;
    if (s.numIn >= (1ll << 31) - 1) return TILING_BAD_SHAPE;  // map entries are int32 rows
    const int64_t esz = DTypeSize(s.dtypeKey);
    if (esz == 0) return TILING_BAD_DTYPE;
    if (p.aicNum == 0 || p.aivNum == 0 || p.ubSize < 64 * 1024) return TILING_BAD_PLATFORM;
    if (s.cin > kMatmulMaxK) return TILING_CHANNELS_TOO_WIDE;
    if (s.weightLayout != GMM_WEIGHT_AS_IS && !GatherMmWeightTransposed(s.weightLayout)) return TILING_BAD_SHAPE;
    const bool weightT = GatherMmWeightTransposed(s.weightLayout);
    const bool reversed = s.weightLayout == GMM_WEIGHT_T_REVERSED;

    t.numOut = s.numOut; t.numIn = s.numIn;
    t.kvol = (int32_t)s.kvol; t.cin = (int32_t)s.cin; t.cout = (int32_t)s.cout; t.dtypeKey = s.dtypeKey;
    t.tilingKey = s.dtypeKey + (weightT ? kGmmWeightTKeyBase : 0);
    t.kFirst = reversed ? (int32_t)(s.kvol - 1) : 0;
    t.kStep = reversed ? -1 : 1;

    // offsets per Matmul: Ka = kGroup*Cin <= 65535, a multiple of the window group
    int64_t X = WindowGroupOf(s.kvol);
    if (X * s.cin > kMatmulMaxK) X = 1;
    int64_t kGroup = Min64(s.kvol, kMatmulMaxK / s.cin);
    kGroup = Max64(X, kGroup / X * X);

    // rows per slab: slab budget, never more than a core's share
    const int64_t rowBytes = s.cin * esz;
    const int64_t aiv = p.aivNum;
    const int64_t share = CeilDiv(s.numOut, aiv);
    int64_t T = Min64(kGmmMaxTileRows, Max64(kGmmMinTileRows, kGmmSlabBudget / (s.kvol * rowBytes)));
    const bool accF32 = weightT && esz != 4;
    if (accF32) T = Min64(T, Max64(kGmmMinTileRows, kGmmSlabBudget / (s.cout * 4)));
    if (T >= 16) T = AlignDown(T, 16);
    T = Max64(1, Min64(T, Max64(share, 1)));
    const int64_t castBytes = accF32 ? kGmmCastChunk * (4 + esz) : 0;  // in and out queue of the cast
    // the nbr tile of T rows must leave room for the gather's other buffers: shrink T until it fits
    WindowGatherTiling wg{};
    while (!WindowGatherTilingFor(s.kvol, s.cin, esz, X, T, (int64_t)p.ubSize - castBytes, wg)) {
        if (T == 1) return TILING_CHANNELS_TOO_WIDE;
        T = Max64(1, T / 2);
    }

    // use fewer AIVs for tiny problems: at least one tile row each
    const int64_t used = Min64(aiv, Max64(s.numOut, 0));
    const int64_t blockDim = Min64((int64_t)p.aicNum, CeilDiv(used, 2));

    t.usedAiv = (int32_t)used;
    t.blockDim = (int32_t)blockDim;
    t.tileRows = (int32_t)T;
    t.kGroup = (int32_t)kGroup;
    t.wg = wg;
    t.ubBytes = (int32_t)(wg.ubBytes + castBytes);
    t.slabElems = T * s.kvol * s.cin;
    const int64_t slabBytes = AlignUp(2 * t.slabElems * esz, 512);
    t.accOffset = accF32 ? slabBytes : 0;
    t.castChunk = accF32 ? (int32_t)kGmmCastChunk : 0;
    t.wsPerAiv = slabBytes + (accF32 ? AlignUp(T * s.cout * 4, 512) : 0);

    TCubeTiling& mm = t.mm;
    mm.usedCoreNum = (int32_t)blockDim;
    // one Matmul per k-group; with the weight read transposed one per offset, whose A is a column
    // block of the k-group's slab rows (Ka, their pitch, stays kGroup*Cin) and B one W[k'] (Kb = Cin)
    const int32_t mmK = (int32_t)((weightT ? 1 : kGroup) * s.cin);
    mm.M = (int32_t)T; mm.N = (int32_t)s.cout; mm.Ka = (int32_t)(kGroup * s.cin); mm.Kb = mmK;
    mm.singleCoreM = (int32_t)T; mm.singleCoreN = (int32_t)s.cout; mm.singleCoreK = mmK;
    mm.baseM = (int32_t)Min64(128, AlignUp(T, 16));
    mm.baseN = (int32_t)Min64(256, AlignUp(s.cout, 16));
    mm.baseK = esz == 4 ? 32 : 64;
    return TILING_OK;
}

uint64_t GatherMmWorkspaceBytes(const GatherMmTilingData& t) {
    return kSysWorkspace + (uint64_t)t.wsPerAiv * (uint64_t)(2 * (t.blockDim > 0 ? t.blockDim : 1));
}

}  // namespace mxs_ascend
