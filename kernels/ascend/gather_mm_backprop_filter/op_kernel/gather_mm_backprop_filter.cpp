// gather_mm_backprop_filter (AscendC, Atlas A2 mix kernel):
//   dW[k] = sum_m features[nbr[m, k]]^T (x) grad[m]        dW [K, Cin, Cout]
// features [numIn, Cin], grad [M, Cout], nbr [M, K] int32 (-1 = none). fp32 / fp16 / bf16.
//
// Filter-stationary and deterministic: a work item is (k, block of input channels) (k fastest) and the AIV
// owning it is the only writer of dW[k][block, :]. Per item, for every tile of Tm rows:
//   1. one strided DataCopyPad loads the column nbr[m0:m0+Tm, k] (4 B per row, GM stride K*4);
//   2. the gathered rows features[nbr[m,k], block] (zeros for -1) go through a UB double buffer
//      into a [Tm, cinBlock] workspace slab (one UB->GM DMA per fill);
//   3. Cube Matmul slab^T[cinBlock, Tm] @ grad[m0:m0+Tm, :] (A transposed, grad read in place)
//      overwrites (first tile) / accumulates (later tiles) dW[k][block] (fp32) or the AIV's fp32
//      accumulator (fp16/bf16), which is cast to the output type once per item (vector Cast).
// When there are fewer items than AIVs (small Cin), each item's rows are split into P ranges whose
// fp32 partials go to workspace slots; after SyncAll every AIV adds a share of the chunks in fixed
// p order and casts (still deterministic, no atomics).
// Two slabs alternate so tile i+1 is gathered while the AIC multiplies tile i.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "../op_host/gather_mm_backprop_filter_tiling_data.h"
#include "../../common/op_kernel/core_share.h"

using namespace AscendC;

namespace {

template <typename T>
class GatherMmBpfKernel {
    using AT = MatmulType<TPosition::GM, CubeFormat::ND, T, true>;
    using BT = MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using CT = MatmulType<TPosition::GM, CubeFormat::ND, float>;
    using BiasT = MatmulType<TPosition::GM, CubeFormat::ND, float>;
    using FillT = typename std::conditional<sizeof(T) == 4, int32_t, int16_t>::type;
    static constexpr bool kCast = sizeof(T) != 4;

public:
    __aicore__ inline void Run(GM_ADDR feat, GM_ADDR grad, GM_ADDR nbr, GM_ADDR dw, GM_ADDR workspace,
                               const GatherMmBpfTilingData& t) {
        REGIST_MATMUL_OBJ(&pipe_, GetSysWorkSpacePtr(), mm_, &t.mm);
        const int64_t aiv = GetBlockIdx();
        const bool split = t.numParts > 1;
        // with split items every AIV of the launch must reach the SyncAll before the reduce phase
        if (aiv >= t.usedAiv && !split) return;
        int64_t it0 = 0, nIt = 0;
        if (aiv < t.usedAiv) {
            const CoreShare share = ShareOfCore(t.numUnits, t.usedAiv, aiv);
            it0 = share.first;
            nIt = share.count;
        }

        t_ = &t;
        K_ = t.kvol; cin_ = t.cin; cout_ = t.cout; F_ = t.segsPerFill;
        segPitchElems_ = t.segPitch / (int32_t)sizeof(T);
        featGm_.SetGlobalBuffer((__gm__ T*)feat, (uint64_t)t.numIn * cin_);
        gradGm_.SetGlobalBuffer((__gm__ T*)grad, (uint64_t)t.numOut * cout_);
        nbrGm_.SetGlobalBuffer((__gm__ int32_t*)nbr, (uint64_t)t.numOut * K_);
        GM_ADDR user = GetUserWorkspace(workspace) + aiv * t.wsPerAiv;
        slabGm_[0].SetGlobalBuffer((__gm__ T*)user, (uint64_t)t.slabElems);
        slabGm_[1].SetGlobalBuffer((__gm__ T*)user + t.slabElems, (uint64_t)t.slabElems);
        partialGm_.SetGlobalBuffer((__gm__ float*)(GetUserWorkspace(workspace) + t.partialOffset),
                                   t.numParts > 1 ? (uint64_t)t.numUnits * t.cinBlock * cout_ : 1);
        if constexpr (kCast) {
            accGm_.SetGlobalBuffer((__gm__ float*)(user + t.accOffset), (uint64_t)t.cinBlock * cout_);
            dwT_.SetGlobalBuffer((__gm__ T*)dw, (uint64_t)K_ * cin_ * cout_);
        } else {
            dwF_.SetGlobalBuffer((__gm__ float*)dw, (uint64_t)K_ * cin_ * cout_);
        }

        pipe_.InitBuffer(nbrBuf_, t.nbrBufBytes);
        pipe_.InitBuffer(fillBuf_, 2 * F_ * t.segPitch);
        if (t.castChunk > 0) {
            pipe_.InitBuffer(castIn_, 1, t.castChunk * 4);
            pipe_.InitBuffer(castOut_, 1, t.castChunk * (int32_t)sizeof(T));
        }
        if (split) pipe_.InitBuffer(accBuf_, t.castChunk * 4);
        nbrUb_ = nbrBuf_.Get<int32_t>();
        fillUb_[0] = fillBuf_.Get<T>();
        fillUb_[1] = fillUb_[0][F_ * segPitchElems_];

        for (int64_t it = it0; it < it0 + nIt; ++it) RunItem(it);
        for (int b = 0; b < 2; ++b)
            if (bufUsed_[b]) WaitFlag<HardEvent::MTE3_V>(b);
        mm_.End();
        if (split) {
            SyncAll<false>();  // every partial (written by the AICs) is complete
            Reduce(dw, aiv, GetBlockNum() * GetTaskRatio());
        }
    }

private:
    __aicore__ inline void RunItem(int64_t unit) {
        // part-major units and k-fastest items: consecutive units (one AIV's share) hit different
        // kernel offsets, whose neighbour densities differ a lot (centre offset: every row valid)
        const int64_t it = unit % t_->numItems, part = unit / t_->numItems;
        const int64_t pb = t_->numOut / t_->numParts, pe = t_->numOut % t_->numParts;  // big/small rows
        const int64_t mBegin = part * pb + (part < pe ? part : pe);
        const int64_t mEnd = mBegin + pb + (part < pe ? 1 : 0);
        const bool split = t_->numParts > 1;
        const int32_t k = (int32_t)(it % K_);
        const int32_t blk = (int32_t)(it / K_);
        const int32_t ci0 = blk * t_->cinBlock;
        const int32_t cb = (cin_ - ci0) < t_->cinBlock ? (cin_ - ci0) : t_->cinBlock;
        GlobalTensor<float> c;
        if (split) c = partialGm_[(it * t_->numParts + part) * t_->cinBlock * cout_];  // fp32 partial slot
        else if constexpr (kCast) c = accGm_;
        else c = dwF_[((int64_t)k * cin_ + ci0) * cout_];
        bool pending = false;
        int slab = 0;
        for (int64_t m0 = mBegin; m0 < mEnd; m0 += t_->tileRows) {
            const int32_t tm = (int32_t)((mEnd - m0) < t_->tileRows ? (mEnd - m0) : t_->tileRows);
            // column k of nbr for rows [m0, m0+tm): 4 bytes per row, GM stride K*4, UB pitch 32 B
            DataCopyPad(nbrUb_, nbrGm_[m0 * K_ + k],
                        DataCopyExtParams((uint16_t)tm, 4, (uint32_t)((K_ - 1) * 4), 0, 0),
                        DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
            GatherSlab(slabGm_[slab], tm, ci0, cb);
            PipeBarrier<PIPE_ALL>();  // slab written (MTE3) before the AIC reads it
            if (pending) mm_.WaitIterateAll();
            mm_.SetOrgShape(cb, cout_, tm, tm);
            mm_.SetTensorA(slabGm_[slab], true);
            mm_.SetTensorB(gradGm_[m0 * cout_]);
            mm_.SetSingleShape(cb, cout_, tm);
            mm_.template IterateAll<false>(c, m0 == mBegin ? 0 : 1, false, true);
            pending = true;
            slab ^= 1;
        }
        if (pending) mm_.WaitIterateAll();
        if constexpr (kCast) {
            if (!split) CastOut(k, ci0, cb);
        }
    }

    // rows [0, tm) of the tile: features[nbr[m, k], ci0:ci0+cb] -> slab[tm, cb]
    __aicore__ inline void GatherSlab(const GlobalTensor<T>& slab, int32_t tm, int32_t ci0, int32_t cb) {
        const uint32_t rowBytes = (uint32_t)(cb * sizeof(T));
        // UB rows of a DataCopyPad are 32 B-rounded blockLen apart: the pitch of a (possibly
        // narrower) last channel block is smaller than the tiling's segPitch
        const int32_t pitchElems = (int32_t)(((rowBytes + 31) / 32 * 32) / sizeof(T));
        for (int32_t q0 = 0; q0 < tm; q0 += F_) {
            const int32_t n = (tm - q0) < F_ ? (tm - q0) : F_;
            const int b = buf_;
            buf_ ^= 1;
            LocalTensor<T> ub = fillUb_[b];
            if (bufUsed_[b]) WaitFlag<HardEvent::MTE3_V>(b);
            Duplicate(ub.template ReinterpretCast<FillT>(), (FillT)0,
                      (int32_t)(n * pitchElems * sizeof(T) / sizeof(FillT)));
            SetFlag<HardEvent::V_MTE2>(b);
            WaitFlag<HardEvent::V_MTE2>(b);
            for (int32_t j = 0; j < n; ++j) {
                const int32_t src = nbrUb_.GetValue((q0 + j) * 8);
                if (src >= 0)
                    DataCopyPad(ub[j * pitchElems], featGm_[(int64_t)src * cin_ + ci0],
                                DataCopyExtParams(1, rowBytes, 0, 0, 0), DataCopyPadExtParams<T>(false, 0, 0, T(0)));
            }
            SetFlag<HardEvent::MTE2_MTE3>(b);
            WaitFlag<HardEvent::MTE2_MTE3>(b);
            SetFlag<HardEvent::V_MTE3>(b);
            WaitFlag<HardEvent::V_MTE3>(b);
            DataCopyPad(slab[(int64_t)q0 * cb], ub, DataCopyExtParams((uint16_t)n, rowBytes, 0, 0, 0));
            SetFlag<HardEvent::MTE3_V>(b);
            bufUsed_[b] = true;
        }
    }

    // Split items: dW block = sum_p partial[item*P + p] in fixed p order (fp32), cast to T (RINT).
    // Chunks of all items are spread over every AIV of the launch.
    __aicore__ inline void Reduce(GM_ADDR dw, int64_t core, int64_t cores) {
        const GatherMmBpfTilingData& t = *t_;
        GlobalTensor<T> dwGm;
        dwGm.SetGlobalBuffer((__gm__ T*)dw, (uint64_t)K_ * cin_ * cout_);
        LocalTensor<float> acc = accBuf_.Get<float>();
        const int64_t work = (int64_t)t.numItems * t.redChunks;
        const CoreShare share = ShareOfCore(work, cores, core);
        const int64_t w0 = share.first, nw = share.count;
        for (int64_t wi = w0; wi < w0 + nw; ++wi) {
            const int64_t item = wi / t.redChunks, ch = wi % t.redChunks;
            const int32_t k = (int32_t)(item % K_), blk = (int32_t)(item / K_);
            const int32_t ci0 = blk * t.cinBlock;
            const int32_t cb = (cin_ - ci0) < t.cinBlock ? (cin_ - ci0) : t.cinBlock;
            const int64_t total = (int64_t)cb * cout_, e0 = ch * (int64_t)t.castChunk;
            if (e0 >= total) continue;
            const int32_t n = (int32_t)((total - e0) < t.castChunk ? (total - e0) : t.castChunk);
            for (int32_t p = 0; p < t.numParts; ++p) {
                LocalTensor<float> in = castIn_.template AllocTensor<float>();
                DataCopyPad(in, partialGm_[(item * t.numParts + p) * (int64_t)t.cinBlock * cout_ + e0],
                            DataCopyExtParams(1, (uint32_t)(n * 4), 0, 0, 0),
                            DataCopyPadExtParams<float>(false, 0, 0, 0.0f));
                castIn_.EnQue(in);
                in = castIn_.template DeQue<float>();
                if (p == 0) Adds(acc, in, 0.0f, n);
                else Add(acc, acc, in, n);
                castIn_.FreeTensor(in);
            }
            LocalTensor<T> o = castOut_.template AllocTensor<T>();
            if constexpr (kCast) Cast(o, acc, RoundMode::CAST_RINT, (uint32_t)n);
            else Adds(o, acc, 0.0f, n);
            castOut_.EnQue(o);
            o = castOut_.template DeQue<T>();
            DataCopyPad(dwGm[((int64_t)k * cin_ + ci0) * cout_ + e0], o,
                        DataCopyExtParams(1, (uint32_t)(n * sizeof(T)), 0, 0, 0));
            castOut_.FreeTensor(o);
        }
    }

    // fp32 accumulator [cb, cout] -> dW[k][ci0:ci0+cb, :] in T (RNE), chunked through UB
    __aicore__ inline void CastOut(int32_t k, int32_t ci0, int32_t cb) {
        const int64_t total = (int64_t)cb * cout_;
        GlobalTensor<T> dst = dwT_[((int64_t)k * cin_ + ci0) * cout_];
        for (int64_t e0 = 0; e0 < total; e0 += t_->castChunk) {
            const int32_t n = (int32_t)((total - e0) < t_->castChunk ? (total - e0) : t_->castChunk);
            LocalTensor<float> in = castIn_.template AllocTensor<float>();
            DataCopyPad(in, accGm_[e0], DataCopyExtParams(1, (uint32_t)(n * 4), 0, 0, 0),
                        DataCopyPadExtParams<float>(false, 0, 0, 0.0f));
            castIn_.EnQue(in);
            in = castIn_.template DeQue<float>();
            LocalTensor<T> o = castOut_.template AllocTensor<T>();
            Cast(o, in, RoundMode::CAST_RINT, (uint32_t)n);
            castIn_.FreeTensor(in);
            castOut_.EnQue(o);
            o = castOut_.template DeQue<T>();
            DataCopyPad(dst[e0], o, DataCopyExtParams(1, (uint32_t)(n * sizeof(T)), 0, 0, 0));
            castOut_.FreeTensor(o);
        }
    }

    TPipe pipe_;
    Matmul<AT, BT, CT, BiasT> mm_;
    TBuf<TPosition::VECCALC> nbrBuf_, fillBuf_, accBuf_;
    TQue<TPosition::VECIN, 1> castIn_;
    TQue<TPosition::VECOUT, 1> castOut_;
    LocalTensor<int32_t> nbrUb_;
    LocalTensor<T> fillUb_[2];
    GlobalTensor<T> featGm_, gradGm_, slabGm_[2], dwT_;
    GlobalTensor<float> accGm_, dwF_, partialGm_;
    GlobalTensor<int32_t> nbrGm_;
    const GatherMmBpfTilingData* t_ = nullptr;
    int32_t K_ = 0, cin_ = 0, cout_ = 0, segPitchElems_ = 0, F_ = 0;
    int buf_ = 0;
    bool bufUsed_[2] = {false, false};
};

}  // namespace

extern "C" __global__ __aicore__ void gather_mm_backprop_filter(GM_ADDR features, GM_ADDR grad, GM_ADDR nbr,
                                                               GM_ADDR dw, GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
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

