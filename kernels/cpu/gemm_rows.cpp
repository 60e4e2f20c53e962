// Portable implementation of gemm_rows.h, and the run-time switch to the
// AVX-512 kernels (gemm_rows_avx512.cpp) on CPUs that have them.
#include "gemm_rows.h"
#include "portable_switch.h"

#include <cstdlib>

namespace mxs {

#if defined(__x86_64__) && defined(__GNUC__)
void gemm_rows_avx512(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* B, int64_t ldb,
                      float* const* c);
void gemm_rows_avx512(int64_t m, int64_t kdim, int64_t ncols, const double* const* a, const double* B, int64_t ldb,
                      double* const* c);
void gemm_tn_rows_avx512(int64_t n, int64_t nrows, int64_t ncols, const float* const* a, const float* const* g,
                         float* D, int64_t ldd);
void gemm_tn_rows_avx512(int64_t n, int64_t nrows, int64_t ncols, const double* const* a, const double* const* g,
                         double* D, int64_t ldd);
void gemm_rows_pairs_avx512(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* Bp,
                            float* const* c);
static const bool kUseAvx512 = __builtin_cpu_supports("avx512f") && !portable_kernels_only();
#else
static const bool kUseAvx512 = false;
#endif

namespace {

constexpr int64_t kRows = 4, kCols = 64;

// acc[r][j] = sum_p A(r, p) * B(p, j) for a kRows x kCols block, then added to
// the destination: the same order as the AVX-512 kernels.
template <typename T, typename AOf, typename BOf, typename Out>
void generic_block(int64_t rows, int64_t cols, int64_t kdim, AOf a_of, BOf b_of, Out out) {
  T acc[kRows][kCols] = {};
  for (int64_t p = 0; p < kdim; ++p) {
    const T* b = b_of(p);
    for (int64_t r = 0; r < rows; ++r) {
      const T av = a_of(r, p);
      for (int64_t j = 0; j < cols; ++j) acc[r][j] += av * b[j];
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    T* o = out(r);
    for (int64_t j = 0; j < cols; ++j) o[j] += acc[r][j];
  }
}

template <typename T>
void gemm_rows_generic(int64_t m, int64_t kdim, int64_t ncols, const T* const* a, const T* B, int64_t ldb,
                       T* const* c) {
  for (int64_t r0 = 0; r0 < m; r0 += kRows)
    for (int64_t j0 = 0; j0 < ncols; j0 += kCols)
      generic_block<T>(
          m - r0 < kRows ? m - r0 : kRows, ncols - j0 < kCols ? ncols - j0 : kCols, kdim,
          [&](int64_t r, int64_t p) { return a[r0 + r][p]; }, [&](int64_t p) { return B + p * ldb + j0; },
          [&](int64_t r) { return c[r0 + r] + j0; });
}

template <typename T>
void gemm_tn_rows_generic(int64_t n, int64_t nrows, int64_t ncols, const T* const* a, const T* const* g, T* D,
                          int64_t ldd) {
  for (int64_t i0 = 0; i0 < nrows; i0 += kRows)
    for (int64_t j0 = 0; j0 < ncols; j0 += kCols)
      generic_block<T>(
          nrows - i0 < kRows ? nrows - i0 : kRows, ncols - j0 < kCols ? ncols - j0 : kCols, n,
          [&](int64_t r, int64_t p) { return a[p][i0 + r]; }, [&](int64_t p) { return g[p] + j0; },
          [&](int64_t r) { return D + (i0 + r) * ldd + j0; });
}

}  // namespace

void gemm_rows(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* B, int64_t ldb,
               float* const* c) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return gemm_rows_avx512(m, kdim, ncols, a, B, ldb, c);
#endif
  gemm_rows_generic(m, kdim, ncols, a, B, ldb, c);
}

void gemm_rows(int64_t m, int64_t kdim, int64_t ncols, const double* const* a, const double* B, int64_t ldb,
               double* const* c) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return gemm_rows_avx512(m, kdim, ncols, a, B, ldb, c);
#endif
  gemm_rows_generic(m, kdim, ncols, a, B, ldb, c);
}

void gemm_tn_rows(int64_t n, int64_t nrows, int64_t ncols, const float* const* a, const float* const* g, float* D,
                  int64_t ldd) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return gemm_tn_rows_avx512(n, nrows, ncols, a, g, D, ldd);
#endif
  gemm_tn_rows_generic(n, nrows, ncols, a, g, D, ldd);
}

void gemm_tn_rows(int64_t n, int64_t nrows, int64_t ncols, const double* const* a, const double* const* g, double* D,
                  int64_t ldd) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return gemm_tn_rows_avx512(n, nrows, ncols, a, g, D, ldd);
#endif
  gemm_tn_rows_generic(n, nrows, ncols, a, g, D, ldd);
}

int64_t pair_width(int64_t ncols) { return !kUseAvx512 || ncols > 32 ? 0 : ncols > 16 ? 32 : 16; }

int64_t pair_packed_size(int64_t kdim, int64_t ncols) { return (kdim + 1) / 2 * pair_width(ncols) * 2; }

void pack_pairs(int64_t kdim, int64_t ncols, const float* B, int64_t ldb, float* Bp) {
  const int64_t width = pair_width(ncols);
  for (int64_t q = 0; q < (kdim + 1) / 2; ++q)
    for (int64_t j = 0; j < width; ++j)
      for (int64_t e = 0; e < 2; ++e) {
        const int64_t p = 2 * q + e;
        Bp[(q * width + j) * 2 + e] = p < kdim && j < ncols ? B[p * ldb + j] : 0.0f;
      }
}

void gemm_rows_pairs(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* Bp,
                     float* const* c) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return gemm_rows_pairs_avx512(m, kdim, ncols, a, Bp, c);
#endif
  (void)m, (void)kdim, (void)ncols, (void)a, (void)Bp, (void)c;
  std::abort();  // unreachable: pair_width() is 0 without AVX-512, so no caller packs pairs
}

const char* gemm_float_isa() { return kUseAvx512 ? "avx512" : "generic"; }

}  // namespace mxs
