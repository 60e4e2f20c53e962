// Max and average pooling over a neighbor map (schema: kernels/schema/schema.cpp), without
// gathering the [M, K, C] window tensor: each output row reads its window's input rows
// one at a time, so memory is the [M, C] output (and the [M, C] argmax of max pooling).
//
//   sparse_max_pool(x, nbr)             out[m, c] = max over k with nbr[m, k] >= 0 of
//                                       x[nbr[m, k], c]; argmax[m, c] = that k (the
//                                       lowest on ties; a NaN wins, as in torch's max
//                                       pooling); a row without inputs: 0 and -1. argmax
//                                       is int8 (K <= 127), int16 (K <= 32767) or int32:
//                                       a quarter of the output's bytes for float32
//   sparse_max_pool_backward(g, am, nbr, n)  dx [n, C]: g[m, c] added at row
//                                       nbr[m, argmax[m, c]]
//   sparse_avg_pool(x, nbr)             out[m] = sum of the window's input rows / their count
//   sparse_avg_pool_backward(g, nbr, n) dx [n, C]: g[m] / count[m] added at each input row
//
// The backward passes scatter: several outputs can read the same input (overlapping
// windows). Threads split the channels, and each walks every output row in order, so
// each dx element is summed in the same order whatever the thread count (bitwise
// reproducible).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../contract/pool_args.h"
#include "large_tensor_pool.h"

namespace mxs {
namespace {

// Every entry of the map is -1 or an input row: checked before any row is read.
void check_rows_in_range(const at::Tensor& rows, int64_t num_rows, const char* name) {
  if (rows.numel() == 0) return;
  check_pool_entries(name, rows.min().item<int64_t>(), rows.max().item<int64_t>(), num_rows);
}

// Calls f(I{}) with I the C++ type of pool_offset_dtype (pool_args.h).
template <typename F>
void dispatch_offset(at::ScalarType t, F f) {
  if (t == at::kChar) return f(int8_t{});
  if (t == at::kShort) return f(int16_t{});
  TORCH_CHECK_VALUE(t == at::kInt, "argmax: expected int8, int16 or int32 kernel offsets, got ", t);
  return f(int32_t{});
}

// Channel ranges per thread: whole cache lines of float where there are enough channels.
constexpr int64_t kChannelGrain = 16;

template <typename scalar_t, typename I>
void max_pool_rows(const scalar_t* x, const int32_t* nbr, int64_t m0, int64_t m1, int64_t k, int64_t c,
                   scalar_t* out, I* argmax) {
  for (int64_t m = m0; m < m1; ++m) {
    scalar_t* o = out + m * c;
    I* a = argmax + m * c;
    bool any = false;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t i = nbr[m * k + j];
      if (i < 0) continue;
      const scalar_t* row = x + int64_t(i) * c;
      if (!any) {
        for (int64_t ch = 0; ch < c; ++ch) o[ch] = row[ch], a[ch] = I(j);
        any = true;
        continue;
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        const scalar_t v = row[ch];
        // strictly greater keeps the first on ties; a NaN replaces a number and then stays
        if (v > o[ch] || (std::isnan(static_cast<double>(v)) && !std::isnan(static_cast<double>(o[ch])))) {
          o[ch] = v;
          a[ch] = I(j);
        }
      }
    }
    if (!any)
      for (int64_t ch = 0; ch < c; ++ch) o[ch] = scalar_t(0), a[ch] = I(-1);
  }
}

std::tuple<at::Tensor, at::Tensor> sparse_max_pool_cpu(const at::Tensor& features, const at::Tensor& nbr_in) {
  check_pool_args(features, nbr_in);
  const at::Tensor x = features.contiguous(), nbr = nbr_in.contiguous();
  check_rows_in_range(nbr, x.size(0), "nbr");
  const int64_t m = nbr.size(0), k = nbr.size(1), c = x.size(1);
  at::Tensor out = empty_cpu({m, c}, x.options());
  at::Tensor argmax = empty_cpu({m, c}, x.options().dtype(pool_offset_dtype(k)));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "sparse_max_pool", [&] {
    dispatch_offset(argmax.scalar_type(), [&](auto offset) {
      using I = decltype(offset);
      const scalar_t* px = x.data_ptr<scalar_t>();
      const int32_t* pn = nbr.data_ptr<int32_t>();
      scalar_t* po = out.data_ptr<scalar_t>();
      I* pa = static_cast<I*>(argmax.data_ptr());
      at::parallel_for(0, m, 256, [&](int64_t m0, int64_t m1) { max_pool_rows(px, pn, m0, m1, k, c, po, pa); });
    });
  });
  return {out, argmax};
}

at::Tensor sparse_max_pool_backward_cpu(const at::Tensor& grad_in, const at::Tensor& argmax_in,
                                        const at::Tensor& nbr_in, int64_t num_rows) {
  check_pool_backward_args(grad_in, &argmax_in, nbr_in, num_rows);
  const at::Tensor g = grad_in.contiguous(), argmax = argmax_in.contiguous(), nbr = nbr_in.contiguous();
  check_rows_in_range(nbr, num_rows, "nbr");
  check_rows_in_range(argmax, nbr.size(1), "argmax");
  const int64_t m = g.size(0), c = g.size(1), k = nbr.size(1);
  at::Tensor dx = empty_cpu({num_rows, c}, g.options());
  dx.zero_();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, g.scalar_type(), "sparse_max_pool_backward", [&] {
    dispatch_offset(argmax.scalar_type(), [&](auto offset) {
      using I = decltype(offset);
      const scalar_t* pg = g.data_ptr<scalar_t>();
      const I* pa = static_cast<const I*>(argmax.data_ptr());
      const int32_t* pn = nbr.data_ptr<int32_t>();
      scalar_t* pdx = dx.data_ptr<scalar_t>();
      at::parallel_for(0, c, kChannelGrain, [&](int64_t c0, int64_t c1) {
        for (int64_t r = 0; r < m; ++r)
          for (int64_t ch = c0; ch < c1; ++ch) {
            const I j = pa[r * c + ch];
            if (j < 0) continue;
            const int32_t i = pn[r * k + j];
            // a map entry -1 at the argmax offset: argmax is not this map's (checked, not read out of range)
            TORCH_CHECK_VALUE(i >= 0, "argmax: offset ", int64_t(j), " of output row ", r,
                              " has no input row in nbr (argmax and nbr are not from the same forward)");
            pdx[int64_t(i) * c + ch] += pg[r * c + ch];
          }
      });
    });
  });
  return dx;
}

at::Tensor sparse_avg_pool_cpu(const at::Tensor& features, const at::Tensor& nbr_in) {
  check_pool_args(features, nbr_in);
  const at::Tensor x = features.contiguous(), nbr = nbr_in.contiguous();
  check_rows_in_range(nbr, x.size(0), "nbr");
  const int64_t m = nbr.size(0), k = nbr.size(1), c = x.size(1);
  at::Tensor out = empty_cpu({m, c}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "sparse_avg_pool", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* px = x.data_ptr<scalar_t>();
    const int32_t* pn = nbr.data_ptr<int32_t>();
    scalar_t* po = out.data_ptr<scalar_t>();
    at::parallel_for(0, m, 256, [&](int64_t m0, int64_t m1) {
      std::vector<acc_t> sum(c);
      for (int64_t r = m0; r < m1; ++r) {
        std::fill(sum.begin(), sum.end(), acc_t(0));
        int64_t count = 0;
        for (int64_t j = 0; j < k; ++j) {
          const int32_t i = pn[r * k + j];
          if (i < 0) continue;
          ++count;
          const scalar_t* row = px + int64_t(i) * c;
          for (int64_t ch = 0; ch < c; ++ch) sum[ch] += acc_t(row[ch]);
        }
        const acc_t n = acc_t(count > 0 ? count : 1);
        for (int64_t ch = 0; ch < c; ++ch) po[r * c + ch] = scalar_t(sum[ch] / n);
      }
    });
  });
  return out;
}

at::Tensor sparse_avg_pool_backward_cpu(const at::Tensor& grad_in, const at::Tensor& nbr_in, int64_t num_rows) {
  check_pool_backward_args(grad_in, nullptr, nbr_in, num_rows);
  const at::Tensor g = grad_in.contiguous(), nbr = nbr_in.contiguous();
  check_rows_in_range(nbr, num_rows, "nbr");
  const int64_t m = g.size(0), k = nbr.size(1), c = g.size(1);
  at::Tensor dx = empty_cpu({num_rows, c}, g.options());
  dx.zero_();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, g.scalar_type(), "sparse_avg_pool_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* pg = g.data_ptr<scalar_t>();
    const int32_t* pn = nbr.data_ptr<int32_t>();
    scalar_t* pdx = dx.data_ptr<scalar_t>();
    at::parallel_for(0, c, kChannelGrain, [&](int64_t c0, int64_t c1) {
      for (int64_t r = 0; r < m; ++r) {
        int64_t count = 0;
        for (int64_t j = 0; j < k; ++j) count += pn[r * k + j] >= 0;
        if (count == 0) continue;
        for (int64_t j = 0; j < k; ++j) {
          const int32_t i = pn[r * k + j];
          if (i < 0) continue;
          for (int64_t ch = c0; ch < c1; ++ch)
            pdx[int64_t(i) * c + ch] = scalar_t(acc_t(pdx[int64_t(i) * c + ch]) + acc_t(pg[r * c + ch]) / acc_t(count));
        }
      }
    });
  });
  return dx;
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("sparse_max_pool", &mxs::sparse_max_pool_cpu);
  m.impl("sparse_max_pool_backward", &mxs::sparse_max_pool_backward_cpu);
  m.impl("sparse_avg_pool", &mxs::sparse_avg_pool_cpu);
  m.impl("sparse_avg_pool_backward", &mxs::sparse_avg_pool_backward_cpu);
}
