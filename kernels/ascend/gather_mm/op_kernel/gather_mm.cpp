// gather_mm (AscendC, Atlas A2 mix kernel): out[m] = sum_k features[nbr[m, k]] @ W[k].
//   features [numIn, Cin], weight [K, Cin, Cout] (= [K*Cin, Cout] row-major), nbr [M, K] int32
//   (-1 = no neighbour), out [M, Cout]. fp32 / fp16 / bf16 (tiling key = mxs_ascend::DTypeKey).
// Weight read transposed (tiling keys 10-12 = DTypeKey + kGmmWeightTKeyBase, op_host/
// gather_mm_weight_layout.h): weight is a layer's [K, Cout, Cin] and offset k multiplies
// W[kFirst + kStep*k]^T -- the input gradient (nbr_t, or a submanifold map with the offsets
// reversed) reading the layer's weight where it lies, with no transposed copy: see docs/en/ascend.md.
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
//      Weight read transposed: the W[k']^T of consecutive offsets are no one ND matrix, so one
//      Matmul per offset: A = the offset's [T, Cin] columns of its k-group (SetOrgShape Ka =
//      kc*Cin, their row pitch), B = W[k'] ([Cout, Cin] row-major) with isTransposeB (ISTRANS B
//      type), accumulated over the offsets as over k-groups. The slab and the gather are the same.
//      fp16/bf16 accumulate the offsets in an fp32 tile of the workspace (C type float), cast to T
//      by the AIV once the tile's last Matmul is done (while the next tile is gathered first).
//   Two slabs alternate: the Matmul of tile i runs (IterateAll<false>) while tile i+1 is gathered.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "gather_mm_tiling_data.h"
#include "core_share.h"
#include "window_gather.h"

using namespace AscendC;

namespace {

// Type X if B, else Y (the kernel compiler offers no <type_traits>).
template <bool B, typename X, typename Y>
struct Pick {
    using Type = X;
};
template <typename X, typename Y>
struct Pick<false, X, Y> {
    using Type = Y;
};

// WEIGHT_T: the weight is [K, Cout, Cin], read transposed (B's MatmulType has ISTRANS; false: the
// same B type as A, the plain kernel, unchanged).
template <typename T, bool WEIGHT_T>
class GatherMmKernel {
    // fp16/bf16 with the weight read transposed: the offsets' Matmuls add up in an fp32 tile of the
    // AIV's workspace, cast to T once per tile -- as the plain kernel's one Matmul over all offsets
    // rounds once -- instead of rounding to T at every offset's atomic add.
    static constexpr bool ACC_F32 = WEIGHT_T && sizeof(T) != 4;
    using AccT = typename Pick<ACC_F32, float, T>::Type;
    using AT = MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using BT = MatmulType<TPosition::GM, CubeFormat::ND, T, WEIGHT_T>;
    using CT = MatmulType<TPosition::GM, CubeFormat::ND, AccT>;
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
        GlobalTensor<AccT> accGm;  // ACC_F32: this AIV's fp32 tile [tileRows, cout] (after its slabs)
        if constexpr (ACC_F32) {
            accGm.SetGlobalBuffer((__gm__ AccT*)(user + aiv * t.wsPerAiv + t.accOffset), (uint64_t)t.tileRows * cout);
            pipe_.InitBuffer(castIn_, 1, t.castChunk * 4);
            pipe_.InitBuffer(castOut_, 1, t.castChunk * (int32_t)sizeof(T));
        }

        int slab = 0;
        bool pending = false;
        int64_t castRow0 = 0;  // ACC_F32: the tile whose sums wait in accGm for their cast (castRows > 0)
        int32_t castRows = 0;
        for (int64_t r = 0; r < rows; r += t.tileRows) {
            const int32_t tr = (int32_t)((rows - r) < t.tileRows ? (rows - r) : t.tileRows);
            const int64_t m0 = row0 + r;
            // the other slab may still be read by the AIC (its Matmul is pending): gather into this one
            gather_.GatherTile(nbrGm, m0, tr, slabGm[slab]);
            gather_.Drain();
            PipeBarrier<PIPE_ALL>();  // slab written (MTE3) before the AIC reads it
            for (int32_t k0 = 0; k0 < K; k0 += t.kGroup) {
                const int32_t kc = (K - k0) < t.kGroup ? (K - k0) : t.kGroup;
                // k-group g of the slab: [tileRows, kc*cin] starting at g*tileRows*kGroup*cin
                const GlobalTensor<T> group = slabGm[slab][(int64_t)k0 * t.tileRows * cin];
                if constexpr (!WEIGHT_T) {
                    if (pending) mm_.WaitIterateAll();
                    mm_.SetOrgShape(tr, cout, kc * cin);
                    mm_.SetTensorA(group);
                    mm_.SetTensorB(wGm[(int64_t)k0 * cin * cout]);
                    mm_.SetSingleShape(tr, cout, kc * cin);
                    mm_.template IterateAll<false>(outGm[m0 * cout], k0 == 0 ? 0 : 1, false, true);
                    pending = true;
                } else {
                    for (int32_t j = 0; j < kc; ++j) {
                        const int32_t k = k0 + j, kw = t.kFirst + t.kStep * k;
                        if (pending) mm_.WaitIterateAll();
                        if constexpr (ACC_F32) {
                            // the previous tile's sums are complete: to T before this tile overwrites them
                            if (castRows > 0) CastTile(accGm, outGm, castRow0, castRows, cout, t.castChunk);
                            castRows = 0;
                        }
                        // A: columns [j*cin, (j+1)*cin) of the group's rows (pitch kc*cin); B: W[kw]^T
                        mm_.SetOrgShape(tr, cout, kc * cin, cin);
                        mm_.SetTensorA(group[(int64_t)j * cin]);
                        mm_.SetTensorB(wGm[(int64_t)kw * cout * cin], true);
                        mm_.SetSingleShape(tr, cout, cin);
                        if constexpr (ACC_F32) {
                            mm_.template IterateAll<false>(accGm, k == 0 ? 0 : 1, false, true);
                        } else {
                            mm_.template IterateAll<false>(outGm[m0 * cout], k == 0 ? 0 : 1, false, true);
                        }
                        pending = true;
                    }
                }
            }
            if constexpr (ACC_F32) {
                castRow0 = m0;
                castRows = tr;
            }
            slab ^= 1;
        }
        if (pending) mm_.WaitIterateAll();
        if constexpr (ACC_F32) {
            if (castRows > 0) CastTile(accGm, outGm, castRow0, castRows, cout, t.castChunk);
        }
        mm_.End();
    }

private:
    // out rows [m0, m0 + rows) = the tile's fp32 sums in acc, rounded to T (RINT), chunk by chunk.
    // On return acc has been read (the tile's next Matmul overwrites it).
    __aicore__ inline void CastTile(const GlobalTensor<AccT>& acc, const GlobalTensor<T>& out, int64_t m0,
                                    int32_t rows, int32_t cout, int32_t chunk) {
        const int64_t total = (int64_t)rows * cout;
        for (int64_t e0 = 0; e0 < total; e0 += chunk) {
            const int32_t n = (int32_t)((total - e0) < chunk ? (total - e0) : chunk);
            LocalTensor<float> in = castIn_.template AllocTensor<float>();
            DataCopyPad(in, acc[e0], DataCopyExtParams(1, (uint32_t)(n * 4), 0, 0, 0),
                        DataCopyPadExtParams<float>(false, 0, 0, 0.0f));
            castIn_.EnQue(in);
            in = castIn_.template DeQue<float>();
            LocalTensor<T> o = castOut_.template AllocTensor<T>();
            Cast(o, in, RoundMode::CAST_RINT, (uint32_t)n);
            castIn_.FreeTensor(in);
            castOut_.EnQue(o);
            o = castOut_.template DeQue<T>();
            DataCopyPad(out[m0 * cout + e0], o, DataCopyExtParams(1, (uint32_t)(n * sizeof(T)), 0, 0, 0));
            castOut_.FreeTensor(o);
        }
        PipeBarrier<PIPE_ALL>();  // acc read (MTE2) before the AIC writes it again
    }

    TPipe pipe_;
    Matmul<AT, BT, CT, BiasT> mm_;
    mxs_kernel::WindowGather<T> gather_;
    TQue<TPosition::VECIN, 1> castIn_;    // ACC_F32 only
    TQue<TPosition::VECOUT, 1> castOut_;
};

}  // namespace

extern "C" __global__ __aicore__ void gather_mm(GM_ADDR features, GM_ADDR weight, GM_ADDR nbr, GM_ADDR out,
                                               GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    REGISTER_TILING_DEFAULT(GatherMmTilingData);
    GET_TILING_DATA_WITH_STRUCT(GatherMmTilingData, t, tiling);
    // keys 0-2: weight [K, Cin, Cout]; 10-12 (+ kGmmWeightTKeyBase): [K, Cout, Cin] read transposed
    if (TILING_KEY_IS(0)) {
        GatherMmKernel<float, false> op;
        op.Run(features, weight, nbr, out, workspace, t);
    } else if (TILING_KEY_IS(1)) {
        GatherMmKernel<half, false> op;
        op.Run(features, weight, nbr, out, workspace, t);
    } else if (TILING_KEY_IS(2)) {
        GatherMmKernel<bfloat16_t, false> op;
        op.Run(features, weight, nbr, out, workspace, t);
    } else if (TILING_KEY_IS(10)) {
        GatherMmKernel<float, true> op;
        op.Run(features, weight, nbr, out, workspace, t);
    } else if (TILING_KEY_IS(11)) {
        GatherMmKernel<half, true> op;
        op.Run(features, weight, nbr, out, workspace, t);
    } else if (TILING_KEY_IS(12)) {
        GatherMmKernel<bfloat16_t, true> op;
        op.Run(features, weight, nbr, out, workspace, t);
    }
}
