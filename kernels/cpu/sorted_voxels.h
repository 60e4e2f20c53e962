// Input voxels as (key, row) sorted by key. Neighbor lookups then become merge
// sweeps: for a fixed kernel offset every query key is its voxel's key plus one
// constant, so queries are sorted too and one forward-only pointer finds all
// matches in O(N) with sequential memory access (no hashing, no cache misses).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace mxs {

struct KeyRow {
  int64_t key;
  int32_t row;
};

inline bool key_less(const KeyRow& a, const KeyRow& b) { return a.key < b.key; }

// Stable LSD radix sort by a non-negative int64 key, 11 bits per pass, as many
// passes as the largest key needs (voxel keys of LiDAR grids need 2 or 3). Linear
// time, and stable, so the result is fully determined by the input order.
template <typename T, typename KeyOf>
void radix_sort(std::vector<T>& v, KeyOf key_of) {
  constexpr int kBits = 11;
  constexpr int64_t kBuckets = int64_t(1) << kBits;
  int64_t max_key = 0;
  for (const T& x : v) max_key = std::max(max_key, key_of(x));
  std::vector<T> tmp(v.size());
  std::vector<int64_t> count(kBuckets);
  for (int shift = 0; shift < 63 && (max_key >> shift) > 0; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
    for (const T& x : v) ++count[(key_of(x) >> shift) & (kBuckets - 1)];
    int64_t sum = 0;
    for (int64_t& c : count) {
      const int64_t here = c;
      c = sum;
      sum += here;
    }
    for (const T& x : v) tmp[count[(key_of(x) >> shift) & (kBuckets - 1)]++] = x;
    v.swap(tmp);
  }
}

// First position of sorted whose key is >= key.
inline int64_t lower_bound_key(const std::vector<KeyRow>& sorted, int64_t key) {
  return std::lower_bound(sorted.begin(), sorted.end(), KeyRow{key, 0}, key_less) - sorted.begin();
}

}  // namespace mxs
