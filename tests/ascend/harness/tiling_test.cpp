// Unit tests of the host tiling functions (plain C++, no emulator launch): every combination of
// platform (1/2, 3/6, 20/40, 24/48 AIC/AIV), row count (0 .. 5 million), channels (1 .. 1024),
// kernel volume (1, 27, 125) and dtype must produce a tiling that respects the A2 limits and
// covers all work exactly once. Prints "tiling_test: N combinations OK" or the first failure.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "gather_mm/op_host/gather_mm_tiling.h"
#include "gather_mm_backprop_filter/op_host/gather_mm_backprop_filter_tiling.h"
#include "subm_map/op_host/subm_map_tiling.h"
#include "conv_out_keys/op_host/conv_out_keys_tiling.h"
#include "unique_sorted_keys/op_host/unique_sorted_keys_tiling.h"
#include "common/op_host/window_gather_tiling.h"

using namespace mxs_ascend;
static long g_checks = 0;
static int64_t g_maxUb[3] = {0, 0, 0};
static int64_t g_maxUbKeys[2] = {0, 0};  // conv_out_keys, unique_sorted_keys
#define REQUIRE(cond, ...)                                                   \
    do {                                                                     \
        ++g_checks;                                                          \
        if (!(cond)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s | ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

// The window gather's tiling: UB sum, row chunks, the window and the 32 B / word layout rules.
static void checkWindowGather(const WindowGatherTiling& g, int64_t K, int64_t cin, int64_t esz, int64_t T, int64_t budget) {
    REQUIRE(g.ubBytes == WindowGatherUbBytes(g) && g.ubBytes <= budget, "wg ub %d of %lld", g.ubBytes, (long long)budget);
    REQUIRE(g.kvol == K && g.cin == cin && g.tileRows == T && K % g.group == 0, "wg shape");
    REQUIRE(g.chunkRows >= 8 && g.chunkRows % 8 == 0 && g.chunkRows <= 256, "wg chunk %d", g.chunkRows);
    REQUIRE(g.windowRows >= 8 && (int64_t)g.windowRows * g.pitch <= 64 * 1024 + g.pitch, "wg window");
    REQUIRE(g.colChunk >= 1 && g.colChunk <= cin && g.colChunk * esz <= 512 && (g.colChunk == cin || g.colChunk * esz == 512), "wg columns");
    REQUIRE(g.wordBytes == 4 || (g.wordBytes == 2 && (g.colChunk * esz) % 4 != 0), "wg word");
    REQUIRE(g.rowWords * g.wordBytes == g.colChunk * esz, "wg row words");
    REQUIRE((g.segWords * g.wordBytes) % 32 == 0 && g.segWords >= g.group * g.rowWords, "wg seg");
    REQUIRE(g.colChunk == cin || (g.pitch % 32 == 0 && g.windowRows <= 4095), "wg chunked window");
    REQUIRE(g.entryLanes >= 8 && g.entryLanes >= g.chunkRows * g.group && (g.entryLanes & (g.entryLanes - 1)) == 0, "wg lanes");
}
static void checkCoverage(int64_t items, int64_t workers) {
    int64_t next = 0, mn = INT64_MAX, mx = 0;
    for (int64_t w = 0; w < workers; ++w) {
        Range r = SplitBigSmall(items, workers, w);
        REQUIRE(r.begin == next, "items %lld workers %lld", (long long)items, (long long)workers);
        next = r.end;
        mn = std::min(mn, r.end - r.begin); mx = std::max(mx, r.end - r.begin);
    }
    REQUIRE(next == items && mx - mn <= 1, "items %lld workers %lld", (long long)items, (long long)workers);
}

// ConvOutKeys and UniqueSortedKeys over platforms, row counts, kernel shapes up to K = 125 and
// grids whose keys stay below 2^32 or need the high word; the byte constants must rebuild the
// row-major strides exactly.
static void checkKeyKernels(const AscendPlatform (&plats)[4], const int64_t (&rows)[8]) {
    const int64_t grids[][4] = {{41, 1600, 1408, 1}, {1024, 2048, 1536, 1}, {900, 90000, 90000, 3}, {8000000, 8000000, 30000, 3}};
    const int64_t kernels[][3] = {{1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {5, 5, 5}, {3, 1, 5}};
    for (const auto& p : plats)
        for (int64_t N : rows)
            for (const auto& g : grids)
                for (const auto& k : kernels) {
                    ConvOutKeysShape s;
                    s.numVoxels = N; s.batchSize = g[3];
                    // stride 2 (dilation 1): ceil(k / 2) slots per axis; stride 1: k slots
                    const int64_t stride = N % 2 == 0 ? 2 : 1;
                    int64_t slotVol = 1, slotSum = 0;
                    for (int d = 0; d < 3; ++d) {
                        s.spatial[d] = g[d]; s.kernel[d] = k[d]; s.stride[d] = stride; s.padding[d] = k[d] / 2;
                        const int64_t j = (k[d] + stride - 1) / stride;
                        slotVol *= j;
                        slotSum += j;
                    }
                    ConvOutKeysTilingData t;
                    const int32_t st = ConvOutKeysTiling(s, p, t);
                    if (N * slotVol >= (1ll << 31) - 1) { REQUIRE(st == TILING_BAD_SHAPE, "cok pairs"); continue; }
                    REQUIRE(st == TILING_OK, "cok N %lld J %lld grid %lld", (long long)N, (long long)slotVol, (long long)g[0]);
                    REQUIRE(t.slotVol == slotVol && t.slotSum == slotSum, "cok slots");
                    for (int d = 0; d < 3; ++d)
                        REQUIRE(t.slots[d] * t.latticeStep[d] >= k[d] && (t.slots[d] - 1) * t.latticeStep[d] < k[d] &&
                                t.latticeStep[d] == stride && t.outStep[d] == 1 && t.classes[d] == 0, "cok axis slots");
                    REQUIRE(t.ubBytes == ConvOutKeysUbBytes(t, t.tileRows, t.kGroup) && t.ubBytes <= (int64_t)p.ubSize, "cok ub");
                    g_maxUbKeys[0] = std::max<int64_t>(g_maxUbKeys[0], t.ubBytes);
                    REQUIRE(t.tileRows % 64 == 0 && t.tileRows <= kCokMaxTile && t.kGroup >= 1 && t.kGroup <= std::min(t.slotVol, kCokMaxGroup), "cok T/G");
                    REQUIRE(t.numTiles == (N + t.tileRows - 1) / t.tileRows && t.usedAiv <= (int32_t)p.aivNum, "cok tiles");
                    REQUIRE(N == 0 ? t.usedAiv == 0 : t.usedAiv >= 1, "cok used");
                    if (t.usedAiv > 0) checkCoverage(t.numTiles, t.usedAiv);
                    // rebuild S_t from the per-byte constants: 256^i * S_t == A * 2^32 + B
                    unsigned __int128 S = 1;
                    for (int term = 3; term >= 0; --term) {
                        REQUIRE(t.loMul[term] == (int32_t)(uint32_t)(uint64_t)S, "cok loMul");
                        for (int i = 0; i < t.xBytes[term]; ++i) {
                            uint64_t B = 0;
                            for (int j = 0; j < 4; ++j) B |= (uint64_t)t.lowByte[term][i][j] << (8 * j);
                            REQUIRE(((unsigned __int128)(uint32_t)t.hiMul[term][i] << 32) + B == (S << (8 * i)), "cok bytes");
                        }
                        S *= term > 0 ? (unsigned __int128)t.outShape[term - 1] : 1;
                    }
                    REQUIRE(t.wide == (S * (unsigned __int128)g[3] > ((unsigned __int128)1 << 32) ? 1 : 0), "cok wide");
                }
    for (const auto& p : plats)
        for (int64_t C : {0ll, 1ll, 63ll, 64ll, 1000ll, 123457ll, 5000000ll, 54000000ll}) {
            UniqueSortedKeysTilingData t;
            REQUIRE(UniqueSortedKeysTiling(C, p, t) == TILING_OK, "usk C %lld", (long long)C);
            REQUIRE(t.ubBytes == UniqueSortedKeysUbBytes(t.tileKeys, t.usedAiv) && t.ubBytes <= (int64_t)p.ubSize, "usk ub");
            g_maxUbKeys[1] = std::max<int64_t>(g_maxUbKeys[1], UniqueSortedKeysUbBytes(t.tileKeys, p.aivNum));
            REQUIRE(t.tileKeys % 64 == 0 && t.tileKeys <= kUskMaxTile && t.numTiles == (C + t.tileKeys - 1) / t.tileKeys, "usk T");
            REQUIRE(t.usedAiv <= (int32_t)p.aivNum && (C == 0 ? t.usedAiv == 0 : t.usedAiv >= 1), "usk used");
            REQUIRE(t.countOffset >= C * 8 && t.countOffset % 32 == 0, "usk count slots");
            REQUIRE(UniqueSortedKeysWorkspaceBytes(t) >= kSysWorkspace + (uint64_t)t.countOffset + 32ull * t.usedAiv, "usk ws");
            if (t.usedAiv > 0) checkCoverage(t.numTiles, t.usedAiv);
        }
    UniqueSortedKeysTilingData u;
    REQUIRE(UniqueSortedKeysTiling(1ll << 31, plats[0], u) == TILING_BAD_SHAPE, "usk C >= 2^31");
    ConvOutKeysShape bad;
    bad.numVoxels = 10; bad.spatial[0] = 1ll << 24;  // coordinate range beyond float-exact
    ConvOutKeysTilingData t;
    REQUIRE(ConvOutKeysTiling(bad, plats[0], t) == TILING_BAD_SHAPE, "cok 2^24");
    bad.spatial[0] = 1ll << 20; bad.spatial[1] = 1ll << 20; bad.spatial[2] = 1ll << 20; bad.batchSize = 1ll << 4;
    REQUIRE(ConvOutKeysTiling(bad, plats[0], t) == TILING_BAD_SHAPE, "cok key volume >= INT64_MAX");
    // slot constants with gcd(s, dil) > 1, hand-computed: per axis (k, s, dil) -> (J, step, dil/g, classes,
    // dil mod s, dil div s)
    ConvOutKeysShape g;
    g.numVoxels = 10;
    const int64_t geo[3][3] = {{5, 4, 2}, {3, 3, 3}, {4, 2, 1}};
    const int32_t want[3][6] = {{3, 2, 1, 2, 2, 0}, {3, 1, 1, 1, 0, 1}, {2, 2, 1, 0, 1, 0}};
    for (int d = 0; d < 3; ++d) {
        g.spatial[d] = 40; g.kernel[d] = geo[d][0]; g.stride[d] = geo[d][1]; g.dilation[d] = geo[d][2];
    }
    REQUIRE(ConvOutKeysTiling(g, plats[0], t) == TILING_OK && t.slotVol == 18 && t.slotSum == 8, "cok gcd slots");
    for (int d = 0; d < 3; ++d)
        REQUIRE(t.slots[d] == want[d][0] && t.latticeStep[d] == want[d][1] && t.outStep[d] == want[d][2] &&
                t.classes[d] == want[d][3] && t.dilModStride[d] == want[d][4] && t.dilDivStride[d] == want[d][5],
                "cok gcd axis %d", d);
}

int main() {
    const AscendPlatform plats[] = {{1, 2, 196608}, {3, 6, 196608}, {20, 40, 196608}, {24, 48, 196608}};
    const int64_t rows[] = {0, 1, 7, 47, 1000, 123457, 2000000, 5000000};
    const int64_t chans[] = {1, 3, 8, 16, 55, 77, 128, 256, 512, 1000, 1024};
    const int64_t kvols[] = {1, 27, 125};
    long combos = 0;
    for (const auto& p : plats)
        for (int64_t M : rows)
            for (int64_t K : kvols)
                for (int64_t cin : chans)
                    for (int64_t cout : {(int64_t)1, (int64_t)77, cin, (int64_t)1024})
                        for (int32_t dt : {0, 1, 2}) {
                            ++combos;
                            const int64_t esz = DTypeSize(dt);
                            // ---------------- gather_mm
                            GatherMmTilingData t;
                            GatherMmShape s{M, M + 5, K, cin, cout, dt};
                            REQUIRE(GatherMmTiling(s, p, t) == TILING_OK, "M %lld K %lld cin %lld", (long long)M, (long long)K, (long long)cin);
                            REQUIRE(t.ubBytes <= (int64_t)p.ubSize, "ub %d", t.ubBytes);
                            g_maxUb[0] = std::max<int64_t>(g_maxUb[0], t.ubBytes);
                            checkWindowGather(t.wg, K, cin, esz, t.tileRows, (int64_t)p.ubSize);
                            REQUIRE(t.ubBytes == t.wg.ubBytes, "ub sum");
                            REQUIRE(t.kGroup >= 1 && t.kGroup <= K && (int64_t)t.kGroup * cin <= kMatmulMaxK, "kGroup %d", t.kGroup);
                            REQUIRE(t.kGroup % t.wg.group == 0 && K % t.wg.group == 0, "groups inside k-groups");
                            REQUIRE(t.tileRows >= 1 && t.tileRows <= kGmmMaxTileRows, "T %d", t.tileRows);
                            REQUIRE(t.usedAiv <= (int32_t)p.aivNum && t.blockDim <= (int32_t)p.aicNum && 2 * t.blockDim >= t.usedAiv, "cores");
                            REQUIRE(M == 0 ? t.usedAiv == 0 : t.usedAiv >= 1, "used %d", t.usedAiv);
                            REQUIRE(t.slabElems == (int64_t)t.tileRows * K * cin, "slab");
                            REQUIRE(t.slabElems * esz <= std::max(kGmmSlabBudget, kGmmMinTileRows * K * cin * esz) || t.tileRows == 1,
                                    "slab budget %lld", (long long)(t.slabElems * esz));
                            REQUIRE(t.wsPerAiv >= 2 * t.slabElems * esz && t.wsPerAiv % 512 == 0, "ws");
                            REQUIRE(t.mm.Ka == t.kGroup * cin && t.mm.N == cout && t.mm.M == t.tileRows, "mm");
                            REQUIRE(t.mm.Kb == t.mm.Ka && t.mm.singleCoreK == t.mm.Ka, "mm K");
                            REQUIRE(t.tilingKey == dt && t.accOffset == 0 && t.castChunk == 0, "plain key %d", t.tilingKey);
                            // ---------------- gather_mm reading the weight transposed (layouts 1, 2)
                            for (int32_t layout : {(int32_t)GMM_WEIGHT_T, (int32_t)GMM_WEIGHT_T_REVERSED}) {
                                GatherMmTilingData u;
                                GatherMmShape su{M, M + 5, K, cin, cout, dt, layout};
                                REQUIRE(GatherMmTiling(su, p, u) == TILING_OK, "T M %lld K %lld cin %lld", (long long)M, (long long)K, (long long)cin);
                                REQUIRE(u.tilingKey == dt + kGmmWeightTKeyBase, "T key %d", u.tilingKey);
                                REQUIRE(layout == GMM_WEIGHT_T ? (u.kFirst == 0 && u.kStep == 1) : (u.kFirst == K - 1 && u.kStep == -1), "T offsets");
                                REQUIRE(u.ubBytes <= (int64_t)p.ubSize, "T ub %d", u.ubBytes);
                                checkWindowGather(u.wg, K, cin, esz, u.tileRows, (int64_t)p.ubSize - (int64_t)u.castChunk * (4 + esz));
                                REQUIRE(u.kGroup == t.kGroup && u.kGroup % u.wg.group == 0, "T k-groups as the plain slab's");
                                REQUIRE(u.tileRows >= 1 && u.tileRows <= t.tileRows, "T rows %d", u.tileRows);
                                REQUIRE(u.slabElems == (int64_t)u.tileRows * K * cin, "T slab");
                                // one Matmul per offset: A a Cin-wide column block of the k-group's rows, B one W[k'] read transposed
                                REQUIRE(u.mm.Ka == u.kGroup * cin && u.mm.Kb == cin && u.mm.singleCoreK == cin && u.mm.N == cout &&
                                            u.mm.M == u.tileRows, "T mm");
                                if (esz == 4) {
                                    REQUIRE(u.accOffset == 0 && u.castChunk == 0 && u.ubBytes == u.wg.ubBytes, "T fp32 sums in out");
                                    REQUIRE(u.wsPerAiv == AlignUp(2 * u.slabElems * esz, 512), "T ws");
                                } else {   // fp32 tile of sums after the slabs, a cast through two UB buffers
                                    REQUIRE(u.castChunk == kGmmCastChunk && u.ubBytes == u.wg.ubBytes + kGmmCastChunk * (4 + esz), "T cast");
                                    REQUIRE(u.accOffset >= 2 * u.slabElems * esz && u.accOffset % 512 == 0, "T acc offset");
                                    REQUIRE(u.wsPerAiv >= u.accOffset + (int64_t)u.tileRows * cout * 4 && u.wsPerAiv % 512 == 0, "T ws");
                                    REQUIRE((int64_t)u.tileRows * cout * 4 <= std::max(kGmmSlabBudget, kGmmMinTileRows * cout * 4), "T sums budget");
                                }
                                if (u.usedAiv > 0) checkCoverage(M, u.usedAiv);
                                REQUIRE(u.usedAiv == t.usedAiv && u.blockDim == t.blockDim, "T cores");
                            }
                            if (t.usedAiv > 0) {
                                checkCoverage(M, t.usedAiv);
                                // a core's share fits one or more tiles; tiles never exceed the share unless share < 1 tile
                                const int64_t share = (M + t.usedAiv - 1) / t.usedAiv;
                                REQUIRE(t.tileRows <= std::max<int64_t>(share, 1) || t.tileRows == 1, "T vs share");
                            }
                            // ---------------- gather_mm_backprop_filter
                            GatherMmBpfTilingData b;
                            GatherMmBpfShape bs{M, M + 5, K, cin, cout, dt};
                            REQUIRE(GatherMmBpfTiling(bs, p, b) == TILING_OK, "bpf M %lld cin %lld", (long long)M, (long long)cin);
                            REQUIRE(b.ubBytes <= (int64_t)p.ubSize, "bpf ub %d", b.ubBytes);
                            g_maxUb[1] = std::max<int64_t>(g_maxUb[1], b.ubBytes);
                            checkWindowGather(b.wg, K, cin, esz, b.tileRows, (int64_t)p.ubSize - kBpfCastChunk * (8 + esz));
                            REQUIRE(b.ubBytes == b.wg.ubBytes + kBpfCastChunk * (8 + esz), "bpf ub sum");
                            REQUIRE(b.kGroup >= 1 && b.kGroup <= K && (int64_t)b.kGroup * cin <= kMatmulMaxK && b.kGroup % b.wg.group == 0, "bpf kGroup");
                            REQUIRE(b.tileRows >= 1 && b.tileRows <= kGmmMaxTileRows, "bpf T");
                            REQUIRE(b.usedAiv <= (int32_t)p.aivNum && b.blockDim <= (int32_t)p.aicNum && 2 * b.blockDim >= b.usedAiv, "cores");
                            REQUIRE(M == 0 ? b.usedAiv == 0 : b.usedAiv >= 1, "used");
                            REQUIRE(b.usedAiv <= 1 || (int64_t)(b.usedAiv - 1) * kBpfMinRowsPerAiv < M, "rows per partial");
                            REQUIRE((int64_t)b.usedAiv * K * cin * cout * 4 <= std::max<int64_t>(kBpfPartialBudget, K * cin * cout * 4), "partials");
                            REQUIRE(b.redChunks == (K * cin * cout + b.castChunk - 1) / b.castChunk, "red chunks");
                            REQUIRE(b.partialOffset >= b.wsPerAiv * 2 * b.blockDim && b.partialOffset % 512 == 0, "partial offset");
                            REQUIRE(GatherMmBpfWorkspaceBytes(b) >= kSysWorkspace + (uint64_t)b.partialOffset +
                                        (uint64_t)b.usedAiv * K * cin * cout * 4, "ws partials");
                            REQUIRE(b.mm.M == b.kGroup * cin && b.mm.N == cout && b.mm.Ka == b.tileRows, "bpf mm");
                            if (b.usedAiv > 0) checkCoverage(M, b.usedAiv);
                        }
    // invalid shapes are rejected, not wrapped
    GatherMmTilingData t;
    REQUIRE(GatherMmTiling({10, 10, 27, 0, 8, 0}, plats[0], t) == TILING_BAD_SHAPE, "cin 0");
    REQUIRE(GatherMmTiling({-1, 10, 27, 8, 8, 0}, plats[0], t) == TILING_BAD_SHAPE, "M < 0");
    REQUIRE(GatherMmTiling({10, 10, 27, 8, 8, 7}, plats[0], t) == TILING_BAD_DTYPE, "dtype");
    REQUIRE(GatherMmTiling({10, 10, 27, 8, 8, 0}, {0, 0, 196608}, t) == TILING_BAD_PLATFORM, "no cores");
    REQUIRE(GatherMmTiling({10, 10, 1, 70000, 8, 0}, plats[0], t) == TILING_CHANNELS_TOO_WIDE, "cin > 65535");
    REQUIRE(GatherMmTiling({10, 10, 27, 8, 8, 0, 3}, plats[0], t) == TILING_BAD_SHAPE, "weight layout 3");
    GatherMmBpfTilingData b;
    REQUIRE(GatherMmBpfTiling({10, 10, 27, 8, 70000, 0}, plats[0], b) == TILING_CHANNELS_TOO_WIDE, "cout > 65535");
    // ---------------- subm_map: every kernel shape up to 5x5x5, N up to 5 million
    for (const auto& p : plats)
        for (int64_t N : rows)
            for (int64_t kz : {1, 3, 5})
                for (int64_t ky : {1, 3, 5})
                    for (int64_t kx : {1, 3, 5}) {
                        mxs_ascend::SubmMapShape ss;
                        ss.numVoxels = N; ss.ndim = 3;
                        ss.paddedShape[0] = 45; ss.paddedShape[1] = 1604; ss.paddedShape[2] = 1412;
                        ss.kernel[0] = kz; ss.kernel[1] = ky; ss.kernel[2] = kx;
                        SubmMapTilingData st;
                        REQUIRE(SubmMapTiling(ss, p, st) == TILING_OK, "subm N %lld", (long long)N);
                        REQUIRE(st.ubBytes <= (int64_t)p.ubSize, "subm ub %d", st.ubBytes);
                        g_maxUb[2] = std::max<int64_t>(g_maxUb[2], st.ubBytes);
                        REQUIRE(st.kvol == kz * ky * kx && st.groupSize == kx, "subm K");
                        REQUIRE(st.tileQ >= 8 && st.tileQ % 8 == 0 && st.numTiles == (N + st.tileQ - 1) / st.tileQ &&
                                    st.usedAiv <= (int32_t)p.aivNum, "subm tiles");
                        REQUIRE(N == 0 ? st.usedAiv == 0 : st.usedAiv >= 1, "subm used");
                        REQUIRE((1 << st.searchSteps) >= st.stageKeys && (1 << (st.searchSteps - 1)) < st.stageKeys, "subm steps");
                        REQUIRE(st.ubBytes == SubmMapUbBytes(st), "subm ub sum");
                        REQUIRE(st.numSamples <= kSubmMaxSamples && (int64_t)st.numSamples * st.sampleStride >= N &&
                                    (int64_t)(st.numSamples - 1) * st.sampleStride < std::max<int64_t>(N, 1), "subm samples");
                        REQUIRE(st.exactCompare == 1, "no key bound given: exact compares");
                        ss.keyBound = 45ll * 1604 * 1412;  // the padded grid of one batch: low-word compares
                        SubmMapTilingData sc;
                        REQUIRE(SubmMapTiling(ss, p, sc) == TILING_OK && sc.exactCompare == 0 && sc.ubBytes <= (int64_t)p.ubSize &&
                                    sc.tileQ >= st.tileQ, "subm compact");
                        g_maxUb[2] = std::max<int64_t>(g_maxUb[2], sc.ubBytes);
                        ss.keyBound = 0;
                        auto d = SubmMapDeltas(ss);
                        REQUIRE((int64_t)d.size() == st.kvol && d[st.kvol / 2] == 0, "centre delta 0");
                        for (int64_t k = 1; k < st.kvol; ++k) REQUIRE(d[k] > d[k - 1], "deltas increasing");
                        if (st.usedAiv > 0) checkCoverage(st.numTiles, st.usedAiv);
                    }
    {
        mxs_ascend::SubmMapShape ss;
        ss.numVoxels = 10; ss.ndim = 3;
        ss.paddedShape[0] = ss.paddedShape[1] = ss.paddedShape[2] = 10;
        ss.kernel[0] = ss.kernel[1] = ss.kernel[2] = 7;   // K = 343 > 125: rejected (caller falls back)
        SubmMapTilingData st;
        REQUIRE(SubmMapTiling(ss, plats[0], st) == TILING_BAD_SHAPE, "K 343");
    }
    checkKeyKernels(plats, rows);
    printf("peak UB over all shapes: gather_mm %lld, gather_mm_backprop_filter %lld, subm_map %lld, conv_out_keys %lld, "
           "unique_sorted_keys %lld bytes (of 196608)\n", (long long)g_maxUb[0], (long long)g_maxUb[1],
           (long long)g_maxUb[2], (long long)g_maxUbKeys[0], (long long)g_maxUbKeys[1]);
    printf("tiling_test: %ld combinations, %ld checks OK\n", combos, g_checks);
    return 0;
}
