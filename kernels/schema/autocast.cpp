// Autocast policy of the ops, registered once for every device's autocast key
// (torch.autocast("cpu" | "cuda" | "npu", dtype)), so that a network's layers
// need no casts of their own:
//   gather_mm, gather_mm_backprop_filter: lower precision, like torch's conv3d:
//     floating-point operands are cast to the autocast dtype (bfloat16 on CPU by
//     default, float16 on CUDA), float64 ones are left alone, and the result
//     has that dtype. The casts are recorded by autograd, so gradients reach
//     float32 master weights in float32.
//   every other op: no cast (the dispatcher's default for autocast keys). The map
//     builders and pack/unpack take integer tensors; the BatchNorm+ReLU ops
//     already compute in float32 for bfloat16 features, as torch's batch_norm,
//     which autocast also leaves alone, does.
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace mxs {
namespace {

using MaybeMap = std::optional<at::Tensor>;
using GatherSig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const MaybeMap&, int64_t,
                             bool);

at::Tensor redispatch_gather_mm(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr,
                                const MaybeMap& nbr_t, int64_t groups, bool symmetric) {
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("mx_sparse::gather_mm", "").typed<GatherSig>();
  return op.call(features, weight, nbr, nbr_t, groups, symmetric);
}

at::Tensor redispatch_backprop_filter(const at::Tensor& features, const at::Tensor& grad, const at::Tensor& nbr,
                                      const MaybeMap& nbr_t, int64_t groups, bool symmetric) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::gather_mm_backprop_filter", "")
                       .typed<GatherSig>();
  return op.call(features, grad, nbr, nbr_t, groups, symmetric);
}

// torch's own wrapper for the lower-precision policy: excludes the autocast key,
// casts every eligible tensor argument (cached for leaf weights), redispatches.
template <c10::DeviceType device, GatherSig* F>
constexpr auto lower_precision =
    &at::autocast::WrapFunction<at::autocast::CastPolicy::lower_precision_fp, device, GatherSig, GatherSig,
                                F>::type::call;

}  // namespace
}  // namespace mxs

#define MXS_AUTOCAST_POLICY(KEY, DEVICE)                                                           \
  TORCH_LIBRARY_IMPL(mx_sparse, KEY, m) {                                                          \
    m.impl("gather_mm", mxs::lower_precision<DEVICE, &mxs::redispatch_gather_mm>);                  \
    m.impl("gather_mm_backprop_filter", mxs::lower_precision<DEVICE, &mxs::redispatch_backprop_filter>); \
  }

MXS_AUTOCAST_POLICY(AutocastCPU, c10::DeviceType::CPU)
MXS_AUTOCAST_POLICY(AutocastCUDA, c10::DeviceType::CUDA)
MXS_AUTOCAST_POLICY(AutocastPrivateUse1, c10::DeviceType::PrivateUse1)
