// Strided-conv output keys (AscendC, Atlas A2, vector-only kernel).
//
// Input: indices int32 [N, 1 + nd] = (batch, coords). Output: keys int64 [J, N], slot-major: the
// packed key (kernels/common/coord_pack.h on the output grid) of the output voxel that input row n
// feeds through slot j, or INT64_MAX when that slot reaches no output voxel, so that invalid pairs
// sort last. Along axis d only the kernel positions kp with kp*dil = c + p (mod s) can take
// coordinate c to an output: one residue class modulo step = s / gcd(s, dil), at most J_d =
// ceil(k / step) members; axis slot j is the class' j-th member, ascending, and slot j of the row
// is the row-major multi-index of the axis slots (kernels/common/conv_rules.h conv_out_slots;
// J = prod(J_d); at stride 1 slot j is kernel offset j). Every (row, offset) pair that reaches an
// output appears exactly once.
//
// Per tile of T input rows (T lanes; all of this is T-wide vector work, no per-voxel scalar code):
//  1. one DMA of the rows, one Gather per column -> batch and coordinate vectors;
//  2. per axis d, the lattice start of every lane: u = c + p, q = floor(u / s) and r = u mod s from
//     a float estimate corrected once by the exact int32 remainder; the class' least member
//     first = r and o_0 = q when dil == 1 (first = 0, o_0 = u at stride 1), else the one candidate
//     kp0 < min(k, step) with kp0*dil mod s == r gives first = kp0 and o_0 = q - floor(kp0*dil / s)
//     (first = k, i.e. no slot, when none matches); then per axis slot j (sum(J_d) of them, not
//     sum(k)): o_j = o_0 - j*dil/gcd(s, dil), valid = (first + j*step < k) and 0 <= o_j < out[d],
//     and the slot's "term" of the key words: valid flag, low word o * S mod 2^32 and, for keys
//     that may reach 2^32, the byte columns and the high-word part (see conv_out_keys_tiling_data.h
//     for the arithmetic);
//  3. the J slots are walked as a row-major odometer over the axes; running sums of the terms
//     are refreshed only for the axes whose slot changed, so a slot costs one Mul and one Add over
//     the term vectors, plus the float-exact carry chain of the high word for wide keys; invalid
//     lanes become the sentinel;
//  4. one Gather per slot interleaves the (lo, hi) words into int64 keys; G slots leave with one
//     strided DMA from a double-buffered VECOUT queue.
// Scalar work: the eight Iota seeds of the constant tables per core and the candidates' residues
// per (tile, axis), nothing per voxel or slot.
#include "kernel_operator.h"
#include "conv_out_keys_tiling_data.h"
#include "key_vec.h"
#include "core_share.h"

using namespace AscendC;
using namespace mxs_kernel;

namespace {

// parts of one term (T lanes each)
constexpr int32_t V_VALID = 0;  // 1 where this axis slot reaches an output
constexpr int32_t V_LO = 1;     // low key word
constexpr int32_t V_COL = 2;    // byte columns 0..3 of the low part (wide keys)
constexpr int32_t V_HI = 6;     // high-word part without the carry (wide keys)
constexpr int32_t SCRATCH = 10;
// scratch lanes that outlive one slot term (KeyWords and InRange use 2..7)
constexpr int32_t S_O0 = 1;     // o_0 of the current axis
constexpr int32_t S_FIRST = 8;  // first of the current axis (k where the class has no member < k)
constexpr int32_t S_OJ = 9;     // o_j of the current slot
constexpr float INV256 = 1.0f / 256.0f;

class ConvOutKeysKernel {
public:
    __aicore__ inline void Run(GM_ADDR indices, GM_ADDR keys, const ConvOutKeysTilingData& t) {
        t_ = t;
        const int64_t core = GetBlockIdx();
        if (core >= t_.usedAiv) return;
        const CoreShare share = ShareOfCore(t_.numTiles, t_.usedAiv, core);
        const int64_t tile0 = share.first, nt = share.count;
        T_ = t_.tileRows;
        nd_ = t_.ndim;
        V_ = t_.wide ? 7 : 2;
        for (int32_t d = 0, off = 1; d < nd_; off += t_.slots[d], ++d) termOff_[d] = off;
        idxGm_.SetGlobalBuffer((__gm__ int32_t*)indices, (uint64_t)t_.numVoxels * (nd_ + 1));
        keysGm_.SetGlobalBuffer((__gm__ int32_t*)keys, (uint64_t)t_.numVoxels * t_.slotVol * 2);
        InitBuffers();
        BuildTables();
        for (int64_t tl = tile0; tl < tile0 + nt; ++tl) Tile(tl);
    }

private:
    // same order and sizes as ConvOutKeysUbBytes
    __aicore__ inline void InitBuffers() {
        const uint32_t B = (uint32_t)T_ * 4, cols = (uint32_t)nd_ + 1;
        pipe_.InitBuffer(inQ_, 1, (T_ * cols * 4 + 31) / 32 * 32);
        pipe_.InitBuffer(tabB_, 3 * B);
        pipe_.InitBuffer(colB_, cols * B);
        pipe_.InitBuffer(scrB_, SCRATCH * B);
        pipe_.InitBuffer(termB_, (uint32_t)(1 + t_.slotSum) * V_ * B);
        pipe_.InitBuffer(levelB_, (uint32_t)nd_ * V_ * B);
        pipe_.InitBuffer(lohiB_, 2 * B);
        pipe_.InitBuffer(outQ_, 2, (uint32_t)t_.kGroup * 2 * B);
        lohi_ = lohiB_.Get<int32_t>();
    }
    // rowOff[r] = byte offset of row r's first column; ilv = (lo, hi) -> int64 interleave offsets
    __aicore__ inline void BuildTables() {
        LocalTensor<int32_t> tab = tabB_.Get<int32_t>();
        InterleaveOffsets(tab[T_], Scr(0), T_);
        Muls(tab, Scr(0), (nd_ + 1) * 4, T_);  // Scr(0) holds 0..2T-1
        rowOff_ = tab.ReinterpretCast<uint32_t>();
        ilv_ = tab[T_].ReinterpretCast<uint32_t>();
    }

    __aicore__ inline LocalTensor<int32_t> Scr(int32_t i) { return scrB_.Get<int32_t>()[i * T_]; }
    __aicore__ inline LocalTensor<int32_t> Col(int32_t c) { return colB_.Get<int32_t>()[c * T_]; }
    __aicore__ inline LocalTensor<int32_t> Term(int32_t i) { return termB_.Get<int32_t>()[i * V_ * T_]; }
    __aicore__ inline LocalTensor<int32_t> Part(const LocalTensor<int32_t>& term, int32_t v) { return term[v * T_]; }
    // level 0 is the batch term; level l >= 1 = level l-1 combined with axis l-1's current term
    __aicore__ inline LocalTensor<int32_t> Level(int32_t l) {
        return l == 0 ? Term(0) : levelB_.Get<int32_t>()[(l - 1) * V_ * T_];
    }

    __aicore__ inline void Tile(int64_t tl) {
        const int64_t n0 = tl * T_;
        const int32_t q = (int32_t)((t_.numVoxels - n0) < T_ ? (t_.numVoxels - n0) : T_);
        LoadColumns(n0, q);
        Duplicate(Part(Term(0), V_VALID), 1, T_);  // every row has a batch index
        KeyWords(Term(0), Col(0), 0);
        for (int32_t d = 0; d < nd_; ++d) {
            LatticeStart(d);
            for (int32_t j = 0; j < t_.slots[d]; ++j) SlotTerm(d, j, Term(termOff_[d] + j));
        }
        EmitSlots(n0, q);
    }

    // rows [n0, n0 + q) -> Col(0) = batch, Col(1 + d) = coordinate d (lanes >= q: don't care)
    __aicore__ inline void LoadColumns(int64_t n0, int32_t q) {
        const int32_t cols = nd_ + 1;
        LocalTensor<int32_t> raw = inQ_.AllocTensor<int32_t>();
        DataCopyPad(raw, idxGm_[n0 * cols], DataCopyExtParams(1, (uint32_t)(q * cols * 4), 0, 0, 0),
                    DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        inQ_.EnQue(raw);
        raw = inQ_.DeQue<int32_t>();
        for (int32_t c = 0; c < cols; ++c) Gather(Col(c), raw, rowOff_, (uint32_t)(c * 4), (uint32_t)T_);
        inQ_.FreeTensor(raw);
    }

    // Scr(S_O0) = o_0 and (stride > 1) Scr(S_FIRST) = first of axis d's residue class, per lane
    __aicore__ inline void LatticeStart(int32_t d) {
        LocalTensor<int32_t> o0 = Scr(S_O0), first = Scr(S_FIRST);
        if (t_.stride[d] == 1) {  // every kernel position: first = 0, o_0 = u
            Adds(o0, Col(1 + d), t_.padding[d], T_);
            return;
        }
        LocalTensor<int32_t> u = Scr(0);
        Adds(u, Col(1 + d), t_.padding[d], T_);
        FloorDivExact(o0, first, u, d);  // o_0 = q, first = r: the answer when dil == 1
        if (t_.dilation[d] != 1) ClassStart(d, first, o0);
    }

    // first = r on entry; first = the candidate kp0 < min(k, step) with kp0*dil mod s == r (k where
    // there is none) and o0 -= floor(kp0*dil / s) on return. Candidates have distinct residues (they
    // lie within one period step), so at most one matches per lane.
    __aicore__ inline void ClassStart(int32_t d, const LocalTensor<int32_t>& first, const LocalTensor<int32_t>& o0) {
        const int32_t s = t_.stride[d];
        LocalTensor<int32_t> kp = Scr(0), shift = Scr(4), found = Scr(5), eq = Scr(6), tmp = Scr(3);
        Duplicate(kp, 0, T_);
        Duplicate(shift, 0, T_);
        Duplicate(found, 0, T_);
        int32_t res = 0, quo = 0;  // kp0*dil mod s, floor(kp0*dil / s)
        for (int32_t kp0 = 0; kp0 < t_.classes[d]; ++kp0) {
            Equals(eq, first, res, tmp);
            Add(found, found, eq, T_);
            if (kp0 != 0) {
                Muls(tmp, eq, kp0, T_);
                Add(kp, kp, tmp, T_);
            }
            if (quo != 0) {
                Muls(tmp, eq, quo, T_);
                Add(shift, shift, tmp, T_);
            }
            res += t_.dilModStride[d];
            quo += t_.dilDivStride[d];
            if (res >= s) {
                res -= s;
                ++quo;
            }
        }
        Sub(o0, o0, shift, T_);
        Muls(found, found, -t_.kernel[d], T_);  // first = kp + (1 - found) * k
        Adds(found, found, t_.kernel[d], T_);
        Add(first, kp, found, T_);
    }

    // eq = (x == c) as 0/1 for |x - c| < 2^31 - 1
    __aicore__ inline void Equals(const LocalTensor<int32_t>& eq, const LocalTensor<int32_t>& x, int32_t c,
                                  const LocalTensor<int32_t>& tmp) {
        Adds(tmp, x, -c, T_);
        Positive(eq, tmp, T_);           // x > c
        Muls(tmp, tmp, -1, T_);
        Positive(tmp, tmp, T_);          // x < c
        Add(eq, eq, tmp, T_);
        Muls(eq, eq, -1, T_);
        Adds(eq, eq, 1, T_);
    }

    // term of axis d's slot j: kernel position first + j*step < k, o_j = o_0 - j*dil/gcd in range
    __aicore__ inline void SlotTerm(int32_t d, int32_t j, const LocalTensor<int32_t>& term) {
        LocalTensor<int32_t> valid = Part(term, V_VALID), o = Scr(S_OJ);
        if (t_.stride[d] == 1) {
            Duplicate(valid, 1, T_);  // slot j is kernel position j < k
        } else {
            Muls(valid, Scr(S_FIRST), -1, T_);
            Adds(valid, valid, t_.kernel[d] - j * t_.latticeStep[d], T_);
            Positive(valid, valid, T_);
        }
        Adds(o, Scr(S_O0), -j * t_.outStep[d], T_);
        InRange(valid, o, t_.outShape[d]);
        Mul(o, o, valid, T_);  // invalid lanes contribute 0, so their bytes stay in range
        KeyWords(term, o, 1 + d);
    }

    // o = floor(num / s), r = num mod s (num >= 0 here). For |num| < 2^24 the float estimate
    // num * float(1/s) is off by at most one: one too small for exact multiples when float(1/s)
    // rounds down (s = 41: 41 * float(1/41) < 1), one too large for some non-multiples above 2^23
    // (s = 3). One exact int32 remainder correction in each direction makes o and r exact, whatever
    // the rounding of the hardware's Muls and Cast. Uses Scr(3) and Scr(7).
    __aicore__ inline void FloorDivExact(const LocalTensor<int32_t>& o, const LocalTensor<int32_t>& r,
                                         const LocalTensor<int32_t>& num, int32_t d) {
        const int32_t s = t_.stride[d];
        LocalTensor<int32_t> step = Scr(3);
        LocalTensor<float> f = Scr(7).ReinterpretCast<float>();
        Cast(f, num, RoundMode::CAST_NONE, T_);
        Muls(f, f, t_.invStride[d], T_);
        Cast(o, f, RoundMode::CAST_FLOOR, T_);
        Muls(r, o, s, T_);
        Sub(r, num, r, T_);  // r = num - o*s
        Adds(step, r, 1 - s, T_);
        Positive(step, step, T_);  // r >= s: quotient one too small
        Add(o, o, step, T_);
        Muls(step, step, s, T_);
        Sub(r, r, step, T_);
        Mins(step, r, 0, T_);
        Maxs(step, step, -1, T_);  // r < 0: quotient one too large
        Add(o, o, step, T_);
        Muls(step, step, s, T_);
        Sub(r, r, step, T_);       // now 0 <= r < s
    }

    // valid *= (0 <= o < extent)
    __aicore__ inline void InRange(const LocalTensor<int32_t>& valid, const LocalTensor<int32_t>& o, int32_t extent) {
        LocalTensor<int32_t> tmp = Scr(3);
        Adds(tmp, o, 1, T_);
        Positive(tmp, tmp, T_);
        Mul(valid, valid, tmp, T_);
        Muls(tmp, o, -1, T_);
        Adds(tmp, tmp, extent, T_);
        Positive(tmp, tmp, T_);
        Mul(valid, valid, tmp, T_);
    }

    // key-word contributions of x (0 <= x < 2^24) as term `ti` (0 = batch, 1 + d = axis d)
    __aicore__ inline void KeyWords(const LocalTensor<int32_t>& term, const LocalTensor<int32_t>& x, int32_t ti) {
        Muls(Part(term, V_LO), x, t_.loMul[ti], T_);  // wrapping int32 product = exact low word
        if (!t_.wide) return;
        LocalTensor<int32_t> b[3] = {Scr(4), Scr(5), Scr(6)};
        const int32_t nb = t_.xBytes[ti];
        SplitBytes(x, nb, b);
        for (int32_t j = 0; j < 4; ++j) {
            const int32_t w[3] = {t_.lowByte[ti][0][j], t_.lowByte[ti][1][j], t_.lowByte[ti][2][j]};
            WeightedSum(Part(term, V_COL + j), b, nb, w);
        }
        WeightedSum(Part(term, V_HI), b, nb, t_.hiMul[ti]);
    }

    // b[i] = byte i of x (x < 2^24: float-exact, and scaling by 1/256 is exact)
    __aicore__ inline void SplitBytes(const LocalTensor<int32_t>& x, int32_t nb, LocalTensor<int32_t>* b) {
        if (nb == 1) {
            b[0] = x;
            return;
        }
        LocalTensor<int32_t> tmp = Scr(3);
        LocalTensor<float> f = Scr(7).ReinterpretCast<float>();
        Cast(f, x, RoundMode::CAST_NONE, T_);
        Muls(f, f, INV256, T_);
        Cast(b[1], f, RoundMode::CAST_FLOOR, T_);
        Muls(tmp, b[1], 256, T_);
        Sub(b[0], x, tmp, T_);
        if (nb == 3) {
            Cast(f, b[1], RoundMode::CAST_NONE, T_);
            Muls(f, f, INV256, T_);
            Cast(b[2], f, RoundMode::CAST_FLOOR, T_);
            Muls(tmp, b[2], 256, T_);
            Sub(b[1], b[1], tmp, T_);
        }
    }

    // dst = sum_i b[i] * w[i]
    __aicore__ inline void WeightedSum(const LocalTensor<int32_t>& dst, const LocalTensor<int32_t>* b, int32_t nb,
                                       const int32_t* w) {
        LocalTensor<int32_t> tmp = Scr(2);
        Muls(dst, b[0], w[0], T_);
        for (int32_t i = 1; i < nb; ++i) {
            if (w[i] == 0) continue;
            Muls(tmp, b[i], w[i], T_);
            Add(dst, dst, tmp, T_);
        }
    }

    // walk slots j = 0..J-1 (row-major over the axes); stage G slots, then one DMA
    __aicore__ inline void EmitSlots(int64_t n0, int32_t q) {
        int32_t js[kCokMaxDims] = {0, 0, 0, 0};
        UpdateLevels(js, 1);
        LocalTensor<int32_t> stage;
        for (int32_t j = 0; j < t_.slotVol; ++j) {
            const int32_t staged = j % t_.kGroup;  // position in the staged group
            if (staged == 0) stage = outQ_.AllocTensor<int32_t>();
            Emit(stage[staged * 2 * T_]);
            if (staged == t_.kGroup - 1 || j == t_.slotVol - 1) Flush(stage, j - staged, staged + 1, n0, q);
            int32_t d = nd_ - 1;  // advance the odometer: the last axis moves fastest
            while (d >= 0 && ++js[d] == t_.slots[d]) js[d--] = 0;
            if (d >= 0) UpdateLevels(js, d + 1);
        }
    }
    // refresh the running sums of levels from..nd after axis from-1 moved
    __aicore__ inline void UpdateLevels(const int32_t* js, int32_t from) {
        for (int32_t l = from; l <= nd_; ++l) {
            LocalTensor<int32_t> dst = Level(l), a = Level(l - 1), b = Term(termOff_[l - 1] + js[l - 1]);
            Mul(dst, a, b, T_);                                   // validity: all axes valid
            Add(dst[T_], a[T_], b[T_], (V_ - 1) * T_);            // key words add up
        }
    }
    // int64 keys of the current slot into dst [2T] (sentinel where invalid)
    __aicore__ inline void Emit(const LocalTensor<int32_t>& dst) {
        LocalTensor<int32_t> L = Level(nd_), valid = Part(L, V_VALID);
        LocalTensor<int32_t> lo = lohi_, hi = lohi_[T_];
        Adds(lo, Part(L, V_LO), -kSentinelLo, T_);  // lo = (lo - S) * valid + S
        Mul(lo, lo, valid, T_);
        Adds(lo, lo, kSentinelLo, T_);
        if (t_.wide) {
            HighWord(hi, L);
            Adds(hi, hi, -kSentinelHi, T_);
            Mul(hi, hi, valid, T_);
        } else {
            Muls(hi, valid, -kSentinelHi, T_);  // keys < 2^32: the high word is 0
        }
        Adds(hi, hi, kSentinelHi, T_);
        Gather(dst, lohi_, ilv_, 0, (uint32_t)(2 * T_));
    }
    // hi = high part + floor(sum_j col_j 256^j / 2^32): carry chain over the byte columns; every
    // value stays below 2^21, so each float floor(v / 256) is exact
    __aicore__ inline void HighWord(const LocalTensor<int32_t>& hi, const LocalTensor<int32_t>& L) {
        LocalTensor<int32_t> carry = Scr(0), v = Scr(1);
        LocalTensor<float> f = Scr(7).ReinterpretCast<float>();
        Cast(f, Part(L, V_COL), RoundMode::CAST_NONE, T_);
        Muls(f, f, INV256, T_);
        Cast(carry, f, RoundMode::CAST_FLOOR, T_);
        for (int32_t j = 1; j < 4; ++j) {
            Add(v, Part(L, V_COL + j), carry, T_);
            Cast(f, v, RoundMode::CAST_NONE, T_);
            Muls(f, f, INV256, T_);
            Cast(carry, f, RoundMode::CAST_FLOOR, T_);
        }
        Add(hi, Part(L, V_HI), carry, T_);
    }
    // slots j0 .. j0+count-1 of rows [n0, n0+q): one DMA, GM rows N*8 bytes apart (slot-major)
    __aicore__ inline void Flush(LocalTensor<int32_t> stage, int32_t j0, int32_t count, int64_t n0, int32_t q) {
        outQ_.EnQue(stage);
        stage = outQ_.DeQue<int32_t>();
        const uint32_t rowBytes = (uint32_t)q * 8;
        const uint32_t srcGap = (uint32_t)((2 * T_ * 4 - (rowBytes + 31) / 32 * 32) / 32);
        const uint32_t dstGap = (uint32_t)((t_.numVoxels - q) * 8);
        DataCopyPad(keysGm_[((int64_t)j0 * t_.numVoxels + n0) * 2], stage,
                    DataCopyExtParams((uint16_t)count, rowBytes, srcGap, dstGap, 0));
        outQ_.FreeTensor(stage);
    }

    ConvOutKeysTilingData t_;
    TPipe pipe_;
    TQue<TPosition::VECIN, 1> inQ_;
    TQue<TPosition::VECOUT, 1> outQ_;
    TBuf<TPosition::VECCALC> tabB_, colB_, scrB_, termB_, levelB_, lohiB_;
    LocalTensor<uint32_t> rowOff_, ilv_;
    LocalTensor<int32_t> lohi_;
    GlobalTensor<int32_t> idxGm_, keysGm_;
    int32_t T_ = 64, nd_ = 3, V_ = 2;
    int32_t termOff_[kCokMaxDims] = {1, 1, 1, 1};
};

}  // namespace

extern "C" __global__ __aicore__ void conv_out_keys(GM_ADDR indices, GM_ADDR keys, GM_ADDR workspace, GM_ADDR tiling) {
    (void)workspace;
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(ConvOutKeysTilingData);
    GET_TILING_DATA_WITH_STRUCT(ConvOutKeysTilingData, t, tiling);
    ConvOutKeysKernel op;
    op.Run(indices, keys, t);
}
