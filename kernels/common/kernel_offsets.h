// Enumeration of kernel offsets. Offset index k runs over the kernel window in
// row-major order of kernel_size (last axis fastest), the same order as the
// flattened [*kernel, Cin, Cout] weight layout, so W[k] is the slice for offset k.
#pragma once
#include "mxs_qualifiers.h"

namespace mxs {

struct ConvGeometry {
  int ndim;
  int64_t kernel[kMaxSpatialDims];
  int64_t stride[kMaxSpatialDims];
  int64_t padding[kMaxSpatialDims];   // pads_begin: zero padding below each axis
  int64_t dilation[kMaxSpatialDims];
  int64_t pads_end[kMaxSpatialDims];  // zero padding above each axis (== padding unless asymmetric)
};

MXS_INLINE int64_t kernel_volume(const ConvGeometry& g) {
  int64_t v = 1;
  for (int d = 0; d < g.ndim; ++d) v *= g.kernel[d];
  return v;
}

// Per-axis kernel position of offset index k.
MXS_INLINE void kernel_position(const ConvGeometry& g, int64_t k, int64_t* pos) {
  for (int d = g.ndim - 1; d >= 0; --d) {
    pos[d] = k % g.kernel[d];
    k /= g.kernel[d];
  }
}

}  // namespace mxs
