// The accelerators' three map primitives (kernels/schema/schema.cpp: _sorted_key_lookup,
// _conv_out_keys, _unique_sorted_keys) and the optional _conv_output_rows and
// _sorted_key_lookup_rows as one table of typed operator handles, looked up in the dispatcher
// once. A call goes through the dispatcher like torch.ops.mx_sparse.<name>(...) from Python, so
// whatever is registered for the tensors' device runs: the Triton launchers (CUDA), the AscendC
// binding (NPU), the emulator's primitives (MXS_NPU_ON_CPU=1), the torch-operator fallbacks, or a
// fake kernel under a fake-tensor trace. The optional ones have no fallback: a caller asks
// has_kernel first.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <optional>
#include <tuple>

namespace mxs {

struct MapPrimitives {
  // (query_keys, sorted_keys, key_deltas, group, key_bound) -> int32 [S, K] sorted positions or -1
  c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, int64_t)>
      sorted_key_lookup;
  // (indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation) -> int64 [J*N] output keys
  // (J slots per input, kernels/schema/schema.cpp)
  c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, c10::IntArrayRef, int64_t, c10::IntArrayRef,
                                      c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef)>
      conv_out_keys;
  // sorted keys -> (unique keys, int32 [1] count, left on the device)
  c10::TypedOperatorHandle<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&)> unique_sorted_keys;
  // (sorted output keys, out_shape, query_shape, stride) -> (rows int32 [C, 1+nd], query keys
  // int64 [C], int32 [1] count): optional, only where the device has a kernel (has_kernel)
  c10::TypedOperatorHandle<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor&, c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef)>
      conv_output_rows;
  // (query_keys, sorted_keys, key_deltas, group, key_bound, order, scatter_rows, transpose_rows)
  // -> (int32 [S, K] rows order[p] (or -1), at row order[s] with scatter_rows; the transpose on
  // transpose_rows rows): optional, only where has_kernel
  c10::TypedOperatorHandle<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                              int64_t, int64_t, const std::optional<at::Tensor>&,
                                                              bool, int64_t)>
      sorted_key_lookup_rows;
};

// Whether the optional primitive `op` has a kernel for the dispatch key of tensors like `t` (as
// autograd.cpp asks of _gather_mm_transposed).
template <typename Op>
bool has_kernel(const Op& op, const at::Tensor& t) {
  return op.hasKernelForDispatchKey(c10::computeDispatchKey(t.scalar_type(), t.layout(), t.device()));
}

// The schema is defined when mx_sparse._C loads (TORCH_LIBRARY), before any caller runs; the
// device kernels may be registered later (Python), which the dispatcher resolves per call.
inline const MapPrimitives& map_primitives() {
  static const MapPrimitives table{
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mx_sparse::_sorted_key_lookup", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, int64_t)>(),
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mx_sparse::_conv_out_keys", "")
          .typed<at::Tensor(const at::Tensor&, c10::IntArrayRef, int64_t, c10::IntArrayRef, c10::IntArrayRef,
                            c10::IntArrayRef, c10::IntArrayRef)>(),
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mx_sparse::_unique_sorted_keys", "")
          .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&)>(),
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mx_sparse::_conv_output_rows", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, c10::IntArrayRef,
                                                                c10::IntArrayRef, c10::IntArrayRef)>(),
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("mx_sparse::_sorted_key_lookup_rows", "")
          .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t,
                                                    int64_t, const std::optional<at::Tensor>&, bool, int64_t)>(),
  };
  return table;
}

}  // namespace mxs
