// Vector building blocks of the int32-lane kernels (conv_out_keys, unique_sorted_keys, subm_map,
// the window gather).
//
// A2 vector units have no int64 arithmetic and compare int32 only for equality, so an int64 key
// lives in UB as two int32 words (little endian: low word first) and every test on it is written
// with int32 clamps (Maxs/Mins) that yield 0/1 lanes instead of compare bitmaps.
#pragma once
#include "kernel_operator.h"

namespace mxs_kernel {

using AscendC::LocalTensor;

// INT64_MAX as (low, high) words: the key of an (input, offset) pair that reaches no output. It is
// larger than every valid key, so invalid pairs sort last.
constexpr int32_t kSentinelLo = -1;
constexpr int32_t kSentinelHi = 0x7fffffff;

// A Set/Wait pair on `E` with an id taken from the live pipe's pool: TPipe/TQue allocate their own
// event ids from the same pool, so a literal id could be one a queue's hidden event holds.
template <AscendC::HardEvent E>
__aicore__ inline void PipeSync() {
    const int32_t id = (int32_t)AscendC::GetTPipePtr()->FetchEventID(E);
    AscendC::SetFlag<E>(id);
    AscendC::WaitFlag<E>(id);
}

// dst[i] = i for i < n (n a multiple of 8): eight scalar seeds, then doubling Adds.
__aicore__ inline void Iota(const LocalTensor<int32_t>& dst, int32_t n) {
    for (int32_t i = 0; i < 8; ++i) dst.SetValue(i, i);
    PipeSync<AscendC::HardEvent::S_V>();
    for (int32_t len = 8; len < n; len *= 2) AscendC::Adds(dst[len], dst, len, (n - len) < len ? (n - len) : len);
}

// q = floor(i / d), r = i - q*d for 0 <= i < 2^24 and d >= 1 (q, r, i distinct): a float estimate of
// q (off by at most one whatever the rounding of 1/d), then the exact remainder's own float floor
// (|r| < 2d, so exact) corrects it.
__aicore__ inline void DivSmall(const LocalTensor<int32_t>& q, const LocalTensor<int32_t>& r,
                                const LocalTensor<int32_t>& i, int32_t d, int32_t n) {
    LocalTensor<float> f = r.ReinterpretCast<float>();
    const float inv = 1.0f / (float)d;
    AscendC::Cast(f, i, AscendC::RoundMode::CAST_NONE, n);
    AscendC::Muls(f, f, inv, n);
    AscendC::Cast(q, f, AscendC::RoundMode::CAST_FLOOR, n);
    AscendC::Muls(r, q, -d, n);
    AscendC::Add(r, r, i, n);                       // i - q*d, in [-d, 2d)
    AscendC::Cast(f, r, AscendC::RoundMode::CAST_NONE, n);
    AscendC::Adds(f, f, 0.5f, n);
    AscendC::Muls(f, f, inv, n);
    AscendC::Cast(r, f, AscendC::RoundMode::CAST_FLOOR, n);  // -1, 0 or 1
    AscendC::Add(q, q, r, n);
    AscendC::Muls(r, q, -d, n);
    AscendC::Add(r, r, i, n);
}

// Gather byte offsets that interleave lo[0:T) and hi[0:T), stored back to back, into int64 words
// (lo0, hi0, lo1, hi1, ...): off[2i] = 4i, off[2i+1] = 4T + 4i. scratch: 4T int32 lanes; on return
// scratch[0:2T) still holds 0..2T-1 (callers derive their other tables from it).
__aicore__ inline void InterleaveOffsets(const LocalTensor<int32_t>& off, const LocalTensor<int32_t>& scratch, int32_t T) {
    const int32_t n = 2 * T;
    LocalTensor<int32_t> j = scratch;
    LocalTensor<int32_t> tmp = scratch[n];
    LocalTensor<float> fl = tmp.ReinterpretCast<float>();
    Iota(j, n);
    AscendC::Cast(fl, j, AscendC::RoundMode::CAST_NONE, n);
    AscendC::Muls(fl, fl, 0.5f, n);
    AscendC::Cast(off, fl, AscendC::RoundMode::CAST_FLOOR, n);  // i = floor(j / 2)
    AscendC::Muls(tmp, off, -2, n);
    AscendC::Add(tmp, tmp, j, n);                                // parity j - 2i
    AscendC::Muls(off, off, 4, n);
    AscendC::Muls(tmp, tmp, 4 * T, n);
    AscendC::Add(off, off, tmp, n);
}

// dst = (x != 0) as 0/1, for any int32 x including INT32_MIN (no negation that could overflow).
// dst may alias x; tmp must not.
__aicore__ inline void NonZero(const LocalTensor<int32_t>& dst, const LocalTensor<int32_t>& x,
                               const LocalTensor<int32_t>& tmp, int32_t n) {
    AscendC::Mins(tmp, x, 0, n);
    AscendC::Maxs(tmp, tmp, -1, n);  // -1 where x < 0
    AscendC::Maxs(dst, x, 0, n);
    AscendC::Mins(dst, dst, 1, n);   // 1 where x > 0
    AscendC::Sub(dst, dst, tmp, n);
}

// dst = (x >= 1) as 0/1 for x > INT32_MIN (clamp of x to [0, 1]).
__aicore__ inline void Positive(const LocalTensor<int32_t>& dst, const LocalTensor<int32_t>& x, int32_t n) {
    AscendC::Maxs(dst, x, 0, n);
    AscendC::Mins(dst, dst, 1, n);
}

}  // namespace mxs_kernel
