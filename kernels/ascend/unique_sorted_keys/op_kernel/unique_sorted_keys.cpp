// Unique of sorted int64 keys (AscendC, Atlas A2, vector-only kernel with one SyncAll).
//
// Input: keys int64 [C], sorted ascending, INT64_MAX sentinels (pairs that reach no output) last.
// Outputs: ukeys int64 [C] whose first M entries are the distinct non-sentinel keys in ascending
// order, count int32 [1] = M. Workspace: C keys + a 32-byte count slot per core.
//
// Phase 1, per core over its contiguous share of tiles: a key survives when it differs from its
// predecessor (the last key of the previous tile or core, read from GM; -1 before key 0) and is
// not the sentinel. Keys are two int32 words and A2 compares int32 only for equality, so
// "differs" is computed with clamps as (lo != lo') | (hi != hi') in 0/1 lanes; the flags, cast to
// float, become a bitmap with one CompareScalar (int32 compares are documented from CANN 8.2 only,
// float ones in every release; Compares is the 9.0 spelling) and two GatherMask calls (Counter mode) compact the low and high words;
// one Gather interleaves the survivors back into int64 and one DMA appends them to the core's
// workspace region. The core then publishes its survivor count.
// Phase 2, after SyncAll: each core sums the counts of the cores before it (its output offset,
// <= #cores scalar reads) and copies its region to ukeys[offset:]; the last core writes M.
#include "kernel_operator.h"
#include "unique_sorted_keys_tiling_data.h"
#include "key_vec.h"
#include "core_share.h"

using namespace AscendC;
using namespace mxs_kernel;

namespace {

class UniqueSortedKeysKernel {
public:
    __aicore__ inline void Run(GM_ADDR keys, GM_ADDR ukeys, GM_ADDR count, GM_ADDR user,
                               const UniqueSortedKeysTilingData& t) {
        t_ = t;
        core_ = GetBlockIdx();
        T_ = t_.tileKeys;
        const CoreShare share = ShareOfCore(t_.numTiles, t_.usedAiv, core_);
        const int64_t tile0 = share.first, nt = share.count;
        const int64_t segBegin = tile0 * T_;
        keysGm_.SetGlobalBuffer((__gm__ int32_t*)keys, (uint64_t)t_.numKeys * 2);
        outGm_.SetGlobalBuffer((__gm__ int32_t*)ukeys, (uint64_t)t_.numKeys * 2);
        countGm_.SetGlobalBuffer((__gm__ int32_t*)count, 1);
        wsKeys_.SetGlobalBuffer((__gm__ int32_t*)user, (uint64_t)t_.numKeys * 2);
        wsCount_.SetGlobalBuffer((__gm__ int32_t*)(user + t_.countOffset), (uint64_t)t_.usedAiv * 8);
        InitBuffers();
        BuildTables();

        int64_t kept = 0;
        for (int64_t tl = tile0; tl < tile0 + nt; ++tl) kept += CompactTile(tl, segBegin + kept);
        PublishCount(kept);
        PipeBarrier<PIPE_ALL>();  // this core's workspace writes are done before anyone reads counts
        SyncAll();
        int64_t offset = 0, total = 0;
        ReadOffsets(offset, total);
        CopyOut(segBegin, kept, offset);
        if (core_ == t_.usedAiv - 1) WriteCount(total);
    }

private:
    // same order and sizes as UniqueSortedKeysUbBytes
    __aicore__ inline void InitBuffers() {
        const uint32_t B = (uint32_t)T_ * 4;
        pipe_.InitBuffer(inQ_, 2, (uint32_t)(((T_ + 1) * 8 + 31) / 32 * 32));
        pipe_.InitBuffer(tabB_, 3 * B);
        pipe_.InitBuffer(keyB_, 4 * B);
        pipe_.InitBuffer(flagB_, 4 * B);
        pipe_.InitBuffer(bitsB_, (uint32_t)((T_ / 8 + 31) / 32 * 32));
        pipe_.InitBuffer(compactB_, 2 * B);
        pipe_.InitBuffer(outQ_, 2, 2 * B);
        pipe_.InitBuffer(copyQ_, 2, 2 * B);
        pipe_.InitBuffer(cntB_, (uint32_t)((t_.usedAiv * 32 + 31) / 32 * 32));
    }
    // off8[i] = 8i (byte offset of key i in a tile), ilv = (lo, hi) -> int64 interleave offsets
    __aicore__ inline void BuildTables() {
        LocalTensor<int32_t> tab = tabB_.Get<int32_t>(), scratch = keyB_.Get<int32_t>();
        InterleaveOffsets(tab[T_], scratch, T_);
        Muls(tab, scratch, 8, T_);  // scratch holds 0..2T-1
        off8_ = tab;
        ilv_ = tab[T_].ReinterpretCast<uint32_t>();
    }
    __aicore__ inline LocalTensor<int32_t> Key(int32_t i) { return keyB_.Get<int32_t>()[i * T_]; }
    __aicore__ inline LocalTensor<int32_t> Flag(int32_t i) { return flagB_.Get<int32_t>()[i * T_]; }

    // survivors of keys [s0, s0 + q) appended at workspace key index wsPos; returns their number
    __aicore__ inline int64_t CompactTile(int64_t tl, int64_t wsPos) {
        const int64_t s0 = tl * T_;
        const int32_t q = (int32_t)((t_.numKeys - s0) < T_ ? (t_.numKeys - s0) : T_);
        LoadWithPredecessor(s0, q);
        KeepFlags(q);
        LocalTensor<uint8_t> bits = bitsB_.Get<uint8_t>();
        LocalTensor<float> keepF = Flag(1).ReinterpretCast<float>();  // Flag(1..3) are free after KeepFlags
        Cast(keepF, Flag(0), RoundMode::CAST_NONE, T_);
        CompareScalar(bits, keepF, 1.0f, CMPMODE::EQ, (uint32_t)T_);
        LocalTensor<uint32_t> pattern = bits.ReinterpretCast<uint32_t>();
        LocalTensor<int32_t> compact = compactB_.Get<int32_t>();
        uint64_t cnt = 0, cntHi = 0;
        GatherMask(compact, Key(0), pattern, true, (uint32_t)T_, GatherMaskParams(1, 1, 8, 8), cnt);
        GatherMask(compact[T_], Key(1), pattern, true, (uint32_t)T_, GatherMaskParams(1, 1, 8, 8), cntHi);
        if (cnt == 0) return 0;
        LocalTensor<int32_t> stage = outQ_.AllocTensor<int32_t>();
        Gather(stage, compact, ilv_, 0, (uint32_t)(2 * cnt));
        outQ_.EnQue(stage);
        stage = outQ_.DeQue<int32_t>();
        DataCopyPad(wsKeys_[wsPos * 2], stage, DataCopyExtParams(1, (uint32_t)(cnt * 8), 0, 0, 0));
        outQ_.FreeTensor(stage);
        return (int64_t)cnt;
    }

    // Key(0/1) = lo/hi words of keys s0.., Key(2/3) = lo/hi of their predecessors
    __aicore__ inline void LoadWithPredecessor(int64_t s0, int32_t q) {
        LocalTensor<int32_t> raw = inQ_.AllocTensor<int32_t>();
        if (s0 == 0) {  // no predecessor: two pad words of -1 make it the key -1, below every key
            DataCopyPad(raw, keysGm_[0], DataCopyExtParams(1, (uint32_t)(q * 8), 0, 0, 0),
                        DataCopyPadExtParams<int32_t>(true, 2, 0, -1));
        } else {
            DataCopyPad(raw, keysGm_[(s0 - 1) * 2], DataCopyExtParams(1, (uint32_t)((q + 1) * 8), 0, 0, 0),
                        DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        }
        inQ_.EnQue(raw);
        raw = inQ_.DeQue<int32_t>();
        LocalTensor<uint32_t> off = off8_.ReinterpretCast<uint32_t>();
        Gather(Key(0), raw, off, 8, (uint32_t)T_);
        Gather(Key(1), raw, off, 12, (uint32_t)T_);
        Gather(Key(2), raw, off, 0, (uint32_t)T_);
        Gather(Key(3), raw, off, 4, (uint32_t)T_);
        inQ_.FreeTensor(raw);
    }

    // Flag(0) = 1 for lanes i < q whose key differs from its predecessor and is not the sentinel
    __aicore__ inline void KeepFlags(int32_t q) {
        LocalTensor<int32_t> keep = Flag(0), b = Flag(1), t1 = Flag(2), tmp = Flag(3);
        Sub(keep, Key(0), Key(2), T_);
        NonZero(keep, keep, tmp, T_);
        Sub(b, Key(1), Key(3), T_);
        NonZero(b, b, tmp, T_);
        Add(keep, keep, b, T_);
        Mins(keep, keep, 1, T_);  // differs in either word
        Adds(b, Key(0), -kSentinelLo, T_);
        NonZero(b, b, tmp, T_);
        Adds(t1, Key(1), -kSentinelHi, T_);
        NonZero(t1, t1, tmp, T_);
        Add(b, b, t1, T_);
        Mins(b, b, 1, T_);        // not the sentinel
        Mul(keep, keep, b, T_);
        if (q < T_) {             // lanes past the last key: 8q - 8i >= 1 iff i < q
            Muls(t1, off8_, -1, T_);
            Adds(t1, t1, 8 * q, T_);
            Positive(t1, t1, T_);
            Mul(keep, keep, t1, T_);
        }
    }

    __aicore__ inline void PublishCount(int64_t kept) {
        LocalTensor<int32_t> cnt = cntB_.Get<int32_t>();
        cnt.SetValue(0, (int32_t)kept);
        DataCopyPad(wsCount_[core_ * 8], cnt, DataCopyExtParams(1, 4, 0, 0, 0));
    }
    // offset = survivors of the cores before this one; total (last core only) = M
    __aicore__ inline void ReadOffsets(int64_t& offset, int64_t& total) {
        LocalTensor<int32_t> cnt = cntB_.Get<int32_t>();
        DataCopyPad(cnt, wsCount_, DataCopyExtParams((uint16_t)t_.usedAiv, 4, 28, 0, 0),
                    DataCopyPadExtParams<int32_t>(false, 0, 0, 0));  // slot i -> cnt[8i]
        const int64_t upTo = core_ == t_.usedAiv - 1 ? t_.usedAiv : core_;
        for (int64_t i = 0; i < upTo; ++i) {
            const int64_t v = cnt.GetValue((uint32_t)(i * 8));
            if (i < core_) offset += v;
            total += v;
        }
    }
    // workspace keys [segBegin, segBegin + kept) -> ukeys[offset, offset + kept), T keys per DMA
    __aicore__ inline void CopyOut(int64_t segBegin, int64_t kept, int64_t offset) {
        for (int64_t o = 0; o < kept; o += T_) {
            const uint32_t bytes = (uint32_t)(((kept - o) < T_ ? (kept - o) : T_) * 8);
            LocalTensor<int32_t> buf = copyQ_.AllocTensor<int32_t>();
            DataCopyPad(buf, wsKeys_[(segBegin + o) * 2], DataCopyExtParams(1, bytes, 0, 0, 0),
                        DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
            copyQ_.EnQue(buf);
            buf = copyQ_.DeQue<int32_t>();
            DataCopyPad(outGm_[(offset + o) * 2], buf, DataCopyExtParams(1, bytes, 0, 0, 0));
            copyQ_.FreeTensor(buf);
        }
    }
    __aicore__ inline void WriteCount(int64_t total) {
        LocalTensor<int32_t> cnt = cntB_.Get<int32_t>();
        cnt.SetValue(0, (int32_t)total);
        DataCopyPad(countGm_, cnt, DataCopyExtParams(1, 4, 0, 0, 0));
    }

    UniqueSortedKeysTilingData t_;
    TPipe pipe_;
    TQue<TPosition::VECIN, 1> inQ_;
    TQue<TPosition::VECOUT, 1> outQ_;
    TQueBind<TPosition::VECIN, TPosition::VECOUT, 1> copyQ_;
    TBuf<TPosition::VECCALC> tabB_, keyB_, flagB_, bitsB_, compactB_, cntB_;
    LocalTensor<int32_t> off8_;
    LocalTensor<uint32_t> ilv_;
    GlobalTensor<int32_t> keysGm_, outGm_, countGm_, wsKeys_, wsCount_;
    int64_t core_ = 0;
    int32_t T_ = 64;
};

}  // namespace

extern "C" __global__ __aicore__ void unique_sorted_keys(GM_ADDR keys, GM_ADDR ukeys, GM_ADDR count, GM_ADDR workspace,
                                                         GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIV_1_0);  // vector only, but with the hardware SyncAll
    REGISTER_TILING_DEFAULT(UniqueSortedKeysTilingData);
    GET_TILING_DATA_WITH_STRUCT(UniqueSortedKeysTilingData, t, tiling);
    GM_ADDR user = GetUserWorkspace(workspace);
    if (user == nullptr) return;
    UniqueSortedKeysKernel op;
    op.Run(keys, ukeys, count, user, t);
}
