// The kernel window of one voxel as a separable product, for the CPU map builders that walk
// a voxel's window (neighbor_map_cpu.cpp's OutputReach: the outputs an input reaches;
// conv_map_at_cpu.cpp's InputReach: the inputs an output reads). The conv rules are separable
// per axis (conv_rules.h), so each axis lists its valid (kernel position, coordinate) pairs --
// sum(kernel) tests instead of kvol * ndim -- and the window is their row-major product, visited
// by an odometer in ascending k. Both the offset index k and the voxel key on `grid` are sums of
// one share per axis, so the lists hold those shares.
#pragma once
#include <cstdint>
#include <vector>
#include "../common/conv_rules.h"

namespace mxs {

class WindowShares {
 public:
  // grid: the grid the listed coordinates (and the keys fn receives) lie on.
  WindowShares(const ConvGeometry& geo, const Grid& grid) : nd_(geo.ndim) {
    int64_t slots = 0;
    for (int d = 0; d < nd_; ++d) slots += 2 * geo.kernel[d];
    scratch_.resize(slots);
    int64_t* free_slot = scratch_.data();
    int64_t k_stride = 1;
    for (int d = nd_ - 1; d >= 0; --d) {
      k_share_[d] = free_slot;
      key_share_[d] = free_slot + geo.kernel[d];
      free_slot += 2 * geo.kernel[d];
      count_[d] = 0;
      k_stride_[d] = k_stride;
      k_stride *= geo.kernel[d];
      key_stride_[d] = d == nd_ - 1 ? 1 : key_stride_[d + 1] * grid.shape[d + 1];
    }
    batch_stride_ = key_stride_[0] * grid.shape[0];
  }

  // Starts axis d's list again.
  void clear_axis(int d) { count_[d] = 0; }

  // Kernel position kp of axis d lands on coordinate `coord` of the grid.
  void add(int d, int64_t kp, int64_t coord) {
    k_share_[d][count_[d]] = kp * k_stride_[d];
    key_share_[d][count_[d]++] = coord * key_stride_[d];
  }

  // The window's size: the product of the axes' counts.
  int64_t size() const {
    int64_t total = 1;
    for (int d = 0; d < nd_; ++d) total *= count_[d];
    return total;
  }

  // fn(key, k) for every window position, in ascending k; only for a window of size() >= 1.
  template <typename Fn>
  void for_each(int64_t batch, Fn fn) const {
    int64_t at[kMaxSpatialDims] = {};
    while (true) {
      int64_t k = 0, key = batch * batch_stride_;
      for (int d = 0; d < nd_; ++d) {
        k += k_share_[d][at[d]];
        key += key_share_[d][at[d]];
      }
      fn(key, k);
      int d = nd_ - 1;
      while (d >= 0 && ++at[d] == count_[d]) at[d--] = 0;
      if (d < 0) return;
    }
  }

 private:
  const int nd_;
  std::vector<int64_t> scratch_;  // 2 * sum(kernel) slots for the share lists
  int64_t count_[kMaxSpatialDims];
  int64_t k_stride_[kMaxSpatialDims], key_stride_[kMaxSpatialDims], batch_stride_;
  int64_t* k_share_[kMaxSpatialDims];    // kernel position * its stride in k
  int64_t* key_share_[kMaxSpatialDims];  // coordinate * its stride in the key
};

}  // namespace mxs
