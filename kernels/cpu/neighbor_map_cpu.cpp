// CPU map builders: submanifold map, strided-conv map (with canonical output
// order) and the map transpose. Parallel with at::parallel_for; every result is
// independent of the thread count because each cell has exactly one writer and
// the output voxel order comes from a sort.
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>
#include <algorithm>
#include <atomic>
#include "../ops/op_args.h"
#include "sorted_voxels.h"

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

void check_row_count(int64_t n) {
  TORCH_CHECK_VALUE(n < INT32_MAX, "indices: ", n,
                    " rows do not fit the int32 neighbor map; expected fewer than 2^31 - 1");
}

// All input voxels sorted by key; rejects duplicate coordinates (they end up
// adjacent), naming the later row of the lowest such pair.
std::vector<KeyRow> sorted_input_voxels(const int32_t* idx, int64_t n, const Grid& g) {
  std::vector<KeyRow> sorted(n);
  at::parallel_for(0, n, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims];
    for (int64_t r = b; r < e; ++r) {
      const int64_t batch = read_row(idx, g.ndim, r, c);
      sorted[r] = {pack_coord(g, batch, c), static_cast<int32_t>(r)};
    }
  });
  radix_sort(sorted, [](const KeyRow& x) { return x.key; });
  FirstBadRow dup;
  at::parallel_for(1, std::max<int64_t>(n, 1), kRowGrain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      if (sorted[t].key == sorted[t - 1].key) dup.report(std::max(sorted[t].row, sorted[t - 1].row));
  });
  if (dup.any()) {
    const int64_t r = dup.row.load();
    TORCH_CHECK_VALUE(false, "indices: duplicate voxel ", coord_str(idx, g.ndim, r), " at row ", r,
                      "; expected every (batch, *coords) row to be unique");
  }
  return sorted;
}

// Key difference of a spatial offset: keys are row-major, so it is a constant.
int64_t key_delta(const Grid& g, const int64_t* offset) {
  int64_t delta = 0;
  for (int d = 0; d < g.ndim; ++d) delta = delta * g.shape[d] + offset[d];
  return delta;
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
  const std::vector<KeyRow> sorted = sorted_input_voxels(idx, n, grid);

  // Per offset: kernel position and the constant key difference it causes.
  std::vector<int64_t> kpos(kvol * grid.ndim), delta(kvol);
  for (int64_t k = 0; k < kvol; ++k) {
    int64_t* kp = kpos.data() + k * grid.ndim;
    int64_t off[kMaxSpatialDims];
    kernel_position(geo, k, kp);
    for (int d = 0; d < grid.ndim; ++d) off[d] = subm_offset(geo, d, kp[d]);
    delta[k] = key_delta(grid, off);
  }
  at::Tensor nbr = at::empty({n, kvol}, indices.options());
  int32_t* out = nbr.data_ptr<int32_t>();
  // Chunks of the sorted order. Each offset keeps its own forward-only cursor
  // into the sorted keys; a voxel's K answers are written to its row at once.
  at::parallel_for(0, n, kRowGrain, [&](int64_t b, int64_t e) {
    std::vector<int64_t> cursor(kvol);
    for (int64_t k = 0; k < kvol; ++k) cursor[k] = lower_bound_key(sorted, sorted[b].key + delta[k]);
    int64_t c[kMaxSpatialDims], nc[kMaxSpatialDims];
    for (int64_t t = b; t < e; ++t) {
      const int32_t r = sorted[t].row;
      read_row(idx, grid.ndim, r, c);
      // a key match is this voxel's neighbor only if the offset stays inside the grid
      const bool interior = subm_interior(geo, grid, c);
      int32_t* row = out + int64_t(r) * kvol;
      for (int64_t k = 0; k < kvol; ++k) {
        const int64_t q = sorted[t].key + delta[k];
        int64_t j = cursor[k];
        while (j < n && sorted[j].key < q) ++j;
        cursor[k] = j;
        const bool hit = j < n && sorted[j].key == q &&
                         (interior || subm_input_of(geo, grid, c, kpos.data() + k * grid.ndim, nc));
        row[k] = hit ? sorted[j].row : kNoNeighbor;
      }
    }
  });
  return nbr;
}

// One (output voxel, kernel offset, input row) contribution of a strided conv.
struct OutputPair {
  int64_t out_key;
  int32_t row, k;
};

// Calls fn(out_key, k) for every output reached from input row r. The output
// rule is separable per axis, so the valid (kernel position, output coordinate)
// pairs are found per axis (sum(kernel) tests instead of kvol * ndim integer
// divisions) and combined as a row-major odometer, which visits k in ascending
// order. scratch holds 2 * sum(kernel) values.
template <typename Fn>
inline void for_each_output(const int32_t* idx, int64_t r, const Grid& in_grid, const Grid& out_grid,
                            const ConvGeometry& geo, std::vector<int64_t>& scratch, Fn fn) {
  const int nd = in_grid.ndim;
  int64_t c[kMaxSpatialDims], count[kMaxSpatialDims], at[kMaxSpatialDims], oc[kMaxSpatialDims];
  int64_t* kpos[kMaxSpatialDims];
  int64_t* opos[kMaxSpatialDims];
  const int64_t batch = read_row(idx, nd, r, c);
  int64_t* free_slot = scratch.data();
  for (int d = 0; d < nd; ++d) {
    kpos[d] = free_slot;
    opos[d] = free_slot + geo.kernel[d];
    free_slot += 2 * geo.kernel[d];
    count[d] = 0;
    for (int64_t kp = 0; kp < geo.kernel[d]; ++kp) {
      const int64_t o = conv_axis_output(geo, out_grid, d, c[d], kp);
      if (o < 0) continue;
      kpos[d][count[d]] = kp;
      opos[d][count[d]++] = o;
    }
    if (count[d] == 0) return;
    at[d] = 0;
  }
  while (true) {
    int64_t k = 0;
    for (int d = 0; d < nd; ++d) {
      k = k * geo.kernel[d] + kpos[d][at[d]];
      oc[d] = opos[d][at[d]];
    }
    fn(pack_coord(out_grid, batch, oc), k);
    int d = nd - 1;
    while (d >= 0 && ++at[d] == count[d]) at[d--] = 0;
    if (d < 0) return;
  }
}

// Every contribution, sorted by output key: counted per fixed chunk of rows,
// then written at prefix-sum offsets, then sorted (stably). Equal keys differ
// in k, so their relative order would not matter anyway.
std::vector<OutputPair> sorted_output_pairs(const int32_t* idx, int64_t n, const Grid& in_grid,
                                            const Grid& out_grid, const ConvGeometry& geo) {
  const int64_t chunks = (n + kRowGrain - 1) / kRowGrain;
  int64_t kernel_sum = 0;
  for (int d = 0; d < geo.ndim; ++d) kernel_sum += geo.kernel[d];
  std::vector<int64_t> offset(chunks + 1, 0);
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    std::vector<int64_t> scratch(2 * kernel_sum);
    for (int64_t c = cb; c < ce; ++c)
      for (int64_t r = c * kRowGrain; r < std::min(n, (c + 1) * kRowGrain); ++r)
        for_each_output(idx, r, in_grid, out_grid, geo, scratch, [&](int64_t, int64_t) { ++offset[c + 1]; });
  });
  for (int64_t c = 0; c < chunks; ++c) offset[c + 1] += offset[c];
  std::vector<OutputPair> pairs(offset[chunks]);
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    std::vector<int64_t> scratch(2 * kernel_sum);
    for (int64_t c = cb; c < ce; ++c) {
      int64_t w = offset[c];
      for (int64_t r = c * kRowGrain; r < std::min(n, (c + 1) * kRowGrain); ++r)
        for_each_output(idx, r, in_grid, out_grid, geo, scratch, [&](int64_t key, int64_t k) {
          pairs[w++] = {key, static_cast<int32_t>(r), static_cast<int32_t>(k)};
        });
    }
  });
  radix_sort(pairs, [](const OutputPair& p) { return p.out_key; });
  return pairs;
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
  sorted_input_voxels(idx, n, grid);  // rejects duplicate voxels

  const std::vector<OutputPair> pairs = sorted_output_pairs(idx, n, grid, out_grid, geo);
  const int64_t np = static_cast<int64_t>(pairs.size());
  // output index of pair p = number of distinct keys before it
  std::vector<int32_t> out_of(np);
  int64_t m = 0;
  for (int64_t p = 0; p < np; ++p) {
    if (p > 0 && pairs[p].out_key != pairs[p - 1].out_key) ++m;
    out_of[p] = static_cast<int32_t>(m);
  }
  m = np ? m + 1 : 0;
  check_row_count(m);

  at::Tensor out_indices = at::empty({m, 1 + grid.ndim}, indices.options());
  at::Tensor nbr = at::full({m, kvol}, kNoNeighbor, indices.options());
  int32_t* oi = out_indices.data_ptr<int32_t>();
  int32_t* map = nbr.data_ptr<int32_t>();
  at::parallel_for(0, np, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims];
    for (int64_t p = b; p < e; ++p) {
      const int64_t o = out_of[p];
      map[o * kvol + pairs[p].k] = pairs[p].row;  // (o, k) determines the row: one writer per cell
      if (p > 0 && out_of[p - 1] == o) continue;  // first pair of each output writes its coordinates
      oi[o * (1 + grid.ndim)] = static_cast<int32_t>(unpack_coord(out_grid, pairs[p].out_key, c));
      for (int d = 0; d < grid.ndim; ++d) oi[o * (1 + grid.ndim) + 1 + d] = static_cast<int32_t>(c[d]);
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
