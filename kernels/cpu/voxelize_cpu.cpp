// CPU voxelization (hard and dynamic). spconv's and mmcv's CPU voxelizers walk the points in
// input order and look each cell up in a dense int32 table over the whole grid (360 MB for a
// KITTI grid). Here the walk is the same -- it is what defines their voxel order and which
// voxels and points a cap keeps -- but the lookup is an open-addressing hash table of the
// int64 cell keys, sized by the number of points: memory O(N), never the grid volume, and a
// table that stays in cache. The walk is the only sequential pass; computing the keys, the
// finite check and writing the outputs run in parallel over fixed-size blocks of points, so
// the result does not depend on the thread count.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>
#include "../contract/voxelize_args.h"
#include "fast_divide.h"
#include "large_tensor_pool.h"
#include "sorted_voxels.h"

namespace mxs {
namespace {

constexpr int64_t kPointBlock = 8192;  // parallel passes split the points into blocks of this size

// A per-point array whose elements are not initialised on allocation (every pass writes
// each element before it is read); std::vector would first clear megabytes per call.
template <typename T>
class PointArray {
 public:
  explicit PointArray(int64_t n = 0) : data_(new T[n]), n_(n) {}
  T& operator[](int64_t i) { return data_[i]; }
  const T& operator[](int64_t i) const { return data_[i]; }
  int64_t size() const { return n_; }

 private:
  std::unique_ptr<T[]> data_;
  int64_t n_;
};

// True when the n values hold a NaN or an infinity. The float32 test on the exponent bits is a
// branch-free loop the compiler vectorizes; the common case (all finite) reads the block once.
template <typename T>
bool any_nonfinite(const T* v, int64_t n) {
  bool bad = false;
  for (int64_t e = 0; e < n; ++e) bad |= !std::isfinite(static_cast<float>(v[e]));
  return bad;
}

template <>
bool any_nonfinite<float>(const float* v, int64_t n) {
  uint32_t bad = 0;
  for (int64_t e = 0; e < n; ++e) {
    uint32_t bits;
    std::memcpy(&bits, v + e, 4);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad != 0;
}

template <>
bool any_nonfinite<double>(const double* v, int64_t n) {
  bool bad = false;
  for (int64_t e = 0; e < n; ++e) bad |= !std::isfinite(v[e]);
  return bad;
}

// Cell key of every point, -1 outside the grid; the first non-finite value (lowest
// row-major position) is an error. Returns the number of points inside. Per block, the
// quotients (p - min) / size of each axis are computed in a contiguous buffer first: the
// divisions, the costly part, then run as vector instructions (same IEEE result per lane).
template <typename scalar_t, typename acc_t>
int64_t point_keys(const scalar_t* pts, int64_t n, int64_t c, const int64_t* batch, const VoxelGrid& g,
                   PointArray<int64_t>& key) {
  const int64_t blocks = (n + kPointBlock - 1) / kPointBlock;
  std::vector<int64_t> first_bad(blocks, -1), inside_count(blocks, 0);
  at::parallel_for(0, blocks, 1, [&](int64_t bb, int64_t be) {
    std::vector<acc_t> q(static_cast<size_t>(g.ndim) * kPointBlock);
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t begin = blk * kPointBlock, len = std::min(n, begin + kPointBlock) - begin;
      const scalar_t* p = pts + begin * c;
      if (any_nonfinite(p, len * c)) {
        for (int64_t e = 0; e < len * c; ++e)
          if (!std::isfinite(static_cast<acc_t>(p[e]))) {
            first_bad[blk] = begin * c + e;
            break;
          }
        continue;
      }
      for (int j = 0; j < g.ndim; ++j) {
        acc_t* qj = q.data() + j * kPointBlock;
        const acc_t lo = static_cast<acc_t>(g.lo[j]), size = static_cast<acc_t>(g.size[j]);
        for (int64_t i = 0; i < len; ++i) qj[i] = static_cast<acc_t>(p[i * c + j]);
        for (int64_t i = 0; i < len; ++i) qj[i] = (qj[i] - lo) / size;
      }
      int64_t count = 0;
      for (int64_t i = 0; i < len; ++i) {
        int64_t cell[kMaxSpatialDims];
        bool inside = true;
        for (int j = 0; j < g.ndim && inside; ++j) {
          const int64_t v = voxel_cell_of_quotient(q[j * kPointBlock + i], g.extent[j]);
          cell[g.ndim - 1 - j] = v;  // keys and coordinates list the axes reversed: (z, y, x)
          inside = v >= 0;
        }
        key[begin + i] = inside ? pack_coord(g.packed, batch ? batch[begin + i] : 0, cell) : -1;
        count += inside;
      }
      inside_count[blk] = count;
    }
  });
  for (int64_t blk = 0; blk < blocks; ++blk)
    if (first_bad[blk] >= 0)
      fail_nonfinite_point(first_bad[blk], c, static_cast<double>(static_cast<acc_t>(pts[first_bad[blk]])));
  int64_t inside = 0;
  for (int64_t cnt : inside_count) inside += cnt;
  return inside;
}

// Open-addressing (linear probing) table from cell key to voxel group, with at least
// twice as many slots as keys it will hold. A slot holds only the group (4 bytes, so the
// table of a 100k-point frame fits in L2); the key is compared in the groups' own key list,
// whose recent entries -- the cells the last points fell in -- are in cache anyway.
class CellTable {
 public:
  CellTable(int64_t capacity, std::vector<int64_t>& group_keys) : group_keys_(group_keys) {
    int bits = 4;
    while ((int64_t(1) << bits) < 2 * capacity) ++bits;
    shift_ = 64 - bits;
    mask_ = (uint64_t(1) << bits) - 1;
    slots_.assign(size_t(1) << bits, -1);
  }

  // Group of `key`; a new key becomes group group_keys.size() (appended; `inserted` set).
  int32_t find_or_insert(int64_t key, bool& inserted) {
    uint64_t s = (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> shift_;  // Fibonacci hashing
    while (true) {
      const int32_t g = slots_[s];
      if (g < 0) {
        slots_[s] = static_cast<int32_t>(group_keys_.size());
        group_keys_.push_back(key);
        inserted = true;
        return slots_[s];
      }
      if (group_keys_[g] == key) {
        inserted = false;
        return g;
      }
      s = (s + 1) & mask_;
    }
  }

 private:
  std::vector<int64_t>& group_keys_;
  int shift_;
  uint64_t mask_;
  std::vector<int32_t> slots_;
};

// The voxels of a call in first-appearance order ("groups"), each point's group and slot.
struct Groups {
  PointArray<int32_t> of_point;   // group of each point, -1 outside the grid
  PointArray<int32_t> slot;       // position of the point among its group's points (input order)
  std::vector<int64_t> key;       // cell key of each group
  std::vector<int32_t> count;     // points per group
};

Groups walk_points(const PointArray<int64_t>& key, int64_t inside) {
  const int64_t n = key.size();
  Groups r{PointArray<int32_t>(n), PointArray<int32_t>(n), {}, {}};
  CellTable table(inside, r.key);
  for (int64_t i = 0; i < n; ++i) {
    if (key[i] < 0) {
      r.of_point[i] = -1;
      continue;
    }
    bool inserted;
    const int32_t gi = table.find_or_insert(key[i], inserted);
    if (inserted) r.count.push_back(0);
    r.of_point[i] = gi;
    r.slot[i] = r.count[gi]++;
  }
  return r;
}

// Groups in output order: by sample (ascending batch), within a sample by first appearance.
std::vector<int32_t> output_order(const Groups& r, int64_t volume, bool batched) {
  const int64_t groups = static_cast<int64_t>(r.key.size());
  std::vector<KeyRow> order(groups);
  for (int64_t gi = 0; gi < groups; ++gi)
    order[gi] = KeyRow{batched ? r.key[gi] / volume : 0, static_cast<int32_t>(gi)};
  radix_sort(order, [](const KeyRow& x) { return x.key; });  // stable: first appearance within a sample
  std::vector<int32_t> out(groups);
  for (int64_t i = 0; i < groups; ++i) out[i] = order[i].row;
  return out;
}

at::Tensor voxel_coords(const Groups& r, const std::vector<int32_t>& voxel_group, const VoxelGrid& g,
                        const at::TensorOptions& opts) {
  const int64_t m = static_cast<int64_t>(voxel_group.size());
  at::Tensor coords = empty_cpu({m, 1 + g.ndim}, opts.dtype(at::kInt));
  int32_t* out = coords.data_ptr<int32_t>();
  FastDivisor extent[kMaxSpatialDims];  // key unpacking without the int64 divide instruction
  for (int d = 0; d < g.ndim; ++d) extent[d] = FastDivisor(g.packed.shape[d]);
  at::parallel_for(0, m, kPointBlock, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t rest = r.key[voxel_group[i]], cell;
      int32_t* row = out + i * (1 + g.ndim);
      for (int d = g.ndim - 1; d >= 0; --d) {
        rest = extent[d].divide(rest, &cell);
        row[1 + d] = static_cast<int32_t>(cell);
      }
      row[0] = static_cast<int32_t>(rest);
    }
  });
  return coords;
}

struct Prepared {
  VoxelGrid grid;
  at::Tensor points;  // contiguous
  Groups groups;
  int64_t volume = 1;  // cells per sample
  bool batched = false;
};

Prepared prepare(const at::Tensor& points, const std::optional<at::Tensor>& batch, c10::ArrayRef<double> voxel_size,
                 c10::ArrayRef<double> point_cloud_range) {
  Prepared p;
  p.grid = make_voxel_grid(voxel_size, point_cloud_range);
  check_voxelize_points(points, p.grid.ndim);
  const std::optional<at::Tensor> b64 = check_voxelize_batch(batch, points, p.grid);
  const at::Tensor bc = b64 ? b64->contiguous() : at::Tensor();
  p.batched = b64.has_value();
  for (int d = 0; d < p.grid.ndim; ++d) p.volume *= p.grid.packed.shape[d];
  p.points = points.contiguous();
  const int64_t n = p.points.size(0), c = p.points.size(1);
  PointArray<int64_t> key(n);
  int64_t inside = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.points.scalar_type(), "voxelize_cpu", [&] {
    using acc_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    inside = point_keys<scalar_t, acc_t>(p.points.data_ptr<scalar_t>(), n, c,
                                         p.batched ? bc.data_ptr<int64_t>() : nullptr, p.grid, key);
  });
  p.groups = walk_points(key, inside);
  return p;
}

// point_voxel[i] = voxel row of point i's group (group_voxel), -1 for a point in no group.
at::Tensor point_voxel_ids(const Groups& r, const std::vector<int64_t>& group_voxel, const at::TensorOptions& opts) {
  const int64_t n = r.of_point.size();
  at::Tensor ids = empty_cpu({n}, opts.dtype(at::kLong));
  int64_t* out = ids.data_ptr<int64_t>();
  at::parallel_for(0, n, kPointBlock, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = r.of_point[i] < 0 ? -1 : group_voxel[r.of_point[i]];
  });
  return ids;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> voxelize_dynamic_cpu(
    const at::Tensor& points, const std::optional<at::Tensor>& batch, c10::ArrayRef<double> voxel_size,
    c10::ArrayRef<double> point_cloud_range) {
  const Prepared p = prepare(points, batch, voxel_size, point_cloud_range);
  const std::vector<int32_t> voxel_group = output_order(p.groups, p.volume, p.batched);
  const int64_t m = static_cast<int64_t>(voxel_group.size());
  std::vector<int64_t> group_voxel(m);
  const auto opts = points.options();
  at::Tensor counts = at::empty({m}, opts.dtype(at::kInt));
  int32_t* cnt = counts.data_ptr<int32_t>();
  for (int64_t i = 0; i < m; ++i) {
    group_voxel[voxel_group[i]] = i;
    cnt[i] = p.groups.count[voxel_group[i]];
  }
  return {voxel_coords(p.groups, voxel_group, p.grid, opts), counts, point_voxel_ids(p.groups, group_voxel, opts)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> voxelize_hard_cpu(
    const at::Tensor& points, const std::optional<at::Tensor>& batch, c10::ArrayRef<double> voxel_size,
    c10::ArrayRef<double> point_cloud_range, int64_t max_points, int64_t max_voxels) {
  check_voxelize_caps(max_points, max_voxels);
  const Prepared p = prepare(points, batch, voxel_size, point_cloud_range);
  const Groups& r = p.groups;
  // The first max_voxels voxels of every sample stay; points of a later voxel map to -2.
  const std::vector<int32_t> order = output_order(r, p.volume, p.batched);
  std::vector<int32_t> voxel_group;
  std::vector<int64_t> group_voxel(order.size(), -2);
  int64_t in_sample = 0, last_batch = -1;
  for (const int32_t gi : order) {
    const int64_t b = r.key[gi] / p.volume;
    in_sample = b == last_batch ? in_sample + 1 : 0;
    last_batch = b;
    if (max_voxels != -1 && in_sample >= max_voxels) continue;
    group_voxel[gi] = static_cast<int64_t>(voxel_group.size());
    voxel_group.push_back(gi);
  }
  const int64_t m = static_cast<int64_t>(voxel_group.size()), n = p.points.size(0), c = p.points.size(1);
  const auto opts = points.options();
  // Outputs from the CPU pool: a frame's voxels are megabytes, and fresh pages every frame
  // cost a page fault each (kernels/cpu/large_tensor_pool.h).
  at::Tensor voxels = allocate_voxels(m, max_points, c, [&](const std::vector<int64_t>& sizes) {
    return empty_cpu(sizes, opts).zero_();
  });
  at::Tensor counts = at::empty({m}, opts.dtype(at::kInt));
  int32_t* cnt = counts.data_ptr<int32_t>();
  for (int64_t i = 0; i < m; ++i) cnt[i] = static_cast<int32_t>(std::min<int64_t>(r.count[voxel_group[i]], max_points));
  // Each stored point has its own (voxel, slot): the copies are independent.
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.points.scalar_type(), "voxelize_copy", [&] {
    const scalar_t* src = p.points.data_ptr<scalar_t>();
    scalar_t* dst = voxels.data_ptr<scalar_t>();
    at::parallel_for(0, n, kPointBlock, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if (r.of_point[i] < 0 || r.slot[i] >= max_points) continue;
        const int64_t v = group_voxel[r.of_point[i]];
        if (v < 0) continue;
        scalar_t* row = dst + (v * max_points + r.slot[i]) * c;
        for (int64_t k = 0; k < c; ++k) row[k] = src[i * c + k];
      }
    });
  });
  return {voxels, voxel_coords(r, voxel_group, p.grid, opts), counts, point_voxel_ids(r, group_voxel, opts)};
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("voxelize_dynamic", &mxs::voxelize_dynamic_cpu);
  m.impl("voxelize_hard", &mxs::voxelize_hard_cpu);
}
