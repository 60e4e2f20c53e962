// Sorted-key neighbour lookup (AscendC, Atlas A2, vector-only kernel), used for BOTH map builders.
//
// Inputs: qkeys [M] int64 query base keys, sorted ascending; ckeys [N] int64 candidate (input voxel)
// keys on a padded grid, sorted ascending (stable sort on the host/torch_npu side); deltas [K] int64
// key offsets of the kernel window, increasing.
// Output: nbrS [M, K] int32: nbrS[s, k] = s' with ckeys[s'] == qkeys[s] + delta_k, or -1.
//   submanifold map: qkeys = ckeys = sorted voxel keys; the caller un-permutes
//     nbr[perm[s], k] = perm[nbrS[s, k]];
//   strided-conv map: qkeys = pack_in(o * stride) of the (unique, sorted) output voxels on the input
//     grid padded by `padding` below and by the reach of the kernel above; nbr[m, k] = perm[nbrS[m, k]].
//
// Why this shape: A2 has no int64 vector arithmetic, int32 vector compares are EQ-only, and there
// is no GM gather, so neither a hash table nor a dense volume map vectorises. Instead every
// (query, offset) pair of a tile of TQ sorted queries is one int32 LANE of a per-lane binary search:
//   * the offsets k = g*X + x that differ only along the last axis form a group g; for a tile, the
//     targets of group g lie in one range of the sorted candidates, which is staged in UB (one DMA,
//     usually reused by the next tiles; restaged at the range's lower bound when the tile moves
//     past it, found by a scalar binary search of a UB-staged key block or of a coarse index of
//     every S-th key that each core stages once -- no scalar GM reads);
//   * each lane searches its group's staged keys with log2(stageKeys) steps of: vector Gather of the
//     probed key's 32-bit words, compare with the lane's target, advance -- a few vector
//     instructions over K*TQ lanes per step for the whole tile, no scalar work per voxel or offset;
//   * compares: when the host bounds the launch's key range below 2^30 (tiling exactCompare = 0:
//     KITTI, nuScenes, ...) the difference of the LOW words decides (wrapping int32 subtraction is
//     exact) and 14 lane vectors suffice; otherwise every compare is an exact two-word int64 compare
//     built from int32 Min and equality clamps (A2 compares int32 only for equality, so "<" is
//     Min(a, b) == a and a != b as 0/1 lanes), with 19 lane vectors;
//   * a tile whose group range does not fit the staged keys is bisected (a single query always fits);
//     lanes are query-major (lane = i*Kp + k, Kp = K rounded up to 8), so a half's lanes are one
//     contiguous, 32 B-aligned range and its search costs in proportion to its size.
// The lanes are already the output rows [TQ][Kp]: one DMA writes the tile's [q, K] rows.
#include "kernel_operator.h"
#include "subm_map_tiling_data.h"
#include "core_share.h"
#include "key_vec.h"

using namespace AscendC;

namespace {

constexpr int32_t MAXK = 125;
constexpr int64_t COMPACT_SPAN = 1ll << 30;
constexpr int32_t INT32_MIN_V = -2147483647 - 1;

// one Set/Wait pair with an id from the pipe's pool (key_vec.h)
template <HardEvent E>
__aicore__ inline void Sync() {
    mxs_kernel::PipeSync<E>();
}

class SubmMapKernel {
public:
    __aicore__ inline void Run(GM_ADDR qkeys, GM_ADDR ckeys, GM_ADDR deltas, GM_ADDR nbrS, const SubmMapTilingData& t) {
        const int64_t core = GetBlockIdx();
        if (core >= t.usedAiv) return;
        const CoreShare share = ShareOfCore(t.numTiles, t.usedAiv, core);
        N_ = t.numVoxels;
        NC_ = t.numCand;
        K_ = t.kvol;
        X_ = t.groupSize;
        G_ = K_ / X_;
        TQ_ = t.tileQ;
        KP_ = (K_ + 7) / 8 * 8;
        L_ = KP_ * TQ_;
        cap_ = t.stageKeys;
        steps_ = t.searchSteps;
        S_ = t.sampleStride;
        NS_ = t.numSamples;
        exact_ = t.exactCompare != 0;
        keys32Gm_.SetGlobalBuffer((__gm__ int32_t*)ckeys, (uint64_t)NC_ * 2);
        q32Gm_.SetGlobalBuffer((__gm__ int32_t*)qkeys, (uint64_t)N_ * 2);
        outGm_.SetGlobalBuffer((__gm__ int32_t*)nbrS, (uint64_t)N_ * K_);
        GlobalTensor<int32_t> dGm;
        dGm.SetGlobalBuffer((__gm__ int32_t*)deltas, (uint64_t)K_ * 2);
        InitBuffers();
        LoadConstants(dGm);
        for (int64_t tl = share.first; tl < share.first + share.count; ++tl) Tile(tl);
    }

private:
    // same buffers and sizes as SubmMapUbBytes
    __aicore__ inline void InitBuffers() {
        const uint32_t lane = (uint32_t)((L_ * 4 + 31) / 32 * 32);
        const int32_t vectors = exact_ ? kLaneVectorsExact : kLaneVectorsCompact;
        for (int32_t i = 0; i < vectors; ++i) pipe_.InitBuffer(laneB_[i], lane);
        pipe_.InitBuffer(qrawB_, (uint32_t)((TQ_ * 8 + 31) / 32 * 32));
        pipe_.InitBuffer(stageB_, (uint32_t)(G_ * cap_ * 8));
        pipe_.InitBuffer(sampB_, (uint32_t)(NS_ * 32));
        pipe_.InitBuffer(deltaB_, (uint32_t)((K_ * 8 + 31) / 32 * 32));
        pipe_.InitBuffer(groupB_, (uint32_t)(3 * ((G_ * 4 + 31) / 32 * 32)));
        qIdx_ = laneB_[0].Get<uint32_t>();
        gOff_ = laneB_[1].Get<uint32_t>();
        dlo_ = laneB_[2].Get<int32_t>();
        gbase_ = laneB_[3].Get<int32_t>();
        qlo_ = laneB_[4].Get<int32_t>();
        pos_ = laneB_[5].Get<int32_t>();
        tmp_[0] = laneB_[6].Get<int32_t>();
        tmp_[3] = laneB_[7].Get<int32_t>();
        tmp_[4] = laneB_[8].Get<int32_t>();
        c_ = laneB_[9].Get<int32_t>();
        nmaxc_ = laneB_[10].Get<int32_t>();
        nval_ = laneB_[11].Get<int32_t>();
        sbase_ = laneB_[12].Get<int32_t>();
        res_ = laneB_[13].Get<int32_t>();
        if (exact_) {  // two-word compares need the high words and more temporaries
            qhi_ = laneB_[14].Get<int32_t>();
            dhi_ = laneB_[15].Get<int32_t>();
            tmp_[1] = laneB_[16].Get<int32_t>();
            tmp_[2] = laneB_[17].Get<int32_t>();
            tmp_[5] = laneB_[18].Get<int32_t>();
        }
        stage_ = stageB_.Get<int32_t>();
        samp_ = sampB_.Get<int32_t>();
        qraw_ = qrawB_.Get<int32_t>();
        const int32_t gStride = (G_ * 4 + 31) / 32 * 8;  // int32 elements of one 32 B-aligned group array
        gNmax_ = groupB_.Get<int32_t>();
        gN_ = gNmax_[gStride];
        gSb_ = gNmax_[2 * gStride];
    }

    // deltas, lane tables, coarse index
    __aicore__ inline void LoadConstants(const GlobalTensor<int32_t>& dGm) {
        LocalTensor<int32_t> dl = deltaB_.Get<int32_t>();
        DataCopyPad(dl, dGm, DataCopyExtParams(1, (uint32_t)(K_ * 8), 0, 0, 0), DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        // coarse index: ckeys[j*S] for j < NS, one 32-byte UB block each (one strided DMA)
        if (NC_ > 0)
            DataCopyPad(samp_, keys32Gm_, DataCopyExtParams((uint16_t)NS_, 8, (uint32_t)((S_ - 1) * 8), 0, 0),
                        DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        Sync<HardEvent::MTE2_S>();
        Sync<HardEvent::MTE2_V>();
        for (int32_t k = 0; k < K_; ++k) delta_[k] = Word64(dl, 2 * k);
        for (int32_t g = 0; g < G_; ++g) {
            n_[g] = 0;
            sb_[g] = 0;
        }
        LaneTables();
        Gather(dlo_, dl, res_.ReinterpretCast<uint32_t>(), (uint32_t)0, (uint32_t)L_);
        if (exact_) Gather(dhi_, dl, res_.ReinterpretCast<uint32_t>(), (uint32_t)4, (uint32_t)L_);
        Muls(gbase_, gOff_.ReinterpretCast<int32_t>(), 2 * cap_, L_);  // 4g * 2cap = byte offset of group g's keys
    }

    // lane l = i*Kp + k (pad lanes k >= K repeat K-1): qIdx = 8i (query key in a tile), res_ = 8k (delta_k),
    // gOff = 4*(k / X) (the lane's group) -- built once per core with vector ops
    __aicore__ inline void LaneTables() {
        LocalTensor<int32_t> l = pos_, i = c_, k = nval_, g = sbase_, qi = qIdx_.ReinterpretCast<int32_t>();
        mxs_kernel::Iota(l, L_);
        mxs_kernel::DivSmall(i, k, l, KP_, L_);
        Mins(k, k, K_ - 1, L_);
        Muls(qi, i, 8, L_);
        Muls(res_, k, 8, L_);
        mxs_kernel::DivSmall(g, i, k, X_, L_);
        Muls(gOff_.ReinterpretCast<int32_t>(), g, 4, L_);
    }

    __aicore__ inline int64_t Word64(const LocalTensor<int32_t>& t, int32_t i) {
        const uint32_t lo = (uint32_t)t.GetValue(i);
        const int64_t hi = t.GetValue(i + 1);
        return (int64_t)(((uint64_t)hi << 32) | lo);
    }
    __aicore__ inline int64_t QueryKey(int32_t i) { return Word64(qraw_, 2 * i); }
    __aicore__ inline int64_t StagedKey(int32_t g, int64_t i) { return Word64(stage_, (int32_t)(2 * (g * cap_ + i))); }
    __aicore__ inline int64_t SampleKey(int64_t j) { return Word64(samp_, (int32_t)(8 * j)); }

    // first index i in [0, n_g) with staged key >= x (n_g if none): scalar binary search in UB
    __aicore__ inline int64_t StagedLowerBound(int32_t g, int64_t x) {
        int64_t lo = 0, hi = n_[g];
        while (lo < hi) {
            const int64_t mid = (lo + hi) / 2;
            if (StagedKey(g, mid) < x) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }
    // start of the coarse block holding lower_bound(x): j*S for the largest j with sample[j] < x
    __aicore__ inline int64_t CoarseStart(int64_t x) {
        int64_t lo = 0, hi = NS_;  // first j with sample[j] >= x
        while (lo < hi) {
            const int64_t mid = (lo + hi) / 2;
            if (SampleKey(mid) < x) lo = mid + 1;
            else hi = mid;
        }
        return lo == 0 ? 0 : (lo - 1) * S_;
    }
    // ckeys[from : from + cap) -> staged keys of group g
    __aicore__ inline void Stage(int32_t g, int64_t from) {
        const int64_t n = (NC_ - from) < cap_ ? (NC_ - from) : cap_;
        sb_[g] = from;
        n_[g] = n;
        if (n <= 0) {  // past the last candidate: nothing matches (the lanes' gathers stay in bounds)
            gNmax_.SetValue(g, 0);
            gN_.SetValue(g, 0);
            gSb_.SetValue(g, (int32_t)from);
            return;
        }
        Sync<HardEvent::V_MTE2>();  // the previous search's Gathers of this area are done
        DataCopyPad(stage_[g * cap_ * 2], keys32Gm_[from * 2], DataCopyExtParams(1, (uint32_t)(n * 8), 0, 0, 0),
                    DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        Sync<HardEvent::MTE2_S>();
        Sync<HardEvent::MTE2_V>();
        last_[g] = StagedKey(g, n - 1);
        gNmax_.SetValue(g, (int32_t)(n - 1));
        gN_.SetValue(g, (int32_t)n);
        gSb_.SetValue(g, (int32_t)from);
    }
    // every candidate key in [tmin, tmax] of group g is staged; the staged range starts at or before
    // lower_bound(tmin) because tiles (and bisected halves) are visited in ascending key order
    __aicore__ inline bool Covers(int32_t g, int64_t tmax) {
        return sb_[g] + n_[g] == NC_ || last_[g] > tmax;
    }
    __aicore__ inline bool Ensure(int32_t g, int64_t tmin, int64_t tmax) {
        if (staged_[g] && Covers(g, tmax)) return true;
        if (!(staged_[g] && n_[g] > 0 && last_[g] >= tmin)) {
            // the range moved past the staged keys: coarse index, then forward in staged blocks
            int64_t from = CoarseStart(tmin);
            if (staged_[g] && from < sb_[g]) from = sb_[g];
            Stage(g, from);
            while (sb_[g] + n_[g] < NC_ && last_[g] < tmin) Stage(g, sb_[g] + n_[g]);
        }
        staged_[g] = true;
        const int64_t lb = StagedLowerBound(g, tmin);
        if (lb > 0) Stage(g, sb_[g] + lb);  // the range starts at lower_bound(tmin): as far forward as it can reach
        return Covers(g, tmax);
    }

    __aicore__ inline void Tile(int64_t tl) {
        const int64_t s0 = tl * TQ_;
        const int32_t q = (int32_t)((N_ - s0) < TQ_ ? (N_ - s0) : TQ_);
        if (tilesDone_ > 0) {
            Sync<HardEvent::V_MTE2>();   // the previous tile's Gathers of qraw are done
            Sync<HardEvent::MTE3_V>();   // the previous tile's output DMA has read res
        }
        DataCopyPad(qraw_, q32Gm_[s0 * 2], DataCopyExtParams(1, (uint32_t)(q * 8), 0, 0, 0),
                    DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        Sync<HardEvent::MTE2_S>();
        Sync<HardEvent::MTE2_V>();
        int32_t stA[16], stB[16], sp = 0;
        stA[sp] = 0;
        stB[sp] = q;
        ++sp;
        while (sp > 0) {
            --sp;
            const int32_t a = stA[sp], b = stB[sp];
            const int64_t kA = QueryKey(a), kB = QueryKey(b - 1);
            bool fits = true;
            for (int32_t g = 0; g < G_ && fits; ++g)
                fits = Ensure(g, kA + delta_[g * X_], kB + delta_[g * X_ + X_ - 1]);
            if (!fits && b - a > 1) {
                const int32_t mid = (a + b) / 2;
                stA[sp] = mid; stB[sp] = b; ++sp;  // right half after the left one
                stA[sp] = a; stB[sp] = mid; ++sp;
                continue;
            }
            Search(a * KP_, (b - a) * KP_);
        }
        // lanes = rows [q][Kp]: one DMA of q rows of K int32
        Sync<HardEvent::V_MTE3>();
        DataCopyPad(outGm_[s0 * K_], res_, DataCopyExtParams((uint16_t)q, (uint32_t)(K_ * 4), 0, 0, 0));
        ++tilesDone_;
    }

    // targets of the lanes: query i + delta_k, as low words (and high words in exact mode)
    __aicore__ inline void Targets() {
        Gather(qlo_[l0_], qraw_, qIdx_[l0_], (uint32_t)0, (uint32_t)n_L_);
        if (!exact_) {
            Add(qlo_[l0_], qlo_[l0_], dlo_[l0_], n_L_);
            return;
        }
        Gather(qhi_[l0_], qraw_, qIdx_[l0_], (uint32_t)4, (uint32_t)n_L_);
        LocalTensor<int32_t> sum = T(4), carry = T(3);
        Add(sum, V(qlo_), V(dlo_), n_L_);
        LessUnsigned(carry, sum, V(qlo_), T(0), T(1), T(2), V(pos_));  // carry out of the low words
        Add(V(qhi_), V(qhi_), V(dhi_), n_L_);
        Add(V(qhi_), V(qhi_), carry, n_L_);
        Adds(V(qlo_), sum, 0, n_L_);
    }

    // 0/1 lanes: dst = (a == b) for any int32 (the wrapping difference is zero only when equal);
    // tmp distinct from dst
    __aicore__ inline void Equal(const LocalTensor<int32_t>& dst, const LocalTensor<int32_t>& a,
                                 const LocalTensor<int32_t>& b, const LocalTensor<int32_t>& tmp) {
        Sub(dst, a, b, n_L_);
        mxs_kernel::NonZero(dst, dst, tmp, n_L_);
        Muls(dst, dst, -1, n_L_);
        Adds(dst, dst, 1, n_L_);
    }
    // 0/1 lanes: dst = (a < b) as signed int32 without overflow: Min(a, b) == a and a != b.
    // dst, t1, t2 distinct from each other and from a, b
    __aicore__ inline void LessSigned(const LocalTensor<int32_t>& dst, const LocalTensor<int32_t>& a,
                                      const LocalTensor<int32_t>& b, const LocalTensor<int32_t>& t1,
                                      const LocalTensor<int32_t>& t2) {
        Min(t1, a, b, n_L_);
        Equal(dst, t1, a, t2);  // a <= b
        Equal(t1, a, b, t2);
        Sub(dst, dst, t1, n_L_);
    }
    // 0/1 lanes: dst = (a < b) as unsigned: flip the sign bits (adding INT32_MIN wraps exactly)
    __aicore__ inline void LessUnsigned(const LocalTensor<int32_t>& dst, const LocalTensor<int32_t>& a,
                                        const LocalTensor<int32_t>& b, const LocalTensor<int32_t>& ta,
                                        const LocalTensor<int32_t>& tb, const LocalTensor<int32_t>& t1,
                                        const LocalTensor<int32_t>& t2) {
        Adds(ta, a, INT32_MIN_V, n_L_);
        Adds(tb, b, INT32_MIN_V, n_L_);
        LessSigned(dst, ta, tb, t1, t2);
    }

    // res[l0, l0 + n) = position of each lane's target in the candidates, or -1
    __aicore__ inline void Search(int32_t l0, int32_t n) {
        l0_ = l0;
        n_L_ = n;
        Targets();
        // the lanes' group staging state, gathered from the per-group arrays that Stage() keeps
        Sync<HardEvent::S_V>();
        Gather(V(nmaxc_), gNmax_, gOff_[l0_], (uint32_t)0, (uint32_t)n_L_);
        Gather(V(nval_), gN_, gOff_[l0_], (uint32_t)0, (uint32_t)n_L_);
        Gather(V(sbase_), gSb_, gOff_[l0_], (uint32_t)0, (uint32_t)n_L_);
        Duplicate(V(pos_), 0, n_L_);
        LocalTensor<int32_t> off = T(3), lt = T(4);
        for (int32_t s = steps_ - 1; s >= 0; --s) {
            const int32_t step = 1 << s;
            Adds(off, V(pos_), step - 1, n_L_);
            Min(off, off, V(nmaxc_), n_L_);
            KeyLess(lt, off);                // staged[probe] < target
            Muls(lt, lt, step, n_L_);
            Add(V(pos_), V(pos_), lt, n_L_);
        }
        Min(V(pos_), V(pos_), V(nval_), n_L_);          // pos = number of staged keys < target
        Min(off, V(pos_), V(nmaxc_), n_L_);
        KeyEqual(lt, off);                   // staged[pos] == target
        Sub(off, V(nval_), V(pos_), n_L_);
        mxs_kernel::Positive(off, off, n_L_);  // and pos < n
        Mul(lt, lt, off, n_L_);
        Add(V(res_), V(sbase_), V(pos_), n_L_);
        Adds(V(res_), V(res_), 1, n_L_);
        Mul(V(res_), V(res_), lt, n_L_);
        Adds(V(res_), V(res_), -1, n_L_);
    }

    // byte offsets of the lanes' staged keys: idx*8 + the group's staging area (idx is overwritten)
    __aicore__ inline void KeyOffsets(const LocalTensor<int32_t>& idx) {
        Muls(idx, idx, 8, n_L_);
        Add(idx, idx, V(gbase_), n_L_);
    }
    // lt = (staged key at `idx` in the lane's group < lane target); uses tmp 0..2, V(c_), V(res_)
    __aicore__ inline void KeyLess(const LocalTensor<int32_t>& lt, const LocalTensor<int32_t>& idx) {
        KeyOffsets(idx);
        Gather(V(c_), stage_, idx.ReinterpretCast<uint32_t>(), (uint32_t)0, (uint32_t)n_L_);
        if (!exact_) {
            Sub(lt, V(qlo_), V(c_), n_L_);           // |target - key| < 2^30: the low words decide
            mxs_kernel::Positive(lt, lt, n_L_);
            return;
        }
        // key < target  <=>  hi(key) < hi(target), or hi equal and lo(key) <u lo(target)
        LocalTensor<int32_t> loLess = T(5);
        LessUnsigned(loLess, V(c_), V(qlo_), T(0), T(1), T(2), lt);
        Gather(V(c_), stage_, idx.ReinterpretCast<uint32_t>(), (uint32_t)4, (uint32_t)n_L_);
        Equal(T(0), V(c_), V(qhi_), T(1));
        Mul(loLess, loLess, T(0), n_L_);
        LessSigned(lt, V(c_), V(qhi_), T(0), T(1));
        Add(lt, lt, loLess, n_L_);
    }
    // eq = (staged key at `idx` in the lane's group == lane target); uses tmp 0..1, V(c_)
    __aicore__ inline void KeyEqual(const LocalTensor<int32_t>& eq, const LocalTensor<int32_t>& idx) {
        KeyOffsets(idx);
        Gather(V(c_), stage_, idx.ReinterpretCast<uint32_t>(), (uint32_t)0, (uint32_t)n_L_);
        Equal(eq, V(c_), V(qlo_), T(0));
        if (!exact_) return;
        Gather(V(c_), stage_, idx.ReinterpretCast<uint32_t>(), (uint32_t)4, (uint32_t)n_L_);
        Equal(T(1), V(c_), V(qhi_), T(0));
        Mul(eq, eq, T(1), n_L_);
    }

    // the lanes [l0, l0 + n) of a lane vector / of temporary i (the range of the current search)
    __aicore__ inline LocalTensor<int32_t> V(const LocalTensor<int32_t>& v) { return v[l0_]; }
    __aicore__ inline LocalTensor<int32_t> T(int32_t i) { return tmp_[i][l0_]; }

    static constexpr int32_t kLaneVectorsCompact = 14, kLaneVectorsExact = 19;
    TPipe pipe_;
    TBuf<TPosition::VECCALC> laneB_[kLaneVectorsExact], qrawB_, stageB_, sampB_, deltaB_, groupB_;
    LocalTensor<uint32_t> qIdx_, gOff_;
    LocalTensor<int32_t> dlo_, dhi_, gbase_, qlo_, qhi_, pos_, tmp_[6], c_, nmaxc_, nval_, sbase_, res_;
    LocalTensor<int32_t> stage_, samp_, qraw_, gNmax_, gN_, gSb_;
    GlobalTensor<int32_t> keys32Gm_, q32Gm_, outGm_;
    int64_t N_ = 0, NC_ = 0, S_ = 1, NS_ = 1, tilesDone_ = 0;
    int32_t K_ = 0, KP_ = 8, X_ = 1, G_ = 1, TQ_ = 64, L_ = 64, cap_ = 256, steps_ = 8, l0_ = 0, n_L_ = 0;
    bool exact_ = true;
    int64_t delta_[MAXK];
    int64_t sb_[MAXK], n_[MAXK], last_[MAXK];
    bool staged_[MAXK] = {};
};

}  // namespace

extern "C" __global__ __aicore__ void subm_map(GM_ADDR qkeys, GM_ADDR ckeys, GM_ADDR deltas, GM_ADDR nbrS,
                                              GM_ADDR workspace, GM_ADDR tiling) {
    (void)workspace;
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(SubmMapTilingData);
    GET_TILING_DATA_WITH_STRUCT(SubmMapTilingData, t, tiling);
    SubmMapKernel op;
    op.Run(qkeys, ckeys, deltas, nbrS, t);
}
