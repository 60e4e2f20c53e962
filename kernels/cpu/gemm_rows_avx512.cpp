// AVX-512 float and double kernels of gemm_rows.h. The output is cut into column
// strips; a strip is computed R rows at a time in a register tile of R x NV vectors:
//   strips of 4 vectors (64 floats, 32 doubles): 6 rows x 4 vectors  (24 zmm accumulators)
//   the last 2 or 1 vectors:                   14 rows x 2 vectors, or 14 rows x 1 vector
// float and double run the same templates (Simd<T> below); double has half the
// lanes per vector and no pair-packed paths (those are float-only).
// Each p step loads the strip's NV B vectors and broadcasts one A value per row.
// A tile must fit the 32 vector registers with its B vectors and broadcast:
// R * NV + NV + 1 <= 32. One register more (the former 7 x 4 tile) and GCC keeps
// an accumulator on the stack, a store and a reload on every p step. Operand
// pointers are copied into locals before the p loop: read through the callers'
// arrays, GCC reloads them on every step. Both together, measured on the captured
// KITTI calls: 10-15 % off gather_mm with 64 output channels.
// Narrow outputs take row/column pairs instead, as there a float broadcast feeds
// at most two FMAs: gemm_rows_pairs on pair-packed B (up to 32 columns) and
// gemm_tn_rows two D rows per broadcast (up to 16; at 32 columns the plain 14 x 2
// tile measured as fast, in-process A/B). Column tails use masked
// loads/stores (masked-off lanes never fault), row tails a smaller instantiation.
// Compiled for AVX-512 by the target pragma alone and only called after the
// run-time CPU check in gemm_rows.cpp.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <cstdint>
#include <cstring>
#include <type_traits>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw,fma")

// The row/vector loops below carry explicit unroll pragmas: unless they are
// unrolled completely before scalar replacement (the count must cover R <= 16),
// GCC 12 keeps the accumulator array in memory and stores every accumulator on
// every p step.
#define MXS_UNROLL _Pragma("GCC unroll 16")
#define MXS_INLINE inline __attribute__((always_inline))

namespace mxs {
namespace {

// One zmm register of T: float (16 lanes) or double (8 lanes), with the masked
// loads/stores of a column tail. The float and double kernels are the same
// templates over this; the float ones compile to what they were before.
template <typename T>
struct Simd;

template <>
struct Simd<float> {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static MXS_INLINE V zero() { return _mm512_setzero_ps(); }
  static MXS_INLINE V set1(float x) { return _mm512_set1_ps(x); }
  static MXS_INLINE V load(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static MXS_INLINE void store(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static MXS_INLINE V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static MXS_INLINE V add(V a, V b) { return _mm512_add_ps(a, b); }
};

template <>
struct Simd<double> {
  using V = __m512d;
  using Mask = __mmask8;
  static constexpr int kLanes = 8;
  static MXS_INLINE V zero() { return _mm512_setzero_pd(); }
  static MXS_INLINE V set1(double x) { return _mm512_set1_pd(x); }
  static MXS_INLINE V load(Mask m, const double* p) { return _mm512_maskz_loadu_pd(m, p); }
  static MXS_INLINE void store(double* p, Mask m, V v) { _mm512_mask_storeu_pd(p, m, v); }
  static MXS_INLINE V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static MXS_INLINE V add(V a, V b) { return _mm512_add_pd(a, b); }
};

// The first n of a vector's lanes (all of them from kLanes on, none at n <= 0).
template <typename T>
inline typename Simd<T>::Mask lanes_of(int64_t n) {
  using Mask = typename Simd<T>::Mask;
  constexpr int L = Simd<T>::kLanes;
  return n >= L ? Mask((1u << L) - 1u) : n <= 0 ? Mask(0) : Mask((1u << n) - 1u);
}

inline __mmask16 mask_of(int64_t n) { return lanes_of<float>(n); }

// R * NV accumulators, `live` other vectors held through the p loop, and R <= 16
// for MXS_UNROLL.
template <int R, int NV>
constexpr bool fits_registers(int live) {
  return R <= 16 && R * NV + live <= 32;
}

template <int R, int NV, typename V>
MXS_INLINE void zero(V (&acc)[R][NV]) {
  MXS_UNROLL for (int r = 0; r < R; ++r)
    MXS_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = V{};  // every lane +0.0
}

// acc[r][v] += a_at(r) * b[Lv..Lv+L) for r < R (L lanes of T): one p step.
template <typename T, int R, int NV, typename AAt>
MXS_INLINE void fma_step(typename Simd<T>::V (&acc)[R][NV], const T* b, const typename Simd<T>::Mask* mask,
                         AAt a_at) {
  using S = Simd<T>;
  typename S::V bv[NV];
  MXS_UNROLL for (int v = 0; v < NV; ++v) bv[v] = S::load(mask[v], b + S::kLanes * v);
  MXS_UNROLL for (int r = 0; r < R; ++r) {
    const typename S::V av = S::set1(a_at(r));
    MXS_UNROLL for (int v = 0; v < NV; ++v) acc[r][v] = S::fma(av, bv[v], acc[r][v]);
  }
}

// out(r)[Lv..Lv+L) += acc[r][v], the columns of mask[v] only.
template <typename T, int R, int NV, typename Out>
MXS_INLINE void add_tile(const typename Simd<T>::V (&acc)[R][NV], Out out, const typename Simd<T>::Mask* mask) {
  using S = Simd<T>;
  MXS_UNROLL for (int r = 0; r < R; ++r) {
    T* o = out(r);
    MXS_UNROLL for (int v = 0; v < NV; ++v)
      S::store(o + S::kLanes * v, mask[v], S::add(S::load(mask[v], o + S::kLanes * v), acc[r][v]));
  }
}

template <int R>
using Rows = std::integral_constant<int, R>;

// block(Rows<R>(), r0) for r0 = 0, R, 2R, ...; the last m % R rows as one more
// block of exactly that many rows (its own instantiation).
template <int R, typename Block>
inline void tail_block(int64_t rows, int64_t r0, Block block) {
  if (rows == R) return block(Rows<R>(), r0);
  if constexpr (R > 1) tail_block<R - 1>(rows, r0, block);
}

template <int R, typename Block>
inline void row_blocks(int64_t m, Block block) {
  int64_t r0 = 0;
  for (; r0 + R <= m; r0 += R) block(Rows<R>(), r0);
  if (r0 < m) tail_block<R - 1>(m - r0, r0, block);
}

// Cuts the columns into strips (4 vectors wide: 64 floats or 32 doubles, then 2
// or 1 vectors) and calls strip(Rows<R>(), std::integral_constant<int, NV>(), j0, mask)
// for each.
template <typename T, typename Strip>
inline void column_strips(int64_t ncols, Strip strip) {
  constexpr int64_t L = Simd<T>::kLanes;
  for (int64_t j0 = 0; j0 < ncols;) {
    const int64_t w = ncols - j0;
    const typename Simd<T>::Mask mask[4] = {lanes_of<T>(w), lanes_of<T>(w - L), lanes_of<T>(w - 2 * L),
                                            lanes_of<T>(w - 3 * L)};
    if (w > 2 * L) {
      strip(Rows<6>(), std::integral_constant<int, 4>(), j0, mask);
      j0 += 4 * L;
    } else if (w > L) {
      strip(Rows<14>(), std::integral_constant<int, 2>(), j0, mask);
      j0 += 2 * L;
    } else {
      strip(Rows<14>(), std::integral_constant<int, 1>(), j0, mask);
      j0 += L;
    }
  }
}

// gemm_rows, one tile: c[r][j0..] += sum_p a[r][p] * B[p][j0..] for R gathered rows.
template <typename T, int R, int NV>
inline void rows_block(int64_t kdim, const T* const* a, const T* b, int64_t ldb, T* const* c, int64_t j0,
                       const typename Simd<T>::Mask* mask) {
  static_assert(fits_registers<R, NV>(NV + 1));
  const T* ar[R];
  MXS_UNROLL for (int r = 0; r < R; ++r) ar[r] = a[r];
  typename Simd<T>::V acc[R][NV];
  zero(acc);
  for (int64_t p = 0; p < kdim; ++p, b += ldb) fma_step<T>(acc, b, mask, [&](int r) { return ar[r][p]; });
  add_tile<T>(acc, [&](int r) { return c[r] + j0; }, mask);
}

// gemm_tn_rows, one tile: D[i0 + r][j0..] += sum_p a[p][i0 + r] * g[p][j0..].
template <typename T, int R, int NV>
inline void tn_block(int64_t n, const T* const* a, int64_t i0, const T* const* g, int64_t j0, T* D, int64_t ldd,
                     const typename Simd<T>::Mask* mask) {
  static_assert(fits_registers<R, NV>(NV + 1));
  typename Simd<T>::V acc[R][NV];
  zero(acc);
  for (int64_t p = 0; p < n; ++p) {
    const T* ap = a[p] + i0;
    fma_step<T>(acc, g[p] + j0, mask, [&](int r) { return ap[r]; });
  }
  add_tile<T>(acc, [&](int r) { return D + (i0 + r) * ldd + j0; }, mask);
}

// gemm_rows_pairs on pair-packed B (gemm_rows.h): a packed row holds NV vectors of
// 8 columns x 2 p, so acc[r][v] lane 2c + e sums the products of parity e for column
// 8v + c. One 64-bit broadcast (a[r][2q], a[r][2q + 1]) feeds NV FMAs per row for
// two p; an odd last p is broadcast as (a[r][kdim - 1], +0) against a zero row.
template <int R, int NV>
inline void pair_block(int64_t kdim, const float* const* a, const float* bp, float* const* c, int64_t ncols) {
  static_assert(fits_registers<R, NV>(NV + 1));
  const float* ar[R];
  MXS_UNROLL for (int r = 0; r < R; ++r) ar[r] = a[r];
  __m512 acc[R][NV];
  zero(acc);
  auto step = [&](const float* b, auto broadcast_row) {
    __m512 bv[NV];
    MXS_UNROLL for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
    MXS_UNROLL for (int r = 0; r < R; ++r) {
      const __m512 av = broadcast_row(ar[r]);
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

// gemm_tn_rows for narrow outputs (ncols <= 16), rows of D taken two at a time: one
// 64-bit broadcast (a[p][i], a[p][i + 1]) times the gradient row with every column
// duplicated into a lane pair, so acc[r][v] lane 2c + e is D[i0 + 2r + e][8v + c].
// Half the broadcasts of the plain kernel per FMA, and the same sums in the same
// order (over p ascending, then added to D): results are bitwise those of the
// plain kernel. Held through the loop besides the accumulators: NV duplicated
// gradient vectors, the two permutation indices and the broadcast.
template <int P, int NV>
inline void tn_pair_block(int64_t n, const float* const* a, const float* const* g, int64_t i0, float* D, int64_t ldd,
                          int64_t ncols) {
  static_assert(fits_registers<P, NV>(NV + 3));
  const __m512i dup_lo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i dup_hi = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  __m512 acc[P][NV];
  zero(acc);
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

// The plain kernels for T = float or double.
template <typename T>
void gemm_rows_plain(int64_t m, int64_t kdim, int64_t ncols, const T* const* a, const T* B, int64_t ldb,
                     T* const* c) {
  column_strips<T>(ncols, [&](auto R, auto nv, int64_t j0, const typename Simd<T>::Mask* mask) {
    row_blocks<decltype(R)::value>(m, [&](auto r, int64_t r0) {
      rows_block<T, decltype(r)::value, decltype(nv)::value>(kdim, a + r0, B + j0, ldb, c + r0, j0, mask);
    });
  });
}

// Rows [i0, nrows) of D.
template <typename T>
void gemm_tn_rows_plain(int64_t n, int64_t i0, int64_t nrows, int64_t ncols, const T* const* a, const T* const* g,
                        T* D, int64_t ldd) {
  column_strips<T>(ncols, [&](auto R, auto nv, int64_t j0, const typename Simd<T>::Mask* mask) {
    row_blocks<decltype(R)::value>(nrows - i0, [&](auto r, int64_t r0) {
      tn_block<T, decltype(r)::value, decltype(nv)::value>(n, a, i0 + r0, g, j0, D, ldd, mask);
    });
  });
}

}  // namespace

void gemm_rows_pairs_avx512(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* Bp,
                            float* const* c) {
  if (ncols > 16)
    row_blocks<6>(m, [&](auto r, int64_t r0) { pair_block<decltype(r)::value, 4>(kdim, a + r0, Bp, c + r0, ncols); });
  else
    row_blocks<14>(m, [&](auto r, int64_t r0) { pair_block<decltype(r)::value, 2>(kdim, a + r0, Bp, c + r0, ncols); });
}

void gemm_rows_avx512(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* B, int64_t ldb,
                      float* const* c) {
  gemm_rows_plain(m, kdim, ncols, a, B, ldb, c);
}

void gemm_rows_avx512(int64_t m, int64_t kdim, int64_t ncols, const double* const* a, const double* B, int64_t ldb,
                      double* const* c) {
  gemm_rows_plain(m, kdim, ncols, a, B, ldb, c);
}

void gemm_tn_rows_avx512(int64_t n, int64_t nrows, int64_t ncols, const float* const* a, const float* const* g,
                         float* D, int64_t ldd) {
  int64_t i0 = 0;  // rows [0, i0) done by the row-pair kernel
  if (ncols <= 16) {
    row_blocks<13>(nrows / 2, [&](auto pairs, int64_t r) {
      tn_pair_block<decltype(pairs)::value, 2>(n, a, g, 2 * r, D, ldd, ncols);
    });
    i0 = nrows & ~int64_t(1);
  }
  gemm_tn_rows_plain(n, i0, nrows, ncols, a, g, D, ldd);
}

void gemm_tn_rows_avx512(int64_t n, int64_t nrows, int64_t ncols, const double* const* a, const double* const* g,
                         double* D, int64_t ldd) {
  gemm_tn_rows_plain<double>(n, 0, nrows, ncols, a, g, D, ldd);
}

}  // namespace mxs

#undef MXS_INLINE
#undef MXS_UNROLL
#pragma GCC pop_options
#endif
