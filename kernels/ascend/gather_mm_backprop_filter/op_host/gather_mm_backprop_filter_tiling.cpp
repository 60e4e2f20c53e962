// Host tiling of gather_mm_backprop_filter.
//
// Design: row-stationary with fixed-order partials, deterministic. Each of `usedAiv` AIVs owns a
// contiguous range of rows (big/small split); per tile of T rows it builds the same [T, K*Cin]
// slab as gather_mm (window gather) and the Cube adds slab^T @ grad[rows] (grad read in place) into
// the AIV's own fp32 partial of dW [K*Cin, Cout] -- every feature row is gathered once for all K
// offsets, and grad is read once. After SyncAll every AIV of the launch sums a share of dW's
// chunks over the partials in AIV order and casts it: deterministic, no atomics. The number of
// AIVs with rows is capped so that each covers >= kBpfMinRowsPerAiv rows and the partials stay
// within kBpfPartialBudget (the reduce reads them all once).
#include "gather_mm_backprop_filter_tiling.h"
#include "gather_mm_tiling.h"

namespace mxs_ascend {

int32_t GatherMmBpfTiling(const GatherMmBpfShape& s, const AscendPlatform& p, GatherMmBpfTilingData& t) {
    t = GatherMmBpfTilingData{};
    if (s.numOut < 0 || s.numIn < 0 || s.kvol <= 0 || s.cin <= 0 || s.cout <= 0) return TILING_BAD_SHAPE;
    if (s.kvol > (1 << 20) || s.cin > (1 << 20) || s.cout > (1 << 20)) return TILING_BAD_SHAPE;
    if (s.numIn >= (1ll << 31) - 1) return TILING_BAD_SHAPE;
    const int64_t esz = DTypeSize(s.dtypeKey);
    if (esz == 0) return TILING_BAD_DTYPE;
    if (p.aicNum == 0 || p.aivNum == 0 || p.ubSize < 64 * 1024) return TILING_BAD_PLATFORM;
    if (s.cin > kMatmulMaxK || s.cout > kMatmulMaxK) return TILING_CHANNELS_TOO_WIDE;

    t.numOut = s.numOut; t.numIn = s.numIn;
    t.kvol = (int32_t)s.kvol; t.cin = (int32_t)s.cin; t.cout = (int32_t)s.cout; t.dtypeKey = s.dtypeKey;
    const int64_t aiv = p.aivNum;
    const int64_t dwElems = s.kvol * s.cin * s.cout;

    int64_t X = WindowGroupOf(s.kvol);
    if (X * s.cin > kMatmulMaxK) X = 1;
    int64_t kGroup = Min64(s.kvol, kMatmulMaxK / s.cin);
    kGroup = Max64(X, kGroup / X * X);

    int64_t used = Min64(aiv, Max64(1, CeilDiv(s.numOut, kBpfMinRowsPerAiv)));
    used = Min64(used, Max64(1, kBpfPartialBudget / (dwElems * 4)));
    if (s.numOut == 0) used = 0;  // dW = 0, zero-filled by the caller

    const int64_t rowBytes = s.cin * esz;
    const int64_t share = used > 0 ? CeilDiv(s.numOut, used) : 1;
    int64_t T = Min64(kGmmMaxTileRows, Max64(kGmmMinTileRows, kGmmSlabBudget / (s.kvol * rowBytes)));
    if (T >= 16) T = AlignDown(T, 16);
    T = Max64(1, Min64(T, share));
    const int64_t castChunk = kBpfCastChunk;
    const int64_t castBytes = castChunk * 4 + castChunk * esz + castChunk * 4;  // in queue, out queue, accumulator
    WindowGatherTiling wg{};
    while (!WindowGatherTilingFor(s.kvol, s.cin, esz, X, T, (int64_t)p.ubSize - castBytes, wg)) {
        if (T == 1) return TILING_CHANNELS_TOO_WIDE;
        T = Max64(1, T / 2);
    }

    t.usedAiv = (int32_t)used;
    t.blockDim = (int32_t)Min64((int64_t)p.aicNum, CeilDiv(Max64(used, 1), 2));
    t.tileRows = (int32_t)T;
    t.kGroup = (int32_t)kGroup;
    t.castChunk = (int32_t)castChunk;
    t.redChunks = (int32_t)CeilDiv(dwElems, castChunk);
    t.wg = wg;
    t.ubBytes = (int32_t)(wg.ubBytes + castBytes);
    t.slabElems = T * s.kvol * s.cin;
    t.wsPerAiv = AlignUp(2 * t.slabElems * esz, 512);
    t.partialOffset = t.wsPerAiv * 2 * t.blockDim;

    TCubeTiling& mm = t.mm;
    mm.usedCoreNum = t.blockDim;
    mm.M = (int32_t)(kGroup * s.cin); mm.N = (int32_t)s.cout; mm.Ka = mm.Kb = (int32_t)T;
    mm.singleCoreM = mm.M; mm.singleCoreN = (int32_t)s.cout; mm.singleCoreK = (int32_t)T;
    mm.baseM = (int32_t)Min64(128, AlignUp(mm.M, 16));
    mm.baseN = (int32_t)Min64(256, AlignUp(s.cout, 16));
    mm.baseK = esz == 4 ? 32 : 64;
    return TILING_OK;
}

uint64_t GatherMmBpfWorkspaceBytes(const GatherMmBpfTilingData& t) {
    const uint64_t partials = (uint64_t)(t.usedAiv > 0 ? t.usedAiv : 0) * t.kvol * t.cin * t.cout * 4;
    return kSysWorkspace + (uint64_t)t.partialOffset + partials;
}

}  // namespace mxs_ascend
