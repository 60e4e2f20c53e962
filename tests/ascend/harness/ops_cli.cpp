// Emulator harness for the mx_sparse AscendC kernels (CANN CPU-debug style).
//   ops_cli gather_mm   DIR   DIR/params.txt: "M Nin K Cin Cout dtypeKey"; reads feat.bin weight.bin nbr.bin,
//                              writes out.bin
//   ops_cli bpf         DIR   same params; reads feat.bin grad.bin nbr.bin, writes dw.bin
//   ops_cli subm_map    DIR   see subm_map section
//   ops_cli conv_out_keys / unique_keys DIR   see conv_out_keys_harness.cpp
// Prints one JSON line with the tiling decisions (incl. UB bytes) to stdout. Core counts come
// from the platform the emulator reports (ASCEND_SIM_SOC / ASCEND_SIM_AIC_NUM), exactly as the
// CANN glue reads PlatformAscendC.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "tikicpulib.h"
#include "gather_mm/op_host/gather_mm_tiling.h"
#include "gather_mm_backprop_filter/op_host/gather_mm_backprop_filter_tiling.h"

extern "C" __global__ __aicore__ void gather_mm(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
extern "C" __global__ __aicore__ void gather_mm_backprop_filter(GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR, GM_ADDR);
int run_subm_map(const std::string& dir);
int run_conv_out_keys(const std::string& dir);
int run_unique_keys(const std::string& dir);

namespace {

std::vector<char> readFile(const std::string& path) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path.c_str()); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    std::vector<char> v(n);
    if (n && fread(v.data(), 1, n, f) != (size_t)n) { fprintf(stderr, "short read %s\n", path.c_str()); exit(2); }
    fclose(f);
    return v;
}
void writeFile(const std::string& path, const void* p, size_t n) {
    FILE* f = fopen(path.c_str(), "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) { fprintf(stderr, "cannot write %s\n", path.c_str()); exit(2); }
    fclose(f);
}
// GM copy of a host buffer (at least 32 bytes so that empty tensors still get an allocation)
uint8_t* toGm(const std::vector<char>& v, size_t need) {
    if (v.size() != need) { fprintf(stderr, "size mismatch: file %zu expected %zu\n", v.size(), need); exit(2); }
    uint8_t* p = (uint8_t*)AscendC::GmAlloc(need > 32 ? need : 32);
    if (need) memcpy(p, v.data(), need);
    return p;
}
mxs_ascend::AscendPlatform platformInfo() {
    return {AscendSim::GetCoreNumAic(), AscendSim::GetCoreNumAiv(), AscendSim::GetUbSize()};
}

int runGatherMm(const std::string& dir, bool bpf) {
    long long M, Nin, K, Cin, Cout, dt;
    FILE* pf = fopen((dir + "/params.txt").c_str(), "r");
    if (!pf || fscanf(pf, "%lld %lld %lld %lld %lld %lld", &M, &Nin, &K, &Cin, &Cout, &dt) != 6) { fprintf(stderr, "bad params\n"); return 2; }
    fclose(pf);
    const size_t esz = mxs_ascend::DTypeSize((int32_t)dt);
    auto feat = readFile(dir + "/feat.bin");
    auto nbr = readFile(dir + "/nbr.bin");
    uint8_t* gFeat = toGm(feat, Nin * Cin * esz);
    uint8_t* gNbr = toGm(nbr, M * K * 4);
    if (!bpf) {
        mxs_ascend::GatherMmShape s{M, Nin, K, Cin, Cout, (int32_t)dt};
        GatherMmTilingData t;
        int st = mxs_ascend::GatherMmTiling(s, platformInfo(), t);
        if (st != 0) { fprintf(stderr, "tiling failed %d\n", st); return 3; }
        auto w = readFile(dir + "/weight.bin");
        uint8_t* gW = toGm(w, K * Cin * Cout * esz);
        const size_t outBytes = M * Cout * esz;
        uint8_t* gOut = (uint8_t*)AscendC::GmAlloc(outBytes > 32 ? outBytes : 32);
        if (t.usedAiv > 0) {
            uint8_t* ws = (uint8_t*)AscendC::GmAlloc(mxs_ascend::GatherMmWorkspaceBytes(t));
            uint8_t* gT = (uint8_t*)AscendC::GmAlloc(sizeof(t));
            memcpy(gT, &t, sizeof(t));
            AscendC::SetKernelMode(KernelMode::MIX_MODE);
            ICPU_SET_TILING_KEY(t.dtypeKey);
            ICPU_RUN_KF(gather_mm, t.blockDim, gFeat, gW, gNbr, gOut, ws, gT);
        }
        writeFile(dir + "/out.bin", gOut, outBytes);
        printf("{\"kernel\":\"gather_mm\",\"ub_bytes\":%d,\"block_dim\":%d,\"used_aiv\":%d,\"tile_rows\":%d,"
               "\"k_group\":%d,\"window_group\":%d,\"chunk_rows\":%d,\"window_rows\":%d,\"ws_bytes\":%llu}\n",
               t.ubBytes, t.blockDim, t.usedAiv, t.tileRows, t.kGroup, t.wg.group, t.wg.chunkRows, t.wg.windowRows,
               (unsigned long long)mxs_ascend::GatherMmWorkspaceBytes(t));
    } else {
        mxs_ascend::GatherMmBpfShape s{M, Nin, K, Cin, Cout, (int32_t)dt};
        GatherMmBpfTilingData t;
        int st = mxs_ascend::GatherMmBpfTiling(s, platformInfo(), t);
        if (st != 0) { fprintf(stderr, "tiling failed %d\n", st); return 3; }
        auto g = readFile(dir + "/grad.bin");
        uint8_t* gG = toGm(g, M * Cout * esz);
        const size_t dwBytes = K * Cin * Cout * esz;
        uint8_t* gDw = (uint8_t*)AscendC::GmAlloc(dwBytes);
        if (t.usedAiv > 0) {
            uint8_t* ws = (uint8_t*)AscendC::GmAlloc(mxs_ascend::GatherMmBpfWorkspaceBytes(t));
            uint8_t* gT = (uint8_t*)AscendC::GmAlloc(sizeof(t));
            memcpy(gT, &t, sizeof(t));
            AscendC::SetKernelMode(KernelMode::MIX_MODE);
            ICPU_SET_TILING_KEY(t.dtypeKey);
            ICPU_RUN_KF(gather_mm_backprop_filter, t.blockDim, gFeat, gG, gNbr, gDw, ws, gT);
        } else {
            memset(gDw, 0, dwBytes);  // M == 0: the caller zero-fills (no launch)
        }
        writeFile(dir + "/dw.bin", gDw, dwBytes);
        printf("{\"kernel\":\"gather_mm_backprop_filter\",\"ub_bytes\":%d,\"block_dim\":%d,\"used_aiv\":%d,"
               "\"tile_rows\":%d,\"k_group\":%d,\"window_group\":%d,\"chunk_rows\":%d,\"red_chunks\":%d,\"ws_bytes\":%llu}\n",
               t.ubBytes, t.blockDim, t.usedAiv, t.tileRows, t.kGroup, t.wg.group, t.wg.chunkRows, t.redChunks,
               (unsigned long long)mxs_ascend::GatherMmBpfWorkspaceBytes(t));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) { fprintf(stderr, "usage: ops_cli gather_mm|bpf|subm_map|conv_out_keys|unique_keys DIR\n"); return 2; }
    std::string op = argv[1], dir = argv[2];
    if (op == "gather_mm") return runGatherMm(dir, false);
    if (op == "bpf") return runGatherMm(dir, true);
    if (op == "subm_map") return run_subm_map(dir);
    if (op == "conv_out_keys") return run_conv_out_keys(dir);
    if (op == "unique_keys") return run_unique_keys(dir);
    fprintf(stderr, "unknown op %s\n", op.c_str());
    return 2;
}
