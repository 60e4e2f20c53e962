// AVX-512 float kernels of gemm_rows.h. The output is cut into column strips;
// a strip is computed R rows at a time in a register tile of R x NV vectors:
//   strips of 64 columns: 7 rows x 4 vectors  (28 zmm accumulators)
//   the last 32 or 16:   14 rows x 2 vectors, or 14 rows x 1 vector
// Each p step loads the strip's NV B vectors and broadcasts one A value per row,
// so a wide strip needs 11 loads per 28 FMAs where 14 x 2 needs 16; 28
// accumulators (of 32 registers) also spread each tile's final read-add-write of
// its output rows over more work. Measured on the captured KITTI calls against
// the former 8 x 2 tile: 14 x 2 took 7-8 % off all gather_mm and weight-gradient
// calls, 7 x 4 strips another 12 % (25-35 % on gather_mm with 64 or more output
// channels). Outputs of at most 32 columns take row/column pairs instead (below:
// gemm_rows_pairs on pair-packed B, and gemm_tn_rows two D rows per broadcast), as
// there a float broadcast feeds at most two FMAs. Column tails use masked
// loads/stores (masked-off lanes never fault), row tails a smaller instantiation.
// Compiled for AVX-512 by the target pragma alone and only called after the
// run-time CPU check in gemm_rows.cpp.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <cstdint>
#include <cstring>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,fma")

// The row/vector loops below carry explicit unroll pragmas: unless they are
// unrolled completely before scalar replacement (the count must cover R <= 16),
// GCC 12 keeps the accumulator array in memory and stores every accumulator on
// every p step.
#define MXS_UNROLL _Pragma("GCC unroll 16")

namespace mxs {
namespace {

inline __mmask16 mask_of(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? 0 : __mmask16((1u << n) - 1u); }

// acc[r][v] = sum_p A(r, p) * B(p)[16v..16v+16) over p ascending; then out(r) += acc[r].
// mask[v] selects the columns of vector v that exist.
template <int R, int NV, typename AOf, typename BOf, typename Out>
inline void block(int64_t kdim, AOf a_of, BOf b_of, Out out, const __mmask16* mask) {
  __m512 acc[R][NV];
  MXS_UNROLL for (int r = 0; r < R; ++r)
    MXS_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kdim; ++p) {
    const float* b = b_of(p);
    __m512 bv[NV];
    MXS_UNROLL for (int v = 0; v < NV; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + 16 * v);
    MXS_UNROLL for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a_of(r, p));
      MXS_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  MXS_UNROLL for (int r = 0; r < R; ++r) {
    float* o = out(r);
    MXS_UNROLL for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(o + 16 * v, mask[v], _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], o + 16 * v), acc[r][v]));
  }
}

// The last `rows` (< R) rows of a strip: instantiate the exact row count.
template <int R, int NV, typename AOf, typename BOf, typename Out>
inline void row_tail(int64_t rows, int64_t kdim, AOf a_of, BOf b_of, Out out, const __mmask16* mask) {
  if (rows == R) return block<R, NV>(kdim, a_of, b_of, out, mask);
  if constexpr (R > 1) row_tail<R - 1, NV>(rows, kdim, a_of, b_of, out, mask);
}

// All m rows of one column strip (NV vectors wide), R rows at a time.
template <int R, int NV, typename AOf, typename BOf, typename Out>
inline void strip(int64_t m, int64_t kdim, AOf a_of, BOf b_of, Out out, const __mmask16* mask) {
  static_assert(R <= 16 && R * NV <= 28, "MXS_UNROLL must cover R; accumulators + B vectors must fit 32 registers");
  int64_t r0 = 0;
  auto a_at = [&](int r, int64_t p) { return a_of(r0 + r, p); };
  auto out_at = [&](int r) { return out(r0 + r); };
  for (; r0 + R <= m; r0 += R) block<R, NV>(kdim, a_at, b_of, out_at, mask);
  if (r0 < m) row_tail<R - 1, NV>(m - r0, kdim, a_at, b_of, out_at, mask);
}

template <typename AOf, typename BOf, typename Out>
inline void all_rows(int64_t m, int64_t kdim, int64_t ncols, AOf a_of, BOf b_of, Out out) {
  for (int64_t j0 = 0; j0 < ncols;) {
    const int64_t w = ncols - j0;
    auto bj = [&](int64_t p) { return b_of(p) + j0; };
    auto oj = [&](int64_t r) { return out(r) + j0; };
    const __mmask16 mask[4] = {mask_of(w), mask_of(w - 16), mask_of(w - 32), mask_of(w - 48)};
    if (w > 32) {
      strip<7, 4>(m, kdim, a_of, bj, oj, mask);
      j0 += 64;
    } else if (w > 16) {
      strip<14, 2>(m, kdim, a_of, bj, oj, mask);
      j0 += 32;
    } else {
      strip<14, 1>(m, kdim, a_of, bj, oj, mask);
      j0 += 16;
    }
  }
}

// gemm_rows_pairs on pair-packed B (gemm_rows.h): a packed row holds NV vectors of
// 8 columns x 2 p, so acc[r][v] lane 2c + e sums the products of parity e for column
// 8v + c. One 64-bit broadcast (a[r][2q], a[r][2q + 1]) feeds NV FMAs per row for
// two p; an odd last p is broadcast as (a[r][kdim - 1], +0) against a zero row.
template <int R, int NV>
inline void pair_block(int64_t kdim, const float* const* a, const float* bp, float* const* c, int64_t ncols) {
  __m512 acc[R][NV];
  MXS_UNROLL for (int r = 0; r < R; ++r)
    MXS_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  auto step = [&](const float* b, auto broadcast_row) {
    __m512 bv[NV];
    MXS_UNROLL for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
    MXS_UNROLL for (int r = 0; r < R; ++r) {
      const __m512 av = broadcast_row(a[r]);
      MXS_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  };
  const int64_t npairs = kdim / 2;
  for (int64_t q = 0; q < npairs; ++q)
    step(bp + q * 16 * NV, [q](const float* row) {
      double two;  // the two floats as one 64-bit lane (memcpy: no aliasing assumptions)
      std::memcpy(&two, row + 2 * q, sizeof two);
      return _mm512_castpd_ps(_mm512_set1_pd(two));
    });
  if (kdim % 2)
    step(bp + npairs * 16 * NV, [kdim](const float* row) {
      uint32_t bits;
      std::memcpy(&bits, row + kdim - 1, sizeof bits);
      return _mm512_castsi512_ps(_mm512_set1_epi64(int64_t(bits)));  // (a, +0.0f)
    });
  // columns 16h..16h+15 = even-p lanes + odd-p lanes of accumulators 2h and 2h + 1
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  MXS_UNROLL for (int r = 0; r < R; ++r)
    MXS_UNROLL for (int h = 0; h < NV / 2; ++h) {
      const __m512 lo = acc[r][2 * h], hi = acc[r][2 * h + 1];
      const __m512 sum = _mm512_add_ps(_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi));
      const __mmask16 m = mask_of(ncols - 16 * h);
      float* o = c[r] + 16 * h;
      _mm512_mask_storeu_ps(o, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), sum));
    }
}

// The last `rows` (< R) rows: instantiate the exact row count.
template <int R, int NV>
inline void pair_tail(int64_t rows, int64_t kdim, const float* const* a, const float* bp, float* const* c,
                      int64_t ncols) {
  if (rows == R) return pair_block<R, NV>(kdim, a, bp, c, ncols);
  if constexpr (R > 1) pair_tail<R - 1, NV>(rows, kdim, a, bp, c, ncols);
}

template <int R, int NV>
inline void pair_rows(int64_t m, int64_t kdim, const float* const* a, const float* bp, float* const* c,
                      int64_t ncols) {
  int64_t r0 = 0;
  for (; r0 + R <= m; r0 += R) pair_block<R, NV>(kdim, a + r0, bp, c + r0, ncols);
  if (r0 < m) pair_tail<R - 1, NV>(m - r0, kdim, a + r0, bp, c + r0, ncols);
}

// gemm_tn_rows for narrow outputs (ncols <= 32), rows of D taken two at a time: one
// 64-bit broadcast (a[p][i], a[p][i + 1]) times the gradient row with every column
// duplicated into a lane pair, so acc[r][v] lane 2c + e is D[i0 + 2r + e][8v + c].
// Half the broadcasts of the plain kernel per FMA, and the same sums in the same
// order (over p ascending, then added to D): results are bitwise those of the
// plain kernel.
template <int P, int NV>
inline void tn_pair_block(int64_t n, const float* const* a, const float* const* g, int64_t i0, float* D, int64_t ldd,
                          int64_t ncols) {
  const __m512i dup_lo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i dup_hi = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  __m512 acc[P][NV];
  MXS_UNROLL for (int r = 0; r < P; ++r)
    MXS_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < n; ++p) {
    __m512 gd[NV];
    MXS_UNROLL for (int h = 0; h < NV / 2; ++h) {
      const __m512 x = _mm512_maskz_loadu_ps(mask_of(ncols - 16 * h), g[p] + 16 * h);
      gd[2 * h] = _mm512_permutexvar_ps(dup_lo, x);
      gd[2 * h + 1] = _mm512_permutexvar_ps(dup_hi, x);
    }
    const float* ap = a[p] + i0;
    MXS_UNROLL for (int r = 0; r < P; ++r) {
      double two;
      std::memcpy(&two, ap + 2 * r, sizeof two);
      const __m512 av = _mm512_castpd_ps(_mm512_set1_pd(two));
      MXS_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, gd[v], acc[r][v]);
    }
  }
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  MXS_UNROLL for (int r = 0; r < P; ++r)
    MXS_UNROLL for (int h = 0; h < NV / 2; ++h) {
      const __mmask16 m = mask_of(ncols - 16 * h);
      const __m512 lo = acc[r][2 * h], hi = acc[r][2 * h + 1];
      float* d0 = D + (i0 + 2 * r) * ldd + 16 * h;
      float* d1 = d0 + ldd;
      _mm512_mask_storeu_ps(d0, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, d0), _mm512_permutex2var_ps(lo, even, hi)));
      _mm512_mask_storeu_ps(d1, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, d1), _mm512_permutex2var_ps(lo, odd, hi)));
    }
}

// The last `pairs` (< P) row pairs: instantiate the exact count.
template <int P, int NV>
inline void tn_pair_tail(int64_t pairs, int64_t n, const float* const* a, const float* const* g, int64_t i0, float* D,
                         int64_t ldd, int64_t ncols) {
  if (pairs == P) return tn_pair_block<P, NV>(n, a, g, i0, D, ldd, ncols);
  if constexpr (P > 1) tn_pair_tail<P - 1, NV>(pairs, n, a, g, i0, D, ldd, ncols);
}

template <int P, int NV>
inline void tn_pair_rows(int64_t n, int64_t nrows, int64_t ncols, const float* const* a, const float* const* g,
                         float* D, int64_t ldd) {
  const int64_t pairs = nrows / 2;
  int64_t r = 0;
  for (; r + P <= pairs; r += P) tn_pair_block<P, NV>(n, a, g, 2 * r, D, ldd, ncols);
  if (r < pairs) tn_pair_tail<P - 1, NV>(pairs - r, n, a, g, 2 * r, D, ldd, ncols);
}

}  // namespace

void gemm_rows_pairs_avx512(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* Bp,
                            float* const* c) {
  if (ncols > 16) pair_rows<7, 4>(m, kdim, a, Bp, c, ncols);
  else pair_rows<14, 2>(m, kdim, a, Bp, c, ncols);
}

void gemm_rows_avx512(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* B, int64_t ldb,
                      float* const* c) {
  all_rows(
      m, kdim, ncols, [&](int64_t r, int64_t p) { return a[r][p]; }, [&](int64_t p) { return B + p * ldb; },
      [&](int64_t r) { return c[r]; });
}

void gemm_tn_rows_avx512(int64_t n, int64_t nrows, int64_t ncols, const float* const* a, const float* const* g,
                         float* D, int64_t ldd) {
  int64_t i0 = 0;  // rows [0, i0) done by the row-pair kernels
  if (ncols <= 16) {
    tn_pair_rows<14, 2>(n, nrows, ncols, a, g, D, ldd);
    i0 = nrows & ~int64_t(1);
  } else if (ncols <= 32) {
    tn_pair_rows<7, 4>(n, nrows, ncols, a, g, D, ldd);
    i0 = nrows & ~int64_t(1);
  }
  all_rows(
      nrows - i0, n, ncols, [&](int64_t i, int64_t p) { return a[p][i0 + i]; }, [&](int64_t p) { return g[p]; },
      [&](int64_t i) { return D + (i0 + i) * ldd; });
}

}  // namespace mxs

#undef MXS_UNROLL
#pragma GCC pop_options
#endif
