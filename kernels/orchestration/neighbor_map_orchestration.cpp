// The accelerators' map builders (CUDA, NPU) over ATen operators: the work of
// mx_sparse/_accelerator/neighbor_map.py around the three map primitives (map_primitives.h), done
// in C++ so that a builder costs the host a handful of Python calls instead of dozens (issue 32:
// map building was ~30% of a CUDA training step's host time). One copy for both accelerators: the
// operators and primitives dispatch on the tensors' device. The algorithm is the one
// neighbor_map.py's docstring describes, with the operators it used (the value checks in fewer);
// the maps are the same bit for bit.
//
// What stays in Python is what must: the host read (host_sync.read, counted by the benches and
// traced by the tests), the bad-row ValueError (index_checks.raise_bad_rows: it reads the row) and
// the built_maps registry. So a builder is two stages, an object between them:
//   build = SubmMapBuild(...)    arguments checked (kernels/contract/op_args.h, the CPU builders'
//                                checks and messages), keys packed and sorted, the value checks
//                                (`checks`) computed unless the caller vouches for the indices
//   Python: read checks, raise, vouch
//   build.finish()               the lookup and the un-permutation (the map, and the lookup's
//                                result for what the device primitive kept with it)
// and the strided build the same around its one read (`to_read`: the output count, with the value
// checks of unchecked indices).
//
// Indices the caller vouches sorted (`indices_sorted`: rows distinct and ascending in (batch,
// *coords) order, as a strided build emits its outputs; honoured only with `indices_checked`)
// have keys already sorted on any grid they lie in (a packing of in-grid coordinates keeps their
// order): the sort would be the identity, so it is skipped, and with it the permutation's work --
// the lookup's positions are the rows, in input order (the map is the lookup's result itself).
// The same maps bit for bit; issue 32: 3 of a VoxelBackBone8x step's 4 submanifold and 4 strided
// builds run on such indices.
//
// Where the tensors' device has kernels for the optional primitives (map_primitives.h; CUDA), the
// builders hand them work that is ATen operators elsewhere: _sorted_key_lookup_rows writes the
// sort's rows instead of positions (and a submanifold map's rows in input order), so rows_of and
// the un-permutation's index_copy_ go, and a strided map's transpose beside it, so transpose_map's
// scatter goes (the caller keeps it with the map); _conv_output_rows gives a strided map's output
// rows and their query keys with the compaction, so the unpack and pack go. The same maps bit for
// bit.
//
// Nothing here reads device data or makes a CPU tensor, so a builder still traces on fake CUDA
// tensors (tests/cuda/test_fake_cuda_trace.py).
#include <torch/extension.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../contract/op_args.h"
#include "../module/module_parts.h"
#include "device_constants.h"
#include "map_primitives.h"

namespace mxs {
namespace {

using Values = std::vector<int64_t>;
constexpr int32_t kNoNeighbor = -1;

at::TensorOptions int32_on(const c10::Device& device) { return at::TensorOptions().dtype(at::kInt).device(device); }

// ---- keys (mx_sparse/_accelerator/voxel_keys.py)

// Key arithmetic is exact modulo 2^64 (unsigned), as the int64 tensor arithmetic that uses it.
int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// The keys ((b*S0 + c0*scale0 + shift0)*S1 + ...) of rows idx [N, 1+nd] written out as
// b*W_b + sum_d c_d*(scale_d*W_d) + sum_d shift_d*W_d: one addcmul with two kept vectors and one
// row sum (voxel_keys.pack).
at::Tensor pack(const at::Tensor& idx, c10::IntArrayRef shape, c10::IntArrayRef shift = {},
                c10::IntArrayRef scale = {}) {
  const size_t nd = shape.size();
  Values weights(1 + nd), shifts(1 + nd, 0);
  int64_t after = 1;
  for (size_t d = nd; d-- > 0;) {
    weights[1 + d] = wrapping_mul(after, scale.empty() ? 1 : scale[d]);
    shifts[1 + d] = wrapping_mul(after, shift.empty() ? 0 : shift[d]);
    after = wrapping_mul(after, shape[d]);
  }
  weights[0] = after;
  const at::Tensor w = int64_vector_constant(weights, idx.device());
  const at::Tensor b = int64_vector_constant(shifts, idx.device());
  return at::addcmul(b, idx, w).sum(1);
}

// int64 [M, 1+nd] (batch, *coords) of keys >= 0 packed on `shape`: one floor division and one
// remainder by kept vectors (voxel_keys.unpack).
at::Tensor unpack(const at::Tensor& keys, c10::IntArrayRef shape) {
  const size_t nd = shape.size();
  Values weights(1 + nd), sizes(1 + nd);
  int64_t after = 1;
  for (size_t d = nd; d-- > 0;) {
    weights[1 + d] = after;
    sizes[1 + d] = shape[d];
    after *= shape[d];
  }
  weights[0] = after;
  sizes[0] = INT64_MAX;
  const at::Tensor w = int64_vector_constant(weights, keys.device());
  const at::Tensor s = int64_vector_constant(sizes, keys.device());
  return keys.unsqueeze(1).div(w, "floor").remainder_(s);
}

// int64 [K]: the key offset of kernel offset k (row-major, last axis fastest) on the padded grid,
// sum_d (kp_d - centre_d) * dilation_d * W_d, centre = k//2 when centred; kept (voxel_keys.deltas).
at::Tensor key_deltas(c10::IntArrayRef kernel, c10::IntArrayRef dilation, c10::IntArrayRef padded, bool centered,
                      const c10::Device& device) {
  std::string key = centered ? "deltas,c" : "deltas,u";
  for (const auto& values : {kernel, dilation, padded}) key += "|" + list_str(values);
  return device_constant(key, device, [&] {
    const auto options = at::TensorOptions().dtype(at::kLong).device(device);
    const int64_t ndim = static_cast<int64_t>(kernel.size());
    int64_t weight = 1;
    at::Tensor total;
    for (int64_t d = ndim - 1; d >= 0; --d) {
      const int64_t step = dilation[d] * weight;
      const int64_t first = centered ? -(kernel[d] / 2) * step : 0;
      std::vector<int64_t> along(ndim - d, 1);
      along[0] = kernel[d];
      const at::Tensor term = at::arange(first, first + kernel[d] * step, step, options).view(along);
      total = total.defined() ? term + total : term;
      weight *= padded[d];
    }
    return total.reshape(-1);
  });
}

std::string wide_list_str(const std::vector<__int128>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    __int128 v = values[i];
    std::string digits;
    const bool negative = v < 0;
    if (negative) v = -v;
    do {
      digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
      v /= 10;
    } while (v > 0);
    s += (i ? ", " : "") + std::string(negative ? "-" : "") + digits;
  }
  return s + "]";
}

// batch_size x prod(padded), every key on the padded grid below it; within int64 or a ValueError
// (voxel_keys.key_bound's message). The padded extents come wide: a kernel's reach may push
// them past int64, which this check reports.
std::pair<int64_t, Values> key_bound(int64_t batch_size, const std::vector<__int128>& padded) {
  __int128 bound = batch_size;
  bool fits = true;
  for (const __int128 p : padded) {
    fits = fits && p <= INT64_MAX && bound <= INT64_MAX / static_cast<int64_t>(p);
    if (fits) bound *= p;
  }
  TORCH_CHECK_VALUE(fits, "spatial_shape: batch_size (", batch_size, ") x the grid padded by the kernel's reach ",
                    wide_list_str(padded), " exceeds the int64 voxel-key range of the accelerator map builders; "
                    "use a smaller grid or batch");
  return {static_cast<int64_t>(bound), Values(padded.begin(), padded.end())};
}

// ---- value checks (mx_sparse/_accelerator/index_checks.py, flags_and_outside)

// ([lowest row outside the grid or batch, later row of the lowest duplicate pair], n meaning none;
// [N] bool: the rows outside) from idx [N, 1+nd] (int32 or int64), N >= 1, and its keys sorted
// stably. A row is outside when a value is below 0 or not below its limit (batch_size, then the
// grid's extents): two comparisons with a kept limit vector and one reduction per row.
std::pair<at::Tensor, at::Tensor> flags_and_outside(const at::Tensor& idx, c10::IntArrayRef shape, int64_t batch_size,
                                                    const at::Tensor& sorted_keys, const at::Tensor& order) {
  const int64_t n = idx.size(0);
  Values limits{batch_size};
  limits.insert(limits.end(), shape.begin(), shape.end());
  const at::Tensor outside = ((idx < 0) | (idx >= int64_vector_constant(limits, idx.device()))).any(1);
  const at::Tensor rows = at::arange(n, at::TensorOptions().dtype(at::kLong).device(idx.device()));
  const at::Tensor bad_row = at::where(outside, rows, n).amin();
  if (n < 2) return {at::stack({bad_row, at::full_like(bad_row, n)}), outside};
  // equal keys are adjacent, rows ascending among them (stable): the later row of each pair
  const at::Tensor same = sorted_keys.narrow(0, 1, n - 1) == sorted_keys.narrow(0, 0, n - 1);
  const at::Tensor dup_row = at::where(same, order.narrow(0, 1, n - 1), n).amin();
  return {at::stack({bad_row, dup_row}), outside};
}

// What a submanifold build reads of unchecked indices (the common case: they pass): [lowest value
// of each column, highest value of each column, 1 if two rows share a key, else 0], idx's dtype,
// from idx [N, 1+nd] (N >= 1) and its keys sorted. The host compares it with the limits
// (SubmMapBuild::passes); only indices that fail get flags_and_outside (a second read, on the error
// path), which names the row. Four kernels (aminmax, eq, any, cat) where the flags take eleven:
// in a training step this is the first build's, and each kernel the step touches first after a
// collection costs the host ~20 us (issue 32).
at::Tensor check_summary(const at::Tensor& idx, const at::Tensor& sorted_keys) {
  const int64_t n = idx.size(0);
  auto [lowest, highest] = at::aminmax(idx, 0);
  const at::Tensor twice = n < 2 ? at::zeros({1}, idx.options())
                                 : (sorted_keys.narrow(0, 1, n - 1) == sorted_keys.narrow(0, 0, n - 1)).any().view({1});
  return at::cat({lowest, highest, twice});   // (bool promotes to idx's integer type)
}

// ---- rows (neighbor_map._rows)

// Sorted positions [S, K] (or -1) -> the input rows they hold (or -1), int32: one gather from the
// rows behind a leading -1 (position p is entry p + 1).
at::Tensor rows_of(const at::Tensor& found, const at::Tensor& order) {
  const at::Tensor absent = device_constant("absent row", found.device(), [&] {
    return at::full({1}, kNoNeighbor, int32_on(found.device()));
  });
  const at::Tensor rows = at::cat({absent, order.to(at::kInt)});
  return rows.index_select(0, (found + 1).view(-1)).view(found.sizes());
}

// ---- the submanifold map

class SubmMapBuild {
 public:
  SubmMapBuild(const at::Tensor& indices, const Values& spatial_shape, int64_t batch_size, const Values& kernel_size,
               const Values& dilation, bool indices_checked, bool indices_sorted)
      : device_(indices.device()), shape_(spatial_shape), batch_size_(batch_size) {
    const Grid grid = make_grid(spatial_shape, batch_size);
    check_index_layout(indices, grid.ndim);
    const Values ones(grid.ndim, 1), zeros(grid.ndim, 0);
    const ConvGeometry geo = make_geometry(grid.ndim, kernel_size, ones, zeros, dilation);
    kernel_ = kernel_size;
    dilation_ = dilation;
    kvol_ = kernel_volume(geo);
    n_ = indices.size(0);
    if (n_ == 0) return;
    // the grid padded by the kernel's reach on each side, the voxels shifted by it
    Values reach(grid.ndim);
    std::vector<__int128> padded(grid.ndim);
    for (int d = 0; d < grid.ndim; ++d) {
      reach[d] = (kernel_size[d] / 2) * dilation[d];
      padded[d] = static_cast<__int128>(spatial_shape[d]) + 2 * static_cast<__int128>(reach[d]);
    }
    std::tie(bound_, padded_) = key_bound(batch_size, padded);
    if (indices_checked && indices_sorted) {   // sorted already: order_ stays undefined (the identity)
      keys_ = pack(indices, padded_, reach);
      return;
    }
    std::tie(keys_, order_) = at::sort(pack(indices, padded_, reach), std::optional<bool>(true), -1, false);
    rows_in_lookup_ = has_kernel(map_primitives().sorted_key_lookup_rows, keys_);
    if (!indices_checked) {
      indices_ = indices;
      checks = check_summary(indices, keys_);
    }
  }

  // The value checks to read (check_summary); None when the caller vouched for the indices or
  // there are none.
  std::optional<at::Tensor> checks;

  // Whether the read `checks` say every row lies inside the grid and the batch, no voxel twice.
  bool passes(const Values& read) const {
    const size_t columns = 1 + shape_.size();
    TORCH_CHECK(read.size() == 2 * columns + 1, "SubmMapBuild.passes: expected the ", 2 * columns + 1,
                " values of checks, got ", read.size());
    for (size_t c = 0; c < columns; ++c)
      if (read[c] < 0 || read[columns + c] >= (c == 0 ? batch_size_ : shape_[c - 1])) return false;
    return read[2 * columns] == 0;
  }

  // [bad_row, dup_row] (flags_and_outside) of indices that failed `passes`: what the error names.
  at::Tensor flags() const {
    TORCH_CHECK(indices_.defined(), "SubmMapBuild.flags: the indices were vouched for, nothing was checked");
    return flags_and_outside(indices_, shape_, batch_size_, keys_, order_).first;
  }

  // (the map, the lookup's result) once the checks (if any) have passed: every offset's neighbour
  // found in the sorted keys (the lookup: one row per sorted voxel), the positions turned into rows
  // and the rows put back in input order. The lookup's result goes to the caller for what the
  // device primitive may have kept with it (mx_sparse/_accelerator/built_maps.py, lookup_row_key).
  std::tuple<at::Tensor, at::Tensor> finish() const {
    if (n_ == 0) return {at::empty({0, kvol_}, int32_on(device_)), at::empty({0, kvol_}, int32_on(device_))};
    const at::Tensor deltas = key_deltas(kernel_, dilation_, padded_, true, device_);
    const auto& primitives = map_primitives();
    if (rows_in_lookup_) {   // the lookup writes rows, each sorted voxel's at its input row: the map
      const at::Tensor nbr = std::get<0>(
          primitives.sorted_key_lookup_rows.call(keys_, keys_, deltas, kernel_.back(), bound_, order_, true, 0));
      return {nbr, nbr};
    }
    const at::Tensor found = primitives.sorted_key_lookup.call(keys_, keys_, deltas, kernel_.back(), bound_);
    if (!order_.defined()) return {found, found};   // sorted rows: position p is row p, in input order
    at::Tensor nbr = at::empty({n_, kvol_}, int32_on(device_));
    // sorted row s is input row order[s]
    return {nbr.index_copy_(0, order_, rows_of(found, order_)), found};
  }

  // A tensor with one row per row of the lookup (per sorted voxel) put in the map's row order
  // (input order), as finish puts the map's rows: one index_copy_.
  at::Tensor in_input_order(const at::Tensor& per_lookup_row) const {
    TORCH_CHECK_VALUE(per_lookup_row.dim() >= 1 && per_lookup_row.size(0) == n_, "per_lookup_row: expected ", n_,
                      " rows (one per input voxel), got shape ", per_lookup_row.sizes());
    if (n_ == 0) return per_lookup_row.clone();
    // sorted rows, or a lookup that wrote its rows in input order: nothing to move
    if (!order_.defined() || rows_in_lookup_) return per_lookup_row;
    return at::empty_like(per_lookup_row).index_copy_(0, order_, per_lookup_row);
  }

 private:
  c10::Device device_;
  Values shape_, kernel_, dilation_, padded_;
  int64_t batch_size_ = 0, kvol_ = 0, n_ = 0, bound_ = 0;
  at::Tensor indices_, keys_, order_;   // indices_: kept while unchecked, for flags()
  bool rows_in_lookup_ = false;         // keys sorted here and the device has _sorted_key_lookup_rows
};

// ---- the strided map

// _conv_out_keys, which pads symmetrically: with pads_begin != pads_end it runs on the grid padded
// by their difference on the larger side, padding min(pads_begin, pads_end) both ways (inputs shifted
// up by pads_begin - that): the same outputs, reached by the same offsets (neighbor_map.py). That grid
// may pass int32 where the output grid does not (a difference near 2^31 with a stride of 2 or more):
// its coordinates are then int64 (the primitive takes both; every geometry value is below 2^31, so
// nothing here overflows int64).
at::Tensor conv_out_keys(const at::Tensor& indices, c10::IntArrayRef shape, int64_t batch_size,
                         c10::IntArrayRef kernel, c10::IntArrayRef stride, c10::IntArrayRef pads_begin,
                         c10::IntArrayRef pads_end, c10::IntArrayRef dilation) {
  const auto& primitives = map_primitives();
  if (pads_begin.equals(pads_end))
    return primitives.conv_out_keys.call(indices.contiguous(), shape, batch_size, kernel, stride, pads_begin, dilation);
  const size_t nd = shape.size();
  Values grown(nd), low(nd);
  bool wide = false;
  for (size_t d = 0; d < nd; ++d) {
    grown[d] = shape[d] + std::abs(pads_begin[d] - pads_end[d]);
    low[d] = std::min(pads_begin[d], pads_end[d]);
    wide = wide || grown[d] > INT32_MAX;
  }
  const at::Tensor source = wide ? indices.to(at::kLong) : indices;
  std::vector<at::Tensor> columns{source.select(1, 0)};
  for (size_t d = 0; d < nd; ++d)
    columns.push_back(source.select(1, 1 + static_cast<int64_t>(d)) + (pads_begin[d] - low[d]));
  return primitives.conv_out_keys.call(at::stack(columns, 1).contiguous(), grown, batch_size, kernel, stride, low,
                                       dilation);
}

class ConvMapBuild {
 public:
  ConvMapBuild(const at::Tensor& indices, const Values& spatial_shape, int64_t batch_size, const Values& kernel_size,
               const Values& stride, const Values& padding, const Values& dilation,
               const std::optional<Values>& pads_end, bool indices_checked, bool indices_sorted)
      : device_(indices.device()), kernel_(kernel_size), stride_(stride), dilation_(dilation) {
    const Grid grid = make_grid(spatial_shape, batch_size);
    check_index_layout(indices, grid.ndim);
    const ConvGeometry geo = make_geometry(grid.ndim, kernel_size, stride, padding, dilation,
                                           pads_end.has_value() ? at::OptionalIntArrayRef(*pads_end) : at::OptionalIntArrayRef());
    const Grid out_grid = conv_output_grid(grid, geo, spatial_shape, batch_size);
    out_shape = Values(out_grid.shape, out_grid.shape + out_grid.ndim);
    kvol_ = kernel_volume(geo);
    n_ = indices.size(0);
    if (n_ == 0) return;
    // input i keyed at i + padding on a grid padded above to the farthest position an output
    // window reaches, o*s + kp*d (voxel_keys.conv_padding)
    std::vector<__int128> padded(grid.ndim);
    for (int d = 0; d < grid.ndim; ++d) {
      const __int128 reach = static_cast<__int128>(out_shape[d] - 1) * stride[d] - padding[d] +
                             static_cast<__int128>(kernel_size[d] - 1) * dilation[d] - (spatial_shape[d] - 1);
      padded[d] = static_cast<__int128>(spatial_shape[d]) + padding[d] + (reach > 0 ? reach : 0);
    }
    std::tie(bound_, padded_) = key_bound(batch_size, padded);
    if (indices_checked && indices_sorted)   // sorted already: order_ stays undefined (the identity)
      in_keys_ = pack(indices, padded_, padding);
    else
      std::tie(in_keys_, order_) = at::sort(pack(indices, padded_, padding), std::optional<bool>(true), -1, false);
    const Values& ends = pads_end.has_value() ? *pads_end : padding;
    if (indices_checked) {  // indices a builder emitted or checked on this grid: only the count is read
      pair_keys_ = conv_out_keys(indices, spatial_shape, batch_size, kernel_size, stride, padding, ends, dilation);
      to_read = output_voxels();
      return;
    }
    auto [flags, outside] = flags_and_outside(indices, spatial_shape, batch_size, in_keys_, order_);
    // the primitive takes rows inside the grid; until the caller's read says whether the indices are
    // valid, rows outside stand in as row (0, 0, ...), and a bad row raises before any result is used
    const at::Tensor inside = at::where(outside.unsqueeze(1), at::Scalar(0), indices);
    pair_keys_ = conv_out_keys(inside, spatial_shape, batch_size, kernel_size, stride, padding, ends, dilation);
    to_read = at::cat({flags, output_voxels().to(at::kLong)});
  }

  // The output grid's extent per axis (the op's third result).
  Values out_shape;
  // What the caller reads: [output count] for vouched-for indices, else [bad_row, dup_row, output
  // count]; None without input rows.
  std::optional<at::Tensor> to_read;

  // _conv_out_keys' result [J * N] (None without input rows), handed over once: the caller looks up
  // what the device primitive kept with it (its input rows' offset bitmasks: the row keys of the
  // map's transpose, mx_sparse/_accelerator/built_maps.py) and drops it.
  std::optional<at::Tensor> take_pair_keys() {
    std::optional<at::Tensor> taken = std::move(pair_keys_);
    pair_keys_.reset();
    return taken;
  }

  // (out_indices int32 [M, 1+nd] in canonical order, nbr int32 [M, K], out_shape, the lookup's
  // result, the map's transpose on the N input rows or None) for the M read: output o reaches
  // input o*s - p + kp*d, i.e. the key of o*s plus offset k's (uncentred) delta on the input grid
  // shifted by the padding, looked up in the sorted input keys. The lookup's rows are the map's
  // rows; its result goes to the caller for what the device primitive may have kept with it
  // (mx_sparse/_accelerator/built_maps.py, lookup_row_key). The transpose comes from the lookup's
  // launch where the device has _sorted_key_lookup_rows (the input gradient's map: no scatter).
  std::tuple<at::Tensor, at::Tensor, Values, at::Tensor, std::optional<at::Tensor>> finish(int64_t m) const {
    if (n_ == 0)
      return {at::empty({0, static_cast<int64_t>(1 + out_shape.size())}, int32_on(device_)),
              at::empty({0, kvol_}, int32_on(device_)), out_shape, at::empty({0, kvol_}, int32_on(device_)),
              std::nullopt};
    check_row_count(m);
    at::Tensor out_idx, query;
    if (out_rows_.defined()) {   // _conv_output_rows made them (as many rows as pair keys): the first m,
      out_idx = out_rows_.narrow(0, 0, m).clone();   // compact (they are the next layer's indices)
      query = queries_.narrow(0, 0, m);
    } else {
      const at::Tensor rows = unpack(out_keys_.narrow(0, 0, m), out_shape);
      out_idx = rows.to(at::kInt);
      query = pack(rows, padded_, {}, stride_);
    }
    const at::Tensor deltas = key_deltas(kernel_, dilation_, padded_, false, device_);
    const auto& primitives = map_primitives();
    if (has_kernel(primitives.sorted_key_lookup_rows, query)) {   // the lookup writes rows and the transpose
      const std::optional<at::Tensor> order = order_.defined() ? std::optional<at::Tensor>(order_) : std::nullopt;
      auto [nbr, transposed] =
          primitives.sorted_key_lookup_rows.call(query, in_keys_, deltas, kernel_.back(), bound_, order, false, n_);
      return {out_idx, nbr, out_shape, nbr, transposed};
    }
    const at::Tensor found = primitives.sorted_key_lookup.call(query, in_keys_, deltas, kernel_.back(), bound_);
    // sorted input rows: the lookup's positions are the rows
    return {out_idx, order_.defined() ? rows_of(found, order_) : found, out_shape, found, std::nullopt};
  }

 private:
  // The pair keys sorted and compacted into the output voxels: the rows and their query keys
  // where the device has _conv_output_rows (one launch on CUDA), else the unique keys (unpacked
  // and packed in finish, for the m read); returns the count, on the device.
  at::Tensor output_voxels() {
    const at::Tensor sorted = std::get<0>(at::sort(*pair_keys_));
    const auto& primitives = map_primitives();
    at::Tensor count;
    if (has_kernel(primitives.conv_output_rows, sorted))
      std::tie(out_rows_, queries_, count) = primitives.conv_output_rows.call(sorted, out_shape, padded_, stride_);
    else
      std::tie(out_keys_, count) = primitives.unique_sorted_keys.call(sorted);
    return count;
  }

  c10::Device device_;
  Values kernel_, stride_, dilation_, padded_;
  int64_t kvol_ = 0, n_ = 0, bound_ = 0;
  at::Tensor in_keys_, order_, out_keys_, out_rows_, queries_;
  std::optional<at::Tensor> pair_keys_;
};

// ---- the transpose of a built map (neighbor_map._scatter_transpose)

// The transpose of a valid map (entries in [-1, num_rows), each (input row, offset) once): row m
// goes to cell (nbr[m, k], k), written one row down; absent entries (-1) go to a spare row 0 in
// front, dropped. Each kept cell has one writer: the result does not depend on the order. (The
// shift is one add: an int64 remainder sending -1 to a spare last row cost ~4x as much on a
// CPU.) The result, rows 1.. of the buffer, starts 16-byte aligned, as the Triton launches take
// their operands (a misaligned one would be copied): the buffer is placed so that row 1 is.
at::Tensor scatter_transpose(const at::Tensor& nbr, int64_t num_rows) {
  const int64_t m = nbr.size(0), kvol = nbr.size(1);
  constexpr int64_t kAlignedInts = 4;  // 16 bytes of int32 (allocations themselves are aligned wider)
  const int64_t lead = (kAlignedInts - kvol % kAlignedInts) % kAlignedInts;
  const at::Tensor target = nbr.to(at::kLong).add_(1);
  at::Tensor out = at::full({lead + (num_rows + 1) * kvol}, kNoNeighbor, int32_on(nbr.device()))
                       .narrow(0, lead, (num_rows + 1) * kvol)
                       .view({num_rows + 1, kvol});
  const at::Tensor rows = at::arange(m, int32_on(nbr.device())).unsqueeze(1).expand({m, kvol});
  return out.scatter_(0, target, rows).narrow(0, 1, num_rows);
}

}  // namespace

void register_map_orchestration_functions(pybind11::module_& module) {
  namespace py = pybind11;
  py::module_ m = module.def_submodule(
      "map_orchestration", "The accelerators' map builders over ATen operators around the device primitives "
                           "(kernels/orchestration); see mx_sparse/_accelerator/neighbor_map.py");
  py::class_<SubmMapBuild>(m, "SubmMapBuild")
      .def(py::init<const at::Tensor&, const Values&, int64_t, const Values&, const Values&, bool, bool>(),
           py::arg("indices"), py::arg("spatial_shape"), py::arg("batch_size"), py::arg("kernel_size"),
           py::arg("dilation"), py::arg("indices_checked"), py::arg("indices_sorted") = false)
      .def_readonly("checks", &SubmMapBuild::checks)
      .def("passes", &SubmMapBuild::passes, py::arg("read"))
      .def("flags", &SubmMapBuild::flags)
      .def("finish", &SubmMapBuild::finish)
      .def("in_input_order", &SubmMapBuild::in_input_order, py::arg("per_lookup_row"));
  py::class_<ConvMapBuild>(m, "ConvMapBuild")
      .def(py::init<const at::Tensor&, const Values&, int64_t, const Values&, const Values&, const Values&,
                    const Values&, const std::optional<Values>&, bool, bool>(),
           py::arg("indices"), py::arg("spatial_shape"), py::arg("batch_size"), py::arg("kernel_size"),
           py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("pads_end"),
           py::arg("indices_checked"), py::arg("indices_sorted") = false)
      .def_readonly("out_shape", &ConvMapBuild::out_shape)
      .def_readonly("to_read", &ConvMapBuild::to_read)
      .def("take_pair_keys", &ConvMapBuild::take_pair_keys)
      .def("finish", &ConvMapBuild::finish, py::arg("m"));
  // the key arithmetic and the value checks, for the builders still written in Python
  // (mx_sparse/_accelerator/voxel_keys.py, index_checks.py): one implementation of each
  m.def("pack", [](const at::Tensor& idx, const Values& shape, const Values& shift, const Values& scale) {
    return pack(idx, shape, shift, scale);
  }, py::arg("idx"), py::arg("shape"), py::arg("shift"), py::arg("scale"));
  m.def("unpack", [](const at::Tensor& keys, const Values& shape) { return unpack(keys, shape); },
        py::arg("keys"), py::arg("shape"));
  m.def("key_deltas", [](const Values& kernel, const Values& dilation, const Values& padded, bool centered,
                         const c10::Device& device) { return key_deltas(kernel, dilation, padded, centered, device); },
        py::arg("kernel"), py::arg("dilation"), py::arg("padded"), py::arg("centered"), py::arg("device"));
  m.def("flags_and_outside", [](const at::Tensor& idx, const Values& shape, int64_t batch_size,
                                const at::Tensor& sorted_keys, const at::Tensor& order) {
    return flags_and_outside(idx, shape, batch_size, sorted_keys, order);
  }, py::arg("idx"), py::arg("shape"), py::arg("batch_size"), py::arg("sorted_keys"), py::arg("order"));
  m.def("rows_of", &rows_of, py::arg("found"), py::arg("order"));
  m.def("scatter_transpose", &scatter_transpose, py::arg("nbr"), py::arg("num_rows"));
}

}  // namespace mxs
