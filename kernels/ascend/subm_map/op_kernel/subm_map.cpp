// Submanifold neighbor map (AscendC, Atlas A2, vector-only kernel).
//
// Sorted-key neighbour lookup, used for BOTH map builders:
// Inputs: qkeys [M] int64 query base keys, sorted ascending; ckeys [N] int64 candidate (input voxel)
// keys on a padded grid, sorted ascending (stable sort on the host/torch_npu side); deltas [K] int64
// key offsets of the kernel window, increasing; aux (uint32 constant offset tables from SubmMapAux).
// Output: nbrS [M, K] int32: nbrS[s, k] = s' with ckeys[s'] == qkeys[s] + delta_k, or -1.
//   submanifold map: qkeys = ckeys = sorted voxel keys; the caller un-permutes
//     nbr[perm[s], k] = perm[nbrS[s, k]];
//   strided-conv map: qkeys = pack_in(o * stride) of the (unique, sorted) output voxels on the input
//     grid padded by `padding` below and by the reach of the kernel above; nbr[m, k] = perm[nbrS[m, k]].
//
// Why this shape: A2 has no int64 vector arithmetic, int32 vector compares are EQ-only, and there
// is no GM gather, so neither a hash table nor a dense volume map vectorises. Instead, for a tile
// of 64 consecutive sorted voxels and one offset k, the 64 query keys q_i = key_i + delta_k are
// sorted, so their matches lie in ONE window keys[lo:hi) that two searches find -- binary search
// in a block of 256 keys staged in UB from the previous position, galloping over GM only when the
// window lies beyond it (the only scalar work: O(log gap) scalar GM reads per (tile, group of offsets along x), not per
// voxel). Inside the window
// everything is int32 vector work: D[j][i] = q_i - c_j is computed exactly from the LOW 32-bit
// words (wrapping subtraction is exact because |q_i - c_j| <= span < 2^30, enforced by splitting
// the tile), rank_i = #{j: D > 0} and found_i = #{j: D >= 0} - rank_i via Maxs/Mins clamps and a
// tree of Adds, and nbrS = found ? lo + rank : -1. A window is ranked in chunks of `window`
// candidates whose counts add up; one wider than 4 chunks, or a tile spanning >= 2^30 keys, is
// bisected (a single query always fits). The [K][64] results are
// transposed to [64][K] with one vector Gather and written with one DMA per tile.
#include "kernel_operator.h"
#include "../op_host/subm_map_tiling_data.h"
#include "../../common/op_kernel/core_share.h"

using namespace AscendC;

namespace {

constexpr int32_t TILE = 64;
constexpr int32_t WIN_MAX = 128;  // the tiling picks win = 128 (K <= 27) or 64
constexpr int32_t MAXK = 125;
constexpr int64_t SPAN_LIMIT = 1ll << 30;
constexpr int64_t BLK = 256;  // candidate keys staged in UB per (tile, offset group)
constexpr int64_t CHUNKS = 4;  // windows up to CHUNKS * win are ranked in chunks; wider ones bisect the tile

class SubmMapKernel {
public:
    __aicore__ inline void Run(GM_ADDR qkeys, GM_ADDR ckeys, GM_ADDR deltas, GM_ADDR aux, GM_ADDR nbrS,
                               const SubmMapTilingData& t) {
        const int64_t core = GetBlockIdx();
        if (core >= t.usedAiv) return;
        const CoreShare share = ShareOfCore(t.numTiles, t.usedAiv, core);
        const int64_t tile0 = share.first, nt = share.count;
        N_ = t.numVoxels;
        NC_ = t.numCand;
        K_ = t.kvol;
        X_ = t.groupSize;
        win_ = t.window;
        keysGm_.SetGlobalBuffer((__gm__ int64_t*)ckeys, (uint64_t)NC_);
        keys32Gm_.SetGlobalBuffer((__gm__ int32_t*)ckeys, (uint64_t)NC_ * 2);
        q32Gm_.SetGlobalBuffer((__gm__ int32_t*)qkeys, (uint64_t)N_ * 2);
        GlobalTensor<int64_t> dGm;
        dGm.SetGlobalBuffer((__gm__ int64_t*)deltas, (uint64_t)K_);
        GlobalTensor<uint32_t> auxGm;
        auxGm.SetGlobalBuffer((__gm__ uint32_t*)aux, (uint64_t)(t.auxBytes / 4));
        outGm_.SetGlobalBuffer((__gm__ int32_t*)nbrS, (uint64_t)N_ * K_);
        for (int32_t k = 0; k < K_; ++k) {  // K scalar reads once per core
            delta_[k] = dGm.GetValue(k);
            cursor_[k] = 0;  // one cursor per offset group (first K/X entries used)
        }

        const uint32_t ktBytes = (uint32_t)(((TILE * K_ * 4) + 31) / 32 * 32);
        pipe_.InitBuffer(qrawB_, 512);
        pipe_.InitBuffer(qloB_, 256);
        pipe_.InitBuffer(qdlB_, 256);
        pipe_.InitBuffer(crawB_, win_ * 8);
        pipe_.InitBuffer(cbB_, win_ * TILE * 4);
        pipe_.InitBuffer(dB_, win_ * TILE * 4);
        pipe_.InitBuffer(gB_, win_ * TILE * 4);
        pipe_.InitBuffer(bcastB_, win_ * TILE * 4);
        pipe_.InitBuffer(resAllB_, ktBytes);
        pipe_.InitBuffer(trB_, ktBytes);
        pipe_.InitBuffer(outB_, ktBytes);
        pipe_.InitBuffer(scrB_, 4 * 256);
        pipe_.InitBuffer(blkB_, BLK * 8);
        pipe_.InitBuffer(accB_, X_ * 2 * TILE * 4);
        qraw_ = qrawB_.Get<int32_t>(); qlo_ = qloB_.Get<int32_t>(); qdl_ = qdlB_.Get<int32_t>();
        craw_ = crawB_.Get<int32_t>(); cb_ = cbB_.Get<int32_t>(); D_ = dB_.Get<int32_t>(); G_ = gB_.Get<int32_t>();
        bcast_ = bcastB_.Get<uint32_t>(); resAll_ = resAllB_.Get<int32_t>(); tr_ = trB_.Get<uint32_t>();
        out_ = outB_.Get<int32_t>();
        blk_ = blkB_.Get<int32_t>();
        acc_ = accB_.Get<int32_t>();
        LocalTensor<int32_t> scr = scrB_.Get<int32_t>();
        F_ = scr; R_ = scr[64]; M1_ = scr[128];

        // constant tables: broadcast offsets [WIN][TILE] and transpose offsets [TILE][K]
        DataCopy(bcast_, auxGm, win_ * TILE);
        DataCopy(tr_, auxGm[win_ * TILE], TILE * K_);
        SetFlag<HardEvent::MTE2_V>(0);
        WaitFlag<HardEvent::MTE2_V>(0);
        Duplicate(M1_, (int32_t)-1, TILE);

        for (int64_t tl = tile0; tl < tile0 + nt; ++tl) Tile(tl);
    }

private:
    __aicore__ inline int64_t KeyAt(int32_t i) {  // key of lane i of the current tile (scalar UB reads)
        const uint32_t lo = (uint32_t)qraw_.GetValue(2 * i);
        const int64_t hi = qraw_.GetValue(2 * i + 1);
        return (int64_t)(((uint64_t)hi << 32) | lo);
    }
    // first index >= from with keys[idx] >= x (galloping, then binary search)
    __aicore__ inline int64_t Gallop(int64_t from, int64_t x) {
        if (from >= NC_ || keysGm_.GetValue(from) >= x) return from;
        int64_t lo = from, step = 1;  // keys[lo] < x
        while (lo + step < NC_ && keysGm_.GetValue(lo + step) < x) { lo += step; step <<= 1; }
        int64_t hi = (lo + step < NC_) ? lo + step : NC_;  // keys[hi] >= x or hi == NC
        while (hi - lo > 1) {
            const int64_t mid = lo + (hi - lo) / 2;
            if (keysGm_.GetValue(mid) < x) lo = mid; else hi = mid;
        }
        return hi;
    }
    // key of candidate i from the UB-staged block (scalar UB reads, ~20x cheaper than GM)
    __aicore__ inline int64_t BlkKey(int64_t i) {
        const int32_t j = (int32_t)(i - blk0_);
        const uint32_t lo = (uint32_t)blk_.GetValue(2 * j);
        const int64_t hi = blk_.GetValue(2 * j + 1);
        return (int64_t)(((uint64_t)hi << 32) | lo);
    }
    // first index >= from with keys[idx] >= x: binary search inside the staged block when the
    // answer lies there (the common case), galloping over GM otherwise
    __aicore__ inline int64_t Find(int64_t from, int64_t x) {
        const int64_t bEnd = blk0_ + bn_;
        if (from >= blk0_ && from < bEnd) {
            if (BlkKey(from) >= x) return from;
            if (BlkKey(bEnd - 1) >= x) {
                int64_t lo = from, hi = bEnd - 1;  // keys[lo] < x <= keys[hi]
                while (hi - lo > 1) {
                    const int64_t mid = lo + (hi - lo) / 2;
                    if (BlkKey(mid) < x) lo = mid; else hi = mid;
                }
                return hi;
            }
            from = bEnd;
        }
        return Gallop(from, x);
    }
    // stage keys[from : from + BLK) in UB (one DMA)
    __aicore__ inline void Stage(int64_t from) {
        blk0_ = from;
        bn_ = (NC_ - from) < BLK ? (NC_ - from) : BLK;
        if (bn_ <= 0) return;
        LoadSync();
        DataCopyPad(blk_, keys32Gm_[blk0_ * 2], DataCopyExtParams(1, (uint32_t)(bn_ * 8), 0, 0, 0),
                    DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        LoadDone();
    }
    __aicore__ inline void LoadSync() { SetFlag<HardEvent::V_MTE2>(0); WaitFlag<HardEvent::V_MTE2>(0); }
    __aicore__ inline void LoadDone() { SetFlag<HardEvent::MTE2_V>(0); WaitFlag<HardEvent::MTE2_V>(0); }

    __aicore__ inline void Tile(int64_t tl) {
        const int64_t s0 = tl * TILE;
        const int32_t q = (int32_t)((N_ - s0) < TILE ? (N_ - s0) : TILE);
        LoadSync();
        DataCopyPad(qraw_, q32Gm_[s0 * 2], DataCopyExtParams(1, (uint32_t)(q * 8), 0, 0, 0),
                    DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        LoadDone();
        uint64_t cnt = 0;
        GatherMask(qlo_, qraw_, (uint8_t)1, false, 0, GatherMaskParams(1, 2, 8, 0), cnt);  // low words
        // Offsets that differ only along the last axis (k = g*X + x, deltas increasing in x) share
        // one pair of searches, one window DMA and one broadcast Gather.
        for (int32_t g = 0; g < K_ / X_; ++g) {
            const int32_t k0 = g * X_;
            const int64_t dmin = delta_[k0], dmax = delta_[k0 + X_ - 1];
            // stage keys[cursor : cursor + BLK) in UB: the windows of this tile usually lie there
            Stage(cursor_[g]);
            int32_t stA[16], stB[16], sp = 0;
            stA[sp] = 0; stB[sp] = q; ++sp;
            while (sp > 0) {
                --sp;
                const int32_t a = stA[sp], b = stB[sp];
                const int64_t ka = KeyAt(a), kb = KeyAt(b - 1);
                const int64_t lo = Find(cursor_[g], ka + dmin);
                if (lo >= blk0_ + bn_ && lo < NC_) Stage(lo);  // the window moved past the block
                const int64_t hi = Find(lo, kb + dmax + 1);
                const int64_t w = hi - lo;
                if ((w > CHUNKS * win_ || kb - ka + (dmax - dmin) >= SPAN_LIMIT) && b - a > 1) {
                    const int32_t mid = (a + b) / 2;
                    stA[sp] = mid; stB[sp] = b; ++sp;  // right half after the left one
                    stA[sp] = a; stB[sp] = mid; ++sp;
                    continue;
                }
                cursor_[g] = lo;
                uint64_t mask[2] = {((b - a) == 64 ? ~0ull : ((1ull << (b - a)) - 1)) << a, 0};
                if (w == 0) {
                    for (int32_t x = 0; x < X_; ++x) Duplicate(resAll_[(k0 + x) * TILE], (int32_t)-1, mask, 1, 1, 8);
                    continue;
                }
                // windows wider than win_ are ranked in chunks whose counts add up
                for (int64_t c0 = lo; c0 < hi; c0 += win_) {
                    const int32_t cw = (int32_t)((hi - c0) < win_ ? (hi - c0) : win_);
                    if (c0 + cw <= blk0_ + bn_) {  // chunk inside the staged block: no DMA
                        Gather(cb_, blk_, bcast_, (uint32_t)((c0 - blk0_) * 8), (uint32_t)(cw * TILE));
                    } else {
                        LoadWindow(c0, cw);
                    }
                    for (int32_t x = 0; x < X_; ++x) {
                        Adds(qdl_, qlo_, (int32_t)(uint32_t)(uint64_t)delta_[k0 + x], TILE);
                        RankChunk(cw);
                        LocalTensor<int32_t> accR = acc_[x * 2 * TILE], accF = acc_[(x * 2 + 1) * TILE];
                        if (c0 == lo) {
                            Adds(accR, G_, (int32_t)0, TILE);
                            Adds(accF, F_, (int32_t)0, TILE);
                        } else {
                            Add(accR, accR, G_, TILE);
                            Add(accF, accF, F_, TILE);
                        }
                    }
                }
                for (int32_t x = 0; x < X_; ++x) {
                    // R = found * (lo + rank + 1) - 1
                    LocalTensor<int32_t> accR = acc_[x * 2 * TILE], accF = acc_[(x * 2 + 1) * TILE];
                    Adds(R_, accR, (int32_t)(lo + 1), TILE);
                    Mul(R_, R_, accF, TILE);
                    Adds(resAll_[(k0 + x) * TILE], R_, (int32_t)-1, mask, 1, UnaryRepeatParams());
                }
            }
        }
        // [K][64] -> [q][K] and one DMA of the tile's rows
        SetFlag<HardEvent::MTE3_V>(0);
        WaitFlag<HardEvent::MTE3_V>(0);
        Gather(out_, resAll_, tr_, 0, (uint32_t)(q * K_));
        SetFlag<HardEvent::V_MTE3>(0);
        WaitFlag<HardEvent::V_MTE3>(0);
        DataCopyPad(outGm_[s0 * K_], out_, DataCopyExtParams(1, (uint32_t)(q * K_ * 4), 0, 0, 0));
    }

    // candidates keys[lo:lo+w) -> cb[j][i] = low32(c_j), w <= WIN
    __aicore__ inline void LoadWindow(int64_t lo, int32_t w) {
        LoadSync();
        DataCopyPad(craw_, keys32Gm_[lo * 2], DataCopyExtParams(1, (uint32_t)(w * 8), 0, 0, 0),
                    DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        LoadDone();
        Gather(cb_, craw_, bcast_, 0, (uint32_t)(w * TILE));
    }
    // G_[i] = #{c_j < q_i}, F_[i] = #{c_j == q_i} for the queries qdl_ against the loaded chunk
    __aicore__ inline void RankChunk(int32_t w) {
        Sub(D_, qdl_, cb_, (uint64_t)TILE, (uint8_t)w, BinaryRepeatParams(1, 1, 1, 8, 0, 8));  // D = q - c
        // only the next power of two >= w rows take part; empty rows count as "c > q"
        int32_t wp = 1;
        while (wp < w) wp <<= 1;
        if (w < wp) Duplicate(D_[w * TILE], (int32_t)-1, (wp - w) * TILE);
        const int32_t n = wp * TILE;
        Maxs(G_, D_, (int32_t)0, n);
        Mins(G_, G_, (int32_t)1, n);     // 1 where c < q
        Mins(D_, D_, (int32_t)0, n);
        Maxs(D_, D_, (int32_t)-1, n);    // -1 where c > q
        for (int32_t h = wp / 2; h >= 1; h /= 2) {
            Add(G_, G_, G_[h * TILE], h * TILE);
            Add(D_, D_, D_[h * TILE], h * TILE);
        }
        // found = wp + sum(-1 where c > q) - rank  (0 or 1)
        Sub(F_, D_, G_, TILE);
        Adds(F_, F_, wp, TILE);
    }

    TPipe pipe_;
    TBuf<TPosition::VECCALC> accB_, blkB_, qrawB_, qloB_, qdlB_, crawB_, cbB_, dB_, gB_, bcastB_, resAllB_, trB_, outB_, scrB_;
    LocalTensor<int32_t> acc_, blk_, qraw_, qlo_, qdl_, craw_, cb_, D_, G_, resAll_, out_, F_, R_, M1_;
    LocalTensor<uint32_t> bcast_, tr_;
    GlobalTensor<int64_t> keysGm_;
    GlobalTensor<int32_t> keys32Gm_, q32Gm_, outGm_;
    int64_t N_ = 0, NC_ = 0, blk0_ = 0, bn_ = 0;
    int32_t K_ = 0, X_ = 1, win_ = 64;
    int64_t delta_[MAXK];
    int64_t cursor_[MAXK];
};

}  // namespace

extern "C" __global__ __aicore__ void subm_map(GM_ADDR qkeys, GM_ADDR ckeys, GM_ADDR deltas, GM_ADDR aux, GM_ADDR nbrS,
                                              GM_ADDR workspace, GM_ADDR tiling) {
    (void)workspace;
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    GET_TILING_DATA_WITH_STRUCT(SubmMapTilingData, t, tiling);
    SubmMapKernel op;
    op.Run(qkeys, ckeys, deltas, aux, nbrS, t);
}
