// The two errors of a map builder's index value checks (a row outside the grid, a voxel given
// twice), built here once for every builder: the CPU kernels, the tensor-operator checks of the
// device builders and, through mx_sparse._core.contract.index_error, the Python ones.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <sstream>
#include <string>
#include "op_args.h"

namespace mxs {

// "(b, c0, c1, ...)" of one row; reads it from the device (error path only).
inline std::string index_row_str(const at::Tensor& indices, int64_t row) {
  const at::Tensor r = indices.select(0, row).to(at::kCPU, at::kLong).contiguous();
  std::ostringstream s;
  s << "(";
  for (int64_t j = 0; j < r.size(0); ++j) s << (j ? ", " : "") << r.data_ptr<int64_t>()[j];
  s << ")";
  return s.str();
}

// Raises for the lowest row outside the grid (bad_row) or, if none, the later row of the
// lowest duplicate pair (dup_row); a value of N (indices.size(0)) or more means none.
// name: the op's argument holding the rows; grid_name: the argument its grid comes from
// (build_conv_map_at checks out_indices against out_spatial_shape too).
inline void raise_index_error(const at::Tensor& indices, c10::IntArrayRef spatial_shape, int64_t batch_size,
                              int64_t bad_row, int64_t dup_row, const char* name = "indices",
                              const char* grid_name = "spatial_shape") {
  const int64_t n = indices.size(0);
  TORCH_CHECK_VALUE(bad_row < 0 || bad_row >= n, name, ": row ", bad_row, " is (batch, *coords) = ",
                    index_row_str(indices, bad_row), ", expected 0 <= batch < batch_size (", batch_size,
                    ") and 0 <= coord < ", grid_name, " ", list_str(spatial_shape), " on every axis");
  TORCH_CHECK_VALUE(dup_row < 0 || dup_row >= n, name, ": duplicate voxel ", index_row_str(indices, dup_row),
                    " at row ", dup_row, "; expected every (batch, *coords) row to be unique");
}

// A gather's map (gather_mm, gather_mm_backprop_filter): `row`, the lowest map row holding an
// entry outside [-1, num_rows) (not an input row); row < 0: none. The CPU kernel finds the row
// while it computes; the accelerator's check on CPU tensors (mx_sparse/_accelerator/index_checks.py)
// before it launches: one message.
inline void raise_map_row_error(const char* name, int64_t row, int64_t num_rows) {
  TORCH_CHECK_VALUE(row < 0, name, ": row ", row, " holds an input row outside [-1, ", num_rows, ")");
}

}  // namespace mxs
