// The dense core of gather_mm and of its weight gradient, on row-pointer
// operands so gathered rows are read where they lie (no packing copies):
//
//   gemm_rows:    c[r][j]        += sum_{p < kdim} a[r][p] * B[p * ldb + j]   r < m,     j < ncols
//   gemm_tn_rows: D[i * ldd + j] += sum_{p < n}    a[p][i] * g[p][j]          i < nrows, j < ncols
//
// Every output element is summed over p ascending from zero and only then added
// to its destination, whatever the blocking, so results depend only on the
// operands: the ops are bitwise deterministic for any thread count.
#pragma once
#include <cstdint>

namespace mxs {

void gemm_rows(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* B, int64_t ldb,
               float* const* c);
void gemm_rows(int64_t m, int64_t kdim, int64_t ncols, const double* const* a, const double* B, int64_t ldb,
               double* const* c);

void gemm_tn_rows(int64_t n, int64_t nrows, int64_t ncols, const float* const* a, const float* const* g, float* D,
                  int64_t ldd);
void gemm_tn_rows(int64_t n, int64_t nrows, int64_t ncols, const double* const* a, const double* const* g, double* D,
                  int64_t ldd);

// Which implementation the float kernels use on this CPU: "avx512" or "generic".
const char* gemm_float_isa();

}  // namespace mxs
