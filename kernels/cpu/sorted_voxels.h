// Input voxels as (key, row) sorted by key. Neighbor lookups then become merge
// sweeps: for a fixed kernel offset every query key is its voxel's key plus one
// constant, so queries are sorted too and one forward-only pointer finds all
// matches in O(N) with sequential memory access (no hashing, no cache misses).
#pragma once
#include <ATen/Parallel.h>
#include <algorithm>
#include <cstdint>
#include <vector>

namespace mxs {

struct KeyRow {
  int64_t key;
  int32_t row;
};

inline bool key_less(const KeyRow& a, const KeyRow& b) { return a.key < b.key; }

// The parallel passes below split their input into blocks of this size. The
// split depends only on the input length, never on the thread count, so every
// result is the same for any number of threads.
constexpr int64_t kSortBlock = 8192;

inline int64_t sort_blocks(int64_t n) { return (n + kSortBlock - 1) / kSortBlock; }

// Bits in which some key differs from the first one. A radix pass over a digit
// outside this mask would leave the order unchanged, so it is skipped: voxel
// keys occupy few bits, and their high bits (batch, leading axes) often agree.
template <typename T, typename KeyOf>
uint64_t varying_key_bits(const std::vector<T>& v, KeyOf key_of) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (n == 0) return 0;
  const uint64_t first = static_cast<uint64_t>(key_of(v[0]));
  std::vector<uint64_t> per_block(sort_blocks(n), 0);
  at::parallel_for(0, sort_blocks(n), 1, [&](int64_t bb, int64_t be) {
    for (int64_t blk = bb; blk < be; ++blk) {
      uint64_t bits = 0;
      for (int64_t i = blk * kSortBlock; i < std::min(n, (blk + 1) * kSortBlock); ++i)
        bits |= static_cast<uint64_t>(key_of(v[i])) ^ first;
      per_block[blk] = bits;
    }
  });
  uint64_t bits = 0;
  for (uint64_t b : per_block) bits |= b;
  return bits;
}

// One stable counting-sort pass of src into dst by the `bits`-wide digit at
// `shift`. Each block counts its digits; the write positions are laid out
// digit-major, then block-major, so equal digits keep their input order
// (stability); then each block scatters its own elements to its own positions.
template <typename T, typename KeyOf>
void radix_pass(const std::vector<T>& src, std::vector<T>& dst, int shift, int bits, KeyOf key_of) {
  const int64_t buckets = int64_t(1) << bits;
  const uint64_t mask = buckets - 1;
  const int64_t n = static_cast<int64_t>(src.size()), blocks = sort_blocks(n);
  auto digit = [&](const T& x) { return (static_cast<uint64_t>(key_of(x)) >> shift) & mask; };
  std::vector<int64_t> pos(blocks * buckets, 0);  // [block][digit]
  at::parallel_for(0, blocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t blk = bb; blk < be; ++blk) {
      int64_t* count = pos.data() + blk * buckets;
      for (int64_t i = blk * kSortBlock; i < std::min(n, (blk + 1) * kSortBlock); ++i) ++count[digit(src[i])];
    }
  });
  // Digit d of block blk starts after every smaller digit (all blocks) and after
  // digit d of the earlier blocks. Computed block-major (digit totals, their
  // prefix, then a running start per digit): a digit-major walk would touch a
  // new cache line for every (digit, block).
  std::vector<int64_t> start(buckets, 0);
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t d = 0; d < buckets; ++d) start[d] += pos[blk * buckets + d];
  int64_t sum = 0;
  for (int64_t d = 0; d < buckets; ++d) {
    const int64_t total = start[d];
    start[d] = sum;
    sum += total;
  }
  for (int64_t blk = 0; blk < blocks; ++blk)
    for (int64_t d = 0; d < buckets; ++d) {
      const int64_t here = pos[blk * buckets + d];
      pos[blk * buckets + d] = start[d];
      start[d] += here;
    }
  at::parallel_for(0, blocks, 1, [&](int64_t bb, int64_t be) {
    for (int64_t blk = bb; blk < be; ++blk) {
      int64_t* next = pos.data() + blk * buckets;
      for (int64_t i = blk * kSortBlock; i < std::min(n, (blk + 1) * kSortBlock); ++i) dst[next[digit(src[i])]++] = src[i];
    }
  });
}

// Stable LSD radix sort by a non-negative int64 key. Only the span of bits in
// which keys differ is sorted (voxel keys occupy few bits, and their high bits
// -- batch, leading axes -- often agree), in as few passes of at most 12 bits
// as cover it, with the digit width spread evenly over the passes: a 24-bit span
// takes 2 passes. Linear time, and stable, so the result is fully determined
// by the input order.
template <typename T, typename KeyOf>
void radix_sort(std::vector<T>& v, KeyOf key_of) {
  constexpr int kMaxBits = 12;  // 4096 buckets: the counts of a block stay in L1
  const uint64_t varying = varying_key_bits(v, key_of);
  if (varying == 0) return;  // all keys equal (or fewer than two)
  const int low = __builtin_ctzll(varying), span = 64 - __builtin_clzll(varying) - low;
  const int passes = (span + kMaxBits - 1) / kMaxBits, bits = (span + passes - 1) / passes;
  std::vector<T> tmp(v.size());
  for (int shift = low; shift < low + span; shift += bits) {
    radix_pass(v, tmp, shift, bits, key_of);
    v.swap(tmp);
  }
}

// First position of sorted whose key is >= key.
inline int64_t lower_bound_key(const std::vector<KeyRow>& sorted, int64_t key) {
  return std::lower_bound(sorted.begin(), sorted.end(), KeyRow{key, 0}, key_less) - sorted.begin();
}

}  // namespace mxs
