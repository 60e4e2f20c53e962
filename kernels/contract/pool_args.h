// Argument checks of the sparse pooling ops (sparse_max_pool, sparse_avg_pool and their
// backward ops; schema: schema.cpp), shared by the CPU kernels (kernels/cpu/sparse_pool_cpu.cpp)
// and, through mx_sparse._C.contract (contract_bindings.cpp) and mx_sparse._core.contract, the
// accelerator's torch-operator version (mx_sparse/_accelerator/sparse_pool.py): one set of
// messages. Only metadata is checked here (no tensor value is read): the map's entries are
// checked by each backend where its data lives (the CPU kernels on the host, the accelerator
// with a device-side assertion).
#pragma once
#include <torch/types.h>
#include <c10/util/Exception.h>
#include <cstdint>
#include "op_args.h"

namespace mxs {

// argmax of sparse_max_pool holds kernel offsets k < K and -1: the narrowest of int8, int16, int32.
inline at::ScalarType pool_offset_dtype(int64_t kvol) {
  return kvol <= 127 ? at::kChar : kvol <= 32767 ? at::kShort : at::kInt;
}

inline void check_pool_features(const at::Tensor& x, const char* name) {
  TORCH_CHECK_VALUE(x.dim() == 2, name, ": expected a [N, C] tensor, got ", x.dim(), " dimensions");
  TORCH_CHECK_VALUE(at::isFloatingType(x.scalar_type()), name, ": expected a floating-point dtype, got ",
                    x.scalar_type());
}

// The pooling map's entries, lowest lo and highest hi, within [-1, num_rows) (-1 or an input row);
// the values are read by the backend where the map lives (index_checks.py for the accelerator's).
inline void check_pool_entries(const char* name, int64_t lo, int64_t hi, int64_t num_rows) {
  TORCH_CHECK_VALUE(lo >= -1 && hi < num_rows, name, ": expected entries in [-1, ", num_rows, "), got values in [",
                    lo, ", ", hi, "]");
}

// sparse_max_pool / sparse_avg_pool (features [N, C], nbr [M, K]).
inline void check_pool_args(const at::Tensor& features, const at::Tensor& nbr) {
  check_pool_features(features, "features");
  check_map(nbr, "nbr");
  check_same_device("features", features, {{"nbr", &nbr}});
}

// sparse_max_pool_backward (argmax given) / sparse_avg_pool_backward (argmax null):
// grad [M, C], nbr [M, K], num_rows input rows an int32 map can name.
inline void check_pool_backward_args(const at::Tensor& grad, const at::Tensor* argmax, const at::Tensor& nbr,
                                     int64_t num_rows) {
  check_pool_features(grad, "grad");
  check_map(nbr, "nbr");
  check_same_device("grad", grad, {{"argmax", argmax}, {"nbr", &nbr}});
  if (argmax != nullptr)
    TORCH_CHECK_VALUE(argmax->sizes() == grad.sizes(), "argmax: expected the shape of grad ", grad.sizes(), ", got ",
                      argmax->sizes());
  TORCH_CHECK_VALUE(nbr.size(0) == grad.size(0), "nbr: expected one row per grad row (", grad.size(0), "), got ",
                    nbr.size(0));
  if (argmax != nullptr)
    TORCH_CHECK_VALUE(argmax->scalar_type() == pool_offset_dtype(nbr.size(1)), "argmax: expected ",
                      pool_offset_dtype(nbr.size(1)), " kernel offsets for a map of ", nbr.size(1), " offsets, got ",
                      argmax->scalar_type());
  TORCH_CHECK_VALUE(num_rows >= 0 && num_rows < INT32_MAX, "num_rows: expected 0 <= num_rows < 2^31 - 1 (the rows "
                    "an int32 map can name), got ", num_rows);
}

}  // namespace mxs
