// CPU map builders: submanifold map, strided-conv map (with canonical output
// order) and the map transpose. Parallel with at::parallel_for, or
// parallel_dynamic where the cost per row varies (on one thread for small inputs:
// serial_when_small.h); every result is independent
// of the thread count because each cell has exactly one writer and the output
// voxels are listed in key order (a bitmap scan, or a sort on huge grids).
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>
#include <algorithm>
#include <atomic>
#include <tuple>
#include <vector>
#include "fast_divide.h"
#include "large_tensor_pool.h"
#include "parallel_dynamic.h"
#include "portable_switch.h"
#include "serial_when_small.h"
#include "sorted_voxels.h"
#include "voxel_index_checks.h"
#include "window_shares.h"
#include "../contract/transpose_map_args.h"

namespace mxs {
namespace {

// The kernel window of a submanifold map as lines along the last axis. Offsets
// that differ only in their last-axis position have keys `step` apart, so one
// forward-only cursor per line finds all of its matches: the sorted keys between
// the line's first and last query are exactly the candidates.
struct KernelLines {
  int64_t count = 1;   // lines in the window: kvol / width
  int64_t width = 1;   // offsets per line: kernel size of the last axis
  int64_t step = 1;    // key distance of neighbouring offsets in a line (last-axis dilation)
  std::vector<int64_t> first_delta;  // key difference of each line's first offset
};

KernelLines kernel_lines(const Grid& grid, const ConvGeometry& geo) {
  const int last = grid.ndim - 1;
  KernelLines lines;
  lines.width = geo.kernel[last];
  lines.step = geo.dilation[last];
  lines.count = kernel_volume(geo) / lines.width;
  lines.first_delta.resize(lines.count);
  for (int64_t l = 0; l < lines.count; ++l)
    lines.first_delta[l] = kernel_offset_key_delta(geo, grid, l * lines.width, /*centered=*/true);
  return lines;
}

// Fills the found neighbors of the voxels at sorted positions [b, e) into the
// -1-initialised map `out` (rows in input order).
//
// Odd kernels are symmetric: offset K-1-k is the negation of offset k, so
// "j is i's neighbor at k" is the same fact as "i is j's neighbor at K-1-k".
// With `mirror`, each voxel therefore searches only the offsets before the
// centre (the lines before the centre line, and the centre line's first half),
// writes each match into both rows, and is its own centre neighbor. Every map
// cell still has exactly one writer, so chunks may run in parallel.
void subm_sweep(const std::vector<KeyRow>& sorted, const int32_t* idx, const Grid& grid,
                const ConvGeometry& geo, const KernelLines& lines, const std::vector<int64_t>& kpos,
                bool mirror, int64_t b, int64_t e, int32_t* out) {
  const int64_t n = static_cast<int64_t>(sorted.size()), kvol = lines.count * lines.width;
  const int64_t centre_line = lines.count / 2;
  const int64_t searched_lines = mirror ? centre_line + 1 : lines.count;
  std::vector<int64_t> cursor(searched_lines);
  for (int64_t l = 0; l < searched_lines; ++l) cursor[l] = lower_bound_key(sorted, sorted[b].key + lines.first_delta[l]);
  int64_t c[kMaxSpatialDims], nc[kMaxSpatialDims];
  for (int64_t t = b; t < e; ++t) {
    const int64_t key = sorted[t].key;
    const int32_t r = sorted[t].row;
    read_row(idx, grid.ndim, r, c);
    // a key match is this voxel's neighbor only if the offset stays inside the grid
    const bool interior = subm_interior(geo, grid, c);
    int32_t* row = out + int64_t(r) * kvol;
    for (int64_t l = 0; l < searched_lines; ++l) {
      const int64_t positions = mirror && l == centre_line ? lines.width / 2 : lines.width;
      const int64_t lo = key + lines.first_delta[l], hi = lo + (positions - 1) * lines.step;
      int64_t j = cursor[l];
      while (j < n && sorted[j].key < lo) ++j;
      cursor[l] = j;
      for (; j < n && sorted[j].key <= hi; ++j) {
        const int64_t diff = sorted[j].key - lo;
        const int64_t p = lines.step == 1 ? diff : diff / lines.step;  // skip the division when undilated
        if (p * lines.step != diff) continue;
        const int64_t k = l * lines.width + p;
        if (!interior && !subm_input_of(geo, grid, c, kpos.data() + k * grid.ndim, nc)) continue;
        row[k] = sorted[j].row;
        if (mirror) out[int64_t(sorted[j].row) * kvol + (kvol - 1 - k)] = r;
      }
    }
    if (mirror) row[kvol / 2] = r;
  }
}

at::Tensor build_subm_map_cpu(const at::Tensor& indices_in, c10::IntArrayRef spatial_shape,
                              int64_t batch_size, c10::IntArrayRef kernel_size,
                              c10::IntArrayRef dilation) {
  const SerialWhenSmall serial(indices_in);
  const Grid grid = make_grid(spatial_shape, batch_size);
  check_indices(indices_in, grid.ndim);
  const std::vector<int64_t> ones(grid.ndim, 1), zeros(grid.ndim, 0);
  const ConvGeometry geo = make_geometry(grid.ndim, kernel_size, ones, zeros, dilation);
  const at::Tensor indices = indices_in.contiguous();
  const int64_t n = indices.size(0), kvol = kernel_volume(geo);
  check_row_count(n);
  const int32_t* idx = indices.data_ptr<int32_t>();
  check_rows_in_grid(indices, grid, batch_size, spatial_shape);
  const std::vector<KeyRow> sorted = sorted_input_voxels(indices, grid, batch_size, spatial_shape);

  const KernelLines lines = kernel_lines(grid, geo);
  std::vector<int64_t> kpos(kvol * grid.ndim);  // per-axis kernel position of every offset
  for (int64_t k = 0; k < kvol; ++k) kernel_position(geo, k, kpos.data() + k * grid.ndim);
  bool mirror = true;
  for (int d = 0; d < grid.ndim; ++d) mirror = mirror && geo.kernel[d] % 2 == 1;

  at::Tensor nbr = empty_cpu({n, kvol}, indices.options()).fill_(kNoNeighbor);
  int32_t* out = nbr.data_ptr<int32_t>();
  // density varies along the sorted voxels: chunks are handed out dynamically
  const int64_t chunks = (n + kRowGrain - 1) / kRowGrain;
  parallel_dynamic(chunks, chunks > 1, [&](auto next_chunk) {
    for (int64_t ch = next_chunk(); ch < chunks; ch = next_chunk())
      subm_sweep(sorted, idx, grid, geo, lines, kpos, mirror, ch * kRowGrain, std::min(n, (ch + 1) * kRowGrain), out);
  });
  return nbr;
}

// The inverse of pack_coord (coord_pack.h) with FastDivisor: run once per output voxel.
class KeyUnpacker {
 public:
  explicit KeyUnpacker(const Grid& g) : ndim_(g.ndim) {
    for (int d = 0; d < ndim_; ++d) shape_[d] = FastDivisor(g.shape[d]);
  }
  int64_t unpack(int64_t key, int64_t* c) const {
    for (int d = ndim_ - 1; d >= 0; --d) key = shape_[d].divide(key, &c[d]);
    return key;  // batch
  }

 private:
  int ndim_;
  FastDivisor shape_[kMaxSpatialDims];
};

// One (output voxel, kernel offset, input row) contribution of a strided conv.
struct OutputPair {
  int64_t out_key;
  int32_t row, k;
};

// The outputs a strided-conv input reaches (with `transposed`: a transposed-conv
// input, conv_transpose_axis_output), as a separable window (window_shares.h). Sorted inputs
// share their leading coordinates with the previous voxel almost always, so each axis keeps the
// list of its last coordinate.
class OutputReach {
 public:
  OutputReach(const ConvGeometry& geo, const Grid& out_grid, bool transposed)
      : geo_(geo), out_grid_(out_grid), transposed_(transposed), window_(geo, out_grid) {
    for (int d = 0; d < geo.ndim; ++d) {
      coord_[d] = -1;  // nothing cached yet (coordinates are >= 0)
      stride_[d] = FastDivisor(geo.stride[d]);
    }
  }

  // Moves to the input voxel at coordinates c; returns how many outputs it reaches.
  int64_t set(const int64_t* c) {
    for (int d = 0; d < geo_.ndim; ++d)
      if (c[d] != coord_[d]) list_axis(d, c[d]);
    return window_.size();
  }

  // Calls fn(out_key, k) for every output of the voxel last passed to set().
  template <typename Fn>
  void for_each(int64_t batch, Fn fn) const { window_.for_each(batch, fn); }

 private:
  void list_axis(int d, int64_t c) {
    coord_[d] = c;
    window_.clear_axis(d);
    for (int64_t kp = 0; kp < geo_.kernel[d]; ++kp) {
      if (transposed_) {
        const int64_t o = conv_transpose_axis_output(geo_, out_grid_, d, c, kp);
        if (o >= 0) window_.add(d, kp, o);
        continue;
      }
      // the strided rule of conv_rules.h: o = (c + p - kp*d) / s, an exact in-range quotient
      // (dividing with FastDivisor)
      const int64_t num = c + geo_.padding[d] - kp * geo_.dilation[d];
      if (num < 0) continue;
      int64_t rem;
      const int64_t o = stride_[d].divide(num, &rem);
      if (rem == 0 && o < out_grid_.shape[d]) window_.add(d, kp, o);
    }
  }

  const ConvGeometry& geo_;
  const Grid& out_grid_;
  const bool transposed_;
  WindowShares window_;
  int64_t coord_[kMaxSpatialDims];
  FastDivisor stride_[kMaxSpatialDims];
};

// Every contribution, sorted by output key: counted per fixed chunk of rows,
// then written at prefix-sum offsets, then sorted (stably). Equal keys differ
// in k, so their relative order would not matter anyway.
std::vector<OutputPair> sorted_output_pairs(const int32_t* idx, int64_t n, const Grid& in_grid,
                                            const Grid& out_grid, const ConvGeometry& geo, bool transposed) {
  const int64_t chunks = (n + kRowGrain - 1) / kRowGrain;
  std::vector<int64_t> offset(chunks + 1, 0);
  parallel_dynamic(chunks, chunks > 1, [&](auto next_chunk) {
    OutputReach reach(geo, out_grid, transposed);
    int64_t c[kMaxSpatialDims];
    for (int64_t ch = next_chunk(); ch < chunks; ch = next_chunk())
      for (int64_t r = ch * kRowGrain; r < std::min(n, (ch + 1) * kRowGrain); ++r) {
        read_row(idx, in_grid.ndim, r, c);
        offset[ch + 1] += reach.set(c);
      }
  });
  for (int64_t ch = 0; ch < chunks; ++ch) offset[ch + 1] += offset[ch];
  std::vector<OutputPair> pairs(offset[chunks]);
  parallel_dynamic(chunks, chunks > 1, [&](auto next_chunk) {
    OutputReach reach(geo, out_grid, transposed);
    int64_t c[kMaxSpatialDims];
    for (int64_t ch = next_chunk(); ch < chunks; ch = next_chunk()) {
      int64_t w = offset[ch];
      for (int64_t r = ch * kRowGrain; r < std::min(n, (ch + 1) * kRowGrain); ++r) {
        const int64_t batch = read_row(idx, in_grid.ndim, r, c);
        if (reach.set(c) == 0) continue;
        reach.for_each(batch, [&](int64_t key, int64_t k) {
          pairs[w++] = {key, static_cast<int32_t>(r), static_cast<int32_t>(k)};
        });
      }
    }
  });
  radix_sort(pairs, [](const OutputPair& p) { return p.out_key; });
  return pairs;
}

// Output o owns the run of pairs [first[o], first[o + 1]) that share its key;
// returns first with np appended. Run starts are counted per chunk of pairs,
// then written at prefix-sum offsets (a serial scan idled the other threads).
std::vector<int64_t> run_starts(const std::vector<OutputPair>& pairs) {
  const int64_t np = static_cast<int64_t>(pairs.size());
  const int64_t chunks = (np + kRowGrain - 1) / kRowGrain;
  auto is_start = [&](int64_t p) { return p == 0 || pairs[p].out_key != pairs[p - 1].out_key; };
  std::vector<int64_t> offset(chunks + 1, 0);
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch)
      for (int64_t p = ch * kRowGrain; p < std::min(np, (ch + 1) * kRowGrain); ++p) offset[ch + 1] += is_start(p);
  });
  for (int64_t ch = 0; ch < chunks; ++ch) offset[ch + 1] += offset[ch];
  std::vector<int64_t> first(offset[chunks] + 1);
  at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch) {
      int64_t w = offset[ch];
      for (int64_t p = ch * kRowGrain; p < std::min(np, (ch + 1) * kRowGrain); ++p)
        if (is_start(p)) first[w++] = p;
    }
  });
  first[offset[chunks]] = np;
  return first;
}

#if defined(__x86_64__) && defined(__GNUC__)
// The bitmap path counts bits with the POPCNT instruction (without it GCC calls a
// library routine per count, which made the path slower than the sort); it is
// only taken on CPUs that have the instruction (use_output_bitmap).
#pragma GCC push_options
#pragma GCC target("popcnt")
const bool kHavePopcnt = __builtin_cpu_supports("popcnt") && !portable_kernels_only();
#else
const bool kHavePopcnt = true;
#endif

// Output voxels of a strided conv as one bit per cell of the output grid. Keys
// are row-major, so scanning the bits in order lists the outputs sorted (the
// canonical order) with no sort, and an output's row in the map is its rank: the
// set bits before it. Used while the grid is small enough (see
// kMaxBitmapCellsPerInput); huge sparse grids take the sort (sorted_output_pairs).
class OutputBitmap {
 public:
  explicit OutputBitmap(int64_t cells) : words_((cells + 63) / 64, 0) {}

  // Safe from several threads: each word is only ever OR-ed.
  void mark(int64_t key) {
    uint64_t& w = words_[key >> 6];
    const uint64_t bit = uint64_t(1) << (key & 63);
    if (!(__atomic_load_n(&w, __ATOMIC_RELAXED) & bit)) __atomic_fetch_or(&w, bit, __ATOMIC_RELAXED);
  }

  // Counts the set bits per word (after every mark) and returns the total.
  int64_t rank_all() {
    const int64_t nw = static_cast<int64_t>(words_.size()), blocks = (nw + kWordBlock - 1) / kWordBlock;
    std::vector<int64_t> block_start(blocks + 1, 0);
    at::parallel_for(0, blocks, 1, [&](int64_t bb, int64_t be) {
      for (int64_t b = bb; b < be; ++b)
        for (int64_t w = b * kWordBlock; w < std::min(nw, (b + 1) * kWordBlock); ++w)
          block_start[b + 1] += __builtin_popcountll(words_[w]);
    });
    for (int64_t b = 0; b < blocks; ++b) block_start[b + 1] += block_start[b];
    check_row_count(block_start[blocks]);
    rank_.resize(nw);
    at::parallel_for(0, blocks, 1, [&](int64_t bb, int64_t be) {
      for (int64_t b = bb; b < be; ++b) {
        int64_t r = block_start[b];
        for (int64_t w = b * kWordBlock; w < std::min(nw, (b + 1) * kWordBlock); ++w) {
          rank_[w] = static_cast<int32_t>(r);
          r += __builtin_popcountll(words_[w]);
        }
      }
    });
    return block_start[blocks];
  }

  // Row of a marked key among all marked keys, in key order.
  int64_t rank(int64_t key) const {
    const uint64_t below = (uint64_t(1) << (key & 63)) - 1;
    return rank_[key >> 6] + __builtin_popcountll(words_[key >> 6] & below);
  }

  // fn(row, key) for every marked key, in parallel over blocks of words.
  template <typename Fn>
  void for_each_marked(Fn fn) const {
    const int64_t nw = static_cast<int64_t>(words_.size());
    at::parallel_for(0, nw, kWordBlock, [&](int64_t wb, int64_t we) {
      for (int64_t w = wb; w < we; ++w) {
        int64_t row = rank_[w];
        for (uint64_t bits = words_[w]; bits; bits &= bits - 1) fn(row++, w * 64 + __builtin_ctzll(bits));
      }
    });
  }

 private:
  static constexpr int64_t kWordBlock = 4096;
  std::vector<uint64_t> words_;
  std::vector<int32_t> rank_;  // set bits in all earlier words
};

// The bitmap is used while it has at most this many cells per input voxel
// (KITTI-like scenes: ~350 at the first strided layer, ~50 at the next; a
// 2^60-cell grid with a few voxels: far more). Zeroing and scanning it then
// costs less than sorting the contributions, and it takes at most 192 bytes per
// input (bits and ranks), about what the sort's two pair arrays take.
constexpr int64_t kMaxBitmapCellsPerInput = 1024;
constexpr int64_t kMaxBitmapCells = int64_t(1) << 30;  // 128 MiB of bits at most

bool use_output_bitmap(const Grid& out_grid, int64_t batch_size, int64_t n) {
  if (!kHavePopcnt) return false;
  double cells = double(batch_size);
  for (int d = 0; d < out_grid.ndim; ++d) cells *= double(out_grid.shape[d]);
  return cells <= double(kMaxBitmapCells) && cells <= double(kMaxBitmapCellsPerInput) * double(std::max<int64_t>(n, 1));
}

// Map and output voxels through OutputBitmap: one pass over the inputs marks their
// outputs and keeps each chunk's (output key, input row, k) contributions; then
// every contribution writes its map cell (one writer per cell: an output and an
// offset determine the input).
std::tuple<at::Tensor, at::Tensor> conv_map_by_bitmap(const at::Tensor& indices, int64_t batch_size, const Grid& grid,
                                                      const Grid& out_grid, const ConvGeometry& geo, bool transposed) {
  const int64_t n = indices.size(0), kvol = kernel_volume(geo);
  const int32_t* idx = indices.data_ptr<int32_t>();
  int64_t cells = batch_size;
  for (int d = 0; d < out_grid.ndim; ++d) cells *= out_grid.shape[d];
  OutputBitmap outputs(cells);
  const int64_t chunks = (n + kRowGrain - 1) / kRowGrain;
  std::vector<std::vector<OutputPair>> contributions(chunks);
  parallel_dynamic(chunks, chunks > 1, [&](auto next_chunk) {
    OutputReach reach(geo, out_grid, transposed);
    int64_t c[kMaxSpatialDims];
    for (int64_t ch = next_chunk(); ch < chunks; ch = next_chunk()) {
      // filled locally, then moved: the chunks' vector headers share cache lines
      std::vector<OutputPair> mine;
      mine.reserve(4 * kRowGrain);
      for (int64_t r = ch * kRowGrain; r < std::min(n, (ch + 1) * kRowGrain); ++r) {
        const int64_t batch = read_row(idx, grid.ndim, r, c);
        if (reach.set(c) == 0) continue;
        reach.for_each(batch, [&](int64_t key, int64_t k) {
          outputs.mark(key);
          mine.push_back({key, static_cast<int32_t>(r), static_cast<int32_t>(k)});
        });
      }
      contributions[ch] = std::move(mine);
    }
  });
  const int64_t m = outputs.rank_all();
  at::Tensor out_indices = empty_cpu({m, 1 + grid.ndim}, indices.options());
  at::Tensor nbr = empty_cpu({m, kvol}, indices.options()).fill_(kNoNeighbor);
  int32_t* oi = out_indices.data_ptr<int32_t>();
  int32_t* map = nbr.data_ptr<int32_t>();
  const KeyUnpacker out_coords(out_grid);
  outputs.for_each_marked([&](int64_t row, int64_t key) {
    int64_t c[kMaxSpatialDims];
    int32_t* o = oi + row * (1 + grid.ndim);
    o[0] = static_cast<int32_t>(out_coords.unpack(key, c));
    for (int d = 0; d < grid.ndim; ++d) o[1 + d] = static_cast<int32_t>(c[d]);
  });
  parallel_dynamic(chunks, chunks > 1, [&](auto next_chunk) {
    for (int64_t ch = next_chunk(); ch < chunks; ch = next_chunk())
      for (const OutputPair& p : contributions[ch]) map[outputs.rank(p.out_key) * kvol + p.k] = p.row;
  });
  return {out_indices, nbr};
}

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC pop_options
#endif

// Output voxels (canonical order) and map of a strided or transposed conv whose
// arguments are checked, from the (output key, input row, k) contributions: through
// the output bitmap on small grids, else sorted.
std::tuple<at::Tensor, at::Tensor> conv_map_from_contributions(const at::Tensor& indices, int64_t batch_size,
                                                               const Grid& grid, const Grid& out_grid,
                                                               const ConvGeometry& geo, bool transposed) {
  const int64_t n = indices.size(0), kvol = kernel_volume(geo);
  const int32_t* idx = indices.data_ptr<int32_t>();
  if (use_output_bitmap(out_grid, batch_size, n))
    return conv_map_by_bitmap(indices, batch_size, grid, out_grid, geo, transposed);
  const std::vector<OutputPair> pairs = sorted_output_pairs(idx, n, grid, out_grid, geo, transposed);
  const std::vector<int64_t> first = run_starts(pairs);
  const int64_t m = static_cast<int64_t>(first.size()) - 1;
  check_row_count(m);

  // Each output writes its whole map row (-1, then its pairs) and its
  // coordinates, so every cell has one writer and nothing is filled twice.
  at::Tensor out_indices = empty_cpu({m, 1 + grid.ndim}, indices.options());
  at::Tensor nbr = empty_cpu({m, kvol}, indices.options());
  int32_t* oi = out_indices.data_ptr<int32_t>();
  int32_t* map = nbr.data_ptr<int32_t>();
  const KeyUnpacker out_coords(out_grid);
  at::parallel_for(0, m, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t c[kMaxSpatialDims];
    for (int64_t o = b; o < e; ++o) {
      int32_t* row = map + o * kvol;
      std::fill(row, row + kvol, kNoNeighbor);
      for (int64_t p = first[o]; p < first[o + 1]; ++p) row[pairs[p].k] = pairs[p].row;
      oi[o * (1 + grid.ndim)] = static_cast<int32_t>(out_coords.unpack(pairs[first[o]].out_key, c));
      for (int d = 0; d < grid.ndim; ++d) oi[o * (1 + grid.ndim) + 1 + d] = static_cast<int32_t>(c[d]);
    }
  });
  return {out_indices, nbr};
}

// The output grid's extent per axis, the third result of the strided and transposed
// builders: the one place the callers get the output spatial shape from.
std::vector<int64_t> spatial_extents(const Grid& g) { return std::vector<int64_t>(g.shape, g.shape + g.ndim); }

// `padding` is pads_begin; pads_end (optional) the padding above, `padding` when absent.
std::tuple<at::Tensor, at::Tensor, std::vector<int64_t>> build_conv_map_cpu(
    const at::Tensor& indices_in, c10::IntArrayRef spatial_shape, int64_t batch_size,
    c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
    c10::IntArrayRef dilation, at::OptionalIntArrayRef pads_end) {
  const SerialWhenSmall serial(indices_in);
  const Grid grid = make_grid(spatial_shape, batch_size);
  check_indices(indices_in, grid.ndim);
  const ConvGeometry geo = make_geometry(grid.ndim, kernel_size, stride, padding, dilation, pads_end);
  const Grid out_grid = conv_output_grid(grid, geo, spatial_shape, batch_size);
  const at::Tensor indices = checked_indices(indices_in, grid, batch_size, spatial_shape);
  auto [out_indices, nbr] = conv_map_from_contributions(indices, batch_size, grid, out_grid, geo, false);
  return {out_indices, nbr, spatial_extents(out_grid)};
}

// Transposed (generative) conv: input i reaches o = i*stride - pads_begin + kp*dilation.
std::tuple<at::Tensor, at::Tensor, std::vector<int64_t>> build_conv_transpose_map_cpu(
    const at::Tensor& indices_in, c10::IntArrayRef spatial_shape, int64_t batch_size,
    c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef pads_begin,
    c10::IntArrayRef pads_end, c10::IntArrayRef dilation, c10::IntArrayRef output_padding) {
  const SerialWhenSmall serial(indices_in);
  const Grid grid = make_grid(spatial_shape, batch_size);
  check_indices(indices_in, grid.ndim);
  const ConvGeometry geo = make_geometry(grid.ndim, kernel_size, stride, pads_begin, dilation, pads_end, "pads_begin");
  const Grid out_grid = conv_transpose_output_grid(grid, geo, output_padding, spatial_shape, batch_size);
  const at::Tensor indices = checked_indices(indices_in, grid, batch_size, spatial_shape);
  auto [out_indices, nbr] = conv_map_from_contributions(indices, batch_size, grid, out_grid, geo, true);
  return {out_indices, nbr, spatial_extents(out_grid)};
}

// Error path of transpose_map: finds the lowest row naming an (input row, offset) that an
// earlier row names too, serially, and raises.
[[noreturn]] void report_named_twice(const int32_t* src, int64_t m, int64_t kvol) {
  std::vector<std::pair<int64_t, int64_t>> seen;  // (input row * kvol + k, map row)
  seen.reserve(m * kvol);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t k = 0; k < kvol; ++k)
      if (src[r * kvol + k] >= 0) seen.emplace_back(int64_t(src[r * kvol + k]) * kvol + k, r);
  std::stable_sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t row = INT64_MAX, first = -1, cell = -1;
  for (size_t j = 1; j < seen.size(); ++j)
    if (seen[j].first == seen[j - 1].first && seen[j].second < row)
      row = seen[j].second, first = seen[j - 1].second, cell = seen[j].first;
  raise_named_twice(first, row, cell / kvol, cell % kvol);
}

at::Tensor transpose_map_cpu(const at::Tensor& nbr_in, int64_t num_rows) {
  check_transpose_map_args(nbr_in, num_rows);
  const SerialWhenSmall serial(nbr_in);
  const at::Tensor nbr = nbr_in.contiguous();
  const int64_t m = nbr.size(0), kvol = nbr.size(1);
  check_row_count(m);
  at::Tensor t = empty_cpu({num_rows, kvol}, nbr.options()).fill_(kNoNeighbor);
  const int32_t* src = nbr.data_ptr<int32_t>();
  int32_t* dst = t.data_ptr<int32_t>();
  FirstBadRow bad;
  std::atomic<int64_t> named_twice{0};
  at::parallel_for(0, m, kRowGrain, [&](int64_t b, int64_t e) {
    int64_t twice = 0;
    for (int64_t r = b; r < e; ++r)
      for (int64_t k = 0; k < kvol; ++k) {
        const int32_t i = src[r * kvol + k];
        if (i == kNoNeighbor) continue;
        if (i < 0 || i >= num_rows) {
          bad.report(r);
          continue;
        }
        int32_t& cell = dst[int64_t(i) * kvol + k];
        twice += cell != kNoNeighbor;  // an earlier row of this chunk (or another) named (i, k) already
        cell = static_cast<int32_t>(r);
      }
    named_twice += twice;
  });
  if (bad.any()) check_transpose_map_rows(bad.row.load(), m, num_rows);
  // A map names each (input row, offset) at most once (the builders' maps do); otherwise no
  // transpose exists. Two chunks writing the same cell at the same instant could both miss
  // it, but chunks of one map cannot share a cell unless it is already broken this way.
  if (named_twice.load() > 0) report_named_twice(src, m, kvol);
  return t;
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("build_subm_map", &mxs::build_subm_map_cpu);
  m.impl("build_conv_map", &mxs::build_conv_map_cpu);
  m.impl("build_conv_transpose_map", &mxs::build_conv_transpose_map_cpu);
  m.impl("transpose_map", &mxs::transpose_map_cpu);
}
