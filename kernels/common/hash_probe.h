// Open-addressing hash of int64 voxel keys: the probe sequence only. Storage and
// atomicity belong to each backend (std::atomic on CPU, atomicCAS on CUDA, a
// sorted-key layout on AscendC), which keeps this arithmetic shared.
#pragma once
#include "mxs_qualifiers.h"

namespace mxs {

// splitmix64 finalizer: spreads the row-major keys (which are dense in x) over
// the whole table so linear probing stays short.
MXS_INLINE uint64_t hash_key(int64_t key) {
  uint64_t z = static_cast<uint64_t>(key) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Table capacity: a power of two with load factor <= 1/2.
MXS_INLINE int64_t hash_capacity(int64_t n) {
  int64_t cap = 16;
  while (cap < 2 * n) cap <<= 1;
  return cap;
}

MXS_INLINE int64_t probe_start(int64_t key, int64_t capacity) {
  return static_cast<int64_t>(hash_key(key) & static_cast<uint64_t>(capacity - 1));
}

MXS_INLINE int64_t probe_next(int64_t slot, int64_t capacity) {
  return (slot + 1) & (capacity - 1);
}

}  // namespace mxs
