"""The map of a convolution evaluated at GIVEN output voxels on the accelerator backends, the
contract of the CPU builder (kernels/cpu/conv_map_at_cpu.cpp, build_conv_map_at): the same
checks with the same ValueErrors, and the same map bit for bit (rows in out_indices' order).

No output is discovered, so there is no output-key step: the input keys are sorted once on a
grid padded so that every window position of every output of the output grid lies on it (an
input position outside the input grid then lands on an empty cell), the given outputs are
sorted by their key on the output grid (that sort also exposes duplicates, and the lookup takes
ascending queries, as the AscendC SubmMap kernel requires), one ``_sorted_key_lookup`` finds
every (output, offset) input, and the rows go back to the caller's order:

- strided: output o reads input o*s - pb + kp*d: inputs keyed at i + pb, queries at o*s, the
  (uncentred) key deltas of kp*d -- build_conv_map's lookup (voxel_keys.conv_padding);
- transposed: output o reads the input i with i*s = o + pb - kp*d: inputs keyed at i*s + shift,
  queries at o + pb - (k-1)*d + shift, the mirrored offsets' deltas -- build_conv_transpose_map's
  lookup (voxel_keys.conv_transpose_padding), so no division.

One host read (host_sync.py): the value checks of both index tensors, before any lookup.
"""
import torch

from . import host_sync, index_checks, op_args, voxel_keys
from .neighbor_map import NO_NEIGHBOR, _rows

primitives = torch.ops.mx_sparse


def _input_keys(idx, shape, out_shape, kernel, stride, pads_begin, dilation, transposed):
    """(input keys on the padded grid, the padded grid, the queries' per-axis scale and shift)."""
    if transposed:
        shift, padded, base = voxel_keys.conv_transpose_padding(shape, out_shape, kernel, stride, pads_begin, dilation)
        return voxel_keys.pack(idx, padded, shift=shift, scale=stride), padded, None, base
    shift, padded = voxel_keys.conv_padding(shape, out_shape, kernel, stride, pads_begin, dilation)
    return voxel_keys.pack(idx, padded, shift=shift), padded, stride, None


def build_conv_map_at(indices, out_indices, spatial_shape, batch_size, kernel_size, stride, pads_begin, dilation,
                      transposed=False, out_spatial_shape=None):
    shape = op_args.grid(spatial_shape, batch_size)
    ndim = len(shape)
    op_args.indices(indices, ndim)
    op_args.indices(out_indices, ndim, "out_indices")
    # the geometry checks and the output grid of kernels/contract/op_args.h (the CPU builder's)
    out_shape = op_args.conv_map_at_output_shape(shape, kernel_size, stride, pads_begin, dilation, batch_size,
                                                 transposed, out_spatial_shape)
    op_args.same_device("indices", indices, out_indices=out_indices)
    kernel, stride, pads_begin, dilation = list(kernel_size), list(stride), list(pads_begin), list(dilation)
    kvol = op_args.kernel_volume(kernel)
    n, m, dev = indices.shape[0], out_indices.shape[0], indices.device
    lookup = n > 0 and m > 0
    idx, out_idx = indices.long(), out_indices.long()
    if lookup:
        in_keys, padded, scale, base = _input_keys(idx, shape, out_shape, kernel, stride, pads_begin, dilation,
                                                   transposed)
        bound = voxel_keys.key_bound(batch_size, padded)
    else:   # nothing to look up: the value checks alone, on the grid's own keys
        in_keys = voxel_keys.pack(idx, shape)
    in_keys, order = torch.sort(in_keys, stable=True)
    out_keys, out_order = torch.sort(voxel_keys.pack(out_idx, out_shape), stable=True)
    flags = torch.cat([index_checks.flags(idx, shape, batch_size, in_keys, order),
                       index_checks.flags(out_idx, out_shape, batch_size, out_keys, out_order)])
    bad_row, dup_row, out_bad_row, out_dup_row = host_sync.read(flags, "build_conv_map_at: value checks")
    index_checks.raise_bad_rows(indices, shape, batch_size, bad_row, dup_row)
    index_checks.raise_bad_rows(out_indices, out_shape, batch_size, out_bad_row, out_dup_row, "out_indices",
                                "the derived output grid" if out_spatial_shape is None else "out_spatial_shape")
    if not lookup:
        return torch.full((m, kvol), NO_NEIGHBOR, dtype=torch.int32, device=dev)
    query = voxel_keys.pack(out_idx.index_select(0, out_order), padded, shift=base, scale=scale)
    # both rules take the deltas ascending within each run of the innermost window (SubmMap's
    # order); the transposed rule's are the mirrored offsets', so its columns are reversed after
    deltas = voxel_keys.deltas(kernel, dilation, padded, False, dev)
    found = primitives._sorted_key_lookup(query, in_keys, deltas, kernel[-1], bound)
    if transposed:
        found = found.flip(1)
    nbr = torch.empty((m, kvol), dtype=torch.int32, device=dev)
    return nbr.index_copy_(0, out_order, _rows(found, order))    # sorted output s is row out_order[s]
