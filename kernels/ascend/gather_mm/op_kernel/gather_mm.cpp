// gather_mm (AscendC, Atlas A2 mix kernel): out[m] = sum_k features[nbr[m, k]] @ W[k].
//   features [numIn, Cin], weight [K, Cin, Cout] (= [K*Cin, Cout] row-major), nbr [M, K] int32
//   (-1 = no neighbour), out [M, Cout]. fp32 / fp16 / bf16 (tiling key = mxs_ascend::DTypeKey).
// The input gradient is the same kernel with nbr_t and weight^T ([K, Cout, Cin], transposed once
// on the host): see docs/en/ascend.md.
//
// Output-stationary and deterministic: every AIV owns a contiguous range of output rows, so no
// two cores ever write the same output element and there are no cross-core atomics. Per tile of
// T rows:
//   1. the window gather (common/op_kernel/window_gather.h) builds the [T, K*Cin] slab of the
//      tile's feature rows in the AIV's workspace: one DMA of the nbr rows, then per chunk of rows
//      and group of offsets one DMA per window of input rows, vector Gathers in UB and one DMA of
//      the slab segment -- no per-row DMA and no per-row scalar work;
//   2. the Cube Matmul slab[T, kGroup*Cin] @ W[k0*Cin : (k0+kGroup)*Cin, :] writes the rows
//      (enAtomic = 0 for the first k-group, 1 = accumulate for further groups: still single
//      writer, fixed order -> deterministic). fp16/bf16 accumulate in fp32 inside the Cube.
//   Two slabs alternate: the Matmul of tile i runs (IterateAll<false>) while tile i+1 is gathered.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "gather_mm_tiling_data.h"
#include "core_share.h"
#include "window_gather.h"

using namespace AscendC;

namespace {

template <typename T>
class GatherMmKernel {
    using AT = MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using CT = MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using BiasT = MatmulType<TPosition::GM, CubeFormat::ND, float>;

public:
    __aicore__ inline void Run(GM_ADDR feat, GM_ADDR weight, GM_ADDR nbr, GM_ADDR out, GM_ADDR workspace,
                               const GatherMmTilingData& t) {
        REGIST_MATMUL_OBJ(&pipe_, GetSysWorkSpacePtr(), mm_, &t.mm);
        const int64_t aiv = GetBlockIdx();
        if (aiv >= t.usedAiv) return;  // idle AIV of the last group
        // big/small split of the output rows
        const CoreShare share = ShareOfCore(t.numOut, t.usedAiv, aiv);
        const int64_t row0 = share.first, rows = share.count;
        if (rows <= 0) return;

        const int32_t K = t.kvol, cin = t.cin, cout = t.cout;
        GlobalTensor<T> featGm, wGm, outGm, slabGm[2];
        GlobalTensor<int32_t> nbrGm;
        featGm.SetGlobalBuffer((__gm__ T*)feat, (uint64_t)t.numIn * cin);
        wGm.SetGlobalBuffer((__gm__ T*)weight, (uint64_t)K * cin * cout);
        nbrGm.SetGlobalBuffer((__gm__ int32_t*)nbr, (uint64_t)t.numOut * K);
        outGm.SetGlobalBuffer((__gm__ T*)out, (uint64_t)t.numOut * cout);
        GM_ADDR user = GetUserWorkspace(workspace);
        slabGm[0].SetGlobalBuffer((__gm__ T*)(user + aiv * t.wsPerAiv), (uint64_t)t.slabElems);
        slabGm[1].SetGlobalBuffer((__gm__ T*)(user + aiv * t.wsPerAiv) + t.slabElems, (uint64_t)t.slabElems);
        gather_.SetKGroup(t.kGroup);
        gather_.Init(pipe_, t.wg, featGm);

        int slab = 0;
        bool pending = false;
        for (int64_t r = 0; r < rows; r += t.tileRows) {
            const int32_t tr = (int32_t)((rows - r) < t.tileRows ? (rows - r) : t.tileRows);
            const int64_t m0 = row0 + r;
            // the other slab may still be read by the AIC (its Matmul is pending): gather into this one
            gather_.GatherTile(nbrGm, m0, tr, slabGm[slab]);
            gather_.Drain();
            PipeBarrier<PIPE_ALL>();  // slab written (MTE3) before the AIC reads it
            for (int32_t k0 = 0; k0 < K; k0 += t.kGroup) {
                const int32_t kc = (K - k0) < t.kGroup ? (K - k0) : t.kGroup;
                if (pending) mm_.WaitIterateAll();
                // k-group g of the slab: [tileRows, kc*cin] starting at g*tileRows*kGroup*cin
                mm_.SetOrgShape(tr, cout, kc * cin);
                mm_.SetTensorA(slabGm[slab][(int64_t)k0 * t.tileRows * cin]);
                mm_.SetTensorB(wGm[(int64_t)k0 * cin * cout]);
                mm_.SetSingleShape(tr, cout, kc * cin);
                mm_.template IterateAll<false>(outGm[m0 * cout], k0 == 0 ? 0 : 1, false, true);
                pending = true;
            }
            slab ^= 1;
        }
        if (pending) mm_.WaitIterateAll();
        mm_.End();
    }

private:
    TPipe pipe_;
    Matmul<AT, AT, CT, BiasT> mm_;
    mxs_kernel::WindowGather<T> gather_;
};

}  // namespace

extern "C" __global__ __aicore__ void gather_mm(GM_ADDR features, GM_ADDR weight, GM_ADDR nbr, GM_ADDR out,
                                               GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(GatherMmTilingData);
    GET_TILING_DATA_WITH_STRUCT(GatherMmTilingData, t, tiling);
    if (TILING_KEY_IS(0)) {
        GatherMmKernel<float> op;
        op.Run(features, weight, nbr, out, workspace, t);
    } else if (TILING_KEY_IS(1)) {
        GatherMmKernel<half> op;
        op.Run(features, weight, nbr, out, workspace, t);
    } else if (TILING_KEY_IS(2)) {
        GatherMmKernel<bfloat16_t> op;
        op.Run(features, weight, nbr, out, workspace, t);
    }
}
