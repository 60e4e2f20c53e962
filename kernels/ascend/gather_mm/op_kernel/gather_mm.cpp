// gather_mm (AscendC, Atlas A2 mix kernel): out[m] = sum_k features[nbr[m, k]] @ W[k].
//   features [numIn, Cin], weight [K, Cin, Cout] (= [K*Cin, Cout] row-major), nbr [M, K] int32
//   (-1 = no neighbour), out [M, Cout]. fp32 / fp16 / bf16 (tiling key = mxs_ascend::DTypeKey).
// The input gradient is the same kernel with nbr_t and weight^T ([K, Cout, Cin], transposed once
// on the host): see docs/en/ascend.md.
//
// Output-stationary and deterministic: every AIV owns a contiguous range of output rows, so no
// two cores ever write the same output element and there are no cross-core atomics. Per tile
// of T rows and group of kGroup offsets:
//   1. one DMA loads nbr[rows, :] (T*K int32) into UB;
//   2. the AIV gathers the (row, k) feature rows into a UB double buffer (zero-filled by one
//      vector Duplicate per fill; one DataCopyPad per valid pair — there is no GM gather
//      instruction on A2, so the per-pair index read + DMA issue is the irreducible scalar
//      work) and writes each fill with ONE UB->GM DMA into a [T, kGroup*Cin] slab of its
//      workspace;
//   3. the Cube Matmul slab[T, kGroup*Cin] @ W[k0*Cin : (k0+kGroup)*Cin, :] writes the rows
//      (enAtomic = 0 for the first group, 1 = accumulate for further groups: still single
//      writer, fixed order -> deterministic). fp16/bf16 accumulate in fp32 inside the Cube.
//   Two slabs alternate: the Matmul of tile i runs (IterateAll<false>) while tile i+1 is gathered.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "../op_host/gather_mm_tiling_data.h"
#include "../../common/op_kernel/core_share.h"

using namespace AscendC;

namespace {

template <typename T>
class GatherMmKernel {
    using AT = MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using CT = MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using BiasT = MatmulType<TPosition::GM, CubeFormat::ND, float>;
    // 16-bit types are zero-filled through an int16 view (Duplicate has no need for the float type)
    using FillT = typename std::conditional<sizeof(T) == 4, int32_t, int16_t>::type;

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

        K_ = t.kvol; cin_ = t.cin; cout_ = t.cout;
        segPitchElems_ = t.segPitch / (int32_t)sizeof(T);
        F_ = t.segsPerFill;
        featGm_.SetGlobalBuffer((__gm__ T*)feat, (uint64_t)t.numIn * cin_);
        wGm_.SetGlobalBuffer((__gm__ T*)weight, (uint64_t)K_ * cin_ * cout_);
        nbrGm_.SetGlobalBuffer((__gm__ int32_t*)nbr, (uint64_t)t.numOut * K_);
        outGm_.SetGlobalBuffer((__gm__ T*)out, (uint64_t)t.numOut * cout_);
        GM_ADDR user = GetUserWorkspace(workspace);
        slabGm_[0].SetGlobalBuffer((__gm__ T*)(user + aiv * t.wsPerAiv), (uint64_t)t.slabElems);
        slabGm_[1].SetGlobalBuffer((__gm__ T*)(user + aiv * t.wsPerAiv) + t.slabElems, (uint64_t)t.slabElems);

        pipe_.InitBuffer(nbrBuf_, t.nbrBufBytes);
        pipe_.InitBuffer(fillBuf_, 2 * F_ * t.segPitch);
        nbrUb_ = nbrBuf_.Get<int32_t>();
        fillUb_[0] = fillBuf_.Get<T>();
        fillUb_[1] = fillUb_[0][F_ * segPitchElems_];

        int slab = 0;
        bool pending = false;
        for (int64_t r = 0; r < rows; r += t.tileRows) {
            const int32_t tr = (int32_t)((rows - r) < t.tileRows ? (rows - r) : t.tileRows);
            const int64_t m0 = row0 + r;
            // nbr rows of the tile: one DMA; scalar reads below are ordered after it by the compiler
            DataCopyPad(nbrUb_, nbrGm_[m0 * K_], DataCopyExtParams(1, (uint32_t)(tr * K_ * 4), 0, 0, 0),
                        DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
            for (int32_t k0 = 0; k0 < K_; k0 += t.kGroup) {
                const int32_t kc = (K_ - k0) < t.kGroup ? (K_ - k0) : t.kGroup;
                GatherSlab(slabGm_[slab], tr, k0, kc);
                // drain MTE3 so the AIC reads the finished slab (GM-side ordering)
                PipeBarrier<PIPE_ALL>();
                if (pending) mm_.WaitIterateAll();
                mm_.SetOrgShape(tr, cout_, kc * cin_);
                mm_.SetTensorA(slabGm_[slab]);
                mm_.SetTensorB(wGm_[(int64_t)k0 * cin_ * cout_]);
                mm_.SetSingleShape(tr, cout_, kc * cin_);
                mm_.template IterateAll<false>(outGm_[m0 * cout_], k0 == 0 ? 0 : 1, false, true);
                pending = true;
                slab ^= 1;
            }
        }
        if (pending) mm_.WaitIterateAll();
        for (int b = 0; b < 2; ++b)
            if (bufUsed_[b]) WaitFlag<HardEvent::MTE3_V>(b);
        mm_.End();
    }

private:
    // Gather the (row, k) segments of rows [0, tr) and offsets [k0, k0+kc) into slab[tr, kc*cin].
    __aicore__ inline void GatherSlab(const GlobalTensor<T>& slab, int32_t tr, int32_t k0, int32_t kc) {
        const int64_t total = (int64_t)tr * kc;
        const uint32_t rowBytes = (uint32_t)(cin_ * sizeof(T));
        for (int64_t q0 = 0; q0 < total; q0 += F_) {
            const int32_t n = (int32_t)((total - q0) < F_ ? (total - q0) : F_);
            const int b = buf_;
            buf_ ^= 1;
            LocalTensor<T> ub = fillUb_[b];
            if (bufUsed_[b]) WaitFlag<HardEvent::MTE3_V>(b);  // previous UB->GM of this buffer done
            Duplicate(ub.template ReinterpretCast<FillT>(), (FillT)0,
                      (int32_t)(n * segPitchElems_ * sizeof(T) / sizeof(FillT)));
            SetFlag<HardEvent::V_MTE2>(b);
            WaitFlag<HardEvent::V_MTE2>(b);
            for (int32_t j = 0; j < n; ++j) {
                const int64_t q = q0 + j;
                const int32_t r = (int32_t)(q / kc), kk = (int32_t)(q - (int64_t)r * kc);
                const int32_t src = nbrUb_.GetValue(r * K_ + k0 + kk);
                if (src >= 0)
                    DataCopyPad(ub[j * segPitchElems_], featGm_[(int64_t)src * cin_],
                                DataCopyExtParams(1, rowBytes, 0, 0, 0), DataCopyPadExtParams<T>(false, 0, 0, T(0)));
            }
            SetFlag<HardEvent::MTE2_MTE3>(b);
            WaitFlag<HardEvent::MTE2_MTE3>(b);
            SetFlag<HardEvent::V_MTE3>(b);
            WaitFlag<HardEvent::V_MTE3>(b);
            // n rows of cin elements, UB rows 32 B-padded -> compact [n, cin] in GM
            DataCopyPad(slab[q0 * cin_], ub, DataCopyExtParams((uint16_t)n, rowBytes, 0, 0, 0));
            SetFlag<HardEvent::MTE3_V>(b);
            bufUsed_[b] = true;
        }
    }

    TPipe pipe_;
    Matmul<AT, AT, CT, BiasT> mm_;
    TBuf<TPosition::VECCALC> nbrBuf_, fillBuf_;
    LocalTensor<int32_t> nbrUb_;
    LocalTensor<T> fillUb_[2];
    GlobalTensor<T> featGm_, wGm_, outGm_, slabGm_[2];
    GlobalTensor<int32_t> nbrGm_;
    int32_t K_ = 0, cin_ = 0, cout_ = 0, segPitchElems_ = 0, F_ = 0;
    int buf_ = 0;
    bool bufUsed_[2] = {false, false};
};

}  // namespace

extern "C" __global__ __aicore__ void gather_mm(GM_ADDR features, GM_ADDR weight, GM_ADDR nbr, GM_ADDR out,
                                               GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
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
