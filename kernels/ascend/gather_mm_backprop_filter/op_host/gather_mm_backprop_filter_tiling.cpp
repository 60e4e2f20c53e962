// Host tiling of gather_mm_backprop_filter.
//
// Design: filter-stationary, deterministic. Work item = (k, block of input channels); the AIV
// that owns an item owns dW[k][cin block, :] exclusively. For an item it walks all M rows in
// tiles of Tm: one strided DMA loads nbr[m0:m0+Tm, k]; the AIV gathers features[nbr[m,k],
// block] (zeros for -1) into a [Tm, cinBlock] workspace slab; the Cube computes
// slab^T @ grad[m0:m0+Tm, :] (grad rows are read in place from GM: no copy) and accumulates
// into dW (fp32) or into a per-AIV fp32 accumulator that is cast to fp16/bf16 once at the end.
// Items are split over the AIVs with big/small balancing; the channel blocks are chosen so that
// there are at least as many items as AIVs when the channels allow it; when they do not (small
// Cin), every item's rows are split into P ranges whose fp32 partial products go to workspace; after a
// SyncAll later every AIV adds a share of them in fixed order -- still deterministic, no atomics.
#include "gather_mm_backprop_filter_tiling.h"

namespace mxs_ascend {

int32_t GatherMmBpfTiling(const GatherMmBpfShape& s, const AscendPlatform& p, GatherMmBpfTilingData& t) {
    t = GatherMmBpfTilingData{};
    if (s.numOut < 0 || s.numIn < 0 || s.kvol <= 0 || s.cin <= 0 || s.cout <= 0) return TILING_BAD_SHAPE;
    if (s.kvol > (1 << 20) || s.cin > (1 << 20) || s.cout > (1 << 20)) return TILING_BAD_SHAPE;
    const int64_t esz = DTypeSize(s.dtypeKey);
    if (esz == 0) return TILING_BAD_DTYPE;
    if (p.aicNum == 0 || p.aivNum == 0 || p.ubSize < 64 * 1024) return TILING_BAD_PLATFORM;
    if (s.cout > kMatmulMaxK) return TILING_CHANNELS_TOO_WIDE;

    t.numOut = s.numOut; t.numIn = s.numIn;
    t.kvol = (int32_t)s.kvol; t.cin = (int32_t)s.cin; t.cout = (int32_t)s.cout; t.dtypeKey = s.dtypeKey;
    const int64_t aiv = p.aivNum;

    // channel blocks: enough items for all AIVs, blocks of >= 16 channels
    int64_t nb = 1;
    if (s.kvol < aiv) nb = Min64(CeilDiv(aiv, s.kvol), Max64(1, s.cin / kBpfMinCinBlock));
    int64_t cb = CeilDiv(s.cin, nb);
    if (cb >= kBpfMinCinBlock) cb = AlignUp(cb, 8);  // 32 B-friendly for fp32
    if (cb > s.cin) cb = s.cin;
    nb = CeilDiv(s.cin, cb);
    const int64_t items = s.kvol * nb;
    // Too few items for the AIVs (small Cin): split each item's rows into P ranges; the partial
    // products go to fp32 workspace slots and, after SyncAll, all AIVs add them in fixed order.
    int64_t P = 1;
    if (items < 2 * aiv && s.numOut > 0) {
        P = Min64(CeilDiv(8 * aiv, items), Max64(1, s.numOut / kBpfMinPartRows));
        P = Min64(P, Max64(1, kBpfPartialBudget / (items * cb * s.cout * 4)));
        P = Max64(P, 1);
    }
    const int64_t units = items * P;
    const int64_t used = s.numOut == 0 ? 0 : Min64(aiv, units);  // M == 0: dW = 0, zero-filled by the caller

    const int64_t rowBytes = cb * esz;
    const int64_t segPitch = AlignUp(rowBytes, (int64_t)kUbBlock);
    int64_t Tm = Min64(kBpfMaxTileRows, Max64(1, kBpfSlabBudget / rowBytes));
    if (Tm >= 16) Tm = AlignDown(Tm, 16);
    Tm = Max64(1, Min64(Tm, Max64(1, CeilDiv(s.numOut, P))));

    const int64_t nbrBufBytes = Tm * 32;
    const int64_t castChunk = (esz == 4 && P == 1) ? 0 : kBpfCastChunk;
    const int64_t castBytes = castChunk * (4 + esz) + (P > 1 ? castChunk * 4 : 0);  // + reduce accumulator
    const int64_t ubAvail = (int64_t)p.ubSize - nbrBufBytes - castBytes;
    if (ubAvail < 2 * segPitch) return TILING_CHANNELS_TOO_WIDE;
    int64_t F = Min64(Tm, ubAvail / (2 * segPitch));
    F = Min64(F, Max64(1, kBpfFillBudget / segPitch));
    F = Min64(F, 4095);

    t.cinBlock = (int32_t)cb; t.numCinBlocks = (int32_t)nb; t.numItems = (int32_t)items;
    t.usedAiv = (int32_t)used; t.blockDim = (int32_t)Min64((int64_t)p.aicNum, CeilDiv(used, 2));
    t.tileRows = (int32_t)Tm; t.segsPerFill = (int32_t)F; t.segPitch = (int32_t)segPitch;
    t.nbrBufBytes = (int32_t)nbrBufBytes; t.castChunk = (int32_t)castChunk;
    t.ubBytes = (int32_t)(nbrBufBytes + 2 * F * segPitch + castBytes);
    t.slabElems = Tm * cb;
    t.accOffset = AlignUp(2 * t.slabElems * esz, 512);
    const int64_t accBytes = esz == 4 ? 0 : cb * s.cout * 4;
    t.wsPerAiv = AlignUp(t.accOffset + accBytes, 512);
    t.numParts = (int32_t)P;
    t.numUnits = (int32_t)units;
    t.partialOffset = t.wsPerAiv * 2 * t.blockDim;
    t.redChunks = P > 1 ? (int32_t)CeilDiv(cb * s.cout, castChunk) : 0;

    TCubeTiling& mm = t.mm;
    mm.usedCoreNum = t.blockDim;
    mm.M = (int32_t)cb; mm.N = (int32_t)s.cout; mm.Ka = mm.Kb = (int32_t)Tm;
    mm.singleCoreM = (int32_t)cb; mm.singleCoreN = (int32_t)s.cout; mm.singleCoreK = (int32_t)Tm;
    mm.baseM = (int32_t)Min64(128, AlignUp(cb, 16));
    mm.baseN = (int32_t)Min64(256, AlignUp(s.cout, 16));
    mm.baseK = esz == 4 ? 32 : 64;
    return TILING_OK;
}

uint64_t GatherMmBpfWorkspaceBytes(const GatherMmBpfTilingData& t) {
    const uint64_t partials = t.numParts > 1 ? (uint64_t)t.numUnits * t.cinBlock * t.cout * 4 : 0;
    return kSysWorkspace + (uint64_t)t.wsPerAiv * (uint64_t)(2 * (t.blockDim > 0 ? t.blockDim : 1)) + partials;
}

}  // namespace mxs_ascend
