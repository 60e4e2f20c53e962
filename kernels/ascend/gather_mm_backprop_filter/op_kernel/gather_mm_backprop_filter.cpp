// gather_mm_backprop_filter (AscendC, Atlas A2 mix kernel):
//   dW[k] = sum_m features[nbr[m, k]]^T (x) grad[m]        dW [K, Cin, Cout]
// features [numIn, Cin], grad [M, Cout], nbr [M, K] int32 (-1 = none). fp32 / fp16 / bf16.
//
// Row-stationary with fixed-order partials, deterministic:
//   phase 1: each of usedAiv AIVs owns a contiguous range of rows; per tile of T rows the window
//     gather (common/op_kernel/window_gather.h, shared with gather_mm) builds the [T, K*Cin] slab
//     of the tile's feature rows in the AIV's workspace, and the Cube adds, per k-group,
//     slab_g^T [kc*Cin, T] @ grad[rows] [T, Cout] (A transposed, grad read in place) into the AIV's
//     own fp32 partial of dW (first tile overwrites, later tiles accumulate: one writer, fixed
//     order). Every feature row is gathered once for all K offsets, grad is read once;
//   phase 2, after SyncAll: every AIV of the launch sums a contiguous share of dW's chunks over
//     the partials in AIV order (fp32) and casts it to the output type (RINT) once -- fp16/bf16
//     weight gradients are rounded once, not per tile, and no atomics are used.
// Two slabs alternate so tile i+1 is gathered while the AIC multiplies tile i.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "gather_mm_backprop_filter_tiling_data.h"
#include "core_share.h"
#include "window_gather.h"

using namespace AscendC;

namespace {

template <typename T>
class GatherMmBpfKernel {
    using AT = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;
    using BT = MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using CT = MatmulType<TPosition::GM, CubeFormat::ND, float>;
    using BiasT = MatmulType<TPosition::GM, CubeFormat::ND, float>;

public:
    __aicore__ inline void Run(GM_ADDR feat, GM_ADDR grad, GM_ADDR nbr, GM_ADDR dw, GM_ADDR workspace,
                               const GatherMmBpfTilingData& t) {
        REGIST_MATMUL_OBJ(&pipe_, GetSysWorkSpacePtr(), mm_, &t.mm);
        const int64_t aiv = GetBlockIdx();
        const int32_t K = t.kvol, cin = t.cin, cout = t.cout;
        const int64_t dwElems = (int64_t)K * cin * cout;
        GM_ADDR user = GetUserWorkspace(workspace);
        partialGm_.SetGlobalBuffer((__gm__ float*)(user + t.partialOffset), (uint64_t)t.usedAiv * dwElems);
        pipe_.InitBuffer(castIn_, 1, t.castChunk * 4);
        pipe_.InitBuffer(castOut_, 1, t.castChunk * (int32_t)sizeof(T));
        pipe_.InitBuffer(accBuf_, t.castChunk * 4);

        if (aiv < t.usedAiv) {
            const CoreShare share = ShareOfCore(t.numOut, t.usedAiv, aiv);
            GlobalTensor<T> featGm, gradGm, slabGm[2];
            GlobalTensor<int32_t> nbrGm;
            featGm.SetGlobalBuffer((__gm__ T*)feat, (uint64_t)t.numIn * cin);
            gradGm.SetGlobalBuffer((__gm__ T*)grad, (uint64_t)t.numOut * cout);
            nbrGm.SetGlobalBuffer((__gm__ int32_t*)nbr, (uint64_t)t.numOut * K);
            slabGm[0].SetGlobalBuffer((__gm__ T*)(user + aiv * t.wsPerAiv), (uint64_t)t.slabElems);
            slabGm[1].SetGlobalBuffer((__gm__ T*)(user + aiv * t.wsPerAiv) + t.slabElems, (uint64_t)t.slabElems);
            gather_.SetKGroup(t.kGroup);
            gather_.Init(pipe_, t.wg, featGm);
            const GlobalTensor<float> partial = partialGm_[aiv * dwElems];
            int slab = 0;
            bool pending = false;
            for (int64_t r = 0; r < share.count; r += t.tileRows) {
                const int32_t tr = (int32_t)((share.count - r) < t.tileRows ? (share.count - r) : t.tileRows);
                const int64_t m0 = share.first + r;
                gather_.GatherTile(nbrGm, m0, tr, slabGm[slab]);
                gather_.Drain();
                PipeBarrier<PIPE_ALL>();  // slab written (MTE3) before the AIC reads it
                for (int32_t k0 = 0; k0 < K; k0 += t.kGroup) {
                    const int32_t kc = (K - k0) < t.kGroup ? (K - k0) : t.kGroup;
                    if (pending) mm_.WaitIterateAll();
                    mm_.SetOrgShape(kc * cin, cout, tr, tr);
                    mm_.SetTensorA(slabGm[slab][(int64_t)k0 * t.tileRows * cin], true);
                    mm_.SetTensorB(gradGm[m0 * cout]);
                    mm_.SetSingleShape(kc * cin, cout, tr);
                    mm_.template IterateAll<false>(partial[(int64_t)k0 * cin * cout], r == 0 ? 0 : 1, false, true);
                    pending = true;
                }
                slab ^= 1;
            }
            if (pending) mm_.WaitIterateAll();
        }
        mm_.End();
        // AIV-only barrier: each AIV already waited for its own Matmul results (WaitIterateAll), so
        // once every AIV arrives every partial is complete. SyncAll<false> would also wait for the
        // AICs, which sit in the Matmul server loop until the AIV clients quit: a deadlock.
        SyncAll();
        Reduce(dw, aiv, GetBlockNum() * GetTaskRatio(), t, dwElems);
    }

private:
    // dW chunk = sum over the partials in AIV order (fp32), cast to T (RINT); chunks of dW are
    // spread over every AIV of the launch.
    __aicore__ inline void Reduce(GM_ADDR dw, int64_t core, int64_t cores, const GatherMmBpfTilingData& t,
                                  int64_t dwElems) {
        GlobalTensor<T> dwGm;
        dwGm.SetGlobalBuffer((__gm__ T*)dw, (uint64_t)dwElems);
        LocalTensor<float> acc = accBuf_.Get<float>();
        const CoreShare share = ShareOfCore(t.redChunks, cores, core);
        for (int64_t ch = share.first; ch < share.first + share.count; ++ch) {
            const int64_t e0 = ch * (int64_t)t.castChunk;
            const int32_t n = (int32_t)((dwElems - e0) < t.castChunk ? (dwElems - e0) : t.castChunk);
            for (int32_t p = 0; p < t.usedAiv; ++p) {
                LocalTensor<float> in = castIn_.template AllocTensor<float>();
                DataCopyPad(in, partialGm_[p * dwElems + e0], DataCopyExtParams(1, (uint32_t)(n * 4), 0, 0, 0),
                            DataCopyPadExtParams<float>(false, 0, 0, 0.0f));
                castIn_.EnQue(in);
                in = castIn_.template DeQue<float>();
                if (p == 0) Adds(acc, in, 0.0f, n);
                else Add(acc, acc, in, n);
                castIn_.FreeTensor(in);
            }
            LocalTensor<T> o = castOut_.template AllocTensor<T>();
            if constexpr (sizeof(T) != 4) Cast(o, acc, RoundMode::CAST_RINT, (uint32_t)n);
            else Adds(o, acc, 0.0f, n);
            castOut_.EnQue(o);
            o = castOut_.template DeQue<T>();
            DataCopyPad(dwGm[e0], o, DataCopyExtParams(1, (uint32_t)(n * sizeof(T)), 0, 0, 0));
            castOut_.FreeTensor(o);
        }
    }

    TPipe pipe_;
    Matmul<AT, BT, CT, BiasT> mm_;
    mxs_kernel::WindowGather<T> gather_;
    TBuf<TPosition::VECCALC> accBuf_;
    TQue<TPosition::VECIN, 1> castIn_;
    TQue<TPosition::VECOUT, 1> castOut_;
    GlobalTensor<float> partialGm_;
};

}  // namespace

extern "C" __global__ __aicore__ void gather_mm_backprop_filter(GM_ADDR features, GM_ADDR grad, GM_ADDR nbr,
                                                               GM_ADDR dw, GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(GatherMmBpfTilingData);
    GET_TILING_DATA_WITH_STRUCT(GatherMmBpfTilingData, t, tiling);
    if (TILING_KEY_IS(0)) {
        GatherMmBpfKernel<float> op;
        op.Run(features, grad, nbr, dw, workspace, t);
    } else if (TILING_KEY_IS(1)) {
        GatherMmBpfKernel<half> op;
        op.Run(features, grad, nbr, dw, workspace, t);
    } else if (TILING_KEY_IS(2)) {
        GatherMmBpfKernel<bfloat16_t> op;
        op.Run(features, grad, nbr, dw, workspace, t);
    }
}
