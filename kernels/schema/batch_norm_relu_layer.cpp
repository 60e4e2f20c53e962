// The kernel of mx_sparse::_batch_norm_relu below autograd (every device, under
// CompositeExplicitAutograd): batch_norm_relu_forward through the dispatcher, so each device's
// implementation of that op serves this one too; its node (autograd.cpp) calls the same op.
#include <torch/library.h>

#include <tuple>

#include "batch_norm_relu_forward_op.h"

namespace mxs {
namespace {

using MaybeTensor = std::optional<at::Tensor>;

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_relu_layer(const at::Tensor& x, const MaybeTensor& gamma,
                                                                     const MaybeTensor& beta,
                                                                     const MaybeTensor& running_mean,
                                                                     const MaybeTensor& running_var, bool batch_stats,
                                                                     double momentum, double eps) {
  auto [y, mean, invstd, scale, shift] =
      batch_norm_relu_forward_op().call(x, gamma, beta, running_mean, running_var, batch_stats, momentum, eps);
  return {y, scale, shift};
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CompositeExplicitAutograd, m) {
  m.impl("_batch_norm_relu", &mxs::batch_norm_relu_layer);
}
