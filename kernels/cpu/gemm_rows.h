// Small dense kernels on row-pointer operands: the arithmetic core of gather_mm
// and of its weight gradient. Rows are passed as pointers so gathered inputs are
// read in place, without a copy. Every output element is summed in a fixed order
// that depends only on the operands, never on threads, which makes the ops
// bitwise deterministic.
#pragma once
#include <cstdint>

namespace mxs {

// c[r][j] += sum_{p < kdim} a[r][p] * w[p * ldw + j]   for r < n, j < ncols.
void gemm_rows_accumulate(int64_t n, const float* const* a, int64_t kdim, const float* w, int64_t ldw,
                          int64_t ncols, float* const* c);
void gemm_rows_accumulate(int64_t n, const double* const* a, int64_t kdim, const double* w, int64_t ldw,
                          int64_t ncols, double* const* c);

// dw[i * lddw + j] += sum_{p < n} a[p][i] * g[p][j]   for i < nrows, j < ncols.
void outer_rows_accumulate(int64_t n, const float* const* a, int64_t nrows, const float* const* g,
                           int64_t ncols, float* dw, int64_t lddw);
void outer_rows_accumulate(int64_t n, const double* const* a, int64_t nrows, const double* const* g,
                           int64_t ncols, double* dw, int64_t lddw);

}  // namespace mxs
