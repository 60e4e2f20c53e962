// Host tiling of gather_mm (see gather_mm_tiling.h and docs/en/ascend.md for the design).
//
// Design: output-stationary, deterministic. Each AIV owns a contiguous range of output rows
// (big/small split over the AIVs the platform reports). For a tile of T rows it gathers the
// rows features[nbr[m, k]] (zeros for -1) of all K offsets into a [T, K*Cin] slab of its own
// workspace with the window gather (common/op_kernel/window_gather.h: one DMA per window of input
// rows, vector Gather in UB, one DMA per slab segment), then one Cube Matmul per k-group
// slab @ W[k0:k0+kGroup] (W is [K*Cin, Cout] contiguous) writes/accumulates its own rows.
// Two slabs alternate so the AIV gathers tile i+1 while the AIC multiplies tile i.
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

    t.numOut = s.numOut; t.numIn = s.numIn;
    t.kvol = (int32_t)s.kvol; t.cin = (int32_t)s.cin; t.cout = (int32_t)s.cout; t.dtypeKey = s.dtypeKey;

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
    if (T >= 16) T = AlignDown(T, 16);
    T = Max64(1, Min64(T, Max64(share, 1)));
    // the nbr tile of T rows must leave room for the gather's other buffers: shrink T until it fits
    WindowGatherTiling wg{};
    while (!WindowGatherTilingFor(s.kvol, s.cin, esz, X, T, (int64_t)p.ubSize, wg)) {
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
    t.ubBytes = wg.ubBytes;
    t.slabElems = T * s.kvol * s.cin;
    t.wsPerAiv = AlignUp(2 * t.slabElems * esz, 512);

    TCubeTiling& mm = t.mm;
    mm.usedCoreNum = (int32_t)blockDim;
    mm.M = (int32_t)T; mm.N = (int32_t)s.cout; mm.Ka = mm.Kb = (int32_t)(kGroup * s.cin);
    mm.singleCoreM = (int32_t)T; mm.singleCoreN = (int32_t)s.cout; mm.singleCoreK = (int32_t)(kGroup * s.cin);
    mm.baseM = (int32_t)Min64(128, AlignUp(T, 16));
    mm.baseN = (int32_t)Min64(256, AlignUp(s.cout, 16));
    mm.baseK = esz == 4 ? 32 : 64;
    return TILING_OK;
}

uint64_t GatherMmWorkspaceBytes(const GatherMmTilingData& t) {
    return kSysWorkspace + (uint64_t)t.wsPerAiv * (uint64_t)(2 * (t.blockDim > 0 ? t.blockDim : 1));
}

}  // namespace mxs_ascend
