// AMX implementation of gemm_rows_amx.h.
//
// Tile registers of one call:
//   tmm0..3  C: 16 rows x 16 float columns each, a 16 x 64 block of products
//   tmm4     A: 16 gathered rows x (up to) 32 bf16 input channels
//   tmm5..7  B: one weight block each, rotated so a load never waits for the
//            multiply still reading the previous block
// For every 16 gathered rows and every group of up to four 16-column blocks:
// C = 0; C += A(chunk) . B(chunk) over the input chunks; C is stored to a
// scratch tile and added into the accumulator rows (which lie anywhere in the
// output tile, so they cannot be tile-loaded directly).
#include "gemm_rows_amx.h"
#include "portable_switch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <immintrin.h>
#define MXS_HAVE_AMX_BUILD 1
#endif

namespace mxs {

namespace {

constexpr int kRows = 16;      // rows of A and C tiles
constexpr int kChunk = 32;     // bf16 input channels per full A tile row (64 bytes)
constexpr int kBlockCols = 16; // float columns per C tile (64 bytes)
constexpr int kCTiles = 4;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

#ifdef MXS_HAVE_AMX_BUILD
bool cpu_has_amx_bf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = d & (1u << 24), bf16 = d & (1u << 22);
  return tile && bf16;
}

// Linux hands out the 8 KiB tile state only on request (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, since 5.16); without it the
// first tile instruction faults.
bool request_tile_state() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#endif

bool detect_amx() {
  if (env_switch_nothrow("MXS_DISABLE_AMX", false, true) || portable_kernels_only()) return false;
#ifdef MXS_HAVE_AMX_BUILD
  return cpu_has_amx_bf16() && request_tile_state();
#else
  return false;
#endif
}

}  // namespace

bool amx_bf16_usable() {
  static const bool usable = detect_amx();
  return usable;
}

AmxWeights::AmxWeights(const uint16_t* w, int64_t kvol, int64_t groups, int64_t cin_g, int64_t cout_g)
    : groups_(groups), cin_(cin_g), cout_(cout_g) {
  // A single chunk narrower than 32 channels uses a narrower tile (no multiplies
  // by padding); wider inputs are cut into 32-channel chunks, the last zero-padded.
  chunk_width_ = cin_g <= kChunk ? round_up(cin_g, 2) : kChunk;
  kchunks_ = cin_g <= kChunk ? 1 : round_up(cin_g, kChunk) / kChunk;
  nblocks_ = round_up(cout_g, kBlockCols) / kBlockCols;
  data_.assign(kvol * groups * kchunks_ * nblocks_ * kBlockElems, 0);
  const int64_t cout = groups * cout_g;  // row length of w
  for (int64_t k = 0; k < kvol; ++k)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t kc = 0; kc < kchunks_; ++kc)
        for (int64_t nb = 0; nb < nblocks_; ++nb) {
          uint16_t* blk = data_.data() + (((k * groups + g) * kchunks_ + kc) * nblocks_ + nb) * kBlockElems;
          // pair row r holds input channels 2r and 2r+1 interleaved per output column j
          for (int64_t p = 0; p < chunk_width_; ++p) {
            const int64_t ci = kc * kChunk + p;
            if (ci >= cin_g) break;
            for (int64_t j = 0; j < kBlockCols; ++j) {
              const int64_t co = nb * kBlockCols + j;
              if (co >= cout_g) break;
              blk[(p / 2) * 32 + 2 * j + (p % 2)] = w[(k * cin_g + ci) * cout + g * cout_g + co];
            }
          }
        }
}

AmxScratch::AmxScratch(const AmxWeights& w)
    : a(kRows * w.kchunks() * w.chunk_width(), 0), c(kRows * kCTiles * kBlockCols, 0.f) {
  // palette 1; tmm0-3 C (16 x 64 B), tmm4 A (16 x width*2 B), tmm5-7 B (width/2 x 64 B)
  std::memset(config, 0, sizeof(config));
  config[0] = 1;
  auto set = [&](int t, int rows, int colsb) {
    config[16 + 2 * t] = uint8_t(colsb & 0xFF);
    config[16 + 2 * t + 1] = uint8_t(colsb >> 8);
    config[48 + t] = uint8_t(rows);
  };
  for (int t = 0; t < kCTiles; ++t) set(t, kRows, kBlockCols * 4);
  set(4, kRows, int(w.chunk_width()) * 2);
  for (int t = 5; t < 8; ++t) set(t, int(w.chunk_width()) / 2, 64);
}

AmxPairsScratch::AmxPairsScratch(int64_t cin_, int64_t cout_)
    : cin(cin_), cout(cout_), cin_pad(round_up(cin_, kRows)), cout_pad(round_up(cout_, kBlockCols)),
      a_t(cin_pad * kTransposedStride, 0), g_vnni(kMaxPairs / 2 * cout_pad * 2, 0), d(cin_pad * cout_pad, 0.f) {
  // palette 1; every tile 16 rows x 64 B: C (16 channels x 16 columns), A (16
  // channels x 32 pairs), B (16 pair rows x 16 interleaved columns)
  std::memset(config, 0, sizeof(config));
  config[0] = 1;
  for (int t = 0; t < 8; ++t) {
    config[16 + 2 * t] = 64;
    config[48 + t] = kRows;
  }
}

#ifdef MXS_HAVE_AMX_BUILD
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512vl,avx512bw")

namespace {

// tmm[J] += A . B(block nb0 + J) over every input chunk, J < NT (tile numbers
// must be immediates, hence the unrolled chain).
template <int NT>
inline void multiply_blocks(const AmxWeights& w, int64_t k, int64_t g, int64_t nb0, const uint16_t* a,
                            int64_t a_stride_bytes) {
  if constexpr (NT > 0) _tile_zero(0);
  if constexpr (NT > 1) _tile_zero(1);
  if constexpr (NT > 2) _tile_zero(2);
  if constexpr (NT > 3) _tile_zero(3);
  for (int64_t kc = 0; kc < w.kchunks(); ++kc) {
    _tile_loadd(4, a + kc * w.chunk_width(), a_stride_bytes);
    if constexpr (NT > 0) { _tile_loadd(5, w.block(k, g, kc, nb0 + 0), 64); _tile_dpbf16ps(0, 4, 5); }
    if constexpr (NT > 1) { _tile_loadd(6, w.block(k, g, kc, nb0 + 1), 64); _tile_dpbf16ps(1, 4, 6); }
    if constexpr (NT > 2) { _tile_loadd(7, w.block(k, g, kc, nb0 + 2), 64); _tile_dpbf16ps(2, 4, 7); }
    if constexpr (NT > 3) { _tile_loadd(5, w.block(k, g, kc, nb0 + 3), 64); _tile_dpbf16ps(3, 4, 5); }
  }
}

template <int NT>
inline void store_blocks(float* c) {
  constexpr int stride = kCTiles * kBlockCols * 4;
  if constexpr (NT > 0) _tile_stored(0, c + 0 * kBlockCols, stride);
  if constexpr (NT > 1) _tile_stored(1, c + 1 * kBlockCols, stride);
  if constexpr (NT > 2) _tile_stored(2, c + 2 * kBlockCols, stride);
  if constexpr (NT > 3) _tile_stored(3, c + 3 * kBlockCols, stride);
}

inline __mmask16 mask_of(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }

// dst[i][col0 + j] += products[i][j] for the rows that exist and the columns < cout.
inline void add_products(const float* products, int64_t rows, float* const* dst, int64_t col0, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    float* d = dst[i] + col0;
    const float* p = products + i * kCTiles * kBlockCols;
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 m = mask_of(cols - j);
      _mm512_mask_storeu_ps(d + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, d + j), _mm512_maskz_loadu_ps(m, p + j)));
    }
  }
}

}  // namespace

void round_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  const __m512i half = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), qnan = _mm512_set1_epi32(0x7FC0);
  for (int64_t e = 0; e < n; e += 16) {
    const __mmask16 m = mask_of(n - e);
    const __m512 f = _mm512_maskz_loadu_ps(m, src + e);
    const __m512i bits = _mm512_castps_si512(f);
    // bits + 0x7FFF + (bit 16 of bits), upper half: round half to even
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(half, lsb)), 16);
    r = _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), qnan);
    _mm256_mask_storeu_epi16(dst + e, m, _mm512_cvtepi32_epi16(r));
  }
}

void gemm_rows_amx(int64_t n, const uint16_t* const* a, const AmxWeights& w, int64_t k, int64_t g, float* const* c,
                   AmxScratch& s) {
  // The tile configuration is loaded per call: other code on this thread
  // (oneDNN's bf16 matmul, for one) may have loaded its own in between.
  _tile_loadconfig(s.config);
  const int64_t a_stride = w.kchunks() * w.chunk_width();
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, n - r0);
    // Rows past `rows` keep stale data: their products are computed and dropped.
    for (int64_t i = 0; i < rows; ++i) std::memcpy(s.a.data() + i * a_stride, a[r0 + i], w.cin() * 2);
    for (int64_t nb0 = 0; nb0 < w.nblocks(); nb0 += kCTiles) {
      const int64_t nt = std::min<int64_t>(kCTiles, w.nblocks() - nb0);
      switch (nt) {
        case 4: multiply_blocks<4>(w, k, g, nb0, s.a.data(), a_stride * 2); store_blocks<4>(s.c.data()); break;
        case 3: multiply_blocks<3>(w, k, g, nb0, s.a.data(), a_stride * 2); store_blocks<3>(s.c.data()); break;
        case 2: multiply_blocks<2>(w, k, g, nb0, s.a.data(), a_stride * 2); store_blocks<2>(s.c.data()); break;
        default: multiply_blocks<1>(w, k, g, nb0, s.a.data(), a_stride * 2); store_blocks<1>(s.c.data()); break;
      }
      const int64_t col0 = nb0 * kBlockCols;
      add_products(s.c.data(), rows, c + r0, col0, std::min<int64_t>(nt * kBlockCols, w.cout() - col0));
    }
  }
  _tile_release();
}

namespace {

// a_t[c][p0 + q] = a[p0 + q][c] for 16 pairs (q < live, zeros past it) and the
// channels [c0, c0 + 32) that exist, in registers: the 16 rows (32 channels each)
// are interleaved pairwise at 16, then 32, then 64 bits, after which every 128-bit
// lane holds 8 consecutive pairs of one channel. It replaced 32-bit gathers (eight
// rows per instruction): on the captured KITTI calls the transpose went from over
// half of gemm_tn_amx's time to about a third.
void transpose_16_pairs(const uint16_t* const* a, int64_t live, int64_t c0, int64_t cin, uint16_t* at, int64_t ld) {
  const int64_t width = std::min<int64_t>(32, cin - c0);
  const __mmask32 m = width >= 32 ? ~__mmask32(0) : (__mmask32(1) << width) - 1;
  __m512i r[16];
  for (int q = 0; q < 16; ++q) r[q] = q < live ? _mm512_maskz_loadu_epi16(m, a[q] + c0) : _mm512_setzero_si512();
  // lane L of p[2k] holds (row 2k, row 2k+1) of channels 8L..8L+3, of p[2k+1] of 8L+4..8L+7
  __m512i p[16];
  for (int k = 0; k < 8; ++k) {
    p[2 * k] = _mm512_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
    p[2 * k + 1] = _mm512_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
  }
  // lane L of t[s][j] holds rows 4j..4j+3 of channels 8L + 2s and 8L + 2s + 1
  __m512i t[4][4];
  for (int j = 0; j < 4; ++j) {
    t[0][j] = _mm512_unpacklo_epi32(p[4 * j], p[4 * j + 2]);
    t[1][j] = _mm512_unpackhi_epi32(p[4 * j], p[4 * j + 2]);
    t[2][j] = _mm512_unpacklo_epi32(p[4 * j + 1], p[4 * j + 3]);
    t[3][j] = _mm512_unpackhi_epi32(p[4 * j + 1], p[4 * j + 3]);
  }
  auto store_lanes = [&](__m512i v, int64_t ch, int64_t q0) {  // lane L: channel ch + 8L, pairs q0..q0+7
    const __m128i lane[4] = {_mm512_castsi512_si128(v), _mm512_extracti32x4_epi32(v, 1),
                             _mm512_extracti32x4_epi32(v, 2), _mm512_extracti32x4_epi32(v, 3)};
    for (int l = 0; l < 4; ++l)
      if (ch + 8 * l < width) _mm_storeu_si128(reinterpret_cast<__m128i*>(at + (c0 + ch + 8 * l) * ld + q0), lane[l]);
  };
  for (int h = 0; h < 2; ++h)  // rows 8h..8h+7
    for (int s = 0; s < 4; ++s) {
      store_lanes(_mm512_unpacklo_epi64(t[s][2 * h], t[s][2 * h + 1]), 2 * s, 8 * h);
      store_lanes(_mm512_unpackhi_epi64(t[s][2 * h], t[s][2 * h + 1]), 2 * s + 1, 8 * h);
    }
}

// a_t[i][p] = a[p][i]; pairs n..n_pad are zero so they add nothing.
void transpose_rows(int64_t n, int64_t n_pad, const uint16_t* const* a, AmxPairsScratch& s) {
  for (int64_t p0 = 0; p0 < n_pad; p0 += 16)
    for (int64_t c0 = 0; c0 < s.cin; c0 += 32)
      transpose_16_pairs(a + p0, std::clamp<int64_t>(n - p0, 0, 16), c0, s.cin,
                         s.a_t.data() + p0, AmxPairsScratch::kTransposedStride);
}

// g_vnni[r][2j + e] = g[2r + e][j]: two pairs' gradients interleaved per column,
// done 32 columns at a time with 16-bit unpacks (they interleave within 128-bit
// lanes) and one 64-bit permute that puts the lanes back in column order.
void interleave_grads(int64_t n, int64_t n_pad, const uint16_t* const* g, AmxPairsScratch& s) {
  static const __m512i lo_idx = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  static const __m512i hi_idx = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  const int64_t row_len = s.cout_pad * 2;
  for (int64_t r = 0; r < n_pad / 2; ++r) {
    const int64_t p0 = 2 * r, p1 = 2 * r + 1;
    uint16_t* dst = s.g_vnni.data() + r * row_len;
    for (int64_t j = 0; j < s.cout; j += 32) {
      const __mmask32 m = s.cout - j >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << (s.cout - j)) - 1u);
      const __m512i x0 = p0 < n ? _mm512_maskz_loadu_epi16(m, g[p0] + j) : _mm512_setzero_si512();
      const __m512i x1 = p1 < n ? _mm512_maskz_loadu_epi16(m, g[p1] + j) : _mm512_setzero_si512();
      const __m512i lo = _mm512_unpacklo_epi16(x0, x1), hi = _mm512_unpackhi_epi16(x0, x1);
      const __m512i first = _mm512_permutex2var_epi64(lo, lo_idx, hi);   // columns j .. j+15
      const __m512i second = _mm512_permutex2var_epi64(lo, hi_idx, hi);  // columns j+16 .. j+31
      _mm512_storeu_si512(dst + 2 * j, first);
      if (j + 16 < s.cout_pad) _mm512_storeu_si512(dst + 2 * j + 32, second);
    }
  }
}

// d[ib*16.., jb*16..] = sum over pair steps of A(ib, step) . B(step, jb), for NT
// column blocks from jb0; tiles 0..3 accumulate, 4 holds A, 5..7 rotate B.
template <int NT>
void pair_blocks(int64_t ib, int64_t jb0, int64_t steps, AmxPairsScratch& s) {
  if constexpr (NT > 0) _tile_zero(0);
  if constexpr (NT > 1) _tile_zero(1);
  if constexpr (NT > 2) _tile_zero(2);
  if constexpr (NT > 3) _tile_zero(3);
  const int64_t a_stride = AmxPairsScratch::kTransposedStride * 2, b_stride = s.cout_pad * 4;
  const uint16_t* a = s.a_t.data() + ib * kRows * AmxPairsScratch::kTransposedStride;
  for (int64_t st = 0; st < steps; ++st) {
    _tile_loadd(4, a + st * kChunk, a_stride);
    const uint16_t* b = s.g_vnni.data() + st * kRows * s.cout_pad * 2 + jb0 * 32;
    if constexpr (NT > 0) { _tile_loadd(5, b + 0 * 32, b_stride); _tile_dpbf16ps(0, 4, 5); }
    if constexpr (NT > 1) { _tile_loadd(6, b + 1 * 32, b_stride); _tile_dpbf16ps(1, 4, 6); }
    if constexpr (NT > 2) { _tile_loadd(7, b + 2 * 32, b_stride); _tile_dpbf16ps(2, 4, 7); }
    if constexpr (NT > 3) { _tile_loadd(5, b + 3 * 32, b_stride); _tile_dpbf16ps(3, 4, 5); }
  }
  float* d = s.d.data() + ib * kRows * s.cout_pad + jb0 * kBlockCols;
  const int64_t d_stride = s.cout_pad * 4;
  if constexpr (NT > 0) _tile_stored(0, d + 0 * kBlockCols, d_stride);
  if constexpr (NT > 1) _tile_stored(1, d + 1 * kBlockCols, d_stride);
  if constexpr (NT > 2) _tile_stored(2, d + 2 * kBlockCols, d_stride);
  if constexpr (NT > 3) _tile_stored(3, d + 3 * kBlockCols, d_stride);
}

}  // namespace

void gemm_tn_amx(int64_t n, const uint16_t* const* a, const uint16_t* const* g, float* D, int64_t ldd,
                 AmxPairsScratch& s) {
  const int64_t n_pad = round_up(n, kChunk);
  transpose_rows(n, n_pad, a, s);
  interleave_grads(n, n_pad, g, s);
  _tile_loadconfig(s.config);
  const int64_t jblocks = s.cout_pad / kBlockCols;
  for (int64_t ib = 0; ib < s.cin_pad / kRows; ++ib)
    for (int64_t jb0 = 0; jb0 < jblocks; jb0 += kCTiles) {
      switch (std::min<int64_t>(kCTiles, jblocks - jb0)) {
        case 4: pair_blocks<4>(ib, jb0, n_pad / kChunk, s); break;
        case 3: pair_blocks<3>(ib, jb0, n_pad / kChunk, s); break;
        case 2: pair_blocks<2>(ib, jb0, n_pad / kChunk, s); break;
        default: pair_blocks<1>(ib, jb0, n_pad / kChunk, s); break;
      }
    }
  _tile_release();
  for (int64_t i = 0; i < s.cin; ++i)
    for (int64_t j = 0; j < s.cout; ++j) D[i * ldd + j] += s.d[i * s.cout_pad + j];
}

#pragma GCC pop_options
#else
void gemm_rows_amx(int64_t, const uint16_t* const*, const AmxWeights&, int64_t, int64_t, float* const*,
                   AmxScratch&) {
  // Unreachable: amx_bf16_usable() is false on builds without AMX support.
  std::abort();
}
void gemm_tn_amx(int64_t, const uint16_t* const*, const uint16_t* const*, float*, int64_t, AmxPairsScratch&) {
  std::abort();
}
void round_to_bf16(const float*, uint16_t*, int64_t) { std::abort(); }
#endif

}  // namespace mxs
