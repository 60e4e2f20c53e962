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

// Sorts in fixed chunks in parallel, then merges pairs of chunks level by level.
// Callers only rely on the order of distinct keys (or of elements whose ties
// write disjoint results), so the outcome does not depend on threads.
template <typename T, typename Less>
void parallel_sort(std::vector<T>& v, Less key_less) {
  constexpr int64_t kChunks = 8, kMinParallel = 1 << 15;
  const int64_t n = static_cast<int64_t>(v.size());
  if (n < kMinParallel) return std::sort(v.begin(), v.end(), key_less);
  auto bound = [&](int64_t c) { return v.begin() + n * c / kChunks; };
  at::parallel_for(0, kChunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) std::sort(bound(c), bound(c + 1), key_less);
  });
  for (int64_t width = 1; width < kChunks; width *= 2)
    at::parallel_for(0, kChunks / (2 * width), 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const int64_t c = p * 2 * width;
        std::inplace_merge(bound(c), bound(c + width), bound(c + 2 * width), key_less);
      }
    });
}

// First position in sorted[from, n) whose key is >= key.
inline int64_t lower_bound_from(const std::vector<KeyRow>& sorted, int64_t from, int64_t key) {
  return std::lower_bound(sorted.begin() + from, sorted.end(), KeyRow{key, 0}, key_less) - sorted.begin();
}

}  // namespace mxs
