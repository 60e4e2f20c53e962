// Autocast policy of the ops, registered once for every device's autocast key
// (torch.autocast("cpu" | "cuda" | "npu", dtype)), so that a network's layers
// need no casts of their own:
//   gather_mm, gather_mm_backprop_filter: lower precision, like torch's conv3d:
//     floating-point operands are cast to the autocast dtype (bfloat16 on CPU by
//     default, float16 on CUDA), float64 ones are left alone, and the result
//     has that dtype. The casts are recorded by autograd, so gradients reach
//     float32 master weights in float32. The features' activation (gather_mm's
//     source / source_scale / source_shift, the weight gradient's scale / shift)
//     is never cast: it stays with features that are not cast, and is dropped
//     (gather_mm) or applied before the cast (gather_mm_backprop_filter) otherwise.
//   every other op: no cast (the dispatcher's default for autocast keys). The map
//     builders and pack/unpack take integer tensors; the BatchNorm+ReLU ops
//     already compute in float32 for bfloat16 features, as torch's batch_norm,
//     which autocast also leaves alone, does.
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace mxs {
namespace {

using MaybeTensor = std::optional<at::Tensor>;
using GatherSig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const MaybeTensor&, int64_t,
                             bool, const MaybeTensor&, const MaybeTensor&, const MaybeTensor&);
using FilterSig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const MaybeTensor&, int64_t,
                             bool, const MaybeTensor&, const MaybeTensor&);

// The operands' casts are torch's lower-precision policy (at::autocast::cached_cast: float
// tensors other than float64 to the autocast dtype, cached for leaf weights); the features'
// activation (schema.cpp) is never cast: it describes the features as given, so it goes with
// them only when they are not cast.
template <c10::DeviceType device>
at::Tensor autocast_gather_mm(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr,
                              const MaybeTensor& nbr_t, int64_t groups, bool symmetric, const MaybeTensor& source,
                              const MaybeTensor& source_scale, const MaybeTensor& source_shift) {
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("mx_sparse::gather_mm", "").typed<GatherSig>();
  c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(device));
  const auto dtype = at::autocast::get_lower_precision_fp_from_device_type(device);
  const at::Tensor f = at::autocast::cached_cast(dtype, features, device);
  const at::Tensor w = at::autocast::cached_cast(dtype, weight, device);
  if (!f.is_same(features)) return op.call(f, w, nbr, nbr_t, groups, symmetric, std::nullopt, std::nullopt, std::nullopt);
  return op.call(f, w, nbr, nbr_t, groups, symmetric, source, source_scale, source_shift);
}

// A weight gradient of activated features that are to be cast: the activation applied first
// (scale_shift_relu, in the features' dtype), then the cast, as for features given made.
template <c10::DeviceType device>
at::Tensor autocast_backprop_filter(const at::Tensor& features, const at::Tensor& grad, const at::Tensor& nbr,
                                    const MaybeTensor& nbr_t, int64_t groups, bool symmetric, const MaybeTensor& scale,
                                    const MaybeTensor& shift) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::gather_mm_backprop_filter", "")
                       .typed<FilterSig>();
  static auto scale_shift_relu = c10::Dispatcher::singleton()
                                     .findSchemaOrThrow("mx_sparse::scale_shift_relu", "")
                                     .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
  c10::impl::ExcludeDispatchKeyGuard no_autocast(at::autocast::get_autocast_dispatch_key_from_device_type(device));
  const auto dtype = at::autocast::get_lower_precision_fp_from_device_type(device);
  const at::Tensor g = at::autocast::cached_cast(dtype, grad, device);
  const bool activated = scale.has_value() && shift.has_value();
  if (!activated || !at::autocast::is_eligible(features, device) || features.scalar_type() == dtype)
    return op.call(at::autocast::cached_cast(dtype, features, device), g, nbr, nbr_t, groups, symmetric, scale, shift);
  const at::Tensor made = at::autocast::cached_cast(dtype, scale_shift_relu.call(features, *scale, *shift), device);
  return op.call(made, g, nbr, nbr_t, groups, symmetric, std::nullopt, std::nullopt);
}

}  // namespace
}  // namespace mxs

#define MXS_AUTOCAST_POLICY(KEY, DEVICE)                                                           \
  TORCH_LIBRARY_IMPL(mx_sparse, KEY, m) {                                                          \
    m.impl("gather_mm", &mxs::autocast_gather_mm<DEVICE>);                                          \
    m.impl("gather_mm_backprop_filter", &mxs::autocast_backprop_filter<DEVICE>);                    \
  }

MXS_AUTOCAST_POLICY(AutocastCPU, c10::DeviceType::CPU)
MXS_AUTOCAST_POLICY(AutocastCUDA, c10::DeviceType::CUDA)
MXS_AUTOCAST_POLICY(AutocastPrivateUse1, c10::DeviceType::PrivateUse1)
