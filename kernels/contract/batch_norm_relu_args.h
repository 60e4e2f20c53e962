// Argument checks of the fused BatchNorm+ReLU ops (batch_norm_relu_forward, scale_shift_relu,
// batch_norm_relu_backward; schema: schema.cpp), shared by the CPU kernels
// (kernels/cpu/batch_norm_relu_cpu.cpp) and, through mx_sparse._C.contract (contract_bindings.cpp)
// and mx_sparse._core.contract, the accelerator's version (mx_sparse/_accelerator/batch_norm_relu.py):
// one set of messages. Only metadata is checked, and every check runs before anything is written
// (the forward updates the running statistics in place).
#pragma once
#include <torch/types.h>
#include <c10/util/Exception.h>
#include <cstdint>
#include <optional>
#include "op_args.h"

namespace mxs {

// The dtypes the kernels store features and per-channel vectors in. float16 only where `half_ok`:
// the accelerators' kernels take autocast's float16 activations, the CPU kernels do not (a
// capability of the device, so the one refusal the paths do not share).
inline bool is_batch_norm_dtype(at::ScalarType t, bool half_ok) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || (half_ok && t == at::kHalf);
}
// One message on every path (the same bad input, the same error), naming where float16 is taken.
constexpr const char* kBatchNormDtypes = "float32, float64, bfloat16 or (CUDA, NPU) float16";

inline void check_batch_norm_features(const at::Tensor& x, const char* name, bool half_ok) {
  TORCH_CHECK_VALUE(x.dim() == 2, name, ": expected a [N, C] tensor, got ", x.dim(), " dimensions");
  TORCH_CHECK_VALUE(is_batch_norm_dtype(x.scalar_type(), half_ok), name, ": expected ", kBatchNormDtypes,
                    ", got ", x.scalar_type());
}

// A per-channel vector [c], c the channels of the features argument `of` (named: the mismatch is
// between the two, and either may be the wrong one); with `any_dtype` its dtype is not checked
// (scale_shift_relu converts it).
inline void check_batch_norm_channel(const at::Tensor* t, int64_t c, const char* name, const char* of, bool half_ok,
                                     bool any_dtype = false) {
  if (t == nullptr || !t->defined()) return;  // an absent optional argument
  TORCH_CHECK_VALUE(t->dim() == 1 && t->size(0) == c, name, ": expected [", c, "] (one per channel of ", of,
                    "), got ", t->sizes());
  TORCH_CHECK_VALUE(any_dtype || is_batch_norm_dtype(t->scalar_type(), half_ok), name, ": expected ",
                    kBatchNormDtypes, ", got ", t->scalar_type());
}

inline const at::Tensor* optional_ptr(const std::optional<at::Tensor>& t) { return t.has_value() ? &*t : nullptr; }

// batch_norm_relu_forward(input [N, C], weight, bias, running_mean, running_var [C] or absent, batch_stats).
inline void check_batch_norm_relu_forward_args(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                               const std::optional<at::Tensor>& bias,
                                               const std::optional<at::Tensor>& running_mean,
                                               const std::optional<at::Tensor>& running_var, bool batch_stats,
                                               bool half_ok = false) {
  check_batch_norm_features(input, "input", half_ok);
  check_same_device("input", input, {{"weight", optional_ptr(weight)}, {"bias", optional_ptr(bias)},
                                     {"running_mean", optional_ptr(running_mean)},
                                     {"running_var", optional_ptr(running_var)}});
  const int64_t c = input.size(1);
  check_batch_norm_channel(optional_ptr(running_mean), c, "running_mean", "input", half_ok);
  check_batch_norm_channel(optional_ptr(running_var), c, "running_var", "input", half_ok);
  check_batch_norm_channel(optional_ptr(weight), c, "weight", "input", half_ok);
  check_batch_norm_channel(optional_ptr(bias), c, "bias", "input", half_ok);
  TORCH_CHECK_VALUE(!batch_stats || input.size(0) > 0,
                    "input: expected at least one row to take statistics over, got 0");
  TORCH_CHECK_VALUE(batch_stats || (running_mean.has_value() && running_var.has_value()),
                    "running_mean, running_var: expected both when batch_stats is false (normalising with "
                    "the running statistics)");
}

// scale_shift_relu(input [N, C], scale [C], shift [C]).
inline void check_scale_shift_relu_args(const at::Tensor& input, const at::Tensor& scale, const at::Tensor& shift,
                                        bool half_ok = false) {
  check_batch_norm_features(input, "input", half_ok);
  check_same_device("input", input, {{"scale", &scale}, {"shift", &shift}});
  check_batch_norm_channel(&scale, input.size(1), "scale", "input", half_ok, true);
  check_batch_norm_channel(&shift, input.size(1), "shift", "input", half_ok, true);
}

// batch_norm_relu_backward(grad [N, C], input [N, C], mean, invstd, weight (or absent), scale, shift [C]).
inline void check_batch_norm_relu_backward_args(const at::Tensor& grad, const at::Tensor& input,
                                                const at::Tensor& mean, const at::Tensor& invstd,
                                                const std::optional<at::Tensor>& weight, const at::Tensor& scale,
                                                const at::Tensor& shift, bool half_ok = false) {
  check_batch_norm_features(input, "input", half_ok);
  check_same_device("input", input, {{"grad", &grad}, {"mean", &mean}, {"invstd", &invstd},
                                     {"weight", optional_ptr(weight)}, {"scale", &scale}, {"shift", &shift}});
  TORCH_CHECK_VALUE(grad.sizes() == input.sizes(), "grad: expected the shape of input ", input.sizes(), ", got ",
                    grad.sizes());
  const int64_t c = input.size(1);
  check_batch_norm_channel(&mean, c, "mean", "input", half_ok);
  check_batch_norm_channel(&invstd, c, "invstd", "input", half_ok);
  check_batch_norm_channel(optional_ptr(weight), c, "weight", "input", half_ok);
  check_batch_norm_channel(&scale, c, "scale", "input", half_ok);
  check_batch_norm_channel(&shift, c, "shift", "input", half_ok);
}

// The activation a gather may be given with its features (schema.cpp: gather_mm's source,
// source_scale, source_shift; gather_mm_backprop_filter's scale, shift): features that are
// relu(x * scale + shift) per channel, a fused BatchNorm+ReLU output. All of them or none; x
// (`x_name`) is [N, C] like the features (`like`: gather_mm's features, whose dtype and shape x
// has; gather_mm_backprop_filter's features are x itself), scale and shift [C] as
// scale_shift_relu takes them (float16 x where `half_ok`: the accelerators, whose recompute takes it).
// Returns whether one was given.
inline bool check_gather_activation(const at::Tensor& like, const std::optional<at::Tensor>& x, const char* x_name,
                                    const std::optional<at::Tensor>& scale, const char* scale_name,
                                    const std::optional<at::Tensor>& shift, const char* shift_name, bool half_ok) {
  const int given = int(x.has_value()) + int(scale.has_value()) + int(shift.has_value());
  if (given == 0) return false;
  TORCH_CHECK_VALUE(given == 3, x_name, ", ", scale_name, ", ", shift_name,
                    ": expected all or none of the features' activation, got ", scale.has_value() ? "" : "no ",
                    scale_name, " and ", shift.has_value() ? "" : "no ", shift_name);
  TORCH_CHECK_VALUE(x->sizes() == like.sizes() && x->scalar_type() == like.scalar_type(), x_name, ": expected ",
                    like.scalar_type(), " ", like.sizes(), " like features, got ", x->scalar_type(), " ",
                    x->sizes());
  check_batch_norm_features(*x, x_name, half_ok);
  check_same_device(x_name, *x, {{scale_name, &*scale}, {shift_name, &*shift}});
  check_batch_norm_channel(&*scale, x->size(1), scale_name, x_name, half_ok, true);
  check_batch_norm_channel(&*shift, x->size(1), shift_name, x_name, half_ok, true);
  return true;
}

// gather_mm's: features = relu(source * source_scale + source_shift).
inline bool check_gather_mm_activation(const at::Tensor& features, const std::optional<at::Tensor>& source,
                                       const std::optional<at::Tensor>& source_scale,
                                       const std::optional<at::Tensor>& source_shift, bool half_ok = false) {
  return check_gather_activation(features, source, "source", source_scale, "source_scale", source_shift,
                                 "source_shift", half_ok);
}

// gather_mm_backprop_filter's: the weight gradient reads relu(features * scale + shift).
inline bool check_backprop_filter_activation(const at::Tensor& features, const std::optional<at::Tensor>& scale,
                                             const std::optional<at::Tensor>& shift, bool half_ok = false) {
  if (!scale.has_value() && !shift.has_value()) return false;
  return check_gather_activation(features, features, "features", scale, "scale", shift, "shift", half_ok);
}

}  // namespace mxs
