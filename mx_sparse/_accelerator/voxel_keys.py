"""Voxels as int64 keys: packing (batch, *coords) row-major on a grid, unpacking, and the key
offset of every kernel offset. The map builders pack on a grid padded by the kernel's reach, so
that every neighbour of a voxel is its key plus one constant per offset (the key deltas) and a
sorted-key lookup finds it.

``pack``, ``unpack`` and ``deltas`` are the C++ builders' own (kernels/orchestration/
neighbor_map_orchestration.cpp, the constants kept per device there): one implementation of the
key arithmetic for every builder; ``pack_columns`` (the pair builders' broadcast form) is the
same polynomial on separate columns.
"""
import torch

from .._C import map_orchestration as _orchestration
from . import op_args


def _expansion(shape, shift, scale):
    """The key polynomial ((b*S0 + c0*scale0 + shift0)*S1 + ...) written out as
    b*W_b + sum_d c_d*(scale_d*W_d) + sum_d shift_d*W_d (W_d: the product of the sizes after axis
    d, W_b of all): (W_b, [scale_d*W_d], [shift_d*W_d]). Integer arithmetic, exact modulo 2^64, so
    every order of summing it gives the same int64 keys bit for bit (wrap-around included, for rows
    outside the grid that a later check rejects); ``pack``'s C++ expands it the same way."""
    nd = len(shape)
    scale = [1] * nd if scale is None else list(scale)
    shift = [0] * nd if shift is None else list(shift)
    weights, shifts, after = [0] * nd, [0] * nd, 1
    for d in reversed(range(nd)):
        weights[d], shifts[d] = after * scale[d], after * shift[d]
        after *= shape[d]
    return after, weights, shifts


def pack(idx, shape, shift=None, scale=None):
    """The keys of rows idx [N, 1+nd] (int32 or int64): one addcmul with two kept vectors and one
    row sum (two kernels)."""
    return _orchestration.pack(idx, list(shape), [] if shift is None else list(shift),
                               [] if scale is None else list(scale))


def pack_columns(batch, coords, shape, shift=None, scale=None):
    """The keys of ``pack`` from the batch and one coordinate tensor per axis (int64, broadcast
    together: the pair builders pass each axis's coordinates over its own kernel dimension, which
    ``pack``'s one [N, 1+nd] operand cannot take): one kernel per axis, the shifts' part added once."""
    batch_weight, weights, shifts = _expansion(shape, shift, scale)
    key = batch * batch_weight
    for c, w in zip(coords, weights):
        key = torch.add(key, c, alpha=w)
    offset = sum(shifts)
    return key + offset if offset else key


def unpack(keys, shape):
    """int64 [M, 1+nd] (batch, *coords) of keys packed on ``shape`` (keys >= 0): column d is
    (key // W_d) % S_d, the batch key // W_b; one floor division and one remainder by kept
    vectors (two kernels)."""
    return _orchestration.unpack(keys, list(shape))


def conv_padding(shape, out_shape, kernel, stride, padding, dilation):
    """(shift, padded grid) of the strided map: input coordinate i + padding lies in [0, padded),
    padded above to the farthest position an output window reaches, o*s + kp*d."""
    above = [max(0, (o - 1) * st - p + (k - 1) * dl - (s - 1))
             for o, st, p, k, dl, s in zip(out_shape, stride, padding, kernel, dilation, shape)]
    return list(padding), [s + p + a for s, p, a in zip(shape, padding, above)]


def conv_transpose_padding(shape, out_shape, kernel, stride, pads_begin, dilation):
    """(shift, padded grid, query shift) of a transposed-conv lookup (no division): input i keyed
    at i*stride + shift, output o queried at o + query_shift = o + pads_begin - (kernel-1)*dilation
    + shift, so that query + kp*dilation (the mirrored offset) equals an input key exactly when
    o = i*stride - pads_begin + (kernel-1-kp)*dilation; shift keeps every query >= 0, and the grid
    holds every input key and every query + delta."""
    shift = [max(0, (k - 1) * dl - pb) for k, dl, pb in zip(kernel, dilation, pads_begin)]
    padded = [max((s - 1) * st, o - 1 + pb) + sh + 1
              for s, st, o, pb, sh in zip(shape, stride, out_shape, pads_begin, shift)]
    base = [pb + sh - (k - 1) * dl for pb, sh, k, dl in zip(pads_begin, shift, kernel, dilation)]
    return shift, padded, base


def key_bound(batch_size, padded):
    """batch_size x prod(padded): every key on the padded grid lies below it. The accelerator
    builders need it within int64 (the CPU builders, which do not pad, need only the grid)."""
    bound = batch_size
    for p in padded:
        bound *= p
    if bound > op_args.INT64_MAX:
        raise ValueError(f"spatial_shape: batch_size ({batch_size}) x the grid padded by the kernel's reach "
                         f"{list(padded)} exceeds the int64 voxel-key range of the accelerator map builders; "
                         f"use a smaller grid or batch")
    return bound


def deltas(kernel, dilation, padded, centered, device):
    """int64 [K]: the key offset of kernel offset k (row-major, last axis fastest) on the padded
    grid: sum_d (kp_d - centre_d) * dilation_d * stride_d, centre = k//2 for the submanifold map.
    Made once per (kernel, dilation, grid, device) by a few small kernels (no host copy), then kept."""
    return _orchestration.key_deltas(list(kernel), list(dilation), list(padded), bool(centered), torch.device(device))
