// Fidelity: launch geometry (AIV-only and mix 1:2), SKU query, SyncAll data exchange,
// multi-wave launches (more blocks than cores), tiling key, stats counters (checked by pytest).
#include "sim_test.h"
#include "lib/matmul_intf.h"
#include <cstdlib>
using namespace AscendC;

static __aicore__ void geomBody(GM_ADDR out) {
    GlobalTensor<int64_t> g;
    g.SetGlobalBuffer((__gm__ int64_t*)out + GetBlockIdx() * 4, 4);
    g.SetValue(0, GetBlockIdx());
    g.SetValue(1, GetBlockNum());
    g.SetValue(2, GetSubBlockIdx());
    g.SetValue(3, GetTaskRatio());
}
extern "C" __global__ __aicore__ void k_geom(GM_ADDR out) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    geomBody(out);
}
extern "C" __global__ __aicore__ void k_geom_mix(GM_ADDR out) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    geomBody(out);
}

// Each core publishes a value, SyncAll, reads its neighbour's value (legal: different epochs).
extern "C" __global__ __aicore__ void k_sync(GM_ADDR ws, GM_ADDR out) {
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64);
    LocalTensor<int32_t> u = buf.Get<int32_t>();
    int64_t n = GetBlockNum(), i = GetBlockIdx();
    GlobalTensor<int32_t> gw, go;
    gw.SetGlobalBuffer((__gm__ int32_t*)ws, n * 8);
    go.SetGlobalBuffer((__gm__ int32_t*)out, n * 8);
    Duplicate(u, (int32_t)(i * 10 + 1), 8);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(gw[i * 8], u, 8);
    SyncAll();
    DataCopy(u, gw[((i + 1) % n) * 8], 8);
    SyncAll();
    // second epoch: overwrite own slot again (nobody reads it any more)
    Adds(u, u, 1000, 8);
    SetFlag<HardEvent::V_MTE3>(0);
    WaitFlag<HardEvent::V_MTE3>(0);
    DataCopy(go[i * 8], u, 8);
}

extern "C" __global__ __aicore__ void k_waves(GM_ADDR out, GM_ADDR workspace) {
    GlobalTensor<int32_t> g;
    g.SetGlobalBuffer((__gm__ int32_t*)out, GetBlockNum());
    int32_t v = TILING_KEY_IS(2) ? 2 : 0;
    GM_ADDR user = GetUserWorkspace(workspace);
    if (user - workspace != (int64_t)(16 * 1024 * 1024)) v = -100;
    g.SetValue(GetBlockIdx(), (int32_t)GetBlockIdx() * 3 + v);
}

extern "C" __global__ __aicore__ void k_stats(GM_ADDR x, GM_ADDR y) {
    TPipe pipe;
    TQue<TPosition::VECIN, 1> qi;
    TQue<TPosition::VECOUT, 1> qo;
    TBuf<TPosition::VECCALC> gb;
    pipe.InitBuffer(qi, 1, 256);
    pipe.InitBuffer(qo, 1, 256);
    pipe.InitBuffer(gb, 512);  // 64 gather offsets (all 0) + 64 gathered floats
    GlobalTensor<float> gx, gy;
    gx.SetGlobalBuffer((__gm__ float*)x + GetBlockIdx() * 64, 64);
    gy.SetGlobalBuffer((__gm__ float*)y + GetBlockIdx() * 64, 64);
    LocalTensor<float> a = qi.AllocTensor<float>();
    DataCopy(a, gx, 64);
    qi.EnQue(a);
    a = qi.DeQue<float>();
    LocalTensor<float> b = qo.AllocTensor<float>();
    Adds(b, a, gx.GetValue(0), 64);
    LocalTensor<uint32_t> off = gb.Get<uint32_t>();
    Duplicate(off, (uint32_t)0, 64);
    Gather(gb.Get<float>()[64], a, off, (uint32_t)0, (uint32_t)64);  // counted apart as vector_gather_instr
    b.SetValue(0, 5.0f);
    qo.EnQue(b);
    qi.FreeTensor(a);
    b = qo.DeQue<float>();
    DataCopy(gy, b, 64);
    qo.FreeTensor(b);
}

using AF = MatmulType<TPosition::GM, CubeFormat::ND, float>;
extern "C" __global__ __aicore__ void k_mm_stats(GM_ADDR a, GM_ADDR b, GM_ADDR c) {
    TPipe pipe;
    Matmul<AF, AF, AF> mm;
    TCubeTiling t;
    t.M = 32; t.N = 8; t.Ka = t.Kb = 4; t.singleCoreM = 16; t.singleCoreN = 8; t.singleCoreK = 4;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t);
    GlobalTensor<float> ga, gb, gc;
    ga.SetGlobalBuffer((__gm__ float*)a);
    gb.SetGlobalBuffer((__gm__ float*)b);
    gc.SetGlobalBuffer((__gm__ float*)c);
    mm.SetTensorA(ga[GetBlockIdx() * 16 * 4]);
    mm.SetTensorB(gb);
    mm.IterateAll(gc[GetBlockIdx() * 16 * 8]);
    mm.End();
}

int main() {
    uint32_t aic = AscendSim::GetCoreNumAic(), aiv = AscendSim::GetCoreNumAiv();
    std::printf("platform aic=%u aiv=%u\n", aic, aiv);
    CHECK_EQ("platform.ub", 0, (double)AscendSim::GetUbSize(), 196608.0);

    int64_t* g = gmNew<int64_t>(4 * 64, -1);
    int n = (int)(aiv < 5 ? aiv : 5);
    ICPU_RUN_KF(k_geom, n, (GM_ADDR)g);
    for (int i = 0; i < n; ++i) {
        CHECK_EQ("aiv.idx", i, g[i * 4 + 0], i);
        CHECK_EQ("aiv.num", i, g[i * 4 + 1], n);
        CHECK_EQ("aiv.sub", i, g[i * 4 + 2], 0);
        CHECK_EQ("aiv.ratio", i, g[i * 4 + 3], 1);
    }
    int nm = (int)(aic < 3 ? aic : 3);
    AscendC::SetKernelMode(KernelMode::MIX_MODE);
    ICPU_RUN_KF(k_geom_mix, nm, (GM_ADDR)g);
    for (int i = 0; i < 2 * nm; ++i) {
        CHECK_EQ("mix.idx", i, g[i * 4 + 0], i);
        CHECK_EQ("mix.num", i, g[i * 4 + 1], nm);
        CHECK_EQ("mix.sub", i, g[i * 4 + 2], i % 2);
        CHECK_EQ("mix.ratio", i, g[i * 4 + 3], 2);
    }
    CHECK_EQ("mix.untouched", 0, g[2 * nm * 4], -1);

    float* ma = gmNew<float>(32 * 4, 1.0f);
    float* mb = gmNew<float>(4 * 8, 2.0f);
    float* mc = gmNew<float>(32 * 8, 0.0f);
    ICPU_RUN_KF(k_mm_stats, 1, (GM_ADDR)ma, (GM_ADDR)mb, (GM_ADDR)mc);
    for (int i = 0; i < 32 * 8; ++i) CHECK_EQ("mix.mm", i, mc[i], 8.0f);
    AscendC::SetKernelMode(KernelMode::AIV_MODE);

    // ASCEND_SIM_SERIAL=1 runs one core at a time, where SyncAll would deadlock (rule E20)
    const char* serial = std::getenv("ASCEND_SIM_SERIAL");
    int ns = (serial && serial[0] == '1') ? 0 : (int)(aiv < 8 ? aiv : 8);
    if (ns) {
    int32_t* ws = gmNew<int32_t>(ns * 8, 0);
    int32_t* out = gmNew<int32_t>(ns * 8, 0);
    ICPU_RUN_KF(k_sync, ns, (GM_ADDR)ws, (GM_ADDR)out);
    for (int i = 0; i < ns; ++i)
        for (int j = 0; j < 8; ++j) CHECK_EQ("syncall.exchange", i * 8 + j, out[i * 8 + j], ((i + 1) % ns) * 10 + 1 + 1000);
    }

    int nw = (int)aiv + 3;   // more blocks than vector cores: runs in waves
    int32_t* wo = gmNew<int32_t>(nw, -1);
    uint8_t* wsp = (uint8_t*)AscendC::GmAlloc(16 * 1024 * 1024 + 64);
    ICPU_SET_TILING_KEY(2);
    ICPU_RUN_KF(k_waves, nw, (GM_ADDR)wo, wsp);
    ICPU_SET_TILING_KEY(0);
    for (int i = 0; i < nw; ++i) CHECK_EQ("waves", i, wo[i], i * 3 + 2);

    float* x = gmNew<float>(128, 1.0f);
    float* y = gmNew<float>(128, 0.0f);
    ICPU_RUN_KF(k_stats, 2, (GM_ADDR)x, (GM_ADDR)y);
    for (int i = 0; i < 128; ++i) CHECK_EQ("stats.result", i, y[i], i % 64 == 0 ? 5.0f : 2.0f);
    return finish("fid_launch");
}
