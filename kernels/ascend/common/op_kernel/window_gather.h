// Window gather (AscendC, Atlas A2 vector core): rows features[nbr[m, k]] of a tile of a neighbour
// map, written as a slab [rows, K * cin] in GM for the Cube (zeros where nbr = -1).
//
// Why: A2 has no GM gather instruction, so copying one feature row per (m, k) pair costs one DMA
// descriptor and a few scalar instructions per pair -- the bound of the previous kernels. But voxel
// rows are in sorted key order, so for a chunk of consecutive output rows and a group of X offsets
// that differ only along the last axis (e.g. dx = -1, 0, 1), every input row the chunk needs lies
// in ONE short range of input rows. The gather therefore
//   1. reads the chunk's nbr entries of the group with one vector Gather from the nbr tile in UB;
//   2. finds the smallest and largest valid entry with vector Min/Max trees (one scalar read each);
//   3. moves that window of input rows into UB with ONE DMA;
//   4. turns each entry into a byte offset inside the window (or of a zero row) with int32 vector
//      arithmetic -- validity as 0/1 clamps, A2 compares int32 only for equality -- expands it to
//      one offset per 32- or 16-bit word of the row (vector Gather of a constant table + Add), and
//      picks the words with one vector Gather;
//   5. writes the chunk's [rows, X * cin] part of the slab with ONE strided DMA.
// A window wider than the UB budget is swept: the next window starts at the smallest entry not
// yet covered, entries outside a window gather the zero row, and the passes are summed as integers
// (exactly one pass brings a given entry's bits). Any map is gathered exactly; only the number of
// windows depends on how sorted the rows are (an unsorted map degrades to many narrow windows).
// Rows wider than 512 B are gathered in column chunks (strided window DMAs, one slab DMA per
// offset of the group).
#pragma once
#include "kernel_operator.h"
#include "window_gather_tiling.h"
#include "key_vec.h"

namespace mxs_kernel {

using namespace AscendC;

constexpr int32_t kWgNone = 0x7fffffff;      // "no entry" key of the min tree

__aicore__ inline int64_t WgAlign32(int64_t b) { return (b + 31) / 32 * 32; }

template <typename T>
class WindowGather {
public:
    // feat: [numIn, cin] in GM. The slab of a tile is [rows, K*cin], physically split into k-groups of
    // `kgroup` offsets ([rows, kgroup*cin] each, group after group) so that every Matmul's A fits the
    // ND Ka <= 65535 limit.
    __aicore__ inline void Init(TPipe& pipe, const WindowGatherTiling& g, const GlobalTensor<T>& feat) {
        g_ = g;
        feat_ = feat;
        esz_ = (int32_t)sizeof(T);
        colChunk_ = g.colChunk;
        chunked_ = colChunk_ < g.cin;
        const int32_t rowBytes = g.rowWords * g.wordBytes;
        pitch_ = g.pitch;
        subRowWords_ = g.subRowWords;
        words_ = g.chunkRows * g.segWords;
        EL_ = g.entryLanes;
        zeroOff_ = (uint32_t)WgAlign32((int64_t)g.windowRows * pitch_);
        // the slab DMAs' completion events stay set across passes: their ids are reserved from the
        // pipe's pool for the launch (the other edges are Set/Wait pairs with fetched ids)
        for (int b = 0; b < 2; ++b) evSeg_[b] = (int32_t)pipe.AllocEventID<HardEvent::MTE3_V>();

        pipe.InitBuffer(nbrB_, (uint32_t)WgAlign32((int64_t)g.tileRows * g.kvol * 4));
        // one buffer per entry vector: a view's extent is its buffer's, and Gather must not alias
        for (int32_t i = 0; i < 5; ++i) pipe.InitBuffer(vecB_[i], (uint32_t)((EL_ + 8) * 4));
        pipe.InitBuffer(colB_, (uint32_t)(EL_ * 4));
        pipe.InitBuffer(shufB_, 3 * 32);
        pipe.InitBuffer(expB_, (uint32_t)(words_ * 4));
        pipe.InitBuffer(addB_, (uint32_t)(words_ * 4));
        pipe.InitBuffer(offB_, (uint32_t)(words_ * 4));
        pipe.InitBuffer(segB_, (uint32_t)(2 * words_ * g.wordBytes));
        pipe.InitBuffer(tmpB_, (uint32_t)(words_ * g.wordBytes));
        zeroBytes_ = (int32_t)WgAlign32(pitch_ > rowBytes ? pitch_ : rowBytes);
        pipe.InitBuffer(winB_, (uint32_t)(zeroOff_ + zeroBytes_));
        nbr_ = nbrB_.Get<int32_t>();
        ent_ = vecB_[0].Get<int32_t>();
        ge_ = vecB_[1].Get<int32_t>();
        key_ = vecB_[2].Get<int32_t>();
        tmp_ = vecB_[3].Get<int32_t>();
        rr_ = vecB_[4].Get<int32_t>();
        BuildTables();
    }

    // Gathers rows [m0, m0 + tr) of the map (nbrGm: [M, K]) into `slab`.
    __aicore__ inline void GatherTile(const GlobalTensor<int32_t>& nbrGm, int64_t m0, int32_t tr, const GlobalTensor<T>& slab) {
        WaitNbrFree();
        DataCopyPad(nbr_, nbrGm[m0 * g_.kvol], DataCopyExtParams(1, (uint32_t)(tr * g_.kvol * 4), 0, 0, 0),
                    DataCopyPadExtParams<int32_t>(false, 0, 0, 0));
        PipeSync<HardEvent::MTE2_V>();
        for (int32_t r0 = 0; r0 < tr; r0 += g_.chunkRows) {
            const int32_t rows = (tr - r0) < g_.chunkRows ? (tr - r0) : g_.chunkRows;
            for (int32_t k0 = 0; k0 < g_.kvol; k0 += g_.group)
                for (int32_t c0 = 0; c0 < g_.cin; c0 += colChunk_) {
                    const int32_t cw = (g_.cin - c0) < colChunk_ ? (g_.cin - c0) : colChunk_;
                    if (g_.wordBytes == 4) Pass<int32_t>(r0, rows, k0, c0, cw, slab);
                    else Pass<int16_t>(r0, rows, k0, c0, cw, slab);
                }
        }
        nbrBusy_ = true;
    }

    // Every DMA the gatherer issued is complete (call before the slab is handed to the Cube and at
    // kernel end).
    __aicore__ inline void Drain() {
        for (int b = 0; b < 2; ++b)
            if (segBusy_[b]) {
                WaitFlag<HardEvent::MTE3_V>(evSeg_[b]);
                segBusy_[b] = false;
            }
        WaitNbrFree();
    }

private:
    __aicore__ inline void WaitNbrFree() {
        // the previous tile's vector reads of the nbr tile are done before the next DMA overwrites it
        if (nbrBusy_) {
            PipeSync<HardEvent::V_MTE2>();
            nbrBusy_ = false;
        }
    }

    // 0/1 lanes: dst = (x + c >= 1)
    __aicore__ inline void AtLeastOne(const LocalTensor<int32_t>& dst, const LocalTensor<int32_t>& x, int32_t c, int32_t n) {
        Adds(dst, x, c, n);
        Maxs(dst, dst, 0, n);
        Mins(dst, dst, 1, n);
    }

    // Constant tables, built with vector ops once per launch (scratch: the off and seg buffers):
    //   colTab[e]  = (m*K + j)*4 for entry e = m*X + j: byte offset of nbr[m, k0 + j] in the nbr tile
    //   expTab[w]  = byte offset into rr of the entry that word w of a chunk belongs to (pad words:
    //                the sentinel lanes at EL, whose rr is the zero row)
    //   addTab[w]  = byte offset of word w inside its row (0 for pad words)
    //   shuffle[h] = lanes i -> min(i + h, 7) (h = 4, 2, 1), the last steps of the min/max trees
    __aicore__ inline void BuildTables() {
        const int32_t X = g_.group;
        LocalTensor<int32_t> col = colB_.Get<int32_t>();
        mxs_kernel::Iota(ent_, EL_);
        mxs_kernel::DivSmall(ge_, key_, ent_, X, EL_);          // ge = m, key = j
        Muls(ge_, ge_, g_.kvol, EL_);
        Add(col, ge_, key_, EL_);
        Muls(col, col, 4, EL_);

        LocalTensor<int32_t> A = offB_.Get<int32_t>(), B = segB_.Get<int32_t>();
        LocalTensor<int32_t> C = expB_.Get<int32_t>(), D = addB_.Get<int32_t>();
        const int32_t n = words_;
        mxs_kernel::Iota(A, n);
        mxs_kernel::DivSmall(C, B, A, g_.segWords, n);          // C = chunk row m, B = word in the row
        mxs_kernel::DivSmall(A, D, B, subRowWords_, n);         // A = offset j in the group, D = word in the sub-row
        AtLeastOne(B, A, 1 - X, n);                 // pad: j >= X ...
        Muls(C, C, X, n);
        Add(C, C, A, n);                            // entry lane m*X + j
        AtLeastOne(A, D, 1 - g_.rowWords, n);       // ... or word >= rowWords
        Max(B, B, A, n);
        Muls(A, B, -1, n);
        Adds(A, A, 1, n);                           // A = 1 - pad
        Adds(C, C, -EL_, n);
        Mul(C, C, A, n);
        Adds(C, C, EL_, n);
        Muls(C, C, 4, n);                           // expTab
        Muls(D, D, g_.wordBytes, n);
        Mul(D, D, A, n);                            // addTab

        LocalTensor<int32_t> sh = shufB_.Get<int32_t>();
        mxs_kernel::Iota(ent_, 8);
        for (int32_t h = 4, i = 0; h >= 1; h /= 2, ++i) {
            Adds(sh[i * 8], ent_, h, 8);
            Mins(sh[i * 8], sh[i * 8], 7, 8);
            Muls(sh[i * 8], sh[i * 8], 4, 8);
        }
        Duplicate(rr_[EL_], (int32_t)zeroOff_, 8);  // sentinel lanes: the zero row
        LocalTensor<int16_t> zero = winB_.Get<int16_t>();
        Duplicate(zero[zeroOff_ / 2], (int16_t)0, (int32_t)(zeroBytes_ / 2));
    }

    // min (isMax = false) or max of x[0:EL) -> lane 0 of x (x is destroyed), read by the scalar unit
    __aicore__ inline int32_t TreeReduce(const LocalTensor<int32_t>& x, bool isMax) {
        for (int32_t h = EL_ / 2; h >= 8; h /= 2) {
            if (isMax) Max(x, x, x[h], h);
            else Min(x, x, x[h], h);
        }
        LocalTensor<uint32_t> sh = shufB_.Get<uint32_t>();
        for (int32_t i = 0; i < 3; ++i) {
            Gather(tmp_, x, sh[i * 8], (uint32_t)0, (uint32_t)8);
            if (isMax) Max(x, x, tmp_, 8);
            else Min(x, x, tmp_, 8);
        }
        PipeSync<HardEvent::V_S>();
        return x.GetValue(0);
    }

    // rows [r0, r0+rows) of the tile, offsets [k0, k0+X), columns [c0, c0+cw)
    template <typename W>
    __aicore__ inline void Pass(int32_t r0, int32_t rows, int32_t k0, int32_t c0, int32_t cw, const GlobalTensor<T>& slab) {
        const int32_t X = g_.group, E = rows * X;
        // entries: nbr[r0 + m, k0 + j], lanes past E are -1
        Duplicate(ent_, (int32_t)-1, EL_);
        Gather(ent_, nbr_, colB_.Get<uint32_t>(), (uint32_t)((r0 * g_.kvol + k0) * 4), (uint32_t)E);
        Adds(key_, ent_, 0, EL_);
        const int32_t hiRow = TreeReduce(key_, true);
        const int sb = segBuf_;
        segBuf_ ^= 1;
        LocalTensor<W> seg = segB_.Get<W>()[sb * words_];
        if (segBusy_[sb]) {
            WaitFlag<HardEvent::MTE3_V>(evSeg_[sb]);  // the previous slab DMA of this buffer is done
            segBusy_[sb] = false;
        }
        const int32_t nw = rows * g_.segWords;
        if (hiRow < 0) {
            Duplicate(seg, (W)0, nw);  // no neighbour at all in this pass
        } else {
            int64_t cursor = 0;
            bool first = true;
            while (true) {
                // smallest entry >= cursor (cursor >= 0, so -1 entries never qualify)
                Adds(ge_, ent_, (int32_t)-cursor, EL_);
                Adds(ge_, ge_, 1, EL_);
                Maxs(ge_, ge_, 0, EL_);
                Mins(ge_, ge_, 1, EL_);                    // 1 where ent >= cursor
                Adds(key_, ent_, -kWgNone, EL_);
                Mul(key_, key_, ge_, EL_);
                Adds(key_, key_, kWgNone, EL_);            // ent where ge, else kWgNone
                const int32_t lo = TreeReduce(key_, false);
                if (lo == kWgNone) break;
                int64_t w = (int64_t)hiRow - lo + 1;
                if (w > g_.windowRows) w = g_.windowRows;
                LoadWindow(lo, (int32_t)w, c0, cw);
                Offsets(lo, (int32_t)w);
                LocalTensor<W> win = winB_.Get<W>();
                LocalTensor<W> dst = first ? seg : tmpB_.Get<W>();
                Gather(dst, win, offB_.Get<uint32_t>(), (uint32_t)0, (uint32_t)nw);
                if (!first) Add(seg, seg, dst, nw);
                PipeSync<HardEvent::V_MTE2>();             // window reads done before the next window DMA
                first = false;
                cursor = lo + w;
                if (cursor > hiRow) break;
            }
        }
        // seg -> slab rows (r0 .. r0+rows), offsets k0 .. k0+X, columns c0 .. c0+cw
        PipeSync<HardEvent::V_MTE3>();
        const int64_t kg = g_.kvol < KGroup() ? g_.kvol : KGroup();
        const int64_t grp = k0 / kg, kin = k0 - grp * kg;
        const int64_t kc = (g_.kvol - grp * kg) < kg ? (g_.kvol - grp * kg) : kg;  // offsets of this k-group
        const int64_t base = grp * (int64_t)g_.tileRows * kg * g_.cin + ((int64_t)r0 * kc + kin) * g_.cin + c0;
        LocalTensor<T> segT = seg.template ReinterpretCast<T>();
        if (!chunked_) {
            DataCopyPad(slab[base], segT, DataCopyExtParams((uint16_t)rows, (uint32_t)(X * g_.cin * esz_), 0,
                                                            (uint32_t)((kc - X) * g_.cin * esz_), 0));
        } else {
            const uint32_t gapBlocks = (uint32_t)((g_.segWords * g_.wordBytes - WgAlign32(cw * esz_)) / 32);
            for (int32_t j = 0; j < X; ++j)
                DataCopyPad(slab[base + (int64_t)j * g_.cin], segT[j * pitch_ / esz_],
                            DataCopyExtParams((uint16_t)rows, (uint32_t)(cw * esz_), gapBlocks,
                                              (uint32_t)((kc * g_.cin - cw) * esz_), 0));
        }
        SetFlag<HardEvent::MTE3_V>(evSeg_[sb]);
        segBusy_[sb] = true;
    }

    __aicore__ inline int32_t KGroup() const { return kgroup_; }

public:
    // offsets per Matmul k-group (set by the kernel from its tiling; default: all K)
    __aicore__ inline void SetKGroup(int32_t kg) { kgroup_ = kg; }

private:
    // input rows [lo, lo + w), columns [c0, c0 + cw) -> window buffer, rows pitch_ bytes apart
    __aicore__ inline void LoadWindow(int64_t lo, int32_t w, int32_t c0, int32_t cw) {
        LocalTensor<T> win = winB_.Get<T>();
        if (!chunked_) {
            DataCopyPad(win, feat_[lo * g_.cin], DataCopyExtParams(1, (uint32_t)((int64_t)w * g_.cin * esz_), 0, 0, 0),
                        DataCopyPadExtParams<T>(false, 0, 0, (T)0));
        } else {
            const uint32_t gap = (uint32_t)((pitch_ - WgAlign32(cw * esz_)) / 32);
            DataCopyPad(win, feat_[lo * g_.cin + c0],
                        DataCopyExtParams((uint16_t)w, (uint32_t)(cw * esz_), (uint32_t)((g_.cin - cw) * esz_), gap, 0),
                        DataCopyPadExtParams<T>(false, 0, 0, (T)0));
        }
        PipeSync<HardEvent::MTE2_V>();
    }

    // off[word] = byte offset in the window of the word's row (entries outside [lo, lo+w): zero row)
    __aicore__ inline void Offsets(int64_t lo, int32_t w) {
        // rel = ent - lo; in = (rel >= 0) * (rel < w); rr = in ? rel*pitch : zeroOff
        Adds(tmp_, ent_, (int32_t)-lo, EL_);
        Adds(ge_, tmp_, 1, EL_);
        Maxs(ge_, ge_, 0, EL_);
        Mins(ge_, ge_, 1, EL_);
        Muls(key_, tmp_, -1, EL_);
        Adds(key_, key_, w, EL_);
        Maxs(key_, key_, 0, EL_);
        Mins(key_, key_, 1, EL_);
        Mul(ge_, ge_, key_, EL_);                     // in-window flag
        Maxs(tmp_, tmp_, 0, EL_);
        Mins(tmp_, tmp_, w, EL_);
        Muls(tmp_, tmp_, pitch_, EL_);
        Adds(tmp_, tmp_, -(int32_t)zeroOff_, EL_);
        Mul(tmp_, tmp_, ge_, EL_);
        Adds(rr_, tmp_, (int32_t)zeroOff_, EL_);
        // per word: rr[entry of the word] + word offset in the row
        LocalTensor<int32_t> off = offB_.Get<int32_t>();
        Gather(off, rr_, expB_.Get<uint32_t>(), (uint32_t)0, (uint32_t)words_);
        Add(off, off, addB_.Get<int32_t>(), words_);
    }

    WindowGatherTiling g_{};
    GlobalTensor<T> feat_;
    int32_t esz_ = 4, colChunk_ = 0, pitch_ = 0, subRowWords_ = 0, words_ = 0, EL_ = 8, kgroup_ = 1 << 30, zeroBytes_ = 32;
    uint32_t zeroOff_ = 0;
    bool chunked_ = false, nbrBusy_ = false;
    bool segBusy_[2] = {false, false};
    int32_t evSeg_[2] = {0, 0};  // MTE3_V ids of the two slab buffers (TPipe::AllocEventID)
    int segBuf_ = 0;
    TBuf<TPosition::VECCALC> nbrB_, vecB_[5], colB_, shufB_, expB_, addB_, offB_, segB_, tmpB_, winB_;
    LocalTensor<int32_t> nbr_, ent_, ge_, key_, tmp_, rr_;
};

}  // namespace mxs_kernel
