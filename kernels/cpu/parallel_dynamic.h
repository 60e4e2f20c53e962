// Independent work items handed out one at a time from a shared counter, for
// loops whose items differ a lot in cost. LiDAR voxels are stored in sorted
// (batch, z, y, x) order and their density varies along it, so a static split
// of output tiles into one contiguous range per thread (what at::parallel_for
// does) leaves one thread idle while the other finishes its denser half.
// Results must not depend on which thread runs an item: every caller writes
// each item's result to its own place, so they stay bitwise deterministic.
#pragma once
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace mxs {

// Calls worker(next) once per thread (once in all, when `parallel` is false);
// next() returns the next unclaimed item, or a value >= n when none is left.
template <typename Worker>
void parallel_dynamic(int64_t n, bool parallel, const Worker& worker) {
  std::atomic<int64_t> counter{0};
  auto next = [&counter] { return counter.fetch_add(1, std::memory_order_relaxed); };
  const int64_t workers = parallel ? std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), n)) : 1;
  // One index per thread; nested inside another parallel region at::parallel_for
  // runs inline once, and that call then takes every item.
  at::parallel_for(0, workers, 1, [&](int64_t, int64_t) { worker(next); });
}

}  // namespace mxs
