// The handle of mx_sparse::batch_norm_relu_forward (kernels/schema/schema.cpp), looked up in the
// dispatcher once, for its two C++ callers: the fused layer's kernel below autograd
// (batch_norm_relu_layer.cpp) and its autograd node's forward (autograd.cpp). A call goes through
// the dispatcher, so each device's implementation of the op serves both.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <tuple>

namespace mxs {

// (input, weight, bias, running_mean, running_var, batch_stats, momentum, eps)
//   -> (y, mean, invstd, scale, shift)
using BatchNormReluForwardSig = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, bool, double, double);

inline const c10::TypedOperatorHandle<BatchNormReluForwardSig>& batch_norm_relu_forward_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("mx_sparse::batch_norm_relu_forward", "")
                             .typed<BatchNormReluForwardSig>();
  return op;
}

}  // namespace mxs
