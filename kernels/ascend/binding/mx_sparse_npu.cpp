// PrivateUse1 (NPU) kernels of the five accelerator primitives and of the optional input-gradient
// primitive _gather_mm_transposed (kernels/schema/schema.cpp), built only
// when torch_npu and CANN are present (setup.py detection); in CI here this file is compiled with
// -fsyntax-only against the torch 2.14 + torch-npu 2.14.0 headers
// (tests/ascend/test_npu_binding_compiles.py).
//
// Thin launches: each primitive checks the device kernel's own limits (plain C++ next to the op's
// tiling, kernels/ascend/<op>/op_host/<op>_limits.h, shared with the CPU emulator's entry so both
// raise the same ValueError), allocates its outputs with ATen and runs its AscendC kernel through
// op-plugin's EXEC_NPU_CMD (aclnnXxxGetWorkspaceSize -> workspace -> aclnnXxx on the current NPU
// stream). Everything else on NPU tensors -- argument and index checks, key packing, sorts,
// un-permutation, transpose_map, packed maps, the per-group loop, fused BatchNorm+ReLU -- is the
// device-neutral orchestration of mx_sparse/_accelerator (Python, torch operators that torch_npu runs),
// registered for PrivateUse1 by mx_sparse/_accelerator/registration.py once this library is loaded.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "op_plugin/utils/op_api_common.h"

#include "../conv_out_keys/op_host/conv_out_keys_limits.h"
#include "../gather_mm/op_host/gather_mm_limits.h"
#include "../gather_mm/op_host/gather_mm_weight_layout.h"
#include "../gather_mm_backprop_filter/op_host/gather_mm_backprop_filter_limits.h"
#include "../subm_map/op_host/subm_map_limits.h"
#include "../unique_sorted_keys/op_host/unique_sorted_keys_limits.h"

namespace mxs_npu {
namespace {

// The limit functions throw std::invalid_argument with the message; here it becomes the ValueError
// the emulator's entry raises for the same input.
template <typename Check>
void check_limits(const Check& check) {
  try {
    check();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

void check_float(const at::Tensor& t, const char* name) {
  check_limits([&] { mxs_ascend::KernelDtypeKey(name, c10::toString(t.scalar_type())); });
}

// out[s, k] = p where sorted_keys[p] == query_keys[s] + key_deltas[k], else -1 (AscendC SubmMap).
at::Tensor sorted_key_lookup(const at::Tensor& query_keys, const at::Tensor& sorted_keys, const at::Tensor& key_deltas,
                             int64_t group, int64_t key_bound) {
  check_limits([&] { mxs_ascend::CheckSubmMapLimits(key_deltas.size(0), group); });
  at::Tensor out = at::empty({query_keys.size(0), key_deltas.size(0)}, query_keys.options().dtype(at::kInt));
  if (out.numel() == 0) return out;
  if (sorted_keys.size(0) == 0) return out.fill_(-1);
  const at::Tensor q = query_keys.contiguous(), c = sorted_keys.contiguous(), d = key_deltas.contiguous();
  EXEC_NPU_CMD(aclnnSubmMap, q, c, d, group, key_bound, out);
  return out;
}

// Output-grid key of every (slot j, input n) pair, slot-major [J * N], INT64_MAX if none (AscendC
// ConvOutKeys; J = prod of conv_rules.h conv_out_slots, the kernel volume at stride 1).
at::Tensor conv_out_keys(const at::Tensor& indices, c10::IntArrayRef spatial_shape, int64_t batch_size,
                         c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
                         c10::IntArrayRef dilation) {
  check_limits([&] {
    mxs_ascend::CheckConvOutKeysLimits(indices.size(0), static_cast<int32_t>(spatial_shape.size()), spatial_shape.data(),
                                       batch_size, kernel_size.data(), stride.data(), padding.data(), dilation.data());
  });
  const int64_t slots = mxs_ascend::ConvOutKeysSlotVolume(static_cast<int32_t>(kernel_size.size()), kernel_size.data(),
                                                          stride.data(), dilation.data());
  at::Tensor keys = at::empty({slots * indices.size(0)}, indices.options().dtype(at::kLong));
  if (keys.numel() == 0) return keys;
  const at::Tensor idx = indices.contiguous();
  EXEC_NPU_CMD(aclnnConvOutKeys, idx, spatial_shape, batch_size, kernel_size, stride, padding, dilation, keys);
  return keys;
}

// The distinct non-sentinel keys of a sorted array, compacted, and their count (AscendC UniqueSortedKeys).
std::tuple<at::Tensor, at::Tensor> unique_sorted_keys(const at::Tensor& sorted_keys) {
  check_limits([&] { mxs_ascend::CheckUniqueSortedKeysLimits(sorted_keys.size(0)); });
  at::Tensor unique = at::empty_like(sorted_keys, at::MemoryFormat::Contiguous);
  at::Tensor count = at::zeros({1}, sorted_keys.options().dtype(at::kInt));
  if (sorted_keys.size(0) == 0) return {unique, count};
  const at::Tensor keys = sorted_keys.contiguous();
  EXEC_NPU_CMD(aclnnUniqueSortedKeys, keys, unique, count);
  return {unique, count};
}

// AscendC GatherMm, one group, [M, cout] out: weight_layout (gather_mm_weight_layout.h) says whether
// the weight is [K, Cin, Cout] or a layer's [K, Cout, Cin] read transposed (offsets in order or reversed).
at::Tensor launch_gather_mm(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr, int64_t cout,
                            int64_t weight_layout) {
  check_float(features, "features");
  check_limits([&] { mxs_ascend::CheckGatherMmLimits(features.size(1), cout); });
  at::Tensor out = at::empty({nbr.size(0), cout}, features.options());
  if (nbr.size(0) == 0) return out;
  const at::Tensor f = features.contiguous(), w = weight.contiguous(), n = nbr.contiguous();
  EXEC_NPU_CMD(aclnnGatherMm, f, w, n, weight_layout, out);
  return out;
}

// One group: out[m] = sum_k features[nbr[m, k]] @ weight[k], weight [K, Cin, Cout] (AscendC GatherMm).
at::Tensor gather_mm_one_group(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr) {
  return launch_gather_mm(features, weight, nbr, weight.size(2), mxs_ascend::GMM_WEIGHT_AS_IS);
}

// The input gradient with the layer's weight read in place (one group; autograd.cpp):
// out[m] = sum_k features[nbr[m, k]] @ weight[k']^T, weight [K, Cout, Cin] (this op's Cout and Cin),
// k' = K-1-k with reverse_offsets, else k (AscendC GatherMm, ISTRANS B: no transposed copy).
at::Tensor gather_mm_transposed(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr,
                                bool reverse_offsets) {
  return launch_gather_mm(features, weight, nbr, weight.size(1), mxs_ascend::GatherMmTransposedLayout(reverse_offsets));
}

// One group: dW[k] = sum_m a[nbr[m, k]]^T (x) grad[m] (AscendC GatherMmBackpropFilter), a = features,
// or with scale and shift a = relu(features * scale + shift), made first by the scale_shift_relu op.
at::Tensor gather_mm_backprop_filter_one_group(const at::Tensor& source, const at::Tensor& grad, const at::Tensor& nbr,
                                               const std::optional<at::Tensor>& scale,
                                               const std::optional<at::Tensor>& shift) {
  static auto scale_shift_relu = c10::Dispatcher::singleton()
                                     .findSchemaOrThrow("mx_sparse::scale_shift_relu", "")
                                     .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
  const at::Tensor features = scale.has_value() ? scale_shift_relu.call(source, *scale, *shift) : source;
  check_float(features, "features");
  check_limits([&] { mxs_ascend::CheckGatherMmBpfLimits(features.size(1), grad.size(1)); });
  at::Tensor dw = at::empty({nbr.size(1), features.size(1), grad.size(1)}, features.options());
  if (nbr.size(0) == 0) return dw.zero_();
  const at::Tensor f = features.contiguous(), g = grad.contiguous(), n = nbr.contiguous();
  EXEC_NPU_CMD(aclnnGatherMmBackpropFilter, f, g, n, dw);
  return dw;
}

}  // namespace
}  // namespace mxs_npu

TORCH_LIBRARY_IMPL(mx_sparse, PrivateUse1, m) {
  m.impl("_sorted_key_lookup", &mxs_npu::sorted_key_lookup);
  m.impl("_conv_out_keys", &mxs_npu::conv_out_keys);
  m.impl("_unique_sorted_keys", &mxs_npu::unique_sorted_keys);
  m.impl("_gather_mm_one_group", &mxs_npu::gather_mm_one_group);
  m.impl("_gather_mm_transposed", &mxs_npu::gather_mm_transposed);
  m.impl("_gather_mm_backprop_filter_one_group", &mxs_npu::gather_mm_backprop_filter_one_group);
}
