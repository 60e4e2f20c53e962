// Integration: a miniature gather_mm written the way the real kernel will be
// (out[m] = sum_k in[map[m,k]] @ W[k]; map entry -1 = no neighbour), exercising together:
// mix launch, tiling via GET_TILING_DATA, scalar index reads, per-row DataCopyPad gathers into
// a double-buffered TQue, UB->GM staging into a per-core workspace slab, Matmul from GM with
// fp16 inputs / fp32 accumulation, enAtomic accumulation into the output, SyncAll-free
// cross-core partitioning (the race checker must stay quiet), tail cores.
#include "sim_test.h"
#include "lib/matmul_intf.h"
#include <vector>
using namespace AscendC;

struct GatherMmTiling {
    TCubeTiling mm;
    int32_t M, K, Cin, Cout, rowsPerCore;
};
#define ASCEND_SIM_TILING_TYPE GatherMmTiling

using AT = MatmulType<TPosition::GM, CubeFormat::ND, half>;
using CT = MatmulType<TPosition::GM, CubeFormat::ND, float>;

extern "C" __global__ __aicore__ void gather_mm_demo(GM_ADDR feat, GM_ADDR nbr, GM_ADDR weight, GM_ADDR out,
                                                     GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    GET_TILING_DATA(t, tiling);
    TPipe pipe;
    Matmul<AT, AT, CT, CT> mm;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &t.mm);
    const int64_t core = GetBlockIdx();
    const int64_t row0 = core * t.rowsPerCore;
    if (row0 >= t.M) return;                                   // idle tail core
    const int32_t rows = (int32_t)((t.M - row0) < t.rowsPerCore ? (t.M - row0) : t.rowsPerCore);
    const uint32_t rowBytes = t.Cin * sizeof(half);
    const uint32_t rowPitch = (rowBytes + 31) / 32 * 32;

    // GM -> UB -> GM staging: a VECIN->VECOUT binding gives the MTE2->MTE3 / MTE3->MTE2 edges
    TQueBind<TPosition::VECIN, TPosition::VECOUT, 1> qin;
    pipe.InitBuffer(qin, 2, rowPitch);
    GlobalTensor<half> gFeat, gW, gWs;
    GlobalTensor<int32_t> gNbr;
    GlobalTensor<float> gOut;
    gFeat.SetGlobalBuffer((__gm__ half*)feat);
    gNbr.SetGlobalBuffer((__gm__ int32_t*)nbr, (uint64_t)t.M * t.K);
    gW.SetGlobalBuffer((__gm__ half*)weight, (uint64_t)t.K * t.Cin * t.Cout);
    gOut.SetGlobalBuffer((__gm__ float*)out, (uint64_t)t.M * t.Cout);
    gWs.SetGlobalBuffer((__gm__ half*)GetUserWorkspace(workspace) + core * t.rowsPerCore * t.Cin);

    mm.SetOrgShape(rows, t.Cout, t.Cin);
    for (int32_t k = 0; k < t.K; ++k) {
        // gather the rows of this core for offset k into the workspace slab (zeros for -1)
        for (int32_t r = 0; r < rows; ++r) {
            int32_t src = gNbr.GetValue((row0 + r) * t.K + k);
            LocalTensor<half> row = qin.AllocTensor<half>();
            if (src >= 0) {
                DataCopyPad(row, gFeat[(int64_t)src * t.Cin], DataCopyExtParams(1, rowBytes, 0, 0, 0),
                            DataCopyPadExtParams<half>(false, 0, 0, half(0.0f)));
            } else {
                PipeBarrier<PIPE_ALL>();   // V is not covered by the binding's hidden events
                Duplicate(row, half(0.0f), (int32_t)(rowPitch / sizeof(half)));
                PipeBarrier<PIPE_ALL>();
            }
            qin.EnQue(row);
            row = qin.DeQue<half>();
            DataCopyPad(gWs[(int64_t)r * t.Cin], row, DataCopyExtParams(1, rowBytes, 0, 0, 0));
            qin.FreeTensor(row);
        }
        mm.SetTensorA(gWs);
        mm.SetTensorB(gW[(int64_t)k * t.Cin * t.Cout]);
        mm.SetSingleShape(rows, t.Cout, t.Cin);
        mm.template IterateAll<false>(gOut[row0 * t.Cout], 1, false, true);
        mm.WaitIterateAll();                                    // slab is reused for the next k
    }
    mm.End();
}

int main() {
    const int M = 37, K = 5, Cin = 12, Cout = 7, Nin = 29;
    const int blocks = 3, aivs = 2 * blocks;
    const int rowsPerCore = (M + aivs - 1) / aivs;   // 7 -> the last AIV gets 2 rows
    half* feat = (half*)AscendC::GmAlloc(Nin * Cin * sizeof(half));
    int32_t* nbr = (int32_t*)AscendC::GmAlloc(M * K * sizeof(int32_t));
    half* w = (half*)AscendC::GmAlloc(K * Cin * Cout * sizeof(half));
    float* out = (float*)AscendC::GmAlloc(M * Cout * sizeof(float));
    uint8_t* ws = (uint8_t*)AscendC::GmAlloc(16 * 1024 * 1024 + aivs * rowsPerCore * Cin * sizeof(half));
    GatherMmTiling* t = (GatherMmTiling*)AscendC::GmAlloc(sizeof(GatherMmTiling));
    std::vector<float> fv(Nin * Cin), wv(K * Cin * Cout);
    for (int i = 0; i < Nin * Cin; ++i) { fv[i] = (float)((i * 37) % 17 - 8) * 0.25f; feat[i] = half(fv[i]); }
    for (int i = 0; i < K * Cin * Cout; ++i) { wv[i] = (float)((i * 11) % 13 - 6) * 0.5f; w[i] = half(wv[i]); }
    for (int m = 0; m < M; ++m)
        for (int k = 0; k < K; ++k) nbr[m * K + k] = ((m + 3 * k) % 4 == 0) ? -1 : (m * 7 + k * 5) % Nin;
    for (int i = 0; i < M * Cout; ++i) out[i] = 0.0f;
    *t = GatherMmTiling{};
    t->mm.M = rowsPerCore; t->mm.N = Cout; t->mm.Ka = t->mm.Kb = Cin;
    t->mm.singleCoreM = rowsPerCore; t->mm.singleCoreN = Cout; t->mm.singleCoreK = Cin;
    t->M = M; t->K = K; t->Cin = Cin; t->Cout = Cout; t->rowsPerCore = rowsPerCore;
    AscendC::SetKernelMode(KernelMode::MIX_MODE);
    ICPU_RUN_KF(gather_mm_demo, blocks, (GM_ADDR)feat, (GM_ADDR)nbr, (GM_ADDR)w, (GM_ADDR)out, ws, (GM_ADDR)t);
    // reference (all values are small multiples of 1/8: exact in fp16 and in the fp32 sums)
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < Cout; ++n) {
            double acc = 0;
            for (int k = 0; k < K; ++k) {
                int src = nbr[m * K + k];
                if (src < 0) continue;
                for (int c = 0; c < Cin; ++c) acc += (double)fv[src * Cin + c] * wv[(k * Cin + c) * Cout + n];
            }
            CHECK_EQ("gather_mm", m * Cout + n, out[m * Cout + n], acc);
        }
    return finish("fid_gather_mm");
}
