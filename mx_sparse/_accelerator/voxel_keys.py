"""Voxels as int64 keys, with torch operators: packing (batch, *coords) row-major on a grid,
unpacking, and the key offset of every kernel offset. The map builders pack on a grid padded
by the kernel's reach, so that every neighbour of a voxel is its key plus one constant per
offset (the key deltas) and a sorted-key lookup finds it.
"""
import torch

from . import op_args


def pack(idx, shape, shift=None, scale=None):
    """((b*S0 + c0*scale0 + shift0)*S1 + ...) for int64 rows idx [N, 1+nd]."""
    return pack_columns(idx.select(1, 0), [idx.select(1, 1 + d) for d in range(len(shape))], shape, shift, scale)


def pack_columns(batch, coords, shape, shift=None, scale=None):
    """The key of ``pack`` from the batch and one coordinate tensor per axis (int64, broadcast
    together: the pair builders pass each axis's coordinates over its own kernel dimension):
    one kernel per axis (c + key*S as one add), the shifts' part folded into one constant added
    at the end (exact: integers, and every partial sum lies below the key)."""
    key, constant = batch, 0
    for d, s in enumerate(shape):
        c = coords[d]
        if scale is not None and scale[d] != 1:
            c = c * scale[d]
        key = torch.add(c, key, alpha=s)
        constant = constant * s + (shift[d] if shift is not None else 0)
    return key + constant if constant else key


def unpack(keys, shape):
    """int64 [M, 1+nd] (batch, *coords) of keys packed on ``shape``."""
    columns, rest = [], keys
    for s in reversed(shape):
        columns.append(rest.remainder(s))
        rest = rest.div(s, rounding_mode="floor")
    return torch.stack([rest] + columns[::-1], dim=1)


def subm_padding(shape, kernel, dilation):
    """(shift, padded grid) of the submanifold map: k//2 * dilation cells on each side, so that
    every neighbour of an in-grid voxel lies on the padded grid (an outside one on an empty cell)."""
    reach = [(k // 2) * d for k, d in zip(kernel, dilation)]
    return reach, [s + 2 * r for s, r in zip(shape, reach)]


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
    One arange per axis (its terms) summed by broadcasting: a few small kernels, no host copy."""
    ndim, stride = len(kernel), 1
    total = None
    for d in reversed(range(ndim)):
        step = dilation[d] * stride
        first = -(kernel[d] // 2) * step if centered else 0
        term = torch.arange(first, first + kernel[d] * step, step, dtype=torch.int64, device=device)
        term = term.view([kernel[d]] + [1] * (ndim - 1 - d))
        total = term if total is None else term + total
        stride *= padded[d]
    return total.reshape(-1)
