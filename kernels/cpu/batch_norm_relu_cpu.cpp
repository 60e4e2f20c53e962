// BatchNorm followed by ReLU on the features [N, C] of a sparse tensor, as the
// three kernels the fused layer (mx_sparse/nn/batch_norm_relu.py) is built from:
//
//   batch_norm_relu_forward(x, ...)       statistics (or the running ones), the
//                                         running-statistics update, and
//                                         y = max(x * scale + shift, 0)
//   scale_shift_relu(x, scale, shift)     y again (the recompute in backward)
//   batch_norm_relu_backward(dy, x, ...)  dx, dgamma, dbeta from x, not from y
//
// The backward reads x and recomputes the ReLU mask, so the layer never keeps y
// for itself (the next convolution may recompute y too, see the Python side).
// The per-channel arithmetic is here too, in double: a Python version cost
// ~100 us per layer in small tensor ops, which dominates small batches.
// Every reduction sums fixed row blocks separately and then adds the blocks in
// order, in double: results are the same for any thread count. Blocks are handed
// out dynamically (parallel_dynamic.h), which also evens out a busy machine. The
// loops over a block's rows are in batch_norm_relu_rows.h: float and bfloat16 run
// the AVX-512 copy where the CPU has it. float64 stays on the portable copy (SSE2,
// two lanes): the AVX-512 copy fuses x * scale + shift into one rounding there,
// which changes the last bit against the CUDA backend's kernels, bitwise equal to
// these in float64 (tests/cuda/test_batch_norm_kernels.py); the loops are about 2 %
// of a float64 VoxelBackBone8x training step. bfloat16 features are computed in float
// (statistics, scale and shift, which are float32 tensors then) and rounded once
// per stored value.
#include <torch/library.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

#include "../contract/batch_norm_relu_args.h"  // the argument checks (every backend's)
#include "batch_norm_relu_rows.h"
#include "large_tensor_pool.h"
#include "parallel_dynamic.h"
#include "portable_switch.h"
#include "serial_when_small.h"

namespace mxs {
namespace {

constexpr int64_t kRowBlock = 512;

// The dtype of the per-channel scale and shift for features of dtype t: what the loops compute in.
at::ScalarType compute_dtype(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// The row loops for features stored as S on this CPU.
template <typename S>
const BatchNormRows<S>& rows_for() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool avx512 = __builtin_cpu_supports("avx512f") && !portable_kernels_only();
  if constexpr (std::is_same_v<S, float>)
    if (avx512) return batch_norm_rows_avx512_float();
  if constexpr (std::is_same_v<S, bf16_bits>)
    if (avx512) return batch_norm_rows_avx512_bf16();
#endif
  return batch_norm_rows_here<S>();
}

// Calls f(S{}) with S the storage type of features of dtype t.
template <typename F>
auto dispatch_storage(at::ScalarType t, F f) {
  if (t == at::kFloat) return f(float{});
  if (t == at::kDouble) return f(double{});
  return f(bf16_bits{});
}

template <typename S>
const S* data_of(const at::Tensor& t) {
  return static_cast<const S*>(t.data_ptr());
}

template <typename S>
S* data_of(at::Tensor& t) {
  return static_cast<S*>(t.data_ptr());
}

// Per-channel sums over the rows: block_fn(r0, r1, acc) adds the terms of rows
// [r0, r1) into acc (sums_per_channel arrays of C values of type T); each block of
// kRowBlock rows has its own acc, and the blocks are added in order, in double.
template <typename T, typename BlockFn>
std::vector<double> sum_rows(int64_t n, int64_t c, int64_t sums_per_channel, const BlockFn& block_fn) {
  const int64_t nblocks = (n + kRowBlock - 1) / kRowBlock;
  const int64_t width = c * sums_per_channel;
  std::vector<double> partial(nblocks * width, 0.0);
  parallel_dynamic(nblocks, nblocks > 1, [&](auto next_block) {
    std::vector<T> acc(width);
    for (int64_t b = next_block(); b < nblocks; b = next_block()) {
      std::fill(acc.begin(), acc.end(), T(0));
      block_fn(b * kRowBlock, std::min(n, (b + 1) * kRowBlock), acc.data());
      for (int64_t j = 0; j < width; ++j) partial[b * width + j] = acc[j];
    }
  });
  std::vector<double> total(width, 0.0);
  for (int64_t b = 0; b < nblocks; ++b)
    for (int64_t j = 0; j < width; ++j) total[j] += partial[b * width + j];
  return total;
}

// block_fn(r0, r1) for blocks of kRowBlock rows, handed out dynamically.
template <typename BlockFn>
void for_each_block(int64_t n, const BlockFn& block_fn) {
  const int64_t nblocks = (n + kRowBlock - 1) / kRowBlock;
  parallel_dynamic(nblocks, nblocks > 1, [&](auto next_block) {
    for (int64_t b = next_block(); b < nblocks; b = next_block())
      block_fn(b * kRowBlock, std::min(n, (b + 1) * kRowBlock));
  });
}

template <typename T>
std::vector<T> narrowed(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Per-channel mean and biased variance (two passes: no cancellation when |mean| >> std).
template <typename S, typename T = compute_t<S>>
void channel_stats(const S* px, int64_t n, int64_t c, std::vector<double>& mean, std::vector<double>& var) {
  const BatchNormRows<S>& rows = rows_for<S>();
  const std::vector<double> sum =
      sum_rows<T>(n, c, 1, [&](int64_t r0, int64_t r1, T* acc) { rows.add_rows(px, c, r0, r1, acc); });
  for (int64_t j = 0; j < c; ++j) mean[j] = sum[j] / double(n);
  const std::vector<T> mean_t = narrowed<T>(mean);
  const std::vector<double> sq = sum_rows<T>(n, c, 1, [&](int64_t r0, int64_t r1, T* acc) {
    rows.add_squared_deviations(px, mean_t.data(), c, r0, r1, acc);
  });
  for (int64_t j = 0; j < c; ++j) var[j] = sq[j] / double(n);
  // float accumulators overflow for |x| beyond ~1e19 (squares past FLT_MAX), where torch's
  // float32 batch_norm gives 0 for every row; such a channel (or one holding Inf/NaN) is
  // taken again in double, serially: rare, and exact where the data is finite
  for (int64_t j = 0; j < c; ++j) {
    if (std::isfinite(mean[j]) && std::isfinite(var[j])) continue;
    double s = 0, q = 0;
    for (int64_t r = 0; r < n; ++r) s += load<double>(px[r * c + j]);
    mean[j] = s / double(n);
    for (int64_t r = 0; r < n; ++r) {
      const double d = load<double>(px[r * c + j]) - mean[j];
      q += d * d;
    }
    var[j] = q / double(n);
  }
}

// y = max(x * scale + shift, 0); scale and shift are compute-dtype tensors.
at::Tensor scale_shift_relu_tensor(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  at::Tensor y = empty_like_cpu(x);
  const int64_t n = x.size(0), c = x.size(1);
  dispatch_storage(x.scalar_type(), [&](auto s) {
    using S = decltype(s);
    using T = compute_t<S>;
    const S* px = data_of<S>(x);
    const T *ps = data_of<T>(scale), *pb = data_of<T>(shift);
    S* py = data_of<S>(y);
    const BatchNormRows<S>& rows = rows_for<S>();
    for_each_block(n, [&](int64_t r0, int64_t r1) { rows.scale_shift_relu(px, ps, pb, c, r0, r1, py); });
    return 0;
  });
  return y;
}

// Per-channel vectors travel as std::vector<double>: converting them with small
// tensor ops costs more than the whole kernel on a 1,000-voxel layer.
std::vector<double> channel_values(const std::optional<at::Tensor>& t, int64_t c, double fill, const char* name) {
  std::vector<double> v(c, fill);
  if (!t.has_value()) return v;  // checked by the op's entry (batch_norm_relu_args.h)
  const at::Tensor d = t->scalar_type() == at::kBFloat16 ? t->to(at::kFloat) : t->contiguous();
  if (d.scalar_type() == at::kFloat)
    std::copy(d.data_ptr<float>(), d.data_ptr<float>() + c, v.begin());
  else
    std::copy(d.data_ptr<double>(), d.data_ptr<double>() + c, v.begin());
  return v;
}

std::vector<double> channel_values(const at::Tensor& t, int64_t c, const char* name) {
  return channel_values(std::optional<at::Tensor>(t), c, 0.0, name);
}

at::Tensor channel_tensor(const std::vector<double>& v, at::ScalarType dtype) {
  const at::ScalarType held = compute_dtype(dtype);
  at::Tensor t = at::empty({int64_t(v.size())}, at::TensorOptions().dtype(held));
  if (held == at::kFloat)
    std::copy(v.begin(), v.end(), t.data_ptr<float>());
  else
    std::copy(v.begin(), v.end(), t.data_ptr<double>());
  return held == dtype ? t : t.to(dtype);
}

// running <- (1 - momentum) * running + momentum * batch, computed in double.
void blend_into(const std::optional<at::Tensor>& running, const std::vector<double>& batch, double momentum,
                const char* name) {
  if (!running.has_value()) return;
  const int64_t c = int64_t(batch.size());
  std::vector<double> v = channel_values(running, c, 0.0, name);
  for (int64_t j = 0; j < c; ++j) v[j] = (1 - momentum) * v[j] + momentum * batch[j];
  running->copy_(channel_tensor(v, running->scalar_type()));
}

// g = dy where the ReLU passed (x * scale + shift > 0), else 0; xhat = (x - mean) * invstd.
//   dbeta = sum g, dgamma = sum g * xhat
//   batch statistics:   dx = gamma * invstd * (g - mean(g) - xhat * mean(g * xhat))
//   running statistics: dx = gamma * invstd * g
template <typename S, typename T = compute_t<S>>
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_impl(const at::Tensor& dy, const at::Tensor& x,
                                                             const std::vector<double>& mean,
                                                             const std::vector<double>& invstd,
                                                             const std::vector<double>& gamma,
                                                             const std::vector<double>& scale,
                                                             const std::vector<double>& shift, bool batch_stats) {
  const int64_t n = x.size(0), c = x.size(1);
  const S *px = data_of<S>(x), *pdy = data_of<S>(dy);
  const std::vector<T> mean_t = narrowed<T>(mean), inv_t = narrowed<T>(invstd), s_t = narrowed<T>(scale),
                       b_t = narrowed<T>(shift);
  const BatchNormRows<S>& rows = rows_for<S>();
  const std::vector<double> sums = sum_rows<T>(n, c, 2, [&](int64_t r0, int64_t r1, T* acc) {
    rows.add_backward_sums(px, pdy, s_t.data(), b_t.data(), mean_t.data(), inv_t.data(), c, r0, r1, acc);
  });
  // dx = k_g * (g - k_x * (x - mean) - k_0), factored as the formula is: an infinite gamma times a
  // finite bracket is an infinity, where k_g * g + (-a * ...) expanded would be inf - inf = NaN
  std::vector<T> k_g(c), k_x(c), k_0(c);
  for (int64_t j = 0; j < c; ++j) {
    k_g[j] = T(gamma[j] * invstd[j]);
    k_x[j] = batch_stats ? T(invstd[j] * sums[c + j] / double(n)) : T(0);
    k_0[j] = batch_stats ? T(sums[j] / double(n)) : T(0);
  }
  auto dx = empty_like_cpu(x);
  S* pdx = data_of<S>(dx);
  for_each_block(n, [&](int64_t r0, int64_t r1) {
    rows.backward_dx(px, pdy, s_t.data(), b_t.data(), mean_t.data(), k_g.data(), k_x.data(), k_0.data(), c, r0, r1,
                     pdx);
  });
  const std::vector<double> dbeta(sums.begin(), sums.begin() + c), dgamma(sums.begin() + c, sums.end());
  return {dx, channel_tensor(dgamma, x.scalar_type()), channel_tensor(dbeta, x.scalar_type())};
}

// (y, mean, invstd, scale, shift): batch statistics (updating the running ones
// with momentum, unbiased variance, when given) or, without batch_stats, the
// running statistics; scale = gamma * invstd, shift = beta - mean * scale, in the
// dtype the loops compute in (float32 for bfloat16 features).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_relu_forward_cpu(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool batch_stats,
    double momentum, double eps) {
  check_batch_norm_relu_forward_args(input, weight, bias, running_mean, running_var, batch_stats);
  const SerialWhenSmall serial(input);  // fewer than 16,384 rows: one thread
  const at::Tensor x = input.contiguous();
  const int64_t n = x.size(0), c = x.size(1);
  std::vector<double> mean(c), var(c);
  if (batch_stats) {
    dispatch_storage(x.scalar_type(), [&](auto s) {
      channel_stats(data_of<decltype(s)>(x), n, c, mean, var);
      return 0;
    });
    std::vector<double> unbiased(var);
    for (double& v : unbiased) v *= n > 1 ? double(n) / double(n - 1) : 1.0;
    blend_into(running_mean, mean, momentum, "running_mean");
    blend_into(running_var, unbiased, momentum, "running_var");
  } else {
    mean = channel_values(running_mean, c, 0.0, "running_mean");
    var = channel_values(running_var, c, 0.0, "running_var");
  }
  const std::vector<double> gamma = channel_values(weight, c, 1.0, "weight"), beta = channel_values(bias, c, 0.0, "bias");
  std::vector<double> invstd(c), scale(c), shift(c);
  for (int64_t j = 0; j < c; ++j) {
    invstd[j] = 1.0 / std::sqrt(var[j] + eps);
    scale[j] = gamma[j] * invstd[j];
    shift[j] = beta[j] - mean[j] * scale[j];
  }
  const at::ScalarType held = compute_dtype(x.scalar_type());
  const at::Tensor s = channel_tensor(scale, held), b = channel_tensor(shift, held);
  return {scale_shift_relu_tensor(x, s, b), channel_tensor(mean, at::kDouble), channel_tensor(invstd, at::kDouble), s,
          b};
}

at::Tensor scale_shift_relu_cpu(const at::Tensor& input, const at::Tensor& scale, const at::Tensor& shift) {
  check_scale_shift_relu_args(input, scale, shift);
  const SerialWhenSmall serial(input);  // fewer than 16,384 rows: one thread
  const at::ScalarType held = compute_dtype(input.scalar_type());
  return scale_shift_relu_tensor(input.contiguous(), scale.to(held).contiguous(), shift.to(held).contiguous());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_relu_backward_cpu(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& weight, const at::Tensor& scale, const at::Tensor& shift, bool batch_stats) {
  check_batch_norm_relu_backward_args(grad, input, mean, invstd, weight, scale, shift);
  const SerialWhenSmall serial(input);  // fewer than 16,384 rows: one thread
  const int64_t c = input.size(1);
  const auto dt = input.scalar_type();
  const at::Tensor x = input.contiguous(), dy = grad.to(dt).contiguous();
  const std::vector<double> m = channel_values(mean, c, "mean"), inv = channel_values(invstd, c, "invstd"),
                            gam = channel_values(weight, c, 1.0, "weight");
  const std::vector<double> s = channel_values(scale, c, "scale"), b = channel_values(shift, c, "shift");
  return dispatch_storage(
      dt, [&](auto st) { return backward_impl<decltype(st)>(dy, x, m, inv, gam, s, b, batch_stats); });
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("batch_norm_relu_forward", &mxs::batch_norm_relu_forward_cpu);
  m.impl("scale_shift_relu", &mxs::scale_shift_relu_cpu);
  m.impl("batch_norm_relu_backward", &mxs::batch_norm_relu_backward_cpu);
}
