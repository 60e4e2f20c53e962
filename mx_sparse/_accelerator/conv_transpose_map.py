"""The transposed (generative) conv map of the accelerator backends, the contract of the CPU
builder (kernels/cpu/neighbor_map_cpu.cpp, build_conv_transpose_map): input i reaches output
o = i*stride - pads_begin + kp*dilation, every o inside the output grid; outputs in canonical
(batch, *spatial) order; the same checks, ValueErrors and maps bit for bit.

Built like the strided map (neighbor_map.py): output keys of every (offset, input) pair ->
sort -> ``_unique_sorted_keys`` -> a ``_sorted_key_lookup`` of the outputs' query keys in the
sorted input keys -> un-permutation.

The pair keys are computed here with torch operators, not by ``_conv_out_keys``: that primitive
(and its AscendC kernel, ConvOutKeys) solves o = (i + p - kp*d) / s for inputs inside its grid
with a symmetric p >= 0. The transposed rule is that one mirrored (stride 1, input coordinate
i*stride, kernel reversed, p = (k-1)*d - pads_begin), but p is negative whenever pads_begin
exceeds the kernel's reach, i*stride leaves int32 and the grid it would need, and inputs reaching
outputs would lie outside that grid: the primitive's contract does not cover it. The torch
version is exact everywhere, runs on every device, and reads nothing on the host.

The lookup needs no division: inputs are keyed at i*stride (+ a shift keeping every coordinate
>= 0) on a grid holding both those and every query o + pads_begin - kp*dilation; a query matches
an input key exactly when o + pads_begin - kp*dilation = i*stride for an active input i. Offset k's
key delta is the (uncentred) delta of the mirrored offset K-1-k, added to the key of
o + pads_begin - (kernel-1)*dilation.
"""
import torch

from . import built_maps, host_sync, index_checks, op_args, voxel_keys
from .neighbor_map import _rows

INT64_MAX = op_args.INT64_MAX
primitives = torch.ops.mx_sparse


def pair_keys(indices, out_shape, kernel, stride, pads_begin, dilation):
    """int64 [K*N], k-major: the output-grid key of the voxel input n reaches through offset k,
    INT64_MAX where that output lies outside the grid."""
    ndim = len(out_shape)
    idx = indices.long()
    inside, coords = None, []
    for d in range(ndim):
        along = [1] * ndim
        along[d] = kernel[d]
        reach = torch.arange(0, kernel[d] * dilation[d], dilation[d], device=indices.device).view(along + [1])
        o = idx.select(1, 1 + d) * stride[d] - pads_begin[d] + reach
        ok = (o >= 0) & (o < out_shape[d])
        inside = ok if inside is None else inside & ok
        coords.append(o)
    key = voxel_keys.pack_columns(idx.select(1, 0), coords, out_shape)
    return torch.where(inside, key, INT64_MAX).reshape(-1)


def build_conv_transpose_map(indices, spatial_shape, batch_size, kernel_size, stride, pads_begin, pads_end,
                             dilation, output_padding):
    shape = op_args.grid(spatial_shape, batch_size)
    ndim = len(shape)
    op_args.indices(indices, ndim)
    # the geometry checks and the output grid of kernels/contract/op_args.h (the CPU builder's)
    out_shape = op_args.conv_transpose_output_shape(shape, kernel_size, stride, pads_begin, pads_end, dilation,
                                                    output_padding, batch_size)
    kernel, stride, pads_begin, dilation = list(kernel_size), list(stride), list(pads_begin), list(dilation)
    kvol = op_args.kernel_volume(kernel)
    n, dev = indices.shape[0], indices.device
    if n == 0:
        return (torch.empty((0, 1 + ndim), dtype=torch.int32, device=dev),
                torch.empty((0, kvol), dtype=torch.int32, device=dev), out_shape)
    # per axis, inputs keyed at i*s + shift and queries at o + pb - kp*d + shift, all in [0, padded)
    shift, padded, base = voxel_keys.conv_transpose_padding(shape, out_shape, kernel, stride, pads_begin, dilation)
    bound = voxel_keys.key_bound(batch_size, padded)
    idx = indices.long()
    in_keys, order = torch.sort(voxel_keys.pack(idx, padded, shift=shift, scale=stride), stable=True)
    flags = index_checks.flags(idx, shape, batch_size, in_keys, order)
    out_keys, count = primitives._unique_sorted_keys(torch.sort(pair_keys(indices, out_shape, kernel, stride,
                                                                          pads_begin, dilation)).values)
    bad_row, dup_row, m = host_sync.read(torch.cat([flags, count.long()]),
                                         "build_conv_transpose_map: value checks and output count")
    index_checks.raise_bad_rows(indices, shape, batch_size, bad_row, dup_row)
    op_args.row_count(m)
    out_idx = voxel_keys.unpack(out_keys.narrow(0, 0, m), out_shape)
    query = voxel_keys.pack(out_idx, padded, shift=base)
    # offset k is the mirrored offset K-1-k: the lookup takes the deltas in their own (ascending
    # within each run of the innermost window) order, as the AscendC SubmMap kernel requires, and
    # its columns are mirrored afterwards
    deltas = voxel_keys.deltas(kernel, dilation, padded, False, dev)
    found = primitives._sorted_key_lookup(query, in_keys, deltas, kernel[-1], bound).flip(1)
    out_idx, nbr = out_idx.int(), _rows(found, order)
    built_maps.vouch_indices(indices, shape, batch_size)
    built_maps.vouch_indices(out_idx, out_shape, batch_size)    # distinct and in the output grid
    built_maps.vouch_map(nbr, n)
    return out_idx, nbr, out_shape
