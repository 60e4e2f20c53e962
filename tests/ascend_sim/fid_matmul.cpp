// Fidelity: Matmul high-level API (§5.2 stride model) - fp32 and fp16 (fp32 accumulation),
// transposes, bias, org vs single shape, atomic accumulation, async IterateAll + Wait,
// multi-core mix launch. Expected values: naive loops over the documented index formulas.
#include "sim_test.h"
#include "lib/matmul_intf.h"
#include <vector>
using namespace AscendC;

struct MmTestTiling {
    TCubeTiling mm;
    int32_t M, N, K, transA, transB, useBias, atomic, async_, orgM, orgN, orgK, offA, offB, offC, perCore;
};
#define ASCEND_SIM_TILING_TYPE MmTestTiling

template <typename A, typename B, typename C, typename BIAS>
__aicore__ void mmBody(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c, GM_ADDR tiling) {
    GET_TILING_DATA(t, tiling);
    using AT = typename A::T; using CT = typename C::T; using BT = typename BIAS::T;
    TPipe pipe;
    Matmul<A, B, C, BIAS> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t.mm);
    GlobalTensor<AT> ga, gb;
    GlobalTensor<CT> gc;
    GlobalTensor<BT> gbias;
    ga.SetGlobalBuffer((__gm__ AT*)a);
    gb.SetGlobalBuffer((__gm__ AT*)b);
    gc.SetGlobalBuffer((__gm__ CT*)c);
    gbias.SetGlobalBuffer((__gm__ BT*)bias);
    // Both AIVs of a group run this code; unless perCore is set only AIV 0 issues the matmul.
    if (!t.perCore && GetBlockIdx() != 0) return;
    int64_t row0 = GetBlockIdx() * t.M;   // multi-core: each AIV takes M rows (non-transposed A only)
    mm.SetOrgShape(t.orgM, t.orgN, t.orgK);
    mm.SetTensorA(ga[t.offA + row0 * t.orgK], t.transA != 0);
    mm.SetTensorB(gb[t.offB], t.transB != 0);
    if (t.useBias) mm.SetBias(gbias);
    mm.SetSingleShape(t.M, t.N, t.K);
    if (t.async_) {
        mm.template IterateAll<false>(gc[t.offC + row0 * t.orgN], (uint8_t)t.atomic, false, true);
        mm.WaitIterateAll();
    } else {
        mm.IterateAll(gc[t.offC + row0 * t.orgN], (uint8_t)t.atomic);
    }
    mm.End();
}

using AF = MatmulType<TPosition::GM, CubeFormat::ND, float, true>;
using CF = MatmulType<TPosition::GM, CubeFormat::ND, float>;
using AH = MatmulType<TPosition::GM, CubeFormat::ND, half, true>;
using CH = MatmulType<TPosition::GM, CubeFormat::ND, half>;
extern "C" __global__ __aicore__ void mm_f32(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c, GM_ADDR tiling) {
    mmBody<AF, AF, CF, CF>(a, b, bias, c, tiling);
}
extern "C" __global__ __aicore__ void mm_f16_f32(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c, GM_ADDR tiling) {
    mmBody<AH, AH, CF, CF>(a, b, bias, c, tiling);
}
extern "C" __global__ __aicore__ void mm_f16_f16(GM_ADDR a, GM_ADDR b, GM_ADDR bias, GM_ADDR c, GM_ADDR tiling) {
    mmBody<AH, AH, CH, CF>(a, b, bias, c, tiling);
}

struct Case {
    int M, N, K, transA, transB, bias, atomic, async_, orgM, orgN, orgK, offA, offB, offC, blocks;
};

static float aval(int i) { return (float)((i * 7) % 11 - 5); }
static float bval(int i) { return (float)((i * 5) % 9 - 4) * 0.5f; }

template <typename AT, typename CT, typename Kern>
static void runCase(const char* name, const Case& cs, Kern kern) {
    int aivs = 2 * cs.blocks;
    int Mtot = cs.M * (cs.blocks > 1 ? aivs : 1);
    size_t na = (size_t)cs.orgM * cs.orgK + 64, nb = (size_t)cs.orgK * cs.orgN + 64, nc = (size_t)cs.orgM * cs.orgN + 64;
    AT* a = (AT*)AscendC::GmAlloc(na * sizeof(AT));
    AT* b = (AT*)AscendC::GmAlloc(nb * sizeof(AT));
    float* bias = (float*)AscendC::GmAlloc(cs.orgN * sizeof(float));
    CT* c = (CT*)AscendC::GmAlloc(nc * sizeof(CT));
    for (size_t i = 0; i < na; ++i) a[i] = AT(aval((int)i));
    for (size_t i = 0; i < nb; ++i) b[i] = AT(bval((int)i));
    for (int i = 0; i < cs.orgN; ++i) bias[i] = (float)(i - 2);
    for (size_t i = 0; i < nc; ++i) c[i] = CT(100.0f);
    MmTestTiling* t = (MmTestTiling*)AscendC::GmAlloc(sizeof(MmTestTiling));
    *t = MmTestTiling{};
    t->mm.M = cs.orgM; t->mm.N = cs.orgN; t->mm.Ka = cs.orgK; t->mm.Kb = cs.orgK;
    t->mm.singleCoreM = cs.M; t->mm.singleCoreN = cs.N; t->mm.singleCoreK = cs.K;
    t->M = cs.M; t->N = cs.N; t->K = cs.K; t->transA = cs.transA; t->transB = cs.transB; t->useBias = cs.bias;
    t->atomic = cs.atomic; t->async_ = cs.async_; t->orgM = cs.orgM; t->orgN = cs.orgN; t->orgK = cs.orgK;
    t->offA = cs.offA; t->offB = cs.offB; t->offC = cs.offC; t->perCore = cs.blocks > 1;
    AscendC::SetKernelMode(KernelMode::MIX_MODE);
    ICPU_RUN_KF(kern, cs.blocks, (GM_ADDR)a, (GM_ADDR)b, (GM_ADDR)bias, (GM_ADDR)c, (GM_ADDR)t);
    // reference: C[m][n] = sum_k A(m,k) B(k,n) (+bias[n]) (+100 if atomic), index formulas of §5.2
    for (int m = 0; m < cs.orgM; ++m)
        for (int n = 0; n < cs.orgN; ++n) {
            size_t ci = (size_t)m * cs.orgN + n;
            int mm = m - cs.offC / cs.orgN, nn = n - cs.offC % cs.orgN;
            bool inside = mm >= 0 && mm < Mtot && nn >= 0 && nn < cs.N;
            double exp = 100.0;
            if (inside) {
                double acc = 0;
                for (int k = 0; k < cs.K; ++k) {
                    size_t ai = cs.transA ? (size_t)cs.offA + (size_t)k * cs.orgM + mm : (size_t)cs.offA + (size_t)mm * cs.orgK + k;
                    size_t bi = cs.transB ? (size_t)cs.offB + (size_t)nn * cs.orgK + k : (size_t)cs.offB + (size_t)k * cs.orgN + nn;
                    acc += (double)aval((int)ai) * (double)bval((int)bi);
                }
                if (cs.bias) acc += nn - 2;
                exp = cs.atomic ? acc + 100.0 : acc;
            }
            CHECK_EQ(name, ci, (float)c[ci], (float)exp);
        }
    AscendC::GmFree(a); AscendC::GmFree(b); AscendC::GmFree(bias); AscendC::GmFree(c); AscendC::GmFree(t);
}

// fp16 output rounding: 1024+1024+1 = 2049 is a tie between 2048 and 2050 -> RNE gives 2048.
extern "C" __global__ __aicore__ void mm_round(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tiling) {
    GET_TILING_DATA_WITH_STRUCT(TCubeTiling, t, tiling);
    TPipe pipe;
    Matmul<AH, AH, CH, CF> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t);
    GlobalTensor<half> ga, gb, gc;
    if (GetBlockIdx() != 0) return;
    ga.SetGlobalBuffer((__gm__ half*)a, 3);
    gb.SetGlobalBuffer((__gm__ half*)b, 3);
    gc.SetGlobalBuffer((__gm__ half*)c, 1);
    mm.SetTensorA(ga);
    mm.SetTensorB(gb);
    mm.IterateAll(gc);
}

int main() {
    // M N K tA tB bias atomic async orgM orgN orgK offA offB offC blocks
    runCase<float, float>("f32.plain", {5, 6, 7, 0, 0, 0, 0, 0, 5, 6, 7, 0, 0, 0, 1}, mm_f32);
    runCase<float, float>("f32.transA", {5, 6, 7, 1, 0, 0, 0, 0, 5, 6, 7, 0, 0, 0, 1}, mm_f32);
    runCase<float, float>("f32.transB", {5, 6, 7, 0, 1, 0, 0, 0, 5, 6, 7, 0, 0, 0, 1}, mm_f32);
    runCase<float, float>("f32.transAB.bias", {4, 3, 9, 1, 1, 1, 0, 0, 4, 3, 9, 0, 0, 0, 1}, mm_f32);
    runCase<float, float>("f32.sub.atomic", {3, 4, 5, 0, 0, 1, 1, 0, 8, 8, 8, 2 * 8 + 1, 3, 1 * 8 + 2, 1}, mm_f32);
    runCase<float, float>("f32.async", {6, 5, 4, 0, 1, 0, 0, 1, 6, 5, 4, 0, 0, 0, 1}, mm_f32);
    runCase<half, float>("f16.f32acc", {7, 9, 33, 0, 0, 1, 0, 0, 7, 9, 33, 0, 0, 0, 1}, mm_f16_f32);
    runCase<half, float>("f16.transA.async.atomic", {5, 6, 7, 1, 0, 0, 1, 1, 5, 6, 7, 0, 0, 0, 1}, mm_f16_f32);
    runCase<half, half>("f16.f16out", {4, 4, 4, 0, 0, 0, 0, 0, 4, 4, 4, 0, 0, 0, 1}, mm_f16_f16);
    runCase<float, float>("f32.mix.4aiv", {2, 5, 6, 0, 0, 0, 0, 0, 8, 5, 6, 0, 0, 0, 2}, mm_f32);

    half* a = (half*)AscendC::GmAlloc(6);
    half* b = (half*)AscendC::GmAlloc(6);
    half* c = (half*)AscendC::GmAlloc(2);
    a[0] = half(1024.0f); a[1] = half(1024.0f); a[2] = half(1.0f);
    b[0] = b[1] = b[2] = half(1.0f);
    TCubeTiling* t = (TCubeTiling*)AscendC::GmAlloc(sizeof(TCubeTiling));
    *t = TCubeTiling{};
    t->M = 1; t->N = 1; t->Ka = 3; t->Kb = 3; t->singleCoreM = 1; t->singleCoreN = 1; t->singleCoreK = 3;
    ICPU_RUN_KF(mm_round, 1, (GM_ADDR)a, (GM_ADDR)b, (GM_ADDR)c, (GM_ADDR)t);
    CHECK_EQ("f16.out.rne", 0, c[0].bits, 0x6800);
    return finish("fid_matmul");
}
