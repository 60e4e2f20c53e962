// BatchNorm followed by ReLU on the features [N, C] of a sparse tensor, as the
// three kernels the fused layer (mx_sparse/batch_norm_relu.py) is built from:
//
//   channel_stats(x)                      per-channel mean and biased variance
//   scale_shift_relu(x, scale, shift)     y = max(x * scale + shift, 0)
//   batch_norm_relu_backward(dy, x, ...)  dx, dgamma, dbeta from x, not from y
//
// The backward reads x and recomputes the ReLU mask, so the layer never keeps y
// for itself (the next convolution may recompute y too, see the Python side).
// Every reduction sums fixed row blocks separately and then adds the blocks in
// order, in double: results are the same for any thread count. Blocks are handed
// out dynamically (parallel_dynamic.h), which also evens out a busy machine.
#include <torch/library.h>
#include <torch/types.h>

#include <algorithm>
#include <vector>

#include "parallel_dynamic.h"

namespace mxs {
namespace {

constexpr int64_t kRowBlock = 512;

void check_features(const at::Tensor& x, const char* name) {
  TORCH_CHECK_VALUE(x.dim() == 2, name, ": expected a [N, C] tensor, got ", x.dim(), " dimensions");
  TORCH_CHECK_VALUE(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, name,
                    ": expected float32 or float64, got ", x.scalar_type());
}

void check_channel_vector(const at::Tensor& v, const at::Tensor& x, const char* name) {
  TORCH_CHECK_VALUE(v.dim() == 1 && v.size(0) == x.size(1), name, ": expected [", x.size(1), "] (one per channel), got ",
                    v.sizes());
}

// Per-channel sums over the rows: row_fn(r, acc) adds row r's terms into acc
// (sums_per_channel arrays of C values of type T, so the loop vectorises); each
// block of kRowBlock rows has its own acc, and the blocks are added in order, in
// double.
template <typename T, typename RowFn>
std::vector<double> sum_rows(int64_t n, int64_t c, int64_t sums_per_channel, const RowFn& row_fn) {
  const int64_t nblocks = (n + kRowBlock - 1) / kRowBlock;
  const int64_t width = c * sums_per_channel;
  std::vector<double> partial(nblocks * width, 0.0);
  parallel_dynamic(nblocks, nblocks > 1, [&](auto next_block) {
    std::vector<T> acc(width);
    for (int64_t b = next_block(); b < nblocks; b = next_block()) {
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t r = b * kRowBlock, end = std::min(n, r + kRowBlock); r < end; ++r) row_fn(r, acc.data());
      for (int64_t j = 0; j < width; ++j) partial[b * width + j] = acc[j];
    }
  });
  std::vector<double> total(width, 0.0);
  for (int64_t b = 0; b < nblocks; ++b)
    for (int64_t j = 0; j < width; ++j) total[j] += partial[b * width + j];
  return total;
}

// row_fn(r) for every row, in blocks of kRowBlock rows handed out dynamically.
template <typename RowFn>
void for_each_row(int64_t n, const RowFn& row_fn) {
  const int64_t nblocks = (n + kRowBlock - 1) / kRowBlock;
  parallel_dynamic(nblocks, nblocks > 1, [&](auto next_block) {
    for (int64_t b = next_block(); b < nblocks; b = next_block())
      for (int64_t r = b * kRowBlock, end = std::min(n, r + kRowBlock); r < end; ++r) row_fn(r);
  });
}

template <typename T>
inline T scale_shift_relu_value(T x, T scale, T shift) {
  const T z = x * scale + shift;
  return z > T(0) ? z : T(0);
}

template <typename T>
std::tuple<at::Tensor, at::Tensor> channel_stats_impl(const at::Tensor& x) {
  const int64_t n = x.size(0), c = x.size(1);
  const T* px = x.data_ptr<T>();
  const std::vector<double> sum = sum_rows<T>(n, c, 1, [&](int64_t r, T* __restrict acc) {
    for (int64_t j = 0; j < c; ++j) acc[j] += px[r * c + j];
  });
  auto mean = at::empty({c}, x.options().dtype(at::kDouble));
  double* pm = mean.data_ptr<double>();
  std::vector<T> mean_t(c);
  for (int64_t j = 0; j < c; ++j) pm[j] = sum[j] / double(n), mean_t[j] = T(pm[j]);
  // Second pass around the mean: no cancellation when |mean| >> std.
  const std::vector<double> sq = sum_rows<T>(n, c, 1, [&](int64_t r, T* __restrict acc) {
    for (int64_t j = 0; j < c; ++j) {
      const T d = px[r * c + j] - mean_t[j];
      acc[j] += d * d;
    }
  });
  auto var = at::empty({c}, mean.options());
  double* pv = var.data_ptr<double>();
  for (int64_t j = 0; j < c; ++j) pv[j] = sq[j] / double(n);
  return {mean, var};
}

template <typename T>
void scale_shift_relu_impl(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, at::Tensor& y) {
  const int64_t n = x.size(0), c = x.size(1);
  const T *px = x.data_ptr<T>(), *ps = scale.data_ptr<T>(), *pb = shift.data_ptr<T>();
  T* py = y.data_ptr<T>();
  for_each_row(n, [&](int64_t r) {
    for (int64_t j = 0; j < c; ++j) py[r * c + j] = scale_shift_relu_value(px[r * c + j], ps[j], pb[j]);
  });
}

// g = dy where the ReLU passed (x * scale + shift > 0), else 0; xhat = (x - mean) * invstd.
//   dbeta = sum g, dgamma = sum g * xhat
//   batch statistics:   dx = gamma * invstd * (g - mean(g) - xhat * mean(g * xhat))
//   running statistics: dx = gamma * invstd * g
template <typename T>
std::tuple<at::Tensor, at::Tensor, at::Tensor> backward_impl(const at::Tensor& dy, const at::Tensor& x,
                                                             const at::Tensor& mean, const at::Tensor& invstd,
                                                             const at::Tensor& gamma, const at::Tensor& scale,
                                                             const at::Tensor& shift, bool batch_stats) {
  const int64_t n = x.size(0), c = x.size(1);
  const T *px = x.data_ptr<T>(), *pdy = dy.data_ptr<T>(), *ps = scale.data_ptr<T>(), *pb = shift.data_ptr<T>();
  const double *pmean = mean.data_ptr<double>(), *pinv = invstd.data_ptr<double>(), *pgam = gamma.data_ptr<double>();
  std::vector<T> mean_t(c), inv_t(c);
  for (int64_t j = 0; j < c; ++j) mean_t[j] = T(pmean[j]), inv_t[j] = T(pinv[j]);
  const std::vector<double> sums = sum_rows<T>(n, c, 2, [&](int64_t r, T* __restrict acc) {
    for (int64_t j = 0; j < c; ++j) {
      const T xv = px[r * c + j], dyv = pdy[r * c + j];  // both loaded: a branch-free select vectorises
      const T g = scale_shift_relu_value(xv, ps[j], pb[j]) > T(0) ? dyv : T(0);
      acc[j] += g;
      acc[c + j] += g * ((xv - mean_t[j]) * inv_t[j]);
    }
  });
  auto dbeta = at::empty({c}, mean.options()), dgamma = at::empty({c}, mean.options());
  std::vector<T> k_g(c), k_x(c), k_0(c);  // dx = k_g * g + k_x * (x - mean) + k_0
  for (int64_t j = 0; j < c; ++j) {
    dbeta.data_ptr<double>()[j] = sums[j];
    dgamma.data_ptr<double>()[j] = sums[c + j];
    const double a = pgam[j] * pinv[j];
    k_g[j] = T(a);
    k_x[j] = batch_stats ? T(-a * pinv[j] * sums[c + j] / double(n)) : T(0);
    k_0[j] = batch_stats ? T(-a * sums[j] / double(n)) : T(0);
  }
  auto dx = at::empty_like(x);
  T* pdx = dx.data_ptr<T>();
  for_each_row(n, [&](int64_t r) {
    for (int64_t j = 0; j < c; ++j) {
      const T xv = px[r * c + j], dyv = pdy[r * c + j];
      const T g = scale_shift_relu_value(xv, ps[j], pb[j]) > T(0) ? dyv : T(0);
      pdx[r * c + j] = k_g[j] * g + k_x[j] * (xv - mean_t[j]) + k_0[j];
    }
  });
  return {dx, dgamma, dbeta};
}

std::tuple<at::Tensor, at::Tensor> channel_stats_cpu(const at::Tensor& input) {
  check_features(input, "input");
  TORCH_CHECK_VALUE(input.size(0) > 0, "input: expected at least one row to take statistics over, got 0");
  const at::Tensor x = input.contiguous();
  return x.scalar_type() == at::kFloat ? channel_stats_impl<float>(x) : channel_stats_impl<double>(x);
}

at::Tensor scale_shift_relu_cpu(const at::Tensor& input, const at::Tensor& scale, const at::Tensor& shift) {
  check_features(input, "input");
  check_channel_vector(scale, input, "scale");
  check_channel_vector(shift, input, "shift");
  const at::Tensor x = input.contiguous(), s = scale.to(x.scalar_type()).contiguous(),
                   b = shift.to(x.scalar_type()).contiguous();
  at::Tensor y = at::empty_like(x);
  if (x.scalar_type() == at::kFloat)
    scale_shift_relu_impl<float>(x, s, b, y);
  else
    scale_shift_relu_impl<double>(x, s, b, y);
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_relu_backward_cpu(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const at::Tensor& gamma, const at::Tensor& scale, const at::Tensor& shift, bool batch_stats) {
  check_features(input, "input");
  TORCH_CHECK_VALUE(grad.sizes() == input.sizes(), "grad: expected the shape of input ", input.sizes(), ", got ",
                    grad.sizes());
  for (const auto& [v, name] : {std::pair{&mean, "mean"}, {&invstd, "invstd"}, {&gamma, "gamma"},
                                {&scale, "scale"}, {&shift, "shift"}})
    check_channel_vector(*v, input, name);
  const auto dt = input.scalar_type();
  const at::Tensor x = input.contiguous(), dy = grad.to(dt).contiguous();
  const at::Tensor m = mean.to(at::kDouble).contiguous(), inv = invstd.to(at::kDouble).contiguous(),
                   gam = gamma.to(at::kDouble).contiguous(), s = scale.to(dt).contiguous(),
                   b = shift.to(dt).contiguous();
  return dt == at::kFloat ? backward_impl<float>(dy, x, m, inv, gam, s, b, batch_stats)
                          : backward_impl<double>(dy, x, m, inv, gam, s, b, batch_stats);
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("channel_stats", &mxs::channel_stats_cpu);
  m.impl("scale_shift_relu", &mxs::scale_shift_relu_cpu);
  m.impl("batch_norm_relu_backward", &mxs::batch_norm_relu_backward_cpu);
}
