// The row loops of batch_norm_relu_cpu.cpp, over rows [r0, r1) of [N, C] features
// with the channels innermost, so that the compiler vectorises them at the width
// of the target it compiles for. This header is compiled twice: in
// batch_norm_relu_cpu.cpp for the baseline x86-64 ISA (SSE2), and in
// batch_norm_relu_avx512.cpp under an AVX-512 target (measured 20-30 % faster on
// KITTI-sized layers; the loops are memory- and compute-bound about equally). The
// loops live in an anonymous namespace, so each file keeps its own copy; the
// BatchNormRows table is how the first reaches the second. Sums run per channel
// in row order in both copies; the AVX-512 copy may fuse x * scale + shift into one
// rounding (FMA), so the two can differ in the last bit.
#pragma once
#include <cstdint>

namespace mxs {

// One ISA's loops for element type T.
template <typename T>
struct BatchNormRows {
  // acc[j] += x[r][j]
  void (*add_rows)(const T* x, int64_t c, int64_t r0, int64_t r1, T* acc);
  // acc[j] += (x[r][j] - mean[j])^2
  void (*add_squared_deviations)(const T* x, const T* mean, int64_t c, int64_t r0, int64_t r1, T* acc);
  // y[r][j] = max(x[r][j] * scale[j] + shift[j], 0)
  void (*scale_shift_relu)(const T* x, const T* scale, const T* shift, int64_t c, int64_t r0, int64_t r1, T* y);
  // g = dy where x * scale + shift > 0, else 0: acc[j] += g, acc[c + j] += g * (x - mean) * invstd
  void (*add_backward_sums)(const T* x, const T* dy, const T* scale, const T* shift, const T* mean,
                            const T* invstd, int64_t c, int64_t r0, int64_t r1, T* acc);
  // dx = k_g * g + k_x * (x - mean) + k_0, g as above
  void (*backward_dx)(const T* x, const T* dy, const T* scale, const T* shift, const T* mean, const T* k_g,
                      const T* k_x, const T* k_0, int64_t c, int64_t r0, int64_t r1, T* dx);
};

// The AVX-512 float loops (batch_norm_relu_avx512.cpp); call only where the CPU has AVX-512.
const BatchNormRows<float>& batch_norm_rows_avx512();

namespace {

template <typename T>
inline T scale_shift_relu_value(T x, T scale, T shift) {
  const T z = x * scale + shift;
  return z > T(0) ? z : T(0);
}

template <typename T>
void add_rows(const T* x, int64_t c, int64_t r0, int64_t r1, T* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) acc[j] += x[r * c + j];
}

template <typename T>
void add_squared_deviations(const T* x, const T* mean, int64_t c, int64_t r0, int64_t r1, T* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const T d = x[r * c + j] - mean[j];
      acc[j] += d * d;
    }
}

template <typename T>
void scale_shift_relu_rows(const T* x, const T* scale, const T* shift, int64_t c, int64_t r0, int64_t r1,
                           T* __restrict y) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = scale_shift_relu_value(x[r * c + j], scale[j], shift[j]);
}

template <typename T>
void add_backward_sums(const T* x, const T* dy, const T* scale, const T* shift, const T* mean, const T* invstd,
                       int64_t c, int64_t r0, int64_t r1, T* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const T xv = x[r * c + j], dyv = dy[r * c + j];  // both loaded: a branch-free select vectorises
      const T g = scale_shift_relu_value(xv, scale[j], shift[j]) > T(0) ? dyv : T(0);
      acc[j] += g;
      acc[c + j] += g * ((xv - mean[j]) * invstd[j]);
    }
}

template <typename T>
void backward_dx(const T* x, const T* dy, const T* scale, const T* shift, const T* mean, const T* k_g, const T* k_x,
                 const T* k_0, int64_t c, int64_t r0, int64_t r1, T* __restrict dx) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const T xv = x[r * c + j], dyv = dy[r * c + j];
      const T g = scale_shift_relu_value(xv, scale[j], shift[j]) > T(0) ? dyv : T(0);
      dx[r * c + j] = k_g[j] * g + k_x[j] * (xv - mean[j]) + k_0[j];
    }
}

// This file's copy of the loops, as a table.
template <typename T>
const BatchNormRows<T>& batch_norm_rows_here() {
  static const BatchNormRows<T> rows{&add_rows<T>, &add_squared_deviations<T>, &scale_shift_relu_rows<T>,
                                     &add_backward_sums<T>, &backward_dx<T>};
  return rows;
}

}  // namespace
}  // namespace mxs
