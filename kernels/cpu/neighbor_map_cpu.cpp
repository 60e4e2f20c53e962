// CPU map builders: submanifold map, strided-conv map (with canonical output
// order) and the map transpose. Parallel with at::parallel_for; every result is
// independent of the thread count because each cell has exactly one writer and
// the output voxel order comes from a sort.
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>
#include <algorithm>
#include <atomic>
#include <memory>
#include "../ops/op_args.h"
#include "voxel_hash_table.h"

namespace mxs {
namespace {

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

std::string coord_str(const int32_t* idx, int ndim, int64_t r) {
  std::ostringstream s;
  s << "(";
  for (int d = 0; d <= ndim; ++d) s << (d ? ", " : "") << idx[r * (1 + ndim) + d];
  s << ")";
  return s.str();
}

void check_rows_in_grid(const int32_t* idx, int64_t n, const Grid& g, int64_t batch_size,
                        c10::IntArrayRef spatial_shape) {
  FirstBadRow bad;
  at::parallel_for(0, n, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims];
    for (int64_t r = b; r < e; ++r) {
      const int64_t batch = read_row(idx, g.ndim, r, c);
      if (batch < 0 || batch >= batch_size || !coord_in_grid(g, c)) bad.report(r);
    }
  });
  if (bad.any()) {
    const int64_t r = bad.row.load();
    TORCH_CHECK_VALUE(false, "indices: row ", r, " is (batch, *coords) = ", coord_str(idx, g.ndim, r),
                      ", expected 0 <= batch < batch_size (", batch_size,
                      ") and 0 <= coord < spatial_shape ", list_str(spatial_shape), " on every axis");
  }
}

// Hashes every input voxel to its row; rejects duplicate coordinates.
void hash_input_rows(const int32_t* idx, int64_t n, const Grid& g, VoxelHashTable& table) {
  FirstBadRow dup;
  at::parallel_for(0, n, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims];
    for (int64_t r = b; r < e; ++r) {
      const int64_t batch = read_row(idx, g.ndim, r, c);
      bool created = false;
      const int64_t slot = table.insert(pack_coord(g, batch, c), &created);
      if (created) table.set_value(slot, static_cast<int32_t>(r));
      else dup.report(r);
    }
  });
  if (dup.any()) {
    const int64_t r = dup.row.load();
    TORCH_CHECK_VALUE(false, "indices: duplicate voxel ", coord_str(idx, g.ndim, r), " at row ", r,
                      "; expected every (batch, *coords) row to be unique");
  }
}

void check_row_count(int64_t n) {
  TORCH_CHECK_VALUE(n < INT32_MAX, "indices: ", n,
                    " rows do not fit the int32 neighbor map; expected fewer than 2^31 - 1");
}

at::Tensor build_subm_map_cpu(const at::Tensor& indices_in, c10::IntArrayRef spatial_shape,
                              int64_t batch_size, c10::IntArrayRef kernel_size,
                              c10::IntArrayRef dilation) {
  const Grid grid = make_grid(spatial_shape, batch_size);
  check_indices(indices_in, grid.ndim);
  const std::vector<int64_t> ones(grid.ndim, 1), zeros(grid.ndim, 0);
  const ConvGeometry geo = make_geometry(grid.ndim, kernel_size, ones, zeros, dilation);
  const at::Tensor indices = indices_in.contiguous();
  const int64_t n = indices.size(0), kvol = kernel_volume(geo);
  check_row_count(n);
  const int32_t* idx = indices.data_ptr<int32_t>();
  check_rows_in_grid(idx, n, grid, batch_size, spatial_shape);

  VoxelHashTable table(n);
  hash_input_rows(idx, n, grid, table);

  at::Tensor nbr = at::empty({n, kvol}, indices.options());
  int32_t* out = nbr.data_ptr<int32_t>();
  at::parallel_for(0, n, kRowGrain / 8, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims], kp[kMaxSpatialDims], ic[kMaxSpatialDims];
    for (int64_t r = b; r < e; ++r) {
      const int64_t batch = read_row(idx, grid.ndim, r, c);
      for (int64_t k = 0; k < kvol; ++k) {
        kernel_position(geo, k, kp);
        out[r * kvol + k] = subm_input_of(geo, grid, c, kp, ic) ? table.find(pack_coord(grid, batch, ic))
                                                                : kNoNeighbor;
      }
    }
  });
  return nbr;
}

// Hashes every output key reached by an input row. Returns false, leaving the
// table incomplete, as soon as the table passes half load.
bool hash_output_keys(const int32_t* idx, int64_t n, const Grid& in_grid, const Grid& out_grid,
                      const ConvGeometry& geo, VoxelHashTable& out_table) {
  const int64_t kvol = kernel_volume(geo);
  std::atomic<bool> overflow{false};
  at::parallel_for(0, n, kRowGrain / 8, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims], kp[kMaxSpatialDims], oc[kMaxSpatialDims];
    for (int64_t r = b; r < e && !overflow.load(std::memory_order_relaxed); ++r) {
      if (out_table.full()) {
        overflow = true;
        break;
      }
      const int64_t batch = read_row(idx, in_grid.ndim, r, c);
      for (int64_t k = 0; k < kvol; ++k) {
        kernel_position(geo, k, kp);
        bool created;
        if (conv_output_of(geo, out_grid, c, kp, oc) && out_table.insert(pack_coord(out_grid, batch, oc), &created) < 0)
          overflow = true;
      }
    }
  });
  return !overflow.load();
}

// The output voxel table of a strided conv, sized from a guess (LiDAR layers
// reach about as many outputs as inputs) and rebuilt 4x larger until it fits;
// the key set, hence the result, does not depend on the guess.
std::unique_ptr<VoxelHashTable> output_table(const int32_t* idx, int64_t n, const Grid& in_grid,
                                             const Grid& out_grid, const ConvGeometry& geo) {
  for (int64_t expected = std::max<int64_t>(2 * n, 1);; expected *= 4) {
    auto table = std::make_unique<VoxelHashTable>(expected);
    if (hash_output_keys(idx, n, in_grid, out_grid, geo, *table)) return table;
  }
}

// The table's keys, ascending: the canonical (batch, *spatial) output order.
std::vector<int64_t> sorted_keys(const VoxelHashTable& table) {
  std::vector<int64_t> keys;
  for (int64_t s = 0; s < table.capacity(); ++s)
    if (table.key_at(s) != kEmptyKey) keys.push_back(table.key_at(s));
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::tuple<at::Tensor, at::Tensor> build_conv_map_cpu(
    const at::Tensor& indices_in, c10::IntArrayRef spatial_shape, int64_t batch_size,
    c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
    c10::IntArrayRef dilation) {
  const Grid grid = make_grid(spatial_shape, batch_size);
  check_indices(indices_in, grid.ndim);
  const ConvGeometry geo = make_geometry(grid.ndim, kernel_size, stride, padding, dilation);
  const Grid out_grid = conv_output_grid(grid, geo, spatial_shape);
  const at::Tensor indices = indices_in.contiguous();
  const int64_t n = indices.size(0), kvol = kernel_volume(geo);
  check_row_count(n);
  const int32_t* idx = indices.data_ptr<int32_t>();
  check_rows_in_grid(idx, n, grid, batch_size, spatial_shape);
  {
    VoxelHashTable input_table(n);  // built only to reject duplicate voxels
    hash_input_rows(idx, n, grid, input_table);
  }

  const std::unique_ptr<VoxelHashTable> table = output_table(idx, n, grid, out_grid, geo);
  VoxelHashTable& out_table = *table;
  const std::vector<int64_t> keys = sorted_keys(out_table);
  const int64_t m = static_cast<int64_t>(keys.size());
  check_row_count(m);

  at::Tensor out_indices = at::empty({m, 1 + grid.ndim}, indices.options());
  int32_t* oi = out_indices.data_ptr<int32_t>();
  at::parallel_for(0, m, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims];
    for (int64_t j = b; j < e; ++j) {
      out_table.set_value(out_table.find_slot(keys[j]), static_cast<int32_t>(j));
      oi[j * (1 + grid.ndim)] = static_cast<int32_t>(unpack_coord(out_grid, keys[j], c));
      for (int d = 0; d < grid.ndim; ++d) oi[j * (1 + grid.ndim) + 1 + d] = static_cast<int32_t>(c[d]);
    }
  });

  at::Tensor nbr = at::full({m, kvol}, kNoNeighbor, indices.options());
  int32_t* map = nbr.data_ptr<int32_t>();
  at::parallel_for(0, n, kRowGrain / 8, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims], kp[kMaxSpatialDims], oc[kMaxSpatialDims];
    for (int64_t r = b; r < e; ++r) {
      const int64_t batch = read_row(idx, grid.ndim, r, c);
      for (int64_t k = 0; k < kvol; ++k) {
        kernel_position(geo, k, kp);
        if (!conv_output_of(geo, out_grid, c, kp, oc)) continue;
        // (o, k) determines the input uniquely, so this cell has one writer.
        map[int64_t(out_table.find(pack_coord(out_grid, batch, oc))) * kvol + k] = static_cast<int32_t>(r);
      }
    }
  });
  return {out_indices, nbr};
}

at::Tensor transpose_map_cpu(const at::Tensor& nbr_in, int64_t num_rows) {
  check_map(nbr_in, "nbr");
  TORCH_CHECK_VALUE(num_rows >= 0 && num_rows < INT32_MAX, "num_rows: expected 0 <= num_rows < 2^31 - 1, got ",
                    num_rows);
  const at::Tensor nbr = nbr_in.contiguous();
  const int64_t m = nbr.size(0), kvol = nbr.size(1);
  at::Tensor t = at::full({num_rows, kvol}, kNoNeighbor, nbr.options());
  const int32_t* src = nbr.data_ptr<int32_t>();
  int32_t* dst = t.data_ptr<int32_t>();
  FirstBadRow bad;
  at::parallel_for(0, m, kRowGrain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      for (int64_t k = 0; k < kvol; ++k) {
        const int32_t i = src[r * kvol + k];
        if (i == kNoNeighbor) continue;
        if (i < 0 || i >= num_rows) bad.report(r);
        else dst[int64_t(i) * kvol + k] = static_cast<int32_t>(r);
      }
  });
  TORCH_CHECK_VALUE(!bad.any(), "nbr: row ", bad.row.load(), " holds an input row outside [0, num_rows=",
                    num_rows, ")");
  return t;
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("build_subm_map", &mxs::build_subm_map_cpu);
  m.impl("build_conv_map", &mxs::build_conv_map_cpu);
  m.impl("transpose_map", &mxs::transpose_map_cpu);
}
