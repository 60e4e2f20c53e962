// Voxel keys as tensor operators, for the code that packs on a device (the voxelization and
// map builders written with torch operators): the row-major packing of kernels/common/coord_pack.h,
// ((b*S0 + c0)*S1 + c1)..., one elementwise step per axis. The caller guarantees that every key
// fits int64 (make_grid / grid_fits_int64), so no step can overflow.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <vector>
#include "op_args.h"

namespace mxs {

// The key of (batch, coords[0], coords[1], ...) on a grid of `shape`, where axis d contributes
// coords[d] * scale[d] + shift[d] (scale 1, shift 0 when empty): a shift moves the voxels onto a
// padded grid, a scale maps output coordinates onto the input grid (o * stride). All int64.
inline at::Tensor pack_key_columns(const at::Tensor& batch, const std::vector<at::Tensor>& coords,
                                   c10::IntArrayRef shape, c10::IntArrayRef shift = {},
                                   c10::IntArrayRef scale = {}) {
  at::Tensor key = batch.to(at::kLong);
  for (size_t d = 0; d < shape.size(); ++d) {
    at::Tensor c = coords[d].to(at::kLong);
    if (!scale.empty() && scale[d] != 1) c = c * scale[d];
    if (!shift.empty() && shift[d] != 0) c = c + shift[d];
    key = key * shape[d] + c;
  }
  return key;
}

// The grid keys are packed on: 1..kMaxSpatialDims positive extents; returns the rank.
inline int64_t check_key_grid(c10::IntArrayRef shape) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  TORCH_CHECK_VALUE(nd >= 1 && nd <= kMaxSpatialDims, "shape: expected 1 to ", kMaxSpatialDims,
                    " dimensions, got ", nd, " (", list_str(shape), ")");
  for (const int64_t s : shape)
    TORCH_CHECK_VALUE(s >= 1, "shape: expected every dimension >= 1, got ", list_str(shape));
  return nd;
}

inline void check_packing_args(const at::Tensor& indices, c10::IntArrayRef shape, c10::IntArrayRef shift,
                               c10::IntArrayRef scale) {
  const int64_t nd = check_key_grid(shape);
  TORCH_CHECK_VALUE(indices.dim() >= 2 && indices.size(-1) == 1 + nd, "indices: expected shape [..., ", 1 + nd,
                    "] (batch + ", nd, " spatial coordinates), got ", indices.sizes());
  TORCH_CHECK_VALUE(!c10::isFloatingType(indices.scalar_type()) && indices.scalar_type() != at::kBool,
                    "indices: expected an integer dtype, got ", indices.scalar_type());
  TORCH_CHECK_VALUE(shift.empty() || static_cast<int64_t>(shift.size()) == nd, "shift: expected ", nd,
                    " values (one per spatial axis), got ", list_str(shift));
  TORCH_CHECK_VALUE(scale.empty() || static_cast<int64_t>(scale.size()) == nd, "scale: expected ", nd,
                    " values (one per spatial axis), got ", list_str(scale));
}

// int64 [...] keys of the rows (batch, *coords) of indices [..., 1 + ndim].
inline at::Tensor pack_keys(const at::Tensor& indices, c10::IntArrayRef shape, c10::IntArrayRef shift = {},
                            c10::IntArrayRef scale = {}) {
  check_packing_args(indices, shape, shift, scale);
  std::vector<at::Tensor> coords;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) coords.push_back(indices.select(-1, 1 + d));
  return pack_key_columns(indices.select(-1, 0), coords, shape, shift, scale);
}

// The inverse of pack_keys (no shift or scale): int32 [M, 1 + ndim] rows (batch, *coords).
inline at::Tensor unpack_keys(const at::Tensor& keys, c10::IntArrayRef shape) {
  const int64_t nd = check_key_grid(shape);
  TORCH_CHECK_VALUE(keys.dim() == 1 && keys.scalar_type() == at::kLong, "keys: expected int64 [M], got ",
                    keys.scalar_type(), " ", keys.sizes());
  std::vector<at::Tensor> cols(1 + nd);
  at::Tensor rest = keys;
  for (int64_t d = nd - 1; d >= 0; --d) {
    cols[1 + d] = at::remainder(rest, shape[d]);
    rest = at::div(rest, shape[d], "floor");
  }
  cols[0] = rest;
  return at::stack(cols, 1).to(at::kInt);
}

}  // namespace mxs
