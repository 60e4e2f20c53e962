// Independent work items handed out at run time, for loops whose items differ a
// lot in cost. LiDAR voxels are stored in sorted (batch, z, y, x) order and their
// density varies along it, so a fixed split of output tiles into one contiguous
// range per thread (what at::parallel_for does) leaves one thread idle while the
// other finishes its denser half.
// Each thread still starts on its own contiguous range (the split at::parallel_for
// would make) and takes it from the front; when it runs out, it takes items from
// the back of the others' ranges. Consecutive ops on the same rows then mostly run
// them on the same core, whose L2 may still hold them: whole training steps
// measured about 2 % faster than with one shared counter (in-process A/B).
// Results must not depend on which thread runs an item: every caller writes
// each item's result to its own place, so they stay bitwise deterministic.
#pragma once
#include <ATen/Parallel.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

namespace mxs {

// Per thread, the items [begin, end) not yet taken, as one 64-bit word
// (begin << 32 | end) so that the owner (front) and a thief (back) claim with
// one compare-exchange each.
class ItemRanges {
 public:
  ItemRanges(int64_t n, int64_t workers) : n_(n), ranges_(workers) {
    TORCH_CHECK(n < (int64_t(1) << 32), "parallel_dynamic: ", n, " items is more than 2^32 - 1");
    for (int64_t t = 0; t < workers; ++t) ranges_[t].store(pack(n * t / workers, n * (t + 1) / workers));
  }
  // The next item for thread `self`, or n when every range is empty.
  int64_t take(int64_t self) {
    const int64_t workers = static_cast<int64_t>(ranges_.size());
    for (int64_t i = 0; i < workers; ++i) {
      const bool own = i == 0;
      std::atomic<uint64_t>& range = ranges_[(self + i) % workers];
      uint64_t cur = range.load(std::memory_order_relaxed);
      for (uint64_t begin = cur >> 32, end = cur & 0xFFFFFFFFu; begin < end;
           begin = cur >> 32, end = cur & 0xFFFFFFFFu) {
        const uint64_t claimed = own ? pack(begin + 1, end) : pack(begin, end - 1);
        if (range.compare_exchange_weak(cur, claimed, std::memory_order_relaxed))
          return static_cast<int64_t>(own ? begin : end - 1);
      }
    }
    return n_;
  }

 private:
  static uint64_t pack(uint64_t begin, uint64_t end) { return begin << 32 | end; }
  int64_t n_;
  std::vector<std::atomic<uint64_t>> ranges_;
};

// Calls worker(next) once per thread (once in all, when `parallel` is false);
// next() returns the next item for this thread, or a value >= n when none is left.
template <typename Worker>
void parallel_dynamic(int64_t n, bool parallel, const Worker& worker) {
  const int64_t workers = parallel ? std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), n)) : 1;
  ItemRanges ranges(n, workers);
  // One index per thread; nested inside another parallel region at::parallel_for
  // runs inline once, and that call then takes every item (its range first,
  // then the others').
  at::parallel_for(0, workers, 1, [&](int64_t self, int64_t) { worker([&ranges, self] { return ranges.take(self); }); });
}

}  // namespace mxs
