// Runs an op on the calling thread when its input is small. Inside the scope of a
// SerialWhenSmall made for fewer than kMinParallelRows rows, this thread's OpenMP
// team size is 1, so every at::parallel_for (and parallel_dynamic, built on it) and
// every torch op called there runs inline; the previous size is restored on leaving
// (the setting belongs to the calling thread only). Used by the neighbor-map ops
// and the fused BatchNorm+ReLU. The map ops on a 1,000-voxel cloud take well under
// a millisecond on one thread; each OpenMP region they opened cost more than that,
// and on a loaded machine, where the second thread waits to be scheduled,
// milliseconds: 2 threads measured 55-60 ms for the eight maps of a 1,000-voxel
// VoxelBackBone8x forward where 1 thread took 0.4-0.8 ms (2 cores, load ~20), and
// 4 ms per BatchNorm+ReLU forward. Their results do not depend on the thread
// count, so this changes no bits.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <cstdint>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace mxs {

// Below this many rows (voxels, map rows) an op stays on one thread: twice the
// block of the parallel sort (sorted_voxels.h), about a millisecond of map work.
constexpr int64_t kMinParallelRows = 16384;

class SerialWhenSmall {
 public:
  // t: the op's main input, whose leading size is its row count (a 0-dim tensor
  // counts as small; the op's own checks report it)
  explicit SerialWhenSmall(const at::Tensor& t) {
#ifdef _OPENMP
    if (t.dim() > 0 && t.size(0) >= kMinParallelRows) return;
    at::internal::lazy_init_num_threads();   // torch's first-use set-up would override the 1 below
    previous_ = omp_get_max_threads();
    if (previous_ > 1) omp_set_num_threads(1);
#else
    (void)t;
#endif
  }
  ~SerialWhenSmall() {
#ifdef _OPENMP
    if (previous_ > 1) omp_set_num_threads(previous_);
#endif
  }
  SerialWhenSmall(const SerialWhenSmall&) = delete;
  SerialWhenSmall& operator=(const SerialWhenSmall&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace mxs
