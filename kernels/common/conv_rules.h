// Output-coordinate rules of the three convolutions (cross-correlation, as
// torch.nn.functional.conv3d). Shared by every backend so the map builders agree
// bit for bit.
#pragma once
#include "coord_pack.h"
#include "kernel_offsets.h"

namespace mxs {

// Spatial output extent of a strided conv padded by pb below and pe above:
// floor((in + pb + pe - d(k-1) - 1)/s) + 1. May be <= 0; callers reject that as
// an empty output shape.
MXS_INLINE int64_t conv_out_extent(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d) {
  const int64_t span = in + pb + pe - d * (k - 1) - 1;
  // floor division that is also right for a negative span
  const int64_t q = span >= 0 ? span / s : -((-span + s - 1) / s);
  return q + 1;
}

// Symmetric padding p on both sides: floor((in + 2p - d(k-1) - 1)/s) + 1.
MXS_INLINE int64_t conv_out_extent(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return conv_out_extent(in, k, s, p, p, d);
}

// Spatial output extent of a transposed conv (ONNX ConvTranspose, oneDNN, torch
// conv_transpose): (in - 1)*s - pb - pe + d(k-1) + 1 + output_padding. With every
// value <= 2^31 - 1 no term overflows int64. May be <= 0 (callers reject it).
MXS_INLINE int64_t conv_transpose_out_extent(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d,
                                             int64_t output_padding) {
  return (in - 1) * s - pb - pe + d * (k - 1) + 1 + output_padding;
}

// Transposed conv: input i feeds output o = i*s - pb + kp*d through kernel position
// kp (every such o inside [0, O)); -1 when outside.
MXS_INLINE int64_t conv_transpose_axis_output(const ConvGeometry& g, const Grid& out, int d, int64_t c, int64_t kp) {
  const int64_t o = c * g.stride[d] - g.padding[d] + kp * g.dilation[d];
  return o >= 0 && o < out.shape[d] ? o : -1;
}

// Strided conv: input i feeds output o through kernel position kp iff i = o*s - p + kp*d
// per axis (the map builders evaluate this per axis: o = (i + pb - kp*d) / s when that is an
// exact, in-range quotient; pe only bounds the output extent).

// The lattice positions of an axis (_conv_out_keys' slots): the kernel positions kp through which
// input coordinate i can reach an output are those with i + p - kp*d a multiple of s, i.e.
// kp*d = i + p (mod s). They form one residue class modulo step = s / gcd(s, d), so an input
// coordinate has at most ceil(k / step) of them (k with stride 1, 2 of 3 for k3 s2, 1 of 2 for
// k2 s2): the slot count per axis, whatever i is. Slot j of coordinate i is its j-th lattice
// position, ascending: kp = first + j*step, first = the least one (in [0, step)).
MXS_INLINE int64_t gcd_positive(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

MXS_INLINE int64_t conv_lattice_step(int64_t s, int64_t d) { return s / gcd_positive(s, d); }

MXS_INLINE int64_t conv_out_slots(int64_t k, int64_t s, int64_t d) {
  const int64_t step = conv_lattice_step(s, d);
  return (k + step - 1) / step;
}

// The same two rules solved for the input, per axis (the map of given output voxels,
// build_conv_map_at): the input coordinate that output coordinate o reads through kernel
// position kp, or -1 when it lies outside [0, in) (or, transposed, off the stride's lattice).
// Strided: i = o*s - pb + kp*d.
MXS_INLINE int64_t conv_axis_input(const ConvGeometry& g, const Grid& in, int d, int64_t o, int64_t kp) {
  const int64_t i = o * g.stride[d] - g.padding[d] + kp * g.dilation[d];
  return i >= 0 && i < in.shape[d] ? i : -1;
}

// Transposed: i*s = o + pb - kp*d, an exact quotient.
MXS_INLINE int64_t conv_transpose_axis_input(const ConvGeometry& g, const Grid& in, int d, int64_t o, int64_t kp) {
  const int64_t num = o + g.padding[d] - kp * g.dilation[d];
  if (num < 0 || num % g.stride[d] != 0) return -1;
  const int64_t i = num / g.stride[d];
  return i < in.shape[d] ? i : -1;
}

// Submanifold conv: output o reads input o + (kp - k/2)*d per axis (kernel centred
// at k//2, so an even kernel reaches one more step backwards than forwards).
MXS_INLINE int64_t subm_offset(const ConvGeometry& g, int d, int64_t kp) {
  return (kp - g.kernel[d] / 2) * g.dilation[d];
}

MXS_INLINE bool subm_input_of(const ConvGeometry& g, const Grid& grid,
                              const int64_t* out_c, const int64_t* kp, int64_t* in_c) {
  for (int d = 0; d < g.ndim; ++d) {
    in_c[d] = out_c[d] + subm_offset(g, d, kp[d]);
    if (in_c[d] < 0 || in_c[d] >= grid.shape[d]) return false;
  }
  return true;
}

// Key difference of kernel offset k on a row-major grid: keys are row-major (coord_pack.h), so
// moving every voxel by one spatial offset shifts every key by one constant, the packed offset.
// centered: the submanifold offset (kp - k/2)*d; otherwise kp*d, the offset of an input from
// o*s - p in a strided conv.
MXS_INLINE int64_t kernel_offset_key_delta(const ConvGeometry& g, const Grid& grid, int64_t k, bool centered) {
  int64_t kp[kMaxSpatialDims], off[kMaxSpatialDims];
  kernel_position(g, k, kp);
  for (int d = 0; d < g.ndim; ++d) off[d] = centered ? subm_offset(g, d, kp[d]) : kp[d] * g.dilation[d];
  return pack_coord(grid, 0, off);
}

// True when every kernel offset of a submanifold conv stays inside the grid.
MXS_INLINE bool subm_interior(const ConvGeometry& g, const Grid& grid, const int64_t* c) {
  for (int d = 0; d < g.ndim; ++d)
    if (c[d] + subm_offset(g, d, 0) < 0 || c[d] + subm_offset(g, d, g.kernel[d] - 1) >= grid.shape[d]) return false;
  return true;
}

}  // namespace mxs
