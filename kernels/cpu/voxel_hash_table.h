// Concurrent insert-only hash table from int64 voxel key to int32 row, O(N)
// memory. Inserts race through compare-and-swap on the key slot; values are only
// read after the parallel insert phase has joined, so they need no atomics.
// The table counts its keys so a caller that cannot bound them in advance can
// stop at half load (full() ) and retry with a larger table: linear probing
// never runs on a table without empty slots.
#pragma once
#include <cstdint>
#include <vector>
#include "../common/hash_probe.h"

namespace mxs {

class VoxelHashTable {
 public:
  explicit VoxelHashTable(int64_t expected)
      : capacity_(hash_capacity(expected)), keys_(capacity_, kEmptyKey), values_(capacity_, kNoNeighbor) {}

  // Inserts key; returns the slot and whether this call created it, or -1 when
  // every slot is taken by other keys.
  int64_t insert(int64_t key, bool* created) {
    int64_t slot = probe_start(key, capacity_);
    for (int64_t probes = 0; probes < capacity_; ++probes) {
      int64_t expected = kEmptyKey;
      if (__atomic_compare_exchange_n(&keys_[slot], &expected, key, false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE)) {
        __atomic_fetch_add(&size_, 1, __ATOMIC_RELAXED);
        *created = true;
        return slot;
      }
      if (expected == key) {
        *created = false;
        return slot;
      }
      slot = probe_next(slot, capacity_);
    }
    *created = false;
    return -1;
  }

  // Slot holding key, or -1. Only valid after all inserts finished.
  int64_t find_slot(int64_t key) const {
    int64_t slot = probe_start(key, capacity_);
    for (int64_t probes = 0; probes < capacity_; ++probes) {
      const int64_t k = keys_[slot];
      if (k == key) return slot;
      if (k == kEmptyKey) return -1;
      slot = probe_next(slot, capacity_);
    }
    return -1;
  }

  int32_t find(int64_t key) const {
    const int64_t slot = find_slot(key);
    return slot < 0 ? kNoNeighbor : values_[slot];
  }

  // More than half the slots used: further inserts must not be attempted.
  bool full() const { return __atomic_load_n(&size_, __ATOMIC_RELAXED) * 2 > capacity_; }

  void set_value(int64_t slot, int32_t v) { values_[slot] = v; }
  int32_t value(int64_t slot) const { return values_[slot]; }
  int64_t capacity() const { return capacity_; }
  int64_t key_at(int64_t slot) const { return keys_[slot]; }

 private:
  int64_t capacity_;
  int64_t size_ = 0;
  std::vector<int64_t> keys_;
  std::vector<int32_t> values_;
};

}  // namespace mxs
