// Host tiling of gather_mm (see gather_mm_tiling.h and docs/en/ascend.md for the design).
//
// Design: output-stationary, deterministic. Each AIV owns a contiguous range of output rows
// (big/small split over the AIVs the platform reports). For a tile of T rows it gathers the
// rows features[nbr[m, k]] (zeros for -1) of kGroup offsets into a [T, kGroup*Cin] slab of its
// own workspace (UB double buffer -> one UB->GM DMA per fill), then one Cube Matmul
// slab @ W[k0:k0+kGroup] (W is [K*Cin, Cout] contiguous) writes/accumulates its own rows.
// Two slabs alternate so the AIV gathers tile i+1 while the AIC multiplies tile i.
#include "gather_mm_tiling.h"

namespace mxs_ascend {

int32_t GatherMmTiling(const GatherMmShape& s, const AscendPlatform& p, GatherMmTilingData& t) {
    t = GatherMmTilingData{};
    if (s.numOut < 0 || s.numIn < 0 || s.kvol <= 0 || s.cin <= 0 || s.cout <= 0) return TILING_BAD_SHAPE;
    if (s.kvol > (1 << 20) || s.cin > (1 << 20) || s.cout > (1 << 20)) return TILING_BAD_SHAPE;
    const int64_t esz = DTypeSize(s.dtypeKey);
    if (esz == 0) return TILING_BAD_DTYPE;
    if (p.aicNum == 0 || p.aivNum == 0 || p.ubSize < 64 * 1024) return TILING_BAD_PLATFORM;

    t.numOut = s.numOut; t.numIn = s.numIn;
    t.kvol = (int32_t)s.kvol; t.cin = (int32_t)s.cin; t.cout = (int32_t)s.cout; t.dtypeKey = s.dtypeKey;

    const int64_t rowBytes = s.cin * esz;
    const int64_t segPitch = AlignUp(rowBytes, (int64_t)kUbBlock);
    // offsets per Matmul: Ka = kGroup*Cin must stay <= 65535 and 16 rows of a slab must fit the budget
    int64_t kGroup = Min64(s.kvol, Max64(1, kMatmulMaxK / s.cin));
    kGroup = Min64(kGroup, Max64(1, kGmmSlabBudget / (16 * rowBytes)));
    if (s.cin > kMatmulMaxK) return TILING_CHANNELS_TOO_WIDE;

    // rows per tile: slab budget, nbr UB budget, never more than a core's share
    const int64_t aiv = p.aivNum;
    const int64_t share = CeilDiv(s.numOut, aiv);
    int64_t T = Min64(kGmmMaxTileRows, Max64(1, kGmmSlabBudget / (kGroup * rowBytes)));
    T = Min64(T, Max64(1, kGmmNbrUbBudget / (4 * s.kvol)));
    if (T >= 16) T = AlignDown(T, 16);
    T = Max64(1, Min64(T, Max64(share, 1)));

    // use fewer AIVs for tiny problems: at least one tile row each
    int64_t used = Min64(aiv, Max64(s.numOut, 0));
    const int64_t blockDim = Min64((int64_t)p.aicNum, CeilDiv(used, 2));

    const int64_t nbrBufBytes = AlignUp(T * s.kvol * 4, (int64_t)kUbBlock);
    const int64_t ubAvail = (int64_t)p.ubSize - kGmmUbReserve - nbrBufBytes;
    if (ubAvail < 2 * segPitch) return TILING_CHANNELS_TOO_WIDE;
    int64_t F = Min64(T * kGroup, ubAvail / (2 * segPitch));
    F = Min64(F, Max64(1, kGmmFillBudget / segPitch));
    F = Min64(F, 4095);  // DataCopyExtParams blockCount

    t.usedAiv = (int32_t)used;
    t.blockDim = (int32_t)blockDim;
    t.tileRows = (int32_t)T;
    t.kGroup = (int32_t)kGroup;
    t.segsPerFill = (int32_t)F;
    t.segPitch = (int32_t)segPitch;
    t.nbrBufBytes = (int32_t)nbrBufBytes;
    t.ubBytes = (int32_t)(nbrBufBytes + 2 * F * segPitch);
    t.slabElems = T * kGroup * s.cin;
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
