// CPU compute primitives:
//   gather_mm:                 out[m] = sum_k in[nbr[m, k]] @ W[k]
//   gather_mm_backprop_filter: dW[k]  = sum_m in[nbr[m, k]]^T (x) grad[m]
// Output-stationary: a tile of output rows owns its accumulators, so there is no
// scatter, no atomics, and the summation order (k ascending, then the fixed
// order of gemm_rows) is the same for every thread count. Half-precision inputs
// are widened to float once and accumulated in float; float64 stays float64.
// bfloat16 gather_mm runs on AMX tiles where the CPU has them (gemm_rows_amx.h):
// bf16 operands read as they are, float accumulators, bf16 output. (An AVX512-BF16
// dot-product kernel was tried before and measured slower than the float path.)
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#include <torch/types.h>
#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>
#include "../contract/batch_norm_relu_args.h"
#include "../contract/index_errors.h"
#include "../contract/op_args.h"
#include "gemm_rows.h"
#include "gemm_rows_amx.h"
#include "large_tensor_pool.h"
#include "map_column.h"
#include "parallel_dynamic.h"

namespace mxs {
namespace {

at::ScalarType accumulate_type(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// Rows of the map must name existing input rows; found during the compute loop
// and reported once afterwards (lowest map row, deterministic).
struct MapRangeCheck {
  std::atomic<int64_t> row{INT64_MAX};
  void report(int64_t r) {
    int64_t cur = row.load();
    while (r < cur && !row.compare_exchange_weak(cur, r)) {}
  }
  void raise_if_bad(const char* name, int64_t num_rows) const {
    raise_map_row_error(name, row.load() == INT64_MAX ? -1 : row.load(), num_rows);
  }
};

// Output rows per tile: the accumulator tile stays within 256 KiB (L2), and wide
// layers still get enough rows per offset to reuse each weight slice. Depends only on
// Cout so the arithmetic is the same for any thread count.
int64_t rows_per_tile(int64_t cout) { return std::clamp<int64_t>(65536 / std::max<int64_t>(cout, 1), 16, 256); }

// Below this many multiply-adds a call runs on the calling thread: opening an
// OpenMP region costs more than the work, and much more on a busy machine, where
// the second thread may wait a time slice to be scheduled. 2^22 (about 0.1-0.3 ms
// of work on one AVX-512 core): at 2^18 the 1,000-voxel VoxelBackBone8x forward
// went parallel in every layer and took 10 ms per gather_mm call at 2 threads
// on the loaded 2-core machine (load ~40), against well under 1 ms on one thread.
constexpr double kMinParallelMacs = 1 << 22;

bool worth_parallel(int64_t items, double macs_per_item) { return items * macs_per_item >= kMinParallelMacs; }

// The output-stationary loop shared by every dtype. For each tile of output
// rows and each offset k it lists the (input row, tile row) pairs and hands them
// to gemm(n, a_rows, c_rows, k, g) once per group, with the row pointers moved
// to that group's channels. The tile sums into `direct + m0 * cout` where the
// output has the accumulator's type (direct != nullptr: float32, float64), else
// into a per-thread buffer that store(m0, m1, acc) then writes out (converting).
// Summing in place saves a copy of every output: float32 calls 4-5 % faster.
// make_gemm() is called once per worker thread (a gemm may own scratch buffers).
template <typename In, typename Acc, typename MakeGemm, typename Store>
void gather_tiles(const In* in, int64_t n_in, const int32_t* nbr, int64_t m, const GatherShape& s,
                  MapRangeCheck& bad, Acc* direct, MakeGemm make_gemm, Store store) {
  const int64_t tile = rows_per_tile(s.cout);
  const int64_t ntiles = (m + tile - 1) / tile;
  // a tile does about tile * kvol / 4 row products (typical LiDAR occupancy)
  const bool parallel = worth_parallel(ntiles, double(tile) * s.kvol / 4 * s.cin_g * s.cout);
  parallel_dynamic(ntiles, parallel, [&](auto next_tile) {
    std::vector<Acc> local(direct ? 0 : tile * s.cout);
    std::vector<int32_t> in_rows(tile + 16), tile_rows(tile + 16);
    std::vector<const In*> a_rows(tile);
    std::vector<Acc*> c_rows(tile);
    auto gemm = make_gemm();
    for (int64_t t = next_tile(); t < ntiles; t = next_tile()) {
      const int64_t m0 = t * tile, m1 = std::min(m, m0 + tile);
      Acc* acc = direct ? direct + m0 * s.cout : local.data();
      std::fill(acc, acc + (m1 - m0) * s.cout, Acc(0));
      for (int64_t k = 0; k < s.kvol; ++k) {
        const MapColumn col =
            compact_map_column(nbr + m0 * s.kvol, m1 - m0, s.kvol, k, n_in, in_rows.data(), tile_rows.data());
        if (col.bad_row >= 0) bad.report(m0 + col.bad_row);  // rare: a corrupt map
        const int64_t n = col.count;
        for (int64_t j = 0; j < n; ++j) {
          a_rows[j] = in + int64_t(in_rows[j]) * s.cin;
          c_rows[j] = acc + int64_t(tile_rows[j]) * s.cout;
        }
        for (int64_t g = 0; g < s.groups && n > 0; ++g) {
          if (g > 0)
            for (int64_t j = 0; j < n; ++j) {
              a_rows[j] += s.cin_g;
              c_rows[j] += s.cout_g;
            }
          gemm(n, a_rows.data(), c_rows.data(), k, g);
        }
      }
      if (!direct) store(m0, m1, acc);
    }
  });
}

// float32 with at most 32 output channels per group (a network's first levels)
// takes the pair-packed path of gemm_rows.h: the weight slice of every (offset,
// group) is re-laid once here, before the tiles.
template <typename T>
void gather_mm_kernel(const T* in, int64_t n_in, const T* w, const int32_t* nbr, int64_t m, const GatherShape& s,
                      T* out, MapRangeCheck& bad) {
  const int64_t packed = std::is_same_v<T, float> ? pair_packed_size(s.cin_g, s.cout_g) : 0;
  std::vector<T> wp(s.kvol * s.groups * packed);
  if constexpr (std::is_same_v<T, float>)
    for (int64_t k = 0; k < s.kvol && packed > 0; ++k)
      for (int64_t g = 0; g < s.groups; ++g)
        pack_pairs(s.cin_g, s.cout_g, w + (k * s.cin_g) * s.cout + g * s.cout_g, s.cout,
                   wp.data() + (k * s.groups + g) * packed);
  gather_tiles<T, T>(
      in, n_in, nbr, m, s, bad, out,
      [&] {
        return [&](int64_t n, const T* const* a, T* const* c, int64_t k, int64_t g) {
          if constexpr (std::is_same_v<T, float>)
            if (packed > 0) return gemm_rows_pairs(n, s.cin_g, s.cout_g, a, wp.data() + (k * s.groups + g) * packed, c);
          gemm_rows(n, s.cin_g, s.cout_g, a, w + (k * s.cin_g) * s.cout + g * s.cout_g, s.cout, c);
        };
      },
      [](int64_t, int64_t, const T*) {});
}

// bfloat16 on AMX: float accumulator tiles, rounded to bf16 once when a tile is done.
void gather_mm_bf16_amx(const uint16_t* in, int64_t n_in, const uint16_t* w, const int32_t* nbr, int64_t m,
                        const GatherShape& s, at::BFloat16* out, MapRangeCheck& bad) {
  const AmxWeights packed(w, s.kvol, s.groups, s.cin_g, s.cout_g);
  gather_tiles<uint16_t, float>(
      in, n_in, nbr, m, s, bad, nullptr,
      [&] {
        return [&, scratch = AmxScratch(packed)](int64_t n, const uint16_t* const* a, float* const* c, int64_t k,
                                                  int64_t g) mutable {
          gemm_rows_amx(n, a, packed, k, g, c, scratch);
        };
      },
      [&](int64_t m0, int64_t m1, const float* acc) {
        round_to_bf16(acc, reinterpret_cast<uint16_t*>(out + m0 * s.cout), (m1 - m0) * s.cout);
      });
}

// bfloat16 layers with at least 16 input channels per group run on AMX; narrower
// ones (a network's first layer) fill too little of a tile to beat the float path.
bool use_amx(const at::Tensor& features, const GatherShape& s) {
  return features.scalar_type() == at::kBFloat16 && s.cin_g >= 16 && amx_bf16_usable();
}

at::Tensor gather_mm_bf16_amx_cpu(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr_in,
                                  const GatherShape& s) {
  const at::Tensor f = features.contiguous(), w = weight.contiguous(), nbr = nbr_in.contiguous();
  const int64_t m = nbr.size(0);
  at::Tensor out = empty_cpu({m, s.cout}, f.options());
  MapRangeCheck bad;
  gather_mm_bf16_amx(reinterpret_cast<const uint16_t*>(f.data_ptr<at::BFloat16>()), f.size(0),
                     reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>()), nbr.data_ptr<int32_t>(), m, s,
                     out.data_ptr<at::BFloat16>(), bad);
  bad.raise_if_bad("nbr", f.size(0));
  return out;
}

at::Tensor gather_mm_cpu(const at::Tensor& features, const at::Tensor& weight, const at::Tensor& nbr_in,
                         const std::optional<at::Tensor>& nbr_t, int64_t groups, bool /*symmetric: autograd's*/,
                         const std::optional<at::Tensor>& source, const std::optional<at::Tensor>& source_scale,
                         const std::optional<at::Tensor>& source_shift /*autograd's too*/) {
  const GatherShape s = check_gather_mm_args(features, weight, nbr_in, nbr_t, groups);
  check_gather_mm_activation(features, source, source_scale, source_shift);
  if (use_amx(features, s)) return gather_mm_bf16_amx_cpu(features, weight, nbr_in, s);
  const auto acc = accumulate_type(features.scalar_type());
  const at::Tensor f = features.to(acc).contiguous(), w = weight.to(acc).contiguous(), nbr = nbr_in.contiguous();
  const int64_t m = nbr.size(0);
  at::Tensor out = empty_cpu({m, s.cout}, f.options());
  MapRangeCheck bad;
  AT_DISPATCH_FLOATING_TYPES(acc, "gather_mm_cpu", [&] {
    gather_mm_kernel<scalar_t>(f.data_ptr<scalar_t>(), f.size(0), w.data_ptr<scalar_t>(), nbr.data_ptr<int32_t>(),
                               m, s, out.data_ptr<scalar_t>(), bad);
  });
  bad.raise_if_bad("nbr", f.size(0));
  return out.to(features.scalar_type());
}

// The weight gradient dW[k] = sum over the pairs (i, m) of offset k of
// in[i]^T (x) grad[m] runs block by block of output rows: a work item takes one
// block of rows and a group of offsets, compacts each offset's column of the
// block's map (the pairs, in ascending m) and sums them into the partial dW[k]
// of that block. A block's gradient rows and the input rows they pair with stay
// in L2 while its offsets pass over them; taken offset by offset over the whole
// map instead, every offset fetched its rows from L3 again (the blocks measured
// 5-35 % faster on the captured KITTI and nuScenes calls, in-process A/B).
// Blocks run in waves of a fixed number of blocks; after each wave its partials
// are added to dW in block order, so the sums are the same for any thread count
// and the partials held at once stay bounded however many rows there are.
struct FilterBlocks {
  int64_t rows;              // output rows per block
  int64_t count;             // blocks
  int64_t per_wave;          // blocks per wave
  int64_t offsets_per_item;  // offsets of one work item
  int64_t items_per_block;
};

// Blocks keep about 1 MiB of gathered rows (half of this CPU's L2), 256 to 2048
// rows (an AMX pair buffer holds 2048). A wave holds at most 8 MiB of partials (a
// whole dW per block; at least one block). Few blocks in a wave (small or wide
// layers) are cut into offset groups so that there are enough items to balance
// the threads. Depends on the shapes only.
FilterBlocks plan_filter_blocks(int64_t m, const GatherShape& s, int64_t in_bytes, int64_t acc_bytes) {
  constexpr int64_t kRowBytes = 1 << 20, kPartialBytes = 8 << 20, kMinItems = 16;
  FilterBlocks b{};
  b.rows = std::clamp<int64_t>(kRowBytes / ((s.cin + s.cout) * in_bytes) / 256 * 256, 256, 2048);
  b.count = (m + b.rows - 1) / b.rows;
  const int64_t partial_bytes = std::max<int64_t>(s.kvol * s.cin_g * s.cout * acc_bytes, 1);
  b.per_wave = std::clamp<int64_t>(kPartialBytes / partial_bytes, 1, std::max<int64_t>(b.count, 1));
  const int64_t groups = std::clamp<int64_t>((kMinItems + b.per_wave - 1) / b.per_wave, 1, std::max<int64_t>(s.kvol, 1));
  b.offsets_per_item = (s.kvol + groups - 1) / groups;
  b.items_per_block = (s.kvol + b.offsets_per_item - 1) / b.offsets_per_item;
  return b;
}

// For every (block, offset) with pairs: column(n, in_rows, out_rows, partial, scratch),
// out_rows absolute; partial is that block's dW[k] [Cin/G, Cout], zeroed. Then
// dw[k] += the blocks' partials, in block order, wave by wave.
template <typename Acc, typename Scratch, typename Column>
void filter_by_blocks(const int32_t* nbr, int64_t m, int64_t n_in, const GatherShape& s, const FilterBlocks& plan,
                      MapRangeCheck& bad, Acc* dw, Column column) {
  const int64_t block = s.cin_g * s.cout;
  std::vector<Acc> partials(std::min(plan.count, plan.per_wave) * s.kvol * block);
  const double macs_per_item = double(plan.rows) * plan.offsets_per_item / 4 * s.cin_g * s.cout;
  for (int64_t w0 = 0; w0 < plan.count; w0 += plan.per_wave) {
    const int64_t blocks = std::min(plan.per_wave, plan.count - w0), items = blocks * plan.items_per_block;
    std::fill(partials.begin(), partials.begin() + blocks * s.kvol * block, Acc(0));
    parallel_dynamic(items, worth_parallel(items, macs_per_item), [&](auto next_item) {
      std::vector<int32_t> in_rows(plan.rows + 16), out_rows(plan.rows + 16);
      Scratch scratch(s, plan.rows);
      for (int64_t item = next_item(); item < items; item = next_item()) {
        const int64_t wb = item / plan.items_per_block, r0 = (w0 + wb) * plan.rows, rows = std::min(plan.rows, m - r0);
        const int64_t k0 = (item % plan.items_per_block) * plan.offsets_per_item;
        for (int64_t k = k0; k < std::min(s.kvol, k0 + plan.offsets_per_item); ++k) {
          const MapColumn col =
              compact_map_column(nbr + r0 * s.kvol, rows, s.kvol, k, n_in, in_rows.data(), out_rows.data());
          if (col.bad_row >= 0) bad.report(r0 + col.bad_row);
          for (int64_t j = 0; j < col.count; ++j) out_rows[j] += static_cast<int32_t>(r0);
          if (col.count > 0)
            column(col.count, in_rows.data(), out_rows.data(), partials.data() + (wb * s.kvol + k) * block, scratch);
        }
      }
    });
    parallel_dynamic(s.kvol, worth_parallel(s.kvol, double(blocks) * block), [&](auto next_offset) {
      for (int64_t k = next_offset(); k < s.kvol; k = next_offset())
        for (int64_t wb = 0; wb < blocks; ++wb) {
          const Acc* src = partials.data() + (wb * s.kvol + k) * block;
          Acc* d = dw + k * block;
          for (int64_t e = 0; e < block; ++e) d[e] += src[e];
        }
    });
  }
}

// Pairs go through gemm_tn_rows in slices of kPairsPerSlice, per group.
constexpr int64_t kPairsPerSlice = 256;

template <typename T>
struct RowScratch {
  RowScratch(const GatherShape&, int64_t) : a_rows(kPairsPerSlice), g_rows(kPairsPerSlice) {}
  std::vector<const T*> a_rows, g_rows;
};

template <typename T>
void backprop_filter_kernel(const T* in, int64_t n_in, const T* grad, const int32_t* nbr, int64_t m,
                            const GatherShape& s, MapRangeCheck& bad, T* dw) {
  const FilterBlocks plan = plan_filter_blocks(m, s, sizeof(T), sizeof(T));
  filter_by_blocks<T, RowScratch<T>>(
      nbr, m, n_in, s, plan, bad, dw,
      [&](int64_t count, const int32_t* in_rows, const int32_t* out_rows, T* partial, RowScratch<T>& sc) {
        for (int64_t p0 = 0; p0 < count; p0 += kPairsPerSlice) {
          const int64_t n = std::min(kPairsPerSlice, count - p0);
          for (int64_t p = 0; p < n; ++p) {
            sc.a_rows[p] = in + int64_t(in_rows[p0 + p]) * s.cin;
            sc.g_rows[p] = grad + int64_t(out_rows[p0 + p]) * s.cout;
          }
          for (int64_t g = 0; g < s.groups; ++g) {
            gemm_tn_rows(n, s.cin_g, s.cout_g, sc.a_rows.data(), sc.g_rows.data(), partial + g * s.cout_g, s.cout);
            for (int64_t p = 0; p < n && g + 1 < s.groups; ++p) {
              sc.a_rows[p] += s.cin_g;
              sc.g_rows[p] += s.cout_g;
            }
          }
        }
      });
}

// bfloat16 on AMX (groups == 1): a column's pairs (at most a block's rows) go
// through one gemm_tn_amx call.
void backprop_filter_bf16_amx(const uint16_t* in, int64_t n_in, const uint16_t* grad, const int32_t* nbr, int64_t m,
                              const GatherShape& s, MapRangeCheck& bad, float* dw) {
  struct Scratch {
    Scratch(const GatherShape& s, int64_t rows) : pairs(s.cin, s.cout), a_rows(rows), g_rows(rows) {}
    AmxPairsScratch pairs;
    std::vector<const uint16_t*> a_rows, g_rows;
  };
  const FilterBlocks plan = plan_filter_blocks(m, s, sizeof(uint16_t), sizeof(float));
  TORCH_INTERNAL_ASSERT(plan.rows <= AmxPairsScratch::kMaxPairs, "a block's column must fit the AMX pair buffers");
  filter_by_blocks<float, Scratch>(
      nbr, m, n_in, s, plan, bad, dw,
      [&](int64_t n, const int32_t* in_rows, const int32_t* out_rows, float* partial, Scratch& sc) {
        for (int64_t p = 0; p < n; ++p) {
          sc.a_rows[p] = in + int64_t(in_rows[p]) * s.cin;
          sc.g_rows[p] = grad + int64_t(out_rows[p]) * s.cout;
        }
        gemm_tn_amx(n, sc.a_rows.data(), sc.g_rows.data(), partial, s.cout, sc.pairs);
      });
}

// relu(x * scale + shift), the scale_shift_relu op (batch_norm_relu_cpu.cpp).
at::Tensor scale_shift_relu(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mx_sparse::scale_shift_relu", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
  return op.call(x, scale, shift);
}

at::Tensor gather_mm_backprop_filter_cpu(const at::Tensor& features_in, const at::Tensor& grad,
                                         const at::Tensor& nbr_in, const std::optional<at::Tensor>& nbr_t,
                                         int64_t groups, bool /*symmetric: autograd's*/,
                                         const std::optional<at::Tensor>& scale,
                                         const std::optional<at::Tensor>& shift) {
  const GatherShape s = check_backprop_filter_args(features_in, grad, nbr_in, nbr_t, groups);
  // with an activation, the features it makes, computed first (one pass; the accelerators' Triton
  // kernel applies it as it loads instead)
  const at::Tensor features = check_backprop_filter_activation(features_in, scale, shift)
                                  ? scale_shift_relu(features_in, *scale, *shift)
                                  : features_in;
  const int64_t cout = s.cout;
  const at::Tensor nbr = nbr_in.contiguous();
  const int64_t m = nbr.size(0), n_in = features.size(0);
  MapRangeCheck bad;
  const auto acc = accumulate_type(features.scalar_type());
  at::Tensor dw = at::zeros({s.kvol, s.cin_g, cout}, features.options().dtype(acc));
  // a map without offsets has no entries and dW no rows (the block planner divides by K)
  if (s.kvol == 0) return dw.to(features.scalar_type());
  if (use_amx(features, s) && groups == 1) {
    const at::Tensor f = features.contiguous(), g = grad.contiguous();
    backprop_filter_bf16_amx(reinterpret_cast<const uint16_t*>(f.data_ptr<at::BFloat16>()), n_in,
                             reinterpret_cast<const uint16_t*>(g.data_ptr<at::BFloat16>()), nbr.data_ptr<int32_t>(), m,
                             s, bad, dw.data_ptr<float>());
    bad.raise_if_bad("nbr", n_in);
    return dw.to(at::kBFloat16);
  }
  const at::Tensor f = features.to(acc).contiguous(), g = grad.to(acc).contiguous();
  AT_DISPATCH_FLOATING_TYPES(acc, "gather_mm_backprop_filter_cpu", [&] {
    backprop_filter_kernel<scalar_t>(f.data_ptr<scalar_t>(), n_in, g.data_ptr<scalar_t>(), nbr.data_ptr<int32_t>(), m,
                                     s, bad, dw.data_ptr<scalar_t>());
  });
  bad.raise_if_bad("nbr", n_in);
  return dw.to(features.scalar_type());
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("gather_mm", &mxs::gather_mm_cpu);
  m.impl("gather_mm_backprop_filter", &mxs::gather_mm_backprop_filter_cpu);
}
