// Emulator harness of the strided-conv output-key kernels.
//   ops_cli conv_out_keys DIR   DIR/params.txt = "N batch ndim spatial... kernel... stride... padding... dilation...",
//                               DIR/indices.bin (int32 [N, 1 + ndim]); writes DIR/keys.bin (int64 [J, N], slot-major)
//   ops_cli unique_keys   DIR   DIR/params.txt = "C", DIR/keys.bin (C sorted int64); writes DIR/ukeys.bin
//                               (the M unique keys) and reports M as "count"
// Both print the tiling as one JSON line. Core counts come from the emulated platform.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "tikicpulib.h"
#include "conv_out_keys/op_host/conv_out_keys_tiling.h"
#include "unique_sorted_keys/op_host/unique_sorted_keys_tiling.h"

extern "C" __global__ __aicore__ void conv_out_keys(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
extern "C" __global__ __aicore__ void unique_sorted_keys(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);

namespace {

mxs_ascend::AscendPlatform simPlatform() {
    return {AscendSim::GetCoreNumAic(), AscendSim::GetCoreNumAiv(), AscendSim::GetUbSize()};
}
// GM buffer of at least 32 bytes (empty tensors still get an allocation) filled from a file
uint8_t* gmFromFile(const std::string& path, size_t bytes) {
    uint8_t* p = (uint8_t*)AscendC::GmAlloc(bytes > 32 ? bytes : 32);
    FILE* f = fopen(path.c_str(), "rb");
    if (!f || (bytes && fread(p, 1, bytes, f) != bytes)) { fprintf(stderr, "cannot read %s\n", path.c_str()); exit(2); }
    fclose(f);
    return p;
}
bool writeBytes(const std::string& path, const void* p, size_t bytes) {
    FILE* f = fopen(path.c_str(), "wb");
    const bool ok = f && (bytes == 0 || fwrite(p, 1, bytes, f) == bytes);
    if (f) fclose(f);
    return ok;
}
template <typename T>
uint8_t* gmTiling(const T& t) {
    uint8_t* g = (uint8_t*)AscendC::GmAlloc(sizeof(t));
    memcpy(g, &t, sizeof(t));
    return g;
}

}  // namespace

int run_conv_out_keys(const std::string& dir) {
    mxs_ascend::ConvOutKeysShape s;
    long long n, batch;
    FILE* pf = fopen((dir + "/params.txt").c_str(), "r");
    if (!pf || fscanf(pf, "%lld %lld %d", &n, &batch, &s.ndim) != 3 || s.ndim < 1 || s.ndim > kCokMaxDims) {
        fprintf(stderr, "bad params\n");
        return 2;
    }
    s.numVoxels = n;
    s.batchSize = batch;
    for (int64_t* arr : {s.spatial, s.kernel, s.stride, s.padding, s.dilation})
        for (int d = 0; d < s.ndim; ++d)
            if (fscanf(pf, "%lld", (long long*)&arr[d]) != 1) { fprintf(stderr, "bad params\n"); return 2; }
    fclose(pf);
    ConvOutKeysTilingData t;
    const int st = mxs_ascend::ConvOutKeysTiling(s, simPlatform(), t);
    if (st != 0) { fprintf(stderr, "tiling failed %d\n", st); return 3; }
    uint8_t* gIdx = gmFromFile(dir + "/indices.bin", (size_t)n * (s.ndim + 1) * 4);
    const size_t outBytes = (size_t)n * t.slotVol * 8;
    uint8_t* gKeys = (uint8_t*)AscendC::GmAlloc(outBytes > 32 ? outBytes : 32);
    uint8_t* ws = (uint8_t*)AscendC::GmAlloc(32);
    if (t.usedAiv > 0) {
        AscendC::SetKernelMode(KernelMode::AIV_MODE);
        ICPU_RUN_KF(conv_out_keys, t.usedAiv, gIdx, gKeys, ws, gmTiling(t));
    }
    if (!writeBytes(dir + "/keys.bin", gKeys, outBytes)) return 2;
    printf("{\"kernel\":\"conv_out_keys\",\"ub_bytes\":%d,\"block_dim\":%d,\"used_aiv\":%d,\"tile_rows\":%d,"
           "\"k_group\":%d,\"wide\":%d,\"tiles\":%lld}\n",
           t.ubBytes, t.usedAiv, t.usedAiv, t.tileRows, t.kGroup, t.wide, (long long)t.numTiles);
    return 0;
}

int run_unique_keys(const std::string& dir) {
    long long c;
    FILE* pf = fopen((dir + "/params.txt").c_str(), "r");
    if (!pf || fscanf(pf, "%lld", &c) != 1) { fprintf(stderr, "bad params\n"); return 2; }
    fclose(pf);
    UniqueSortedKeysTilingData t;
    const int st = mxs_ascend::UniqueSortedKeysTiling(c, simPlatform(), t);
    if (st != 0) { fprintf(stderr, "tiling failed %d\n", st); return 3; }
    uint8_t* gKeys = gmFromFile(dir + "/keys.bin", (size_t)c * 8);
    uint8_t* gOut = (uint8_t*)AscendC::GmAlloc(c * 8 > 32 ? c * 8 : 32);
    int32_t* gCount = (int32_t*)AscendC::GmAlloc(32);
    gCount[0] = 0;  // C == 0: no launch, no keys
    uint8_t* ws = (uint8_t*)AscendC::GmAlloc(mxs_ascend::UniqueSortedKeysWorkspaceBytes(t));
    if (t.usedAiv > 0) {
        AscendC::SetKernelMode(KernelMode::AIV_MODE);
        ICPU_RUN_KF(unique_sorted_keys, t.usedAiv, gKeys, gOut, (uint8_t*)gCount, ws, gmTiling(t));
    }
    if (gCount[0] < 0 || gCount[0] > c || !writeBytes(dir + "/ukeys.bin", gOut, (size_t)gCount[0] * 8)) return 2;
    printf("{\"kernel\":\"unique_sorted_keys\",\"ub_bytes\":%d,\"block_dim\":%d,\"used_aiv\":%d,\"tile_keys\":%d,"
           "\"tiles\":%lld,\"count\":%d}\n",
           t.ubBytes, t.usedAiv, t.usedAiv, t.tileKeys, (long long)t.numTiles, gCount[0]);
    return 0;
}
