// Packing of (batch, *spatial) coordinates into one int64 key, in row-major order
// ((b*D + z)*H + y)*W + x. Sorting keys therefore sorts voxels by (batch, *spatial),
// which is the canonical output order. The caller guarantees (see grid_fits_int64)
// that batch * prod(shape) fits in int64, so no step here can overflow.
#pragma once
#include "mxs_qualifiers.h"

namespace mxs {

struct Grid {
  int ndim;                       // spatial rank, 1..kMaxSpatialDims
  int64_t shape[kMaxSpatialDims];  // spatial extent per axis
};

MXS_INLINE int64_t pack_coord(const Grid& g, int64_t batch, const int64_t* c) {
  int64_t key = batch;
  for (int d = 0; d < g.ndim; ++d) key = key * g.shape[d] + c[d];
  return key;
}

MXS_INLINE bool coord_in_grid(const Grid& g, const int64_t* c) {
  for (int d = 0; d < g.ndim; ++d)
    if (c[d] < 0 || c[d] >= g.shape[d]) return false;
  return true;
}

// True when batch_size * prod(shape) <= INT64_MAX, i.e. every key of the grid is
// representable. Checked by division so the test itself cannot overflow.
MXS_INLINE bool grid_fits_int64(const Grid& g, int64_t batch_size) {
  const int64_t kMax = 0x7fffffffffffffffLL;
  int64_t volume = batch_size < 1 ? 1 : batch_size;
  for (int d = 0; d < g.ndim; ++d) {
    if (g.shape[d] <= 0) return false;
    if (volume > kMax / g.shape[d]) return false;
    volume *= g.shape[d];
  }
  return true;
}

}  // namespace mxs
