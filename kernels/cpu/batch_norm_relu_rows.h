// The row loops of batch_norm_relu_cpu.cpp, over rows [r0, r1) of [N, C] features
// (float32, float64, or bfloat16 computed in float) with the channels innermost, so
// that the compiler vectorises them at the width of the target it compiles for.
// This header is compiled twice: in batch_norm_relu_cpu.cpp for the baseline
// x86-64 ISA (SSE2: the extension is built without -march), and in
// batch_norm_relu_avx512.cpp under an AVX-512 target (on KITTI-sized float32
// layers, 1 thread: forward 1.3-1.9x, backward 1.4-1.8x faster). The loops live in
// an anonymous namespace, so each file keeps its own copy; the BatchNormRows table
// is how the first reaches the second. Sums run per channel in row order in both
// copies, and the extension is built with -ffp-contract=off (setup.py): no copy
// fuses a multiply and an add, so both give the same bits, and so do the vector
// body and the scalar loop GCC runs instead when output and inputs lie close on
// the heap (that choice depended on addresses: dx changed by one ulp, issue 35).
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mxs {

// bfloat16 features are stored as their 16 bits; the loops compute in float.
using bf16_bits = uint16_t;

// The type the loops compute in for features stored as S.
template <typename S>
using compute_t = std::conditional_t<std::is_same_v<S, double>, double, float>;

// One ISA's loops for features stored as S (float, double or bf16_bits), computing in
// T = compute_t<S>: per-channel vectors and sums are T.
template <typename S, typename T = compute_t<S>>
struct BatchNormRows {
  // acc[j] += x[r][j]
  void (*add_rows)(const S* x, int64_t c, int64_t r0, int64_t r1, T* acc);
  // acc[j] += (x[r][j] - mean[j])^2
  void (*add_squared_deviations)(const S* x, const T* mean, int64_t c, int64_t r0, int64_t r1, T* acc);
  // y[r][j] = max(x[r][j] * scale[j] + shift[j], 0), a NaN kept
  void (*scale_shift_relu)(const S* x, const T* scale, const T* shift, int64_t c, int64_t r0, int64_t r1, S* y);
  // g = dy where x * scale + shift > 0, else 0: acc[j] += g, acc[c + j] += g * (x - mean) * invstd
  void (*add_backward_sums)(const S* x, const S* dy, const T* scale, const T* shift, const T* mean,
                            const T* invstd, int64_t c, int64_t r0, int64_t r1, T* acc);
  // dx = k_g * (g - k_x * (x - mean) - k_0), g as above
  void (*backward_dx)(const S* x, const S* dy, const T* scale, const T* shift, const T* mean, const T* k_g,
                      const T* k_x, const T* k_0, int64_t c, int64_t r0, int64_t r1, S* dx);
};

// The AVX-512 float and bfloat16 loops (batch_norm_relu_avx512.cpp); call only
// where the CPU has AVX-512.
const BatchNormRows<float>& batch_norm_rows_avx512_float();
const BatchNormRows<bf16_bits>& batch_norm_rows_avx512_bf16();

namespace {

template <typename T, typename S>
inline T load(S v) {
  if constexpr (std::is_same_v<S, bf16_bits>) {
    const uint32_t bits = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  } else {
    return T(v);
  }
}

// float to bfloat16 rounds to nearest even (c10::BFloat16's rounding); NaN stays a NaN.
template <typename S, typename T>
inline S store(T v) {
  if constexpr (std::is_same_v<S, bf16_bits>) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    return v != v ? bf16_bits(0x7FC0) : bf16_bits(rounded);
  } else {
    return S(v);
  }
}

// x * scale + shift before the ReLU. For float from the exact product (a product of two floats
// fits a double) with one rounding, then once more to float where a value is stored: the same
// bits whether the compiler contracts it into a fused multiply-add (AVX-512 build) or not
// (portable build), and the same as the CUDA backend computes.
template <typename T>
inline auto pre_relu(T x, T scale, T shift) {
  if constexpr (std::is_same_v<T, float>)
    return double(x) * double(scale) + double(shift);
  else
    return x * scale + shift;
}

// max(x * scale + shift, 0), a NaN kept as torch.relu keeps it.
template <typename T>
inline T scale_shift_relu_value(T x, T scale, T shift) {
  const T z = static_cast<T>(pre_relu(x, scale, shift));
  return z < T(0) ? T(0) : z;
}

// The backward's mask: x * scale + shift > 0 (false for a NaN, as torch's is), from the sign of
// the unrounded sum, so a pre-activation too small for float still passes.
template <typename T>
inline bool relu_passes(T x, T scale, T shift) {
  return pre_relu(x, scale, shift) > 0;
}

template <typename S, typename T = compute_t<S>>
void add_rows(const S* x, int64_t c, int64_t r0, int64_t r1, T* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) acc[j] += load<T>(x[r * c + j]);
}

template <typename S, typename T = compute_t<S>>
void add_squared_deviations(const S* x, const T* mean, int64_t c, int64_t r0, int64_t r1, T* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const T d = load<T>(x[r * c + j]) - mean[j];
      acc[j] += d * d;
    }
}

template <typename S, typename T = compute_t<S>>
void scale_shift_relu_rows(const S* x, const T* scale, const T* shift, int64_t c, int64_t r0, int64_t r1,
                           S* __restrict y) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j)
      y[r * c + j] = store<S>(scale_shift_relu_value(load<T>(x[r * c + j]), scale[j], shift[j]));
}

template <typename S, typename T = compute_t<S>>
void add_backward_sums(const S* x, const S* dy, const T* scale, const T* shift, const T* mean, const T* invstd,
                       int64_t c, int64_t r0, int64_t r1, T* __restrict acc) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const T xv = load<T>(x[r * c + j]), dyv = load<T>(dy[r * c + j]);  // both loaded: the select vectorises
      const T g = relu_passes(xv, scale[j], shift[j]) ? dyv : T(0);
      acc[j] += g;
      acc[c + j] += g * ((xv - mean[j]) * invstd[j]);
    }
}

template <typename S, typename T = compute_t<S>>
void backward_dx(const S* x, const S* dy, const T* scale, const T* shift, const T* mean, const T* k_g, const T* k_x,
                 const T* k_0, int64_t c, int64_t r0, int64_t r1, S* __restrict dx) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const T xv = load<T>(x[r * c + j]), dyv = load<T>(dy[r * c + j]);
      const T g = relu_passes(xv, scale[j], shift[j]) ? dyv : T(0);
      // k_x is 0 with running statistics: the term then vanishes even for a NaN input, whose
      // gradient torch's modules give as 0 (the ReLU mask is false)
      const T centred = k_x[j] == T(0) ? T(0) : k_x[j] * (xv - mean[j]);
      dx[r * c + j] = store<S>(k_g[j] * (g - centred - k_0[j]));
    }
}

// This file's copy of the loops, as a table.
template <typename S>
const BatchNormRows<S>& batch_norm_rows_here() {
  static const BatchNormRows<S> rows{&add_rows<S>, &add_squared_deviations<S>, &scale_shift_relu_rows<S>,
                                     &add_backward_sums<S>, &backward_dx<S>};
  return rows;
}

}  // namespace
}  // namespace mxs
