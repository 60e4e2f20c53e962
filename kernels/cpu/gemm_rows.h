// The dense core of gather_mm and of its weight gradient, on row-pointer
// operands so gathered rows are read where they lie (no packing copies):
//
//   gemm_rows:    c[r][j]        += sum_{p < kdim} a[r][p] * B[p * ldb + j]   r < m,     j < ncols
//   gemm_tn_rows: D[i * ldd + j] += sum_{p < n}    a[p][i] * g[p][j]          i < nrows, j < ncols
//
// Every output element is summed over p ascending from zero (gemm_rows_pairs
// below: as two such chains) and only then added to its destination, whatever the
// blocking, so results depend only on the operands: the ops are bitwise
// deterministic for any thread count.
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

// Narrow outputs (ncols <= 32) on AVX-512: B re-laid once per call with each two
// consecutive p side by side per column, so that one 64-bit broadcast of
// (a[r][2q], a[r][2q+1]) feeds the products of two p at once (a float broadcast
// feeds only ncols / 16 <= 2 FMAs per row and the loads, not the FMAs, bound the
// plain kernel there). Each output element is then summed as two chains, even p
// and odd p (each ascending), added together and then to its destination: still
// a function of the operands only.
//   pair_width(ncols):  width (16 or 32) of a packed row, or 0 where this path
//                       does not apply (wider outputs, no AVX-512)
//   pair_packed_size(kdim, ncols): floats of one packed B
//   pack_pairs(kdim, ncols, B, ldb, Bp): Bp[q][j][e] = B[(2q + e) * ldb + j], 0 past kdim or ncols
//   gemm_rows_pairs(...): c[r][j] += sum_{p < kdim} a[r][p] * B[p][j], like gemm_rows
int64_t pair_width(int64_t ncols);
int64_t pair_packed_size(int64_t kdim, int64_t ncols);
void pack_pairs(int64_t kdim, int64_t ncols, const float* B, int64_t ldb, float* Bp);
void gemm_rows_pairs(int64_t m, int64_t kdim, int64_t ncols, const float* const* a, const float* Bp,
                     float* const* c);

// Which implementation the float kernels use on this CPU: "avx512" or "generic".
const char* gemm_float_isa();

}  // namespace mxs
