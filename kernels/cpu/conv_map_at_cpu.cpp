// CPU builder of build_conv_map_at: the map of a strided or transposed convolution evaluated
// at output voxels the caller gives (Open3D's SparseConv / SparseConvTranspose, a layer's
// `out_indices=`). The outputs are the caller's rows in the caller's order, so nothing is
// discovered: each (output, offset) names the one input at the position the rule gives
// (conv_rules.h), found in the sorted input keys by one forward search per offset over the outputs
// in key order (ForwardSearch). Rows are independent, so the map is the same for any thread count.
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>
#include <algorithm>
#include <vector>
#include "large_tensor_pool.h"
#include "voxel_index_checks.h"
#include "window_shares.h"

namespace mxs {
namespace {

// The inputs one output voxel reads (window_shares.h): per axis, the (kernel position, input
// coordinate) pairs of the strided or transposed rule (conv_rules.h).
class InputReach {
 public:
  InputReach(const ConvGeometry& geo, const Grid& in_grid, bool transposed)
      : geo_(geo), in_grid_(in_grid), transposed_(transposed), window_(geo, in_grid) {}

  // Moves to the output voxel at coordinates o; returns how many grid inputs its window holds.
  int64_t set(const int64_t* o) {
    for (int d = 0; d < geo_.ndim; ++d) list_axis(d, o[d]);
    return window_.size();
  }

  // fn(input key, k) for every window position of the voxel last passed to set().
  template <typename Fn>
  void for_each(int64_t batch, Fn fn) const { window_.for_each(batch, fn); }

 private:
  void list_axis(int d, int64_t o) {
    window_.clear_axis(d);
    for (int64_t kp = 0; kp < geo_.kernel[d]; ++kp) {
      const int64_t i = transposed_ ? conv_transpose_axis_input(geo_, in_grid_, d, o, kp)
                                    : conv_axis_input(geo_, in_grid_, d, o, kp);
      if (i >= 0) window_.add(d, kp, i);
    }
  }

  const ConvGeometry& geo_;
  const Grid& in_grid_;
  const bool transposed_;
  WindowShares window_;
};

// Finds input keys for ascending queries of one kernel offset: the outputs are visited in key
// order, and for a fixed offset the input an output reads moves forward with it (its coordinates
// are o*stride + const, or (o + const) / stride, per axis, and keys are row-major), so each
// offset keeps a cursor into the sorted inputs and gallops forward from it: a query costs
// O(log gap) instead of a binary search over all inputs, and memory is read in order.
class ForwardSearch {
 public:
  explicit ForwardSearch(const std::vector<KeyRow>& sorted) : sorted_(sorted), n_(static_cast<int64_t>(sorted.size())) {}

  // First position >= `from` whose key is >= key (n when none); `from` must not pass it.
  int64_t advance(int64_t from, int64_t key) const {
    if (from >= n_ || sorted_[from].key >= key) return from;
    int64_t lo = from, step = 1;  // sorted_[lo].key < key
    while (lo + step < n_ && sorted_[lo + step].key < key) {
      lo += step;
      step *= 2;
    }
    const auto first = sorted_.begin() + lo + 1, last = sorted_.begin() + std::min(n_, lo + step + 1);
    return std::lower_bound(first, last, KeyRow{key, 0}, key_less) - sorted_.begin();
  }

  int32_t row_at(int64_t p, int64_t key) const { return p < n_ && sorted_[p].key == key ? sorted_[p].row : kNoNeighbor; }

 private:
  const std::vector<KeyRow>& sorted_;
  const int64_t n_;
};

at::Tensor build_conv_map_at_cpu(const at::Tensor& indices_in, const at::Tensor& out_indices_in,
                                 c10::IntArrayRef spatial_shape, int64_t batch_size, c10::IntArrayRef kernel_size,
                                 c10::IntArrayRef stride, c10::IntArrayRef pads_begin, c10::IntArrayRef dilation,
                                 bool transposed, at::OptionalIntArrayRef out_spatial_shape) {
  const Grid grid = make_grid(spatial_shape, batch_size);
  check_indices(indices_in, grid.ndim);
  check_indices(out_indices_in, grid.ndim, "out_indices");
  const ConvGeometry geo = make_geometry(grid.ndim, kernel_size, stride, pads_begin, dilation, c10::nullopt,
                                         "pads_begin");
  const Grid out_grid = conv_map_at_output_grid(grid, geo, out_spatial_shape, transposed, batch_size);
  const std::vector<int64_t> out_shape(out_grid.shape, out_grid.shape + out_grid.ndim);
  std::vector<KeyRow> sorted, outputs;
  const at::Tensor indices = checked_indices(indices_in, grid, batch_size, spatial_shape, {}, &sorted);
  const char* out_grid_name = out_spatial_shape.has_value() ? "out_spatial_shape" : "the derived output grid";
  const at::Tensor out_indices = checked_indices(out_indices_in, out_grid, batch_size, out_shape,
                                                 {"out_indices", out_grid_name}, &outputs);

  const int64_t m = out_indices.size(0), kvol = kernel_volume(geo);
  at::Tensor nbr = empty_cpu({m, kvol}, indices.options()).fill_(kNoNeighbor);
  const int32_t* oi = out_indices.data_ptr<int32_t>();
  int32_t* map = nbr.data_ptr<int32_t>();
  const ForwardSearch search(sorted);
  // chunks of the outputs in key order; each row is written by its output alone
  at::parallel_for(0, m, kRowGrain, [&](int64_t b, int64_t e) {
    InputReach reach(geo, grid, transposed);
    std::vector<int64_t> cursor(kvol, 0);
    int64_t o[kMaxSpatialDims];
    for (int64_t t = b; t < e; ++t) {
      const int32_t r = outputs[t].row;
      const int64_t batch = read_row(oi, grid.ndim, r, o);
      if (reach.set(o) == 0) continue;
      int32_t* row = map + int64_t(r) * kvol;
      reach.for_each(batch, [&](int64_t key, int64_t k) {
        cursor[k] = search.advance(cursor[k], key);
        row[k] = search.row_at(cursor[k], key);
      });
    }
  });
  return nbr;
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("build_conv_map_at", &mxs::build_conv_map_at_cpu);
}
