// Emulator harness of the sorted-key lookup kernel (subm_map; also the strided-conv map):
// DIR/params.txt = "M N centered ndim shape... kernel... dilation..." (shape = PADDED grid),
// DIR/qkeys.bin (M sorted int64), DIR/ckeys.bin (N sorted int64); writes DIR/nbrs.bin
// (int32 [M, K], positions in ckeys) and prints the tiling as JSON.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <algorithm>
#include <vector>
#include "tikicpulib.h"
#include "subm_map/op_host/subm_map_tiling.h"

extern "C" __global__ __aicore__ void subm_map(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);

int run_subm_map(const std::string& dir) {
    mxs_ascend::SubmMapShape s;
    long long n, nc;
    int centered;
    FILE* pf = fopen((dir + "/params.txt").c_str(), "r");
    if (!pf || fscanf(pf, "%lld %lld %d %d", &n, &nc, &centered, &s.ndim) != 4) { fprintf(stderr, "bad params\n"); return 2; }
    s.numVoxels = n;
    s.numCand = nc;
    s.centered = centered != 0;
    for (int d = 0; d < s.ndim; ++d) if (fscanf(pf, "%lld", (long long*)&s.paddedShape[d]) != 1) return 2;
    for (int d = 0; d < s.ndim; ++d) if (fscanf(pf, "%lld", (long long*)&s.kernel[d]) != 1) return 2;
    for (int d = 0; d < s.ndim; ++d) if (fscanf(pf, "%lld", (long long*)&s.dilation[d]) != 1) return 2;
    fclose(pf);
    const size_t keyBytes = (size_t)n * 8, cBytes = (size_t)nc * 8;
    uint8_t* gKeys = (uint8_t*)AscendC::GmAlloc(keyBytes > 32 ? keyBytes : 32);
    FILE* f = fopen((dir + "/qkeys.bin").c_str(), "rb");
    if (!f || (keyBytes && fread(gKeys, 1, keyBytes, f) != keyBytes)) { fprintf(stderr, "qkeys.bin\n"); return 2; }
    fclose(f);
    uint8_t* gC = (uint8_t*)AscendC::GmAlloc(cBytes > 32 ? cBytes : 32);
    f = fopen((dir + "/ckeys.bin").c_str(), "rb");
    if (!f || (cBytes && fread(gC, 1, cBytes, f) != cBytes)) { fprintf(stderr, "ckeys.bin\n"); return 2; }
    fclose(f);
    // the host knows its keys (the binding: batch * prod(padded shape)): a bound of their range
    int64_t maxKey = 0;
    for (long long i = 0; i < n; ++i) maxKey = std::max(maxKey, ((const int64_t*)gKeys)[i]);
    for (long long i = 0; i < nc; ++i) maxKey = std::max(maxKey, ((const int64_t*)gC)[i]);
    s.keyBound = maxKey + 1;
    mxs_ascend::AscendPlatform p{AscendSim::GetCoreNumAic(), AscendSim::GetCoreNumAiv(), AscendSim::GetUbSize()};
    SubmMapTilingData t;
    int st = mxs_ascend::SubmMapTiling(s, p, t);
    if (st != 0) { fprintf(stderr, "tiling failed %d\n", st); return 3; }
    std::vector<int64_t> deltas = mxs_ascend::SubmMapDeltas(s);
    const size_t outBytes = (size_t)n * t.kvol * 4;
    uint8_t* gD = (uint8_t*)AscendC::GmAlloc(deltas.size() * 8);
    memcpy(gD, deltas.data(), deltas.size() * 8);
    uint8_t* gOut = (uint8_t*)AscendC::GmAlloc(outBytes > 32 ? outBytes : 32);
    uint8_t* gT = (uint8_t*)AscendC::GmAlloc(sizeof(t));
    memcpy(gT, &t, sizeof(t));
    uint8_t* ws = (uint8_t*)AscendC::GmAlloc(32);
    if (t.usedAiv > 0) {
        AscendC::SetKernelMode(KernelMode::AIV_MODE);
        ICPU_RUN_KF(subm_map, t.usedAiv, gKeys, gC, gD, gOut, ws, gT);
    }
    f = fopen((dir + "/nbrs.bin").c_str(), "wb");
    if (!f || (outBytes && fwrite(gOut, 1, outBytes, f) != outBytes)) return 2;
    fclose(f);
    printf("{\"kernel\":\"subm_map\",\"ub_bytes\":%d,\"block_dim\":%d,\"used_aiv\":%d,\"tiles\":%lld,\"tile_q\":%d,"
           "\"stage_keys\":%d,\"sample_stride\":%d,\"exact_compare\":%d}\n", t.ubBytes, t.usedAiv, t.usedAiv,
           (long long)t.numTiles, t.tileQ, t.stageKeys, t.sampleStride, t.exactCompare);
    return 0;
}
