// CPU compute primitives:
//   gather_mm:                 out[m] = sum_k in[nbr[m, k]] @ W[k]
//   gather_mm_backprop_filter: dW[k]  = sum_m in[nbr[m, k]]^T (x) grad[m]
// Output-stationary: a tile of output rows owns its accumulators, so there is no
// scatter, no atomics, and the summation order (k ascending, then the fixed
// order of gemm_rows) is the same for every thread count. Half-precision inputs
// are widened to float once and accumulated in float; float64 stays float64.
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>
#include <algorithm>
#include <atomic>
#include <vector>
#include "../ops/op_args.h"
#include "gemm_rows.h"

namespace mxs {
namespace {

struct GroupedShape {
  int64_t groups, cin, cout, cin_g, cout_g, kvol;
};

at::ScalarType accumulate_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

void check_float(const at::Tensor& t, const char* name) {
  const auto s = t.scalar_type();
  TORCH_CHECK_VALUE(s == at::kFloat || s == at::kDouble || s == at::kHalf || s == at::kBFloat16, name,
                    ": expected float32, float64, float16 or bfloat16, got ", s);
}

GroupedShape check_gather_mm_args(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr,
                                  const at::Tensor& nbr_t, int64_t groups) {
  check_gather_operands(features, nbr, nbr_t, groups);
  check_float(features, "features");
  TORCH_CHECK_VALUE(weight.scalar_type() == features.scalar_type(), "weight: expected dtype ",
                    features.scalar_type(), " like features, got ", weight.scalar_type());
  TORCH_CHECK_VALUE(weight.dim() == 3 && weight.size(0) == nbr.size(1), "weight: expected [K=", nbr.size(1),
                    ", Cin/groups, Cout], got ", weight.sizes());
  GroupedShape s{groups, features.size(1), weight.size(2), weight.size(1), 0, nbr.size(1)};
  TORCH_CHECK_VALUE(s.cin_g * groups == s.cin, "weight: expected Cin/groups = ", s.cin, "/", groups,
                    " input channels per group, got weight ", weight.sizes());
  TORCH_CHECK_VALUE(s.cout % groups == 0, "weight: out channels ", s.cout, " are not divisible by groups=", groups);
  s.cout_g = s.cout / groups;
  return s;
}

// Rows of the map must name existing input rows; found during the compute loop
// and reported once afterwards (lowest map row, deterministic).
struct MapRangeCheck {
  std::atomic<int64_t> row{INT64_MAX};
  void report(int64_t r) {
    int64_t cur = row.load();
    while (r < cur && !row.compare_exchange_weak(cur, r)) {}
  }
  void raise_if_bad(const char* name, int64_t num_rows) const {
    TORCH_CHECK_VALUE(row.load() == INT64_MAX, name, ": row ", row.load(),
                      " holds an input row outside [-1, ", num_rows, ")");
  }
};

// Output rows per tile: the accumulator tile stays around 64 KiB. Depends only on
// Cout so the arithmetic is the same for any thread count.
int64_t rows_per_tile(int64_t cout) { return std::clamp<int64_t>(16384 / std::max<int64_t>(cout, 1), 16, 256); }

template <typename T>
void gather_mm_kernel(const T* in, int64_t n_in, const T* w, const int32_t* nbr, int64_t m, const GroupedShape& s,
                      T* out, MapRangeCheck& bad) {
  const int64_t tile = rows_per_tile(s.cout);
  const int64_t ntiles = (m + tile - 1) / tile;
  at::parallel_for(0, ntiles, 1, [&](int64_t tb, int64_t te) {
    std::vector<const T*> a_rows(tile);
    std::vector<T*> c_rows(tile);
    std::vector<int64_t> in_rows(tile), out_rows(tile);
    for (int64_t t = tb; t < te; ++t) {
      const int64_t m0 = t * tile, m1 = std::min(m, m0 + tile);
      T* acc = out + m0 * s.cout;  // accumulate straight into the output rows
      std::fill(acc, out + m1 * s.cout, T(0));
      for (int64_t k = 0; k < s.kvol; ++k) {
        int64_t n = 0;
        for (int64_t r = m0; r < m1; ++r) {
          const int32_t i = nbr[r * s.kvol + k];
          if (i == kNoNeighbor) continue;
          if (i < 0 || i >= n_in) { bad.report(r); continue; }
          in_rows[n] = i;
          out_rows[n++] = r;
        }
        if (n == 0) continue;
        for (int64_t g = 0; g < s.groups; ++g) {
          for (int64_t j = 0; j < n; ++j) {
            a_rows[j] = in + in_rows[j] * s.cin + g * s.cin_g;
            c_rows[j] = out + out_rows[j] * s.cout + g * s.cout_g;
          }
          const T* wk = w + (k * s.cin_g) * s.cout + g * s.cout_g;
          gemm_rows_accumulate(n, a_rows.data(), s.cin_g, wk, s.cout, s.cout_g, c_rows.data());
        }
      }
    }
  });
}

at::Tensor gather_mm_cpu(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr_in,
                         const at::Tensor& nbr_t, int64_t groups) {
  const GroupedShape s = check_gather_mm_args(features, weight, nbr_in, nbr_t, groups);
  const auto acc = accumulate_type(features.scalar_type());
  const at::Tensor f = features.to(acc).contiguous(), w = weight.to(acc).contiguous(), nbr = nbr_in.contiguous();
  const int64_t m = nbr.size(0);
  at::Tensor out = at::empty({m, s.cout}, f.options());
  MapRangeCheck bad;
  AT_DISPATCH_FLOATING_TYPES(acc, "gather_mm_cpu", [&] {
    gather_mm_kernel<scalar_t>(f.data_ptr<scalar_t>(), f.size(0), w.data_ptr<scalar_t>(), nbr.data_ptr<int32_t>(),
                               m, s, out.data_ptr<scalar_t>(), bad);
  });
  bad.raise_if_bad("nbr", f.size(0));
  return out.to(features.scalar_type());
}

// Output rows m that have a neighbor through offset k, ascending, for every k.
std::vector<std::vector<int32_t>> rows_per_offset(const int32_t* nbr, int64_t m, int64_t kvol, int64_t n_in,
                                                  MapRangeCheck& bad) {
  std::vector<std::vector<int32_t>> rows(kvol);
  at::parallel_for(0, kvol, 1, [&](int64_t kb, int64_t ke) {
    for (int64_t k = kb; k < ke; ++k)
      for (int64_t r = 0; r < m; ++r) {
        const int32_t i = nbr[r * kvol + k];
        if (i == kNoNeighbor) continue;
        if (i < 0 || i >= n_in) bad.report(r);
        else rows[k].push_back(static_cast<int32_t>(r));
      }
  });
  return rows;
}

constexpr int64_t kFilterRowBlock = 16;  // rows of dW[k] one task owns

template <typename T>
void backprop_filter_kernel(const T* in, int64_t n_in, const T* grad, const int32_t* nbr, int64_t m,
                            const GroupedShape& s, T* dw, MapRangeCheck& bad) {
  const auto rows = rows_per_offset(nbr, m, s.kvol, n_in, bad);
  const int64_t blocks = (s.cin_g + kFilterRowBlock - 1) / kFilterRowBlock;
  at::parallel_for(0, s.kvol * blocks, 1, [&](int64_t tb, int64_t te) {
    std::vector<const T*> a_rows, g_rows;
    for (int64_t t = tb; t < te; ++t) {
      const int64_t k = t / blocks, i0 = (t % blocks) * kFilterRowBlock;
      const int64_t ni = std::min(kFilterRowBlock, s.cin_g - i0);
      const auto& ms = rows[k];
      a_rows.resize(ms.size());
      g_rows.resize(ms.size());
      for (int64_t g = 0; g < s.groups; ++g) {
        for (size_t p = 0; p < ms.size(); ++p) {
          a_rows[p] = in + int64_t(nbr[int64_t(ms[p]) * s.kvol + k]) * s.cin + g * s.cin_g + i0;
          g_rows[p] = grad + int64_t(ms[p]) * s.cout + g * s.cout_g;
        }
        T* d = dw + (k * s.cin_g + i0) * s.cout + g * s.cout_g;
        outer_rows_accumulate(static_cast<int64_t>(ms.size()), a_rows.data(), ni, g_rows.data(), s.cout_g, d,
                              s.cout);
      }
    }
  });
}

at::Tensor gather_mm_backprop_filter_cpu(const at::Tensor& features, const at::Tensor& grad,
                                         const at::Tensor& nbr_in, const at::Tensor& nbr_t, int64_t groups) {
  check_gather_operands(features, nbr_in, nbr_t, groups);
  check_float(features, "features");
  TORCH_CHECK_VALUE(grad.scalar_type() == features.scalar_type(), "grad: expected dtype ", features.scalar_type(),
                    " like features, got ", grad.scalar_type());
  TORCH_CHECK_VALUE(grad.dim() == 2 && grad.size(0) == nbr_in.size(0), "grad: expected [M=", nbr_in.size(0),
                    ", Cout], got ", grad.sizes());
  const int64_t cin = features.size(1), cout = grad.size(1);
  TORCH_CHECK_VALUE(cin % groups == 0 && cout % groups == 0, "groups: ", groups,
                    " must divide the input channels (", cin, ") and output channels (", cout, ")");
  const GroupedShape s{groups, cin, cout, cin / groups, cout / groups, nbr_in.size(1)};
  const auto acc = accumulate_type(features.scalar_type());
  const at::Tensor f = features.to(acc).contiguous(), g = grad.to(acc).contiguous(), nbr = nbr_in.contiguous();
  at::Tensor dw = at::zeros({s.kvol, s.cin_g, cout}, f.options());
  MapRangeCheck bad;
  AT_DISPATCH_FLOATING_TYPES(acc, "gather_mm_backprop_filter_cpu", [&] {
    backprop_filter_kernel<scalar_t>(f.data_ptr<scalar_t>(), f.size(0), g.data_ptr<scalar_t>(),
                                     nbr.data_ptr<int32_t>(), nbr.size(0), s, dw.data_ptr<scalar_t>(), bad);
  });
  bad.raise_if_bad("nbr", f.size(0));
  return dw.to(features.scalar_type());
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("gather_mm", &mxs::gather_mm_cpu);
  m.impl("gather_mm_backprop_filter", &mxs::gather_mm_backprop_filter_cpu);
}
