// CPU kernels of pack_map / unpack_map (format and checks: kernels/contract/packed_map_args.h): a
// neighbor map reduced to its present entries plus one bit per (row, offset).
// LiDAR maps are mostly -1 (about 7 of 27 offsets present in a submanifold map,
// 3 to 4 in a strided one), so a packed map takes a third of the memory or less;
// the Python layer keeps the maps that no layer is using in this form
// (mx_sparse/nn/packed_map.py). Rows are handled in fixed blocks whose first value
// positions are stored, so both directions run block-parallel and the result
// does not depend on the thread count.
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>

#include <atomic>
#include <functional>

#include "../common/mxs_qualifiers.h"  // kNoNeighbor
#include "../contract/packed_map_args.h"
#include "large_tensor_pool.h"
#include "portable_switch.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace mxs {
namespace {

constexpr int64_t kRowsPerBlock = kPackRowsPerBlock;
constexpr int64_t kLanes = kPackLanes;

int64_t mask_words(int64_t kvol) { return pack_mask_words(kvol); }
int64_t num_blocks(int64_t m) { return pack_blocks(m); }
uint16_t lanes_below(int64_t n) { return n >= kLanes ? 0xFFFF : n <= 0 ? 0 : uint16_t((1u << n) - 1u); }

// The three kernels below exist twice: portable, and AVX-512 (compress/expand of
// 16 offsets at a time). mask_rows returns the number of values of its rows,
// unpack_rows the number it read.

// mask bits of rows [r0, r1); the first entry below -1 is recorded in `bad`.
int64_t mask_rows_generic(const int32_t* nbr, int64_t kvol, int64_t r0, int64_t r1, uint16_t* mask, int64_t& bad) {
  const int64_t words = mask_words(kvol);
  int64_t count = 0;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t w = 0; w < words; ++w) {
      uint16_t bits = 0;
      for (int64_t j = 0; j < kLanes && w * kLanes + j < kvol; ++j) {
        const int32_t v = nbr[r * kvol + w * kLanes + j];
        if (v < kNoNeighbor && bad < 0) bad = r * kvol + w * kLanes + j;
        bits |= uint16_t(v >= 0) << j;
      }
      mask[r * words + w] = bits;
      count += __builtin_popcount(bits);
    }
  return count;
}

void pack_rows_generic(const int32_t* nbr, int64_t kvol, int64_t r0, int64_t r1, int32_t* values) {
  for (int64_t e = r0 * kvol; e < r1 * kvol; ++e)
    if (nbr[e] >= 0) *values++ = nbr[e];
}

// Returns the number of values read, so the caller can check it against the block's share.
int64_t unpack_rows_generic(const uint16_t* mask, const int32_t* values, int64_t kvol, int64_t r0, int64_t r1,
                            int64_t available, int32_t* nbr) {
  const int64_t words = mask_words(kvol);
  int64_t used = 0;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t k = 0; k < kvol; ++k) {
      const bool present = (mask[r * words + k / kLanes] >> (k % kLanes)) & 1;
      nbr[r * kvol + k] = present && used < available ? values[used] : kNoNeighbor;
      used += present;
    }
  return used;
}

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,popcnt")
int64_t mask_rows_avx512(const int32_t* nbr, int64_t kvol, int64_t r0, int64_t r1, uint16_t* mask, int64_t& bad) {
  const int64_t words = mask_words(kvol);
  const __m512i zero = _mm512_setzero_si512(), none = _mm512_set1_epi32(kNoNeighbor);
  int64_t count = 0;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t w = 0; w < words; ++w) {
      const __mmask16 live = lanes_below(kvol - w * kLanes);
      const __m512i v = _mm512_maskz_loadu_epi32(live, nbr + r * kvol + w * kLanes);
      const __mmask16 below = _mm512_mask_cmplt_epi32_mask(live, v, none);
      if (below && bad < 0) bad = r * kvol + w * kLanes + __builtin_ctz(below);
      const __mmask16 bits = _mm512_mask_cmpge_epi32_mask(live, v, zero);
      mask[r * words + w] = bits;
      count += __builtin_popcount(bits);
    }
  return count;
}

void pack_rows_avx512(const int32_t* nbr, int64_t kvol, int64_t r0, int64_t r1, const uint16_t* mask,
                      int32_t* values) {
  const int64_t words = mask_words(kvol);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t w = 0; w < words; ++w) {
      const __mmask16 bits = mask[r * words + w];
      const __m512i v = _mm512_maskz_loadu_epi32(lanes_below(kvol - w * kLanes), nbr + r * kvol + w * kLanes);
      const int n = __builtin_popcount(bits);
      _mm512_mask_storeu_epi32(values, lanes_below(n), _mm512_maskz_compress_epi32(bits, v));
      values += n;
    }
}

int64_t unpack_rows_avx512(const uint16_t* mask, const int32_t* values, int64_t kvol, int64_t r0, int64_t r1,
                           int64_t available, int32_t* nbr) {
  const int64_t words = mask_words(kvol);
  const __m512i none = _mm512_set1_epi32(kNoNeighbor);
  int64_t used = 0;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t w = 0; w < words; ++w) {
      const __mmask16 bits = mask[r * words + w];
      const int n = __builtin_popcount(bits);
      // never read past the block's share: a corrupt mask is reported by the caller
      const __mmask16 readable = used + n <= available ? bits : 0;
      const __m512i v = _mm512_mask_expandloadu_epi32(none, readable, values + used);
      _mm512_mask_storeu_epi32(nbr + r * kvol + w * kLanes, lanes_below(kvol - w * kLanes), v);
      used += n;
    }
  return used;
}
#pragma GCC pop_options
const bool kUseAvx512 =
    __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("popcnt") && !portable_kernels_only();
#else
const bool kUseAvx512 = false;
#endif

int64_t mask_rows(const int32_t* nbr, int64_t kvol, int64_t r0, int64_t r1, uint16_t* mask, int64_t& bad) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return mask_rows_avx512(nbr, kvol, r0, r1, mask, bad);
#endif
  return mask_rows_generic(nbr, kvol, r0, r1, mask, bad);
}

void pack_rows(const int32_t* nbr, int64_t kvol, int64_t r0, int64_t r1, const uint16_t* mask, int32_t* values) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return pack_rows_avx512(nbr, kvol, r0, r1, mask, values);
#endif
  pack_rows_generic(nbr, kvol, r0, r1, values);
}

int64_t unpack_rows(const uint16_t* mask, const int32_t* values, int64_t kvol, int64_t r0, int64_t r1,
                    int64_t available, int32_t* nbr) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kUseAvx512) return unpack_rows_avx512(mask, values, kvol, r0, r1, available, nbr);
#endif
  return unpack_rows_generic(mask, values, kvol, r0, r1, available, nbr);
}

// A block is ~1024 rows x K entries: enough work to be worth a thread each.
void for_each_block(int64_t nblocks, const std::function<void(int64_t)>& fn) {
  at::parallel_for(0, nblocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) fn(b);
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> pack_map_cpu(const at::Tensor& nbr_in) {
  check_pack_map_args(nbr_in);
  const at::Tensor nbr = nbr_in.contiguous();
  const int64_t m = nbr.size(0), kvol = nbr.size(1), nblocks = num_blocks(m);
  at::Tensor mask = empty_cpu({m, mask_words(kvol)}, nbr.options().dtype(at::kShort));
  at::Tensor starts = at::empty({nblocks + 1}, nbr.options().dtype(at::kLong));
  const int32_t* src = nbr.data_ptr<int32_t>();
  auto* bits = reinterpret_cast<uint16_t*>(mask.data_ptr<int16_t>());
  int64_t* start = starts.data_ptr<int64_t>();
  std::atomic<int64_t> first_bad{INT64_MAX};
  for_each_block(nblocks, [&](int64_t b) {
    int64_t bad = -1;
    const int64_t r0 = b * kRowsPerBlock, r1 = std::min(m, r0 + kRowsPerBlock);
    start[b + 1] = mask_rows(src, kvol, r0, r1, bits, bad);
    for (int64_t cur = first_bad.load(); bad >= 0 && bad < cur && !first_bad.compare_exchange_weak(cur, bad);) {}
  });
  if (first_bad.load() != INT64_MAX) check_pack_map_entries(first_bad.load(), src[first_bad.load()], kvol);
  start[0] = 0;
  for (int64_t b = 0; b < nblocks; ++b) start[b + 1] += start[b];
  at::Tensor values = empty_cpu({start[nblocks]}, nbr.options());
  int32_t* dst = values.data_ptr<int32_t>();
  for_each_block(nblocks, [&](int64_t b) {
    const int64_t r0 = b * kRowsPerBlock, r1 = std::min(m, r0 + kRowsPerBlock);
    pack_rows(src, kvol, r0, r1, bits, dst + start[b]);
  });
  return {mask, values, starts};
}

at::Tensor unpack_map_cpu(const at::Tensor& mask_in, const at::Tensor& values_in, const at::Tensor& starts_in,
                          int64_t kvol) {
  check_unpack_map_args(mask_in, values_in, starts_in, kvol);
  const int64_t m = mask_in.size(0), nblocks = num_blocks(m);
  const at::Tensor mask = mask_in.contiguous(), values = values_in.contiguous(), starts = starts_in.contiguous();
  const auto* bits = reinterpret_cast<const uint16_t*>(mask.data_ptr<int16_t>());
  const int32_t* src = values.data_ptr<int32_t>();
  const int64_t* start = starts.data_ptr<int64_t>();
  const int64_t total = values.size(0);
  int64_t decreasing = nblocks;
  for (int64_t b = nblocks - 1; b >= 0; --b)
    if (start[b] > start[b + 1]) decreasing = b;
  check_unpack_map_starts(start[0], start[nblocks], total, decreasing, nblocks);
  const int64_t words = mask_words(kvol);
  const uint16_t spare = pack_spare_lanes(kvol);
  int64_t spare_row = m;
  for (int64_t r = 0; r < m && spare != 0 && spare_row == m; ++r)
    if (bits[r * words + words - 1] & spare) spare_row = r;
  check_unpack_map_mask(spare_row, nblocks, m, kvol);
  at::Tensor nbr = empty_cpu({m, kvol}, values.options());
  int32_t* dst = nbr.data_ptr<int32_t>();
  std::atomic<int64_t> first_bad{INT64_MAX};
  for_each_block(nblocks, [&](int64_t b) {
    const int64_t r0 = b * kRowsPerBlock, r1 = std::min(m, r0 + kRowsPerBlock), share = start[b + 1] - start[b];
    if (unpack_rows(bits, src + start[b], kvol, r0, r1, share, dst) != share)
      for (int64_t cur = first_bad.load(); b < cur && !first_bad.compare_exchange_weak(cur, b);) {}
  });
  check_unpack_map_mask(m, std::min(first_bad.load(), nblocks), m, kvol);
  return nbr;
}

}  // namespace
}  // namespace mxs

TORCH_LIBRARY_IMPL(mx_sparse, CPU, m) {
  m.impl("pack_map", &mxs::pack_map_cpu);
  m.impl("unpack_map", &mxs::unpack_map_cpu);
}
