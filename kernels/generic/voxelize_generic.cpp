// Device-generic voxelization: the result of kernels/cpu/voxelize_cpu.cpp (voxels listed
// per sample in the order of their first point, a voxel's points in input order) computed
// with torch operators that CUDA and torch_npu implement. The sequential first-appearance
// walk of the CPU kernel does not suit a device, so here a stable sort groups the points of
// each voxel and a second sort orders the voxels by (sample, first point row). The cell
// arithmetic of kernels/common/voxel_rules.h runs as elementwise tensor ops in the same
// order. A few host reads (counts, the finite check) synchronise the device.
// Registered for CUDA and PrivateUse1 only; the tests and the *_ON_CPU switches run it on CPU
// tensors through the dispatcher (mx_sparse._core.op_registration.kernel_for_key), not through an entry of _C.
#include <torch/library.h>
#include <torch/types.h>
#include <optional>
#include <tuple>
#include <vector>
#include "../contract/key_packing.h"
#include "../contract/voxelize_args.h"

namespace mxs {
namespace {

at::Tensor axis_values(const float* v, int n, const at::Tensor& like, at::ScalarType dtype) {
  return at::tensor(std::vector<float>(v, v + n)).to(like.device()).to(dtype);
}

// True at every position whose value differs from the one before (and at 0).
at::Tensor run_starts(const at::Tensor& sorted) {
  at::Tensor start = at::ones({sorted.size(0)}, sorted.options().dtype(at::kBool));
  if (sorted.size(0) > 1) start.narrow(0, 1, sorted.size(0) - 1).copy_(sorted.narrow(0, 1, sorted.size(0) - 1) !=
                                                                      sorted.narrow(0, 0, sorted.size(0) - 1));
  return start;
}

// int64 voxel key per point, -1 outside the grid; errors on a non-finite value.
at::Tensor point_keys(const at::Tensor& points, const std::optional<at::Tensor>& batch, const VoxelGrid& g) {
  const at::Tensor finite = at::isfinite(points);
  if (!finite.all().item<bool>()) {
    const int64_t flat = at::nonzero(finite.logical_not().flatten()).select(1, 0)[0].item<int64_t>();
    fail_nonfinite_point(flat, points.size(1), points.flatten()[flat].item<double>());
  }
  const auto acc = points.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor xyz = points.narrow(1, 0, g.ndim).to(acc);
  const at::Tensor cell_f = at::floor((xyz - axis_values(g.lo, g.ndim, points, acc)) /
                                      axis_values(g.size, g.ndim, points, acc));
  at::Tensor inside = (cell_f >= 0) & (cell_f < 2147483648.0);
  const at::Tensor cell = at::where(inside, cell_f, at::zeros_like(cell_f)).to(at::kLong);
  const at::Tensor extent = at::tensor(std::vector<int64_t>(g.extent, g.extent + g.ndim)).to(points.device());
  inside = (inside & (cell < extent)).all(1);
  std::vector<at::Tensor> zyx;  // packed in (z, y, x) order, like the CPU kernel's pack_coord
  for (int d = 0; d < g.ndim; ++d) zyx.push_back(cell.select(1, g.ndim - 1 - d));
  const at::Tensor key = pack_key_columns(batch.has_value() ? *batch : at::zeros({points.size(0)}, cell.options()),
                                          zyx, c10::IntArrayRef(g.packed.shape, g.ndim));
  return at::where(inside, key, at::full_like(key, -1));
}

// The voxel groups and their output order (see VoxelGroups in voxelize_cpu.cpp).
struct Groups {
  at::Tensor rows;      // [V] in-range point rows, sorted by key, input order within a voxel
  at::Tensor group_of;  // [V] group of each sorted point
  at::Tensor starts;    // [G] first sorted position of each group
  at::Tensor sizes;     // [G] points per group
  at::Tensor keys;      // [G] voxel key
  at::Tensor order;     // [G] groups in output order: ascending batch, then first point row
  at::Tensor batch_rank;  // [G] dense rank of each ordered group's batch index
};

Groups group_points(const at::Tensor& points, const std::optional<at::Tensor>& batch, const VoxelGrid& g) {
  const at::Tensor key = point_keys(points, batch, g);
  const at::Tensor valid = at::nonzero(key >= 0).select(1, 0);
  const auto sorted = at::sort(key.index_select(0, valid), /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const at::Tensor& sorted_keys = std::get<0>(sorted);
  Groups r;
  r.rows = valid.index_select(0, std::get<1>(sorted));
  const at::Tensor is_start = run_starts(sorted_keys);
  r.group_of = at::cumsum(is_start, 0) - 1;
  r.starts = at::nonzero(is_start).select(1, 0);
  const int64_t v = sorted_keys.size(0);
  r.sizes = at::diff(r.starts, 1, 0, std::nullopt, at::full({1}, v, r.starts.options()));
  r.keys = sorted_keys.index_select(0, r.starts);
  int64_t volume = 1;
  for (int d = 0; d < g.ndim; ++d) volume *= g.packed.shape[d];
  const at::Tensor rank = at::cumsum(run_starts(at::div(r.keys, volume, "floor")), 0) - 1;
  const at::Tensor first_row = r.rows.index_select(0, r.starts);
  r.order = at::argsort(rank * points.size(0) + first_row);
  r.batch_rank = rank.index_select(0, r.order);
  return r;
}

at::Tensor voxel_coords(const at::Tensor& keys, const VoxelGrid& g) {
  return unpack_keys(keys, c10::IntArrayRef(g.packed.shape, g.ndim));
}

at::Tensor point_voxel_ids(const Groups& r, const at::Tensor& group_voxel, int64_t n) {
  at::Tensor ids = at::full({n}, -1, r.rows.options());
  return ids.index_put_({r.rows}, group_voxel.index_select(0, r.group_of));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> voxelize_dynamic_generic(
    const at::Tensor& points, const std::optional<at::Tensor>& batch, c10::ArrayRef<double> voxel_size,
    c10::ArrayRef<double> point_cloud_range) {
  VoxelGrid g = make_voxel_grid(voxel_size, point_cloud_range);
  check_voxelize_points(points, g.ndim);
  const Groups r = group_points(points, check_voxelize_batch(batch, points, g), g);
  const int64_t m = r.order.size(0);
  const at::Tensor group_voxel =
      at::empty({m}, r.order.options()).index_put_({r.order}, at::arange(m, r.order.options()));
  return {voxel_coords(r.keys.index_select(0, r.order), g), r.sizes.index_select(0, r.order).to(at::kInt),
          point_voxel_ids(r, group_voxel, points.size(0))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> voxelize_hard_generic(
    const at::Tensor& points, const std::optional<at::Tensor>& batch, c10::ArrayRef<double> voxel_size,
    c10::ArrayRef<double> point_cloud_range, int64_t max_points, int64_t max_voxels) {
  VoxelGrid g = make_voxel_grid(voxel_size, point_cloud_range);
  check_voxelize_points(points, g.ndim);
  check_voxelize_caps(max_points, max_voxels);
  const Groups r = group_points(points, check_voxelize_batch(batch, points, g), g);
  // Position of each ordered group within its sample; the first max_voxels stay.
  const int64_t groups = r.order.size(0);
  const at::Tensor pos = at::arange(groups, r.order.options());
  const at::Tensor sample_start =
      std::get<0>(at::cummax(at::where(run_starts(r.batch_rank), pos, at::zeros_like(pos)), 0));
  const at::Tensor kept = max_voxels == -1 ? at::ones_like(pos, pos.options().dtype(at::kBool))
                                           : (pos - sample_start) < max_voxels;
  const at::Tensor ordered_voxel = at::where(kept, at::cumsum(kept, 0) - 1, at::full_like(pos, -2));
  const at::Tensor group_voxel = at::empty({groups}, pos.options()).index_put_({r.order}, ordered_voxel);
  const at::Tensor voxel_group = r.order.masked_select(kept);
  const int64_t m = voxel_group.size(0), c = points.size(1);
  // Slot of each sorted point in its voxel; points past max_points are not stored.
  const at::Tensor vid = group_voxel.index_select(0, r.group_of);
  const at::Tensor slot = at::arange(r.rows.size(0), pos.options()) - r.starts.index_select(0, r.group_of);
  const at::Tensor store = at::nonzero((vid >= 0) & (slot < max_points)).select(1, 0);
  at::Tensor voxels = allocate_voxels(m, max_points, c, [&](const std::vector<int64_t>& sizes) {
    return at::zeros(sizes, points.options());
  });
  voxels.index_put_({vid.index_select(0, store), slot.index_select(0, store)},
                    points.index_select(0, r.rows.index_select(0, store)));
  return {voxels, voxel_coords(r.keys.index_select(0, voxel_group), g),
          r.sizes.index_select(0, voxel_group).clamp_max(max_points).to(at::kInt),
          point_voxel_ids(r, group_voxel, points.size(0))};
}

}  // namespace
}  // namespace mxs

// No voxelization kernel of ours exists for these devices yet; this is theirs.
TORCH_LIBRARY_IMPL(mx_sparse, CUDA, m) {
  m.impl("voxelize_dynamic", &mxs::voxelize_dynamic_generic);
  m.impl("voxelize_hard", &mxs::voxelize_hard_generic);
}

TORCH_LIBRARY_IMPL(mx_sparse, PrivateUse1, m) {
  m.impl("voxelize_dynamic", &mxs::voxelize_dynamic_generic);
  m.impl("voxelize_hard", &mxs::voxelize_hard_generic);
}
