// Register-blocked implementations of gemm_rows.h. Written as plain loops over
// fixed-size blocks that the compiler vectorises; GCC's target_clones builds an
// AVX-512, an AVX2+FMA and a baseline copy and picks one at load time, so one
// binary is fast on new CPUs and still runs on old ones.
#include "gemm_rows.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MXS_CPU_CLONES __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
#else
#define MXS_CPU_CLONES
#endif

namespace mxs {
namespace {

constexpr int kRowBlock = 6;   // rows sharing each loaded weight vector
constexpr int kColBlock = 16;  // one AVX-512 float vector of accumulators per row

// R rows x C columns starting at column j0; all sums run over p ascending from
// zero and are then added to c, the same order as the tail path below.
template <typename T, int R, int C>
inline void gemm_block(const T* const* a, int64_t kdim, const T* w, int64_t ldw, T* const* c, int64_t j0) {
  T acc[R][C] = {};
  for (int64_t p = 0; p < kdim; ++p) {
    const T* wr = w + p * ldw + j0;
    for (int r = 0; r < R; ++r) {
      const T av = a[r][p];
      for (int j = 0; j < C; ++j) acc[r][j] += av * wr[j];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < C; ++j) c[r][j0 + j] += acc[r][j];
}

template <typename T, int R>
inline void gemm_block_tail(const T* const* a, int64_t kdim, const T* w, int64_t ldw, T* const* c, int64_t j0,
                            int64_t ncols) {
  for (int r = 0; r < R; ++r)
    for (int64_t j = j0; j < ncols; ++j) {
      T s = 0;
      for (int64_t p = 0; p < kdim; ++p) s += a[r][p] * w[p * ldw + j];
      c[r][j] += s;
    }
}

template <typename T, int R>
inline void gemm_row_group(const T* const* a, int64_t kdim, const T* w, int64_t ldw, int64_t ncols, T* const* c) {
  int64_t j = 0;
  for (; j + kColBlock <= ncols; j += kColBlock) gemm_block<T, R, kColBlock>(a, kdim, w, ldw, c, j);
  if (j < ncols) gemm_block_tail<T, R>(a, kdim, w, ldw, c, j, ncols);
}

template <typename T>
inline void gemm_rows_impl(int64_t n, const T* const* a, int64_t kdim, const T* w, int64_t ldw, int64_t ncols,
                           T* const* c) {
  int64_t r = 0;
  for (; r + kRowBlock <= n; r += kRowBlock) gemm_row_group<T, kRowBlock>(a + r, kdim, w, ldw, ncols, c + r);
  for (; r < n; ++r) gemm_row_group<T, 1>(a + r, kdim, w, ldw, ncols, c + r);
}

// Four rank-1 updates per pass over dw, so each dw element is loaded and stored
// once per four products.
template <typename T>
inline void outer_rows_impl(int64_t n, const T* const* a, int64_t nrows, const T* const* g, int64_t ncols, T* dw,
                            int64_t lddw) {
  int64_t p = 0;
  for (; p + 4 <= n; p += 4) {
    const T *g0 = g[p], *g1 = g[p + 1], *g2 = g[p + 2], *g3 = g[p + 3];
    for (int64_t i = 0; i < nrows; ++i) {
      const T a0 = a[p][i], a1 = a[p + 1][i], a2 = a[p + 2][i], a3 = a[p + 3][i];
      T* d = dw + i * lddw;
      for (int64_t j = 0; j < ncols; ++j) d[j] += (a0 * g0[j] + a1 * g1[j]) + (a2 * g2[j] + a3 * g3[j]);
    }
  }
  for (; p < n; ++p)
    for (int64_t i = 0; i < nrows; ++i) {
      const T av = a[p][i];
      T* d = dw + i * lddw;
      for (int64_t j = 0; j < ncols; ++j) d[j] += av * g[p][j];
    }
}

}  // namespace

MXS_CPU_CLONES void gemm_rows_accumulate(int64_t n, const float* const* a, int64_t kdim, const float* w,
                                         int64_t ldw, int64_t ncols, float* const* c) {
  gemm_rows_impl(n, a, kdim, w, ldw, ncols, c);
}
MXS_CPU_CLONES void gemm_rows_accumulate(int64_t n, const double* const* a, int64_t kdim, const double* w,
                                         int64_t ldw, int64_t ncols, double* const* c) {
  gemm_rows_impl(n, a, kdim, w, ldw, ncols, c);
}
MXS_CPU_CLONES void outer_rows_accumulate(int64_t n, const float* const* a, int64_t nrows, const float* const* g,
                                          int64_t ncols, float* dw, int64_t lddw) {
  outer_rows_impl(n, a, nrows, g, ncols, dw, lddw);
}
MXS_CPU_CLONES void outer_rows_accumulate(int64_t n, const double* const* a, int64_t nrows, const double* const* g,
                                          int64_t ncols, double* dw, int64_t lddw) {
  outer_rows_impl(n, a, nrows, g, ncols, dw, lddw);
}

}  // namespace mxs
