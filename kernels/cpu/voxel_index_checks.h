// The value checks of the CPU map builders' voxel rows (every row inside its grid and batch, no
// voxel twice) and the sorted input keys they yield; shared by neighbor_map_cpu.cpp and
// conv_map_at_cpu.cpp. The errors are index_errors.h's, naming the argument (`name`: indices, or
// build_conv_map_at's out_indices) and the grid it was checked against (`grid_name`).
#pragma once
#include <ATen/Parallel.h>
#include <torch/types.h>
#include <algorithm>
#include <atomic>
#include <vector>
#include "../contract/index_errors.h"
#include "sorted_voxels.h"

namespace mxs {

constexpr int64_t kRowGrain = 2048;

// Reads row r of an int32 [N, 1+ndim] index tensor.
inline int64_t read_row(const int32_t* idx, int ndim, int64_t r, int64_t* c) {
  const int32_t* p = idx + r * (1 + ndim);
  for (int d = 0; d < ndim; ++d) c[d] = p[1 + d];
  return p[0];
}

// Lowest row index seen by a parallel check, so the error names a
// deterministic row whatever the thread count.
struct FirstBadRow {
  std::atomic<int64_t> row{INT64_MAX};
  void report(int64_t r) {
    int64_t cur = row.load();
    while (r < cur && !row.compare_exchange_weak(cur, r)) {}
  }
  bool any() const { return row.load() != INT64_MAX; }
};

// Where the rows of a check come from: the argument and its grid, for the messages.
struct IndexArg {
  const char* name = "indices";
  const char* grid_name = "spatial_shape";
};

inline void check_rows_in_grid(const at::Tensor& indices, const Grid& g, int64_t batch_size,
                               c10::IntArrayRef spatial_shape, IndexArg arg = {}) {
  const int32_t* idx = indices.data_ptr<int32_t>();
  const int64_t n = indices.size(0);
  FirstBadRow bad;
  at::parallel_for(0, n, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims];
    for (int64_t r = b; r < e; ++r) {
      const int64_t batch = read_row(idx, g.ndim, r, c);
      if (batch < 0 || batch >= batch_size || !coord_in_grid(g, c)) bad.report(r);
    }
  });
  if (bad.any()) raise_index_error(indices, spatial_shape, batch_size, bad.row.load(), n, arg.name, arg.grid_name);
}

// True when the keys strictly increase, i.e. the rows are already sorted and
// duplicate-free. This is the common case: build_conv_map emits its output voxels
// sorted, and voxelizers usually emit (batch, z, y, x) order.
inline bool strictly_increasing(const std::vector<KeyRow>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  std::atomic<bool> ok{true};
  at::parallel_for(1, std::max<int64_t>(n, 1), kRowGrain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e && ok.load(std::memory_order_relaxed); ++t)
      if (v[t].key <= v[t - 1].key) ok = false;
  });
  return ok;
}

// All voxels (rows inside the grid) sorted by key; rejects duplicate coordinates (they end
// up adjacent), naming the later row of the lowest such pair.
inline std::vector<KeyRow> sorted_input_voxels(const at::Tensor& indices, const Grid& g, int64_t batch_size,
                                               c10::IntArrayRef spatial_shape, IndexArg arg = {}) {
  const int32_t* idx = indices.data_ptr<int32_t>();
  const int64_t n = indices.size(0);
  std::vector<KeyRow> sorted(n);
  at::parallel_for(0, n, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims];
    for (int64_t r = b; r < e; ++r) {
      const int64_t batch = read_row(idx, g.ndim, r, c);
      sorted[r] = {pack_coord(g, batch, c), static_cast<int32_t>(r)};
    }
  });
  if (strictly_increasing(sorted)) return sorted;
  radix_sort(sorted, [](const KeyRow& x) { return x.key; });
  FirstBadRow dup;
  at::parallel_for(1, std::max<int64_t>(n, 1), kRowGrain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      if (sorted[t].key == sorted[t - 1].key) dup.report(std::max(sorted[t].row, sorted[t - 1].row));
  });
  if (dup.any()) raise_index_error(indices, spatial_shape, batch_size, n, dup.row.load(), arg.name, arg.grid_name);
  return sorted;
}

// The input checks every map builder shares: the rows' dtype and shape, their count, every row
// inside the grid, no voxel twice. Returns the contiguous rows; `sorted` (when given) receives
// their keys in ascending order.
inline at::Tensor checked_indices(const at::Tensor& indices_in, const Grid& grid, int64_t batch_size,
                                  c10::IntArrayRef spatial_shape, IndexArg arg = {},
                                  std::vector<KeyRow>* sorted = nullptr) {
  check_indices(indices_in, grid.ndim, arg.name);
  const at::Tensor indices = indices_in.contiguous();
  check_row_count(indices.size(0), arg.name);
  check_rows_in_grid(indices, grid, batch_size, spatial_shape, arg);
  std::vector<KeyRow> keys = sorted_input_voxels(indices, grid, batch_size, spatial_shape, arg);  // no duplicates
  if (sorted != nullptr) *sorted = std::move(keys);
  return indices;
}

}  // namespace mxs
