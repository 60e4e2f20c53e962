// Argument checks and grid set-up of the voxelization ops, shared by the CPU
// kernel and the torch-ops implementation for other devices, so both reject the
// same input with the same message (messages name the argument, the expectation
// and what came).
#pragma once
#include <torch/types.h>
#include <c10/util/Exception.h>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <vector>
#include "../common/coord_pack.h"
#include "../common/voxel_rules.h"

namespace mxs {

// The grid a voxelization call works on. Axis j of the points (x, y, z, ...) is
// packed axis ndim-1-j: keys and output coordinates list the axes reversed
// (z, y, x), like spconv's and mmcv's coordinates and SparseConvTensor indices.
struct VoxelGrid {
  int ndim = 0;
  float size[kMaxSpatialDims];    // per point axis, float32 as the peers store it
  float lo[kMaxSpatialDims];      // range minimum per point axis
  int64_t extent[kMaxSpatialDims];  // cells per point axis
  Grid packed;                    // extents in (z, y, x) order, for pack_coord
  int64_t batch_size = 1;
};

inline std::string double_list_str(c10::ArrayRef<double> v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

// voxel_size [ndim] and point_cloud_range [2*ndim] = (min_0.., max_0..).
inline VoxelGrid make_voxel_grid(c10::ArrayRef<double> voxel_size, c10::ArrayRef<double> point_cloud_range) {
  const int64_t nd = static_cast<int64_t>(voxel_size.size());
  TORCH_CHECK_VALUE(nd >= 1 && nd <= kMaxSpatialDims, "voxel_size: expected 1 to ", kMaxSpatialDims,
                    " values (one per point axis x, y, z, ...), got ", nd, " (", double_list_str(voxel_size), ")");
  TORCH_CHECK_VALUE(static_cast<int64_t>(point_cloud_range.size()) == 2 * nd, "point_cloud_range: expected ",
                    2 * nd, " values (the minima of the ", nd, " axes, then their maxima) for ", nd,
                    "-D voxel_size, got ", point_cloud_range.size(), " (", double_list_str(point_cloud_range), ")");
  VoxelGrid g;
  g.ndim = static_cast<int>(nd);
  for (int j = 0; j < g.ndim; ++j) {
    const float size = static_cast<float>(voxel_size[j]);
    TORCH_CHECK_VALUE(std::isfinite(size) && size > 0.0f, "voxel_size: expected finite values > 0 (as float32), got ",
                      double_list_str(voxel_size));
    const float lo = static_cast<float>(point_cloud_range[j]), hi = static_cast<float>(point_cloud_range[nd + j]);
    TORCH_CHECK_VALUE(std::isfinite(lo) && std::isfinite(hi) && hi > lo, "point_cloud_range: expected finite "
                      "float32 values with max > min on every axis, got min ", point_cloud_range[j], " and max ",
                      point_cloud_range[nd + j], " on axis ", j, " (", double_list_str(point_cloud_range), ")");
    const int64_t extent = voxel_axis_extent(lo, hi, size);
    TORCH_CHECK_VALUE(extent >= 0, "voxel_size / point_cloud_range: axis ", j, " would have (", hi, " - ", lo,
                      ") / ", size, " cells, more than ", kMaxVoxelExtent,
                      " (coordinates are int32); use a larger voxel_size or a smaller range");
    TORCH_CHECK_VALUE(extent >= 1, "voxel_size / point_cloud_range: axis ", j, " has no cell: its range (", hi,
                      " - ", lo, ") is less than half of voxel_size ", size);
    g.size[j] = size;
    g.lo[j] = lo;
    g.extent[j] = extent;
  }
  g.packed.ndim = g.ndim;
  for (int j = 0; j < g.ndim; ++j) g.packed.shape[g.ndim - 1 - j] = g.extent[j];
  TORCH_CHECK_VALUE(grid_fits_int64(g.packed, 1), "voxel_size / point_cloud_range: the grid of ",
                    double_list_str(point_cloud_range), " in voxels of ", double_list_str(voxel_size),
                    " has more cells than an int64 key can number; use a larger voxel_size or a smaller range");
  return g;
}

inline void check_voxelize_points(const at::Tensor& points, int ndim) {
  const auto t = points.scalar_type();
  TORCH_CHECK_VALUE(t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16,
                    "points: expected a float32, float64, float16 or bfloat16 tensor, got ", t);
  TORCH_CHECK_VALUE(points.dim() == 2 && points.size(1) >= ndim, "points: expected shape [N, C] with C >= ", ndim,
                    " (the first ", ndim, " columns are the coordinates), got ", points.sizes());
  TORCH_CHECK_VALUE(points.size(0) >= 1, "points: the point cloud is empty (shape ", points.sizes(),
                    "); expected at least one point");
  TORCH_CHECK_VALUE(points.size(0) < INT32_MAX, "points: ", points.size(0),
                    " points do not fit the int32 point counts; expected fewer than 2^31 - 1");
}

// Checks `batch` ([N] int32/int64 on the points' device) and returns it as
// int64, or nullopt for a single point cloud. Sets g.batch_size = max + 1 and
// checks that every (batch, cell) key fits int64.
inline std::optional<at::Tensor> check_voxelize_batch(const std::optional<at::Tensor>& batch,
                                                      const at::Tensor& points, VoxelGrid& g) {
  g.batch_size = 1;
  if (!batch.has_value()) return std::nullopt;
  const at::Tensor& b = *batch;
  TORCH_CHECK_VALUE(b.scalar_type() == at::kLong || b.scalar_type() == at::kInt,
                    "batch: expected an int64 or int32 tensor (the sample index of each point), got ", b.scalar_type());
  TORCH_CHECK_VALUE(b.dim() == 1 && b.size(0) == points.size(0), "batch: expected shape [", points.size(0),
                    "] (one sample index per point), got ", b.sizes());
  TORCH_CHECK_VALUE(b.device() == points.device(), "batch: expected a tensor on ", points.device(), " like points, got ",
                    b.device());
  at::Tensor b64 = b.to(at::kLong);
  const int64_t lo = b64.min().item<int64_t>(), hi = b64.max().item<int64_t>();
  TORCH_CHECK_VALUE(lo >= 0, "batch: expected sample indices >= 0, got ", lo);
  // hi + 1 samples; hi = INT64_MAX would wrap the count (and its points vanish as out of range)
  TORCH_CHECK_VALUE(hi < INT64_MAX && grid_fits_int64(g.packed, hi + 1), "batch: sample index ", hi,
                    " makes ", hi, " + 1 samples; times the voxel grid that exceeds the int64 key range; use "
                    "fewer samples or a coarser grid");
  g.batch_size = hi + 1;
  return b64;
}

// max_points >= 1 (hard voxelization always stores points); max_voxels >= 1 or
// -1 for no cap.
inline void check_voxelize_caps(int64_t max_points, int64_t max_voxels) {
  TORCH_CHECK_VALUE(max_points >= 1, "max_points: expected >= 1 (points kept per voxel), got ", max_points);
  TORCH_CHECK_VALUE(max_voxels >= 1 || max_voxels == -1,
                    "max_voxels: expected >= 1 (voxels kept per sample) or -1 (no cap), got ", max_voxels);
}

// The voxels tensor [M, max_points, C] from `allocate` (a function of the sizes returning a
// zero-filled tensor); a size beyond int64 or the memory available is reported as an error
// naming max_points.
template <typename Allocate>
at::Tensor allocate_voxels(int64_t m, int64_t max_points, int64_t c, Allocate allocate) {
  TORCH_CHECK_VALUE(m == 0 || max_points <= INT64_MAX / m / std::max<int64_t>(c, 1),
                    "max_points: ", m, " voxels x ", max_points, " points x ", c,
                    " channels exceed the int64 element count");
  try {
    return allocate(std::vector<int64_t>{m, max_points, c});
  } catch (const c10::Error& e) {
    TORCH_CHECK_VALUE(false, "max_points: the voxels tensor [", m, ", ", max_points, ", ", c,
                      "] cannot be allocated (", e.what_without_backtrace(), ")");
  }
  abort();  // not reached
}

// Error for the first non-finite value (row-major position `flat` in points [N, C]).
[[noreturn]] inline void fail_nonfinite_point(int64_t flat, int64_t c, double value) {
  TORCH_CHECK_VALUE(false, "points: row ", flat / c, " column ", flat % c, " is ", value,
                    "; expected finite values (NaN or Inf in a point cloud)");
  abort();
}

}  // namespace mxs
