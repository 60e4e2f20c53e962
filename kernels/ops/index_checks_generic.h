// Value checks of a map builder's indices written with tensor operators, for backends whose
// builders run on a device (the NPU binding): every row inside the grid, no voxel twice, with
// the CPU builders' messages. One host read for both checks (plus one for the offending row on
// the error path). The CPU backend checks the same with loops over host memory; this version is
// exposed as mx_sparse._C.check_index_values_generic so that it is executed (and compared with
// the CPU builders' errors) on CPU tensors in the test suite.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include "index_errors.h"
#include "key_packing.h"

namespace mxs {

// indices: int32 [N, 1 + ndim] (layout checked by check_indices); the grid by make_grid.
inline void check_index_values_generic(const at::Tensor& indices, c10::IntArrayRef spatial_shape,
                                       int64_t batch_size) {
  const int64_t n = indices.size(0), ndim = static_cast<int64_t>(spatial_shape.size());
  if (n == 0) return;
  const at::Tensor idx = indices.to(at::kLong);
  at::Tensor b = idx.select(1, 0);
  at::Tensor outside = b.lt(0).logical_or(b.ge(batch_size));
  for (int64_t d = 0; d < ndim; ++d) {
    const at::Tensor c = idx.select(1, 1 + d);
    outside = outside.logical_or(c.lt(0)).logical_or(c.ge(spatial_shape[d]));
  }
  // batch x grid fits int64 (make_grid); garbage for outside rows, which the sort sets aside
  const at::Tensor key = pack_keys(idx, spatial_shape);
  const at::Tensor rows = at::arange(n, idx.options());
  const at::Tensor none = at::full({}, n, idx.options());
  const at::Tensor bad_row = at::where(outside, rows, none).min();
  // stable: among equal keys rows ascend, so the second of each equal pair is the later row
  const auto sorted = at::sort(at::where(outside, at::full({}, -1, idx.options()), key), /*stable=*/true,
                               /*dim=*/0, /*descending=*/false);
  const at::Tensor keys = std::get<0>(sorted), order = std::get<1>(sorted);
  at::Tensor dup_row = none;
  if (n > 1) {
    const at::Tensor same = keys.narrow(0, 1, n - 1).eq(keys.narrow(0, 0, n - 1));
    dup_row = at::where(same, order.narrow(0, 1, n - 1), none).min();
  }
  const at::Tensor found = at::stack({bad_row, dup_row}).to(at::kCPU).contiguous();
  const int64_t bad = found.data_ptr<int64_t>()[0], dup = found.data_ptr<int64_t>()[1];
  raise_index_error(indices, spatial_shape, batch_size, bad, dup);
}

}  // namespace mxs
