// Autograd of the two compute primitives, attached once to the ops (Autograd
// alias key) so every backend shares it. Both primitives are bilinear, so each
// derivative is again one of them, with the map or its transpose:
//   y  = gather_mm(x, W, nbr)                  dx = gather_mm(dy, W^T, nbr_t)
//                                               dW = backprop_filter(x, dy, nbr)
//   dW = backprop_filter(x, dy, nbr)          d(x)  = gather_mm(dy, gW^T, nbr_t)
//                                               d(dy) = gather_mm(x, gW, nbr)
// When nbr_t does not come with the call it is derived where needed: a
// symmetric map's transpose is nbr with offset k read as K-1-k, so
// gather_mm(dy, W^T, nbr_t) = gather_mm(dy, reversed(W^T), nbr); any other map
// is transposed inside backward and dropped after use. Calling the ops (not
// kernels) in backward keeps double backward working. The transposed weight is
// made contiguous here, in one operator (the device primitives read it densely):
// a plain copy, or for a symmetric map one index_select with the offsets reversed --
// except where the device reads the weight transposed itself (_gather_mm_transposed:
// CUDA's Triton gather, the NPU's AscendC GatherMm), when no graph of the backward is
// recorded: no copy at all.
//
// Activated features: gather_mm given source, source_scale, source_shift (features = relu(source
// * scale + shift), a fused BatchNorm+ReLU output; mx_sparse/nn/conv.py) keeps those instead of
// features, and its weight gradient is backprop_filter(source, dy, ..., scale, shift), which
// applies the activation as it reads source (the CUDA kernel) or recomputes features first (the
// others): no backward keeps or recomputes the features themselves.
//
// The fused BatchNorm1d+ReLU layer (_batch_norm_relu) has its node here too: one per
// conv-BN-ReLU block, its backward batch_norm_relu_backward.
#include <torch/autograd.h>
#include <torch/library.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <tuple>

#include "../contract/op_args.h"
#include "../orchestration/device_constants.h"
#include "batch_norm_relu_forward_op.h"

namespace mxs {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using MaybeMap = std::optional<at::Tensor>;
using MaybeTensor = std::optional<at::Tensor>;

// features = relu(source * scale + shift) per channel: what a gather's features are made of.
struct Activation {
  MaybeTensor source, scale, shift;
  bool given() const { return source.has_value() && scale.has_value() && shift.has_value(); }
};

// What the input gradient runs on: the map, and its transpose if given.
struct MapPair {
  at::Tensor nbr;
  MaybeMap nbr_t;
  bool symmetric;
};

at::Tensor call_gather_mm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& nbr, const MaybeMap& nbr_t,
                          int64_t groups, bool symmetric, const Activation& act = {}) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::gather_mm", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const MaybeMap&,
                                         int64_t, bool, const MaybeTensor&, const MaybeTensor&, const MaybeTensor&)>();
  return op.call(x, w, nbr, nbr_t, groups, symmetric, act.source, act.scale, act.shift);
}

at::Tensor call_backprop_filter(const at::Tensor& x, const at::Tensor& dy, const MapPair& maps, int64_t groups,
                                const MaybeTensor& scale = std::nullopt, const MaybeTensor& shift = std::nullopt) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::gather_mm_backprop_filter", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const MaybeMap&,
                                         int64_t, bool, const MaybeTensor&, const MaybeTensor&)>();
  return op.call(x, dy, maps.nbr, maps.nbr_t, groups, maps.symmetric, scale, shift);
}

at::Tensor call_scale_shift_relu(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::scale_shift_relu", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
  return op.call(x, scale, shift);
}

at::Tensor call_transpose_map(const at::Tensor& nbr, const c10::SymInt& num_rows) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::transpose_map", "")
                       .typed<at::Tensor(const at::Tensor&, c10::SymInt)>();
  return op.call(nbr, num_rows);
}

// [K, Cin/G, Cout] -> [K, Cout/G, Cin]: per group, each W[k] block transposed.
// Sizes are read as SymInts here and below: under torch.compile (AOTAutograd
// traces this backward with fake tensors) a voxel count is symbolic, and
// size() would specialise or fail on it.
at::Tensor transpose_grouped(const at::Tensor& w, int64_t groups) {
  const c10::SymInt k = w.sym_size(0), cin_g = w.sym_size(1), cout_g = w.sym_size(2) / groups;
  return w.view_symint({k, cin_g, groups, cout_g})
      .permute({0, 3, 2, 1})
      .reshape_symint({k, cout_g, cin_g * groups});
}

// int64 [k] = k-1, ..., 1, 0 on `device`: made once per (k, device) and kept (a few bytes;
// device_constants.h's store, never destroyed), so that reversing the offsets of a weight is one
// operator (index_select) per backward call, not two (an arange, or a flip whose output keeps the
// transposed layout, then a contiguous copy). A plain tensor even when first made inside
// inference_mode (double backward saves the index).
at::Tensor reversed_offsets(int64_t k, const at::Device& device) {
  return device_constant("reversed offsets," + std::to_string(k), device, [&] {
    return at::arange(k - 1, -1, -1, at::TensorOptions().dtype(at::kLong).device(device));
  });
}

// A tensor that is only traced (torch.compile's fake and functional tensors carry the Python key,
// functionalisation its own) must not meet a cached real tensor: it takes flip + contiguous.
bool traced(const at::Tensor& t) {
  const auto keys = t.key_set();
  return keys.has(c10::DispatchKey::Python) || keys.has(c10::DispatchKey::Functionalize) ||
         t.sym_size(0).is_symbolic();
}

// w^T with offset k read as K-1-k, contiguous.
at::Tensor reversed_contiguous(const at::Tensor& wt) {
  if (traced(wt)) return wt.flip(0).contiguous();
  return at::index_select(wt, 0, reversed_offsets(wt.size(0), wt.device()));
}

using GatherMmTransposedOp = c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&,
                                                                  const at::Tensor&, bool)>;

// _gather_mm_transposed (schema.cpp), looked up once.
const GatherMmTransposedOp& gather_mm_transposed_op() {
  static const GatherMmTransposedOp op = c10::Dispatcher::singleton()
                                             .findSchemaOrThrow("mx_sparse::_gather_mm_transposed", "")
                                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&,
                                                               const at::Tensor&, bool)>();
  return op;
}

// Whether the input gradient can read w in place (_gather_mm_transposed): g's device has a kernel
// for it (CUDA, and CPU tensors under MXS_CUDA_ON_CPU=1: the Triton gather reads the weight
// transposed; the NPU, and CPU tensors under MXS_NPU_ON_CPU=1: AscendC GatherMm's transposed-weight
// mode), one group, real tensors, and no graph of the backward to record (the op has no autograd;
// create_graph takes gather_mm on the copy, which double backward needs). Elsewhere (the CPU
// kernels) the transposed copy: one operator per backward call.
bool reads_weight_transposed(const at::Tensor& g, const at::Tensor& w, int64_t groups) {
  if (groups != 1 || at::GradMode::is_enabled() || traced(g) || traced(w)) return false;
  return gather_mm_transposed_op().hasKernelForDispatchKey(
      c10::computeDispatchKey(g.scalar_type(), g.layout(), g.device()));
}

// sum_k g[nbr[m, k]] @ w[k']^T, k' = K-1-k with reverse_offsets: gather_mm(g, the transposed
// (reversed) w, nbr, also) with the weight read in place; the same argument checks as that call.
at::Tensor call_gather_mm_transposed(const at::Tensor& g, const at::Tensor& w, const at::Tensor& nbr,
                                     const MaybeMap& also, bool reverse_offsets) {
  check_gather_mm_args(g, w.transpose(1, 2), nbr, also, 1);
  return gather_mm_transposed_op().call(g, w, nbr, reverse_offsets);
}

// sum_k g[nbr_t[i, k]] @ w[k]^T for the num_rows input rows i: the input
// gradient of gather_mm(., w, nbr, nbr_t).
at::Tensor input_gradient(const at::Tensor& g, const at::Tensor& w, const MapPair& maps, const c10::SymInt& num_rows,
                          int64_t groups) {
  const bool in_place = reads_weight_transposed(g, w, groups);
  if (maps.symmetric && !maps.nbr_t.has_value()) {
    if (in_place) return call_gather_mm_transposed(g, w, maps.nbr, std::nullopt, true);
    return call_gather_mm(g, reversed_contiguous(transpose_grouped(w, groups)), maps.nbr, std::nullopt, groups, true);
  }
  at::Tensor nbr_t;
  if (maps.nbr_t.has_value()) {
    // the forward does not read nbr_t (callers without autograd pass any map there); here its
    // rows are the input gradient's
    TORCH_CHECK_VALUE(maps.nbr_t->sym_size(0).sym_eq(num_rows).expect_true(__FILE__, __LINE__),
                      "nbr_t: expected one row per input row (", num_rows, ") for the input gradient, got ",
                      maps.nbr_t->sym_size(0));
    nbr_t = *maps.nbr_t;
  } else {
    nbr_t = call_transpose_map(maps.nbr, num_rows);
  }
  if (in_place) return call_gather_mm_transposed(g, w, nbr_t, maps.nbr, false);
  return call_gather_mm(g, transpose_grouped(w, groups).contiguous(), nbr_t, maps.nbr, groups, false);
}

// saved: a, b, nbr, nbr_t (or undefined). An activation's scale and shift are kept as data, not
// saved variables: two [C] vectors that no saved-tensor hook needs to see, whose versions the
// fused BatchNorm+ReLU's recipe did not check either (it checked its input's, as autograd checks
// the source here).
void save(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, const MapPair& maps, int64_t groups,
          const Activation& act = {}) {
  ctx->save_for_backward({a, b, maps.nbr, maps.nbr_t.value_or(at::Tensor())});
  if (act.given()) {
    ctx->saved_data["scale"] = *act.scale;
    ctx->saved_data["shift"] = *act.shift;
  }
  ctx->saved_data["groups"] = groups;
  ctx->saved_data["symmetric"] = maps.symmetric;
}

MapPair saved_maps(AutogradContext* ctx, const variable_list& saved) {
  return {saved[2], saved[3].defined() ? MaybeMap(saved[3]) : std::nullopt, ctx->saved_data["symmetric"].toBool()};
}

// dW of gather_mm from what its node saved: saved[0] is the features, or with an activation
// (its scale and shift in saved_data) their source.
at::Tensor weight_gradient(AutogradContext* ctx, const variable_list& saved, const at::Tensor& dy,
                           const MapPair& maps, int64_t groups) {
  const auto scale = ctx->saved_data.find("scale");
  if (scale == ctx->saved_data.end()) return call_backprop_filter(saved[0], dy, maps, groups);
  const at::Tensor shift = ctx->saved_data["shift"].toTensor();
  // A backward that is itself differentiated (create_graph) recomputes the features with the
  // op, as the saved-tensor hook did before the activation came with the call (so double
  // backward fails or works exactly as it did); else the weight gradient applies it.
  if (at::GradMode::is_enabled())
    return call_backprop_filter(call_scale_shift_relu(saved[0], scale->second.toTensor(), shift), dy, maps, groups);
  return call_backprop_filter(saved[0], dy, maps, groups, scale->second.toTensor(), shift);
}

class GatherMm : public torch::autograd::Function<GatherMm> {
 public:
  // source, scale, shift: the activation of x (undefined: none); they are inputs of the node only
  // to be saved, and get no gradient from it (x's does, and reaches them through the BatchNorm).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, const at::Tensor& nbr,
                            const MaybeMap& nbr_t, int64_t groups, bool symmetric, const MaybeTensor& source,
                            const MaybeTensor& scale, const MaybeTensor& shift) {
    const Activation act{source, scale, shift};
    // saved[0]: what the weight gradient reads (the source has x's rows, which dx counts)
    save(ctx, act.given() ? *source : x, w, {nbr, nbr_t, symmetric}, groups, act);
    at::AutoDispatchBelowADInplaceOrView guard;
    return call_gather_mm(x, w, nbr, nbr_t, groups, symmetric, act);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const int64_t groups = ctx->saved_data["groups"].toInt();
    const MapPair maps = saved_maps(ctx, saved);
    const at::Tensor& dy = grads[0];
    const c10::SymInt num_rows = saved[0].sym_size(0);
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(1)) dw = weight_gradient(ctx, saved, dy, maps, groups);
    // The weight gradient first, then x goes: x may have been recomputed for this backward
    // (saved_tensors.py), and freeing it before dx and the transposed map are allocated lowers
    // the step's peak memory.
    saved[0].reset();
    if (ctx->needs_input_grad(0)) dx = input_gradient(dy, saved[1], maps, num_rows, groups);
    return {dx, dw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class BackpropFilter : public torch::autograd::Function<BackpropFilter> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& dy, const at::Tensor& nbr,
                            const MaybeMap& nbr_t, int64_t groups, bool symmetric) {
    const MapPair maps{nbr, nbr_t, symmetric};
    save(ctx, x, dy, maps, groups);
    at::AutoDispatchBelowADInplaceOrView guard;
    return call_backprop_filter(x, dy, maps, groups);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t groups = ctx->saved_data["groups"].toInt();
    const MapPair maps = saved_maps(ctx, saved);
    const at::Tensor& gw = grads[0];
    at::Tensor dx, ddy;
    if (ctx->needs_input_grad(0)) dx = input_gradient(saved[1], gw, maps, saved[0].sym_size(0), groups);
    if (ctx->needs_input_grad(1)) ddy = call_gather_mm(saved[0], gw, maps.nbr, maps.nbr_t, groups, maps.symmetric);
    return {dx, ddy, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor gather_mm_autograd(const at::Tensor& x, const at::Tensor& w, const at::Tensor& nbr, const MaybeMap& nbr_t,
                              int64_t groups, bool symmetric, const MaybeTensor& source, const MaybeTensor& scale,
                              const MaybeTensor& shift) {
  return GatherMm::apply(x, w, nbr, nbr_t, groups, symmetric, source, scale, shift);
}

// With an activation (scale, shift) and a gradient to record, the features it makes are
// computed first and the plain op differentiated (BackpropFilter's derivatives are those of
// bilinear maps); without one to record, the call goes below autograd with the activation.
at::Tensor backprop_filter_autograd(const at::Tensor& x, const at::Tensor& dy, const at::Tensor& nbr,
                                    const MaybeMap& nbr_t, int64_t groups, bool symmetric, const MaybeTensor& scale,
                                    const MaybeTensor& shift) {
  if (scale.has_value() || shift.has_value()) {
    if (!(at::GradMode::is_enabled() && (x.requires_grad() || dy.requires_grad()))) {
      at::AutoDispatchBelowADInplaceOrView guard;
      return call_backprop_filter(x, dy, {nbr, nbr_t, symmetric}, groups, scale, shift);
    }
    TORCH_CHECK_VALUE(scale.has_value() && shift.has_value(), "scale, shift: expected both or neither");
    return BackpropFilter::apply(call_scale_shift_relu(x, *scale, *shift), dy, nbr, nbr_t, groups, symmetric);
  }
  return BackpropFilter::apply(x, dy, nbr, nbr_t, groups, symmetric);
}

// The fused BatchNorm1d+ReLU (_batch_norm_relu): differentiable in x, gamma and beta; the
// statistics' dependence on x (batch statistics) is inside batch_norm_relu_backward's formula,
// which recomputes the ReLU mask from x, so the node keeps x, never y. A C++ node, not a Python
// autograd.Function: a network has one per conv-BN-ReLU block, and Python's apply and backward
// overhead per layer was a visible share of a training step's host time.
using BnBackwardSig = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                     const at::Tensor&, const at::Tensor&,
                                                                     const MaybeTensor&, const at::Tensor&,
                                                                     const at::Tensor&, bool);

class BatchNormRelu : public torch::autograd::Function<BatchNormRelu> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const MaybeTensor& gamma,
                               const MaybeTensor& beta, const MaybeTensor& running_mean,
                               const MaybeTensor& running_var, bool batch_stats, double momentum, double eps) {
    // the forward op goes through autograd's fallback as it did under the Python Function (grad
    // mode is off here): the running statistics' version counters move as they did
    auto [y, mean, invstd, scale, shift] =
        batch_norm_relu_forward_op().call(x, gamma, beta, running_mean, running_var, batch_stats, momentum, eps);
    ctx->save_for_backward({x, gamma.value_or(at::Tensor()), mean, invstd, scale, shift});
    ctx->saved_data["batch_stats"] = batch_stats;
    ctx->saved_data["has_beta"] = beta.has_value() && beta->defined();
    ctx->mark_non_differentiable({scale, shift});
    ctx->set_materialize_grads(false);   // scale and shift never get a gradient: no zeros made for them
    return {y, scale, shift};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "mx_sparse: double backward through a fused BatchNorm1d+ReLU is not supported; "
                "set mx_sparse.SparseSequential.fuse_bn_relu = False to use torch's modules");
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mx_sparse::batch_norm_relu_backward", "")
                         .typed<BnBackwardSig>();
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& dy = grads[0];
    // needs_input_grad counts the node's edges: an absent gamma or beta (affine=False) has none
    const bool has_gamma = saved[1].defined(), has_beta = ctx->saved_data["has_beta"].toBool();
    const bool need_x = ctx->needs_input_grad(0);
    const bool need_gamma = has_gamma && ctx->needs_input_grad(1);
    const bool need_beta = has_beta && ctx->needs_input_grad(has_gamma ? 2 : 1);
    const at::Tensor none;
    if (!dy.defined()) return {none, none, none, none, none, none, none, none};
    const MaybeTensor gamma = has_gamma ? MaybeTensor(saved[1]) : std::nullopt;
    auto [dx, dgamma, dbeta] =
        op.call(dy, saved[0], saved[2], saved[3], gamma, saved[4], saved[5], ctx->saved_data["batch_stats"].toBool());
    return {need_x ? dx : none, need_gamma ? dgamma : none, need_beta ? dbeta : none, none, none, none, none, none};
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_relu_autograd(const at::Tensor& x, const MaybeTensor& gamma,
                                                                        const MaybeTensor& beta,
                                                                        const MaybeTensor& running_mean,
                                                                        const MaybeTensor& running_var,
                                                                        bool batch_stats, double momentum, double eps) {
  auto outs = BatchNormRelu::apply(x, gamma, beta, running_mean, running_var, batch_stats, momentum, eps);
  return {outs[0], outs[1], outs[2]};
}

// Pooling (schema.cpp): max pooling routes each output gradient to the argmax row,
// average pooling spreads it over the window's inputs; both backward ops take the
// number of input rows as a SymInt, like transpose_map.
class MaxPool : public torch::autograd::Function<MaxPool> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& nbr) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mx_sparse::sparse_max_pool", "")
                         .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&)>();
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, argmax] = op.call(x, nbr);
    ctx->save_for_backward({argmax, nbr});
    ctx->saved_data["num_rows"] = x.sym_size(0);
    ctx->mark_non_differentiable({argmax});
    return {out, argmax};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mx_sparse::sparse_max_pool_backward", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::SymInt)>();
    const auto saved = ctx->get_saved_variables();
    return {op.call(grads[0], saved[0], saved[1], ctx->saved_data["num_rows"].toSymInt()), at::Tensor()};
  }
};

class AvgPool : public torch::autograd::Function<AvgPool> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& nbr) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mx_sparse::sparse_avg_pool", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = op.call(x, nbr);   // first: its checks name a features tensor without rows (no sym_size(0))
    ctx->save_for_backward({nbr});
    ctx->saved_data["num_rows"] = x.sym_size(0);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("mx_sparse::sparse_avg_pool_backward", "")
                         .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::SymInt)>();
    const auto saved = ctx->get_saved_variables();
    return {op.call(grads[0], saved[0], ctx->saved_data["num_rows"].toSymInt()), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> max_pool_autograd(const at::Tensor& x, const at::Tensor& nbr) {
  auto outs = MaxPool::apply(x, nbr);
  return {outs[0], outs[1]};
}

at::Tensor avg_pool_autograd(const at::Tensor& x, const at::Tensor& nbr) { return AvgPool::apply(x, nbr); }

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, Autograd, m) {
  m.impl("sparse_max_pool", &mxs::max_pool_autograd);
  m.impl("sparse_avg_pool", &mxs::avg_pool_autograd);
  m.impl("gather_mm", &mxs::gather_mm_autograd);
  m.impl("gather_mm_backprop_filter", &mxs::backprop_filter_autograd);
  m.impl("_batch_norm_relu", &mxs::batch_norm_relu_autograd);
  // Voxelization is not differentiable (neither are spconv's and mmcv's): its outputs carry
  // no autograd history, whatever the points require.
  m.impl("voxelize_hard", torch::CppFunction::makeFallthrough());
  m.impl("voxelize_dynamic", torch::CppFunction::makeFallthrough());
}
