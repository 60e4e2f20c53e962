// Autograd of the two compute primitives, attached once to the ops (Autograd
// alias key) so every backend shares it. Both primitives are bilinear, so each
// derivative is again one of them, with the map or its transpose:
//   y  = gather_mm(x, W, nbr)                  dx = gather_mm(dy, W^T, nbr_t)
//                                               dW = backprop_filter(x, dy, nbr)
//   dW = backprop_filter(x, dy, nbr)          d(x)  = gather_mm(dy, gW^T, nbr_t)
//                                               d(dy) = gather_mm(x, gW, nbr)
// A symmetric map comes without nbr_t (None): its transpose is nbr with offset k
// read as K-1-k, so gather_mm(dy, W^T, nbr_t) = gather_mm(dy, reversed(W^T), nbr)
// and no second map is kept. Calling the ops (not kernels) in backward keeps
// double backward working.
#include <torch/autograd.h>
#include <torch/library.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace mxs {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using MaybeMap = std::optional<at::Tensor>;

MaybeMap as_map(const at::Tensor& saved) { return saved.defined() ? MaybeMap(saved) : std::nullopt; }

at::Tensor call_gather_mm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& nbr, const MaybeMap& nbr_t,
                          int64_t groups) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::gather_mm", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const MaybeMap&,
                                         int64_t)>();
  return op.call(x, w, nbr, nbr_t, groups);
}

at::Tensor call_backprop_filter(const at::Tensor& x, const at::Tensor& dy, const at::Tensor& nbr,
                                const MaybeMap& nbr_t, int64_t groups) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::gather_mm_backprop_filter", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const MaybeMap&,
                                         int64_t)>();
  return op.call(x, dy, nbr, nbr_t, groups);
}

// [K, Cin/G, Cout] -> [K, Cout/G, Cin]: per group, each W[k] block transposed.
at::Tensor transpose_grouped(const at::Tensor& w, int64_t groups) {
  const int64_t k = w.size(0), cin_g = w.size(1), cout_g = w.size(2) / groups;
  return w.view({k, cin_g, groups, cout_g}).permute({0, 3, 2, 1}).reshape({k, cout_g, groups * cin_g});
}

// sum_k g[nbr_t[i, k]] @ w[k]^T: the input gradient of gather_mm(., w, nbr, nbr_t).
at::Tensor input_gradient(const at::Tensor& g, const at::Tensor& w, const at::Tensor& nbr, const MaybeMap& nbr_t,
                          int64_t groups) {
  const at::Tensor wt = transpose_grouped(w, groups);
  if (nbr_t.has_value()) return call_gather_mm(g, wt, *nbr_t, nbr, groups);
  return call_gather_mm(g, wt.flip(0), nbr, std::nullopt, groups);  // symmetric map
}

class GatherMm : public torch::autograd::Function<GatherMm> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& nbr,
                            const MaybeMap& nbr_t, int64_t groups) {
    ctx->save_for_backward({x, w, nbr, nbr_t.value_or(at::Tensor())});
    ctx->saved_data["groups"] = groups;
    at::AutoDispatchBelowADInplaceOrView guard;
    return call_gather_mm(x, w, nbr, nbr_t, groups);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t groups = ctx->saved_data["groups"].toInt();
    const at::Tensor& dy = grads[0];
    at::Tensor dx, dw;
    const MaybeMap nbr_t = as_map(saved[3]);
    if (ctx->needs_input_grad(0)) dx = input_gradient(dy, saved[1], saved[2], nbr_t, groups);
    if (ctx->needs_input_grad(1)) dw = call_backprop_filter(saved[0], dy, saved[2], nbr_t, groups);
    return {dx, dw, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class BackpropFilter : public torch::autograd::Function<BackpropFilter> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& dy, const at::Tensor& nbr,
                            const MaybeMap& nbr_t, int64_t groups) {
    ctx->save_for_backward({x, dy, nbr, nbr_t.value_or(at::Tensor())});
    ctx->saved_data["groups"] = groups;
    at::AutoDispatchBelowADInplaceOrView guard;
    return call_backprop_filter(x, dy, nbr, nbr_t, groups);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t groups = ctx->saved_data["groups"].toInt();
    const at::Tensor& gw = grads[0];
    at::Tensor dx, ddy;
    const MaybeMap nbr_t = as_map(saved[3]);
    if (ctx->needs_input_grad(0)) dx = input_gradient(saved[1], gw, saved[2], nbr_t, groups);
    if (ctx->needs_input_grad(1)) ddy = call_gather_mm(saved[0], gw, saved[2], nbr_t, groups);
    return {dx, ddy, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor gather_mm_autograd(const at::Tensor& x, const at::Tensor& w, const at::Tensor& nbr, const MaybeMap& nbr_t,
                              int64_t groups) {
  return GatherMm::apply(x, w, nbr, nbr_t, groups);
}

at::Tensor backprop_filter_autograd(const at::Tensor& x, const at::Tensor& dy, const at::Tensor& nbr,
                                    const MaybeMap& nbr_t, int64_t groups) {
  return BackpropFilter::apply(x, dy, nbr, nbr_t, groups);
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, Autograd, m) {
  m.impl("gather_mm", &mxs::gather_mm_autograd);
  m.impl("gather_mm_backprop_filter", &mxs::backprop_filter_autograd);
}
