// Voxelization arithmetic: which cell a point falls in and how many cells an axis
// has. These are the rules of spconv 2.x (Point2VoxelCPU) and mmcv (Voxelization),
// measured bit for bit against spconv 2.3.8 (tests/compat/test_voxelize_spconv.py):
//   * voxel_size and the range bounds are float32 values (the peers store them
//     as float), whatever the caller passed;
//   * extent of axis j = round((max_j - min_j) / size_j), every step in float32,
//     halves rounded away from zero (C's roundf);
//   * cell of a coordinate p = floor((p - min_j) / size_j), computed in float32
//     (in double for float64 points, as mmcv's templated kernel does), and the
//     point belongs to no voxel when the cell is outside [0, extent).
// A backend computing these with its own tensor ops (kernels/generic/voxelize_generic.cpp)
// performs the same IEEE operations in the same order, so it agrees exactly.
#pragma once
#include <math.h>  // roundf
#include "mxs_qualifiers.h"

namespace mxs {

// Largest extent per axis: coordinates are written as int32.
constexpr int64_t kMaxVoxelExtent = 0x7fffffffLL;

// Number of cells along one axis, or -1 when the quotient is not finite or
// exceeds kMaxVoxelExtent (the caller turns that into an error naming the
// arguments). May be 0 for a range narrower than half a voxel.
MXS_INLINE int64_t voxel_axis_extent(float lo, float hi, float size) {
  const float q = (hi - lo) / size;
  if (!(q >= 0.0f) || !(q < 2147483648.0f)) return q < 0.0f ? 0 : -1;  // NaN / inf / too large
  const float r = roundf(q);
  return r > static_cast<float>(kMaxVoxelExtent) ? -1 : static_cast<int64_t>(r);
}

// Cell of coordinate p on an axis of `extent` cells, or -1 outside [0, extent).
// T is float for float32/float16/bfloat16 points (the narrow types are widened
// exactly first) and double for float64 points.
// The cell of quotient q = (p - lo) / size: floor(q) < 0 exactly when q < 0, and for
// 0 <= q < 2^31 floor(q) is the truncation, so no floor call is needed (floorf is a library
// call on baseline x86-64).
template <typename T>
MXS_INLINE int64_t voxel_cell_of_quotient(T q, int64_t extent) {
  if (!(q >= T(0)) || !(q < T(2147483648.0))) return -1;  // also NaN
  const int64_t cell = static_cast<int64_t>(q);
  return cell < extent ? cell : -1;
}

}  // namespace mxs
