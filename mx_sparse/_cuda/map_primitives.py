"""The CUDA backend's map primitives (host side): _conv_out_keys and _sorted_key_lookup as one
Triton launch each, _unique_sorted_keys as two around one torch cumsum (of the first-of-run flags)
(map_kernels.py), instead of the torch-operator fallbacks (fallback.py), whose contracts
(kernels/schema/schema.cpp) and results they keep bit for bit. Nothing is read on the host.

The lookup's launch also writes each result row's neighbour bitmask, the row key of a map plan
(map_plan.py), kept with its result (built_maps.keep_lookup_row_key): a builder that makes a map
from it keeps the keys with the map, and the map's plans skip their row_mask launch.
"""
import torch

from .._core import contract as op_args
from .._accelerator import built_maps, fallback
from . import launch, map_plan

# Elements per program (input rows of one offset; lookup entries: whole rows, offsets at most
# MAX_LOOKUP_OFFSETS at a time).
BLOCK = 1024
MAX_LOOKUP_OFFSETS = 128
# conv_out_keys_kernel's axes (more: the fallback).
MAX_AXES = 4
# CUDA's limit on the second grid dimension (conv_out_keys_kernel's blocks of rows).
MAX_GRID_Y = 65535
# The kernels take their sizes as int32 scalars; larger problems run the fallbacks.
INT32_LIMIT = 2**31 - 1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _per_axis(values, fill):
    return list(values) + [fill] * (MAX_AXES - len(values))


def conv_out_keys(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation):
    ndim = len(spatial_shape)
    if ndim > MAX_AXES or indices.shape[1] != 1 + ndim or _cdiv(indices.shape[0], BLOCK) > MAX_GRID_Y:
        return fallback.conv_out_keys(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation)
    out_shape = op_args.conv_output_extent(spatial_shape, kernel_size, stride, padding, dilation)
    n = indices.shape[0]
    kvol, cells = 1, 1
    for k, o in zip(kernel_size, out_shape):
        kvol, cells = kvol * k, cells * o
    out = torch.empty((kvol * n,), dtype=torch.int64, device=indices.device)
    launch.run(launch.map_kernels().conv_out_keys_kernel, "conv_out_keys", "int64", f"b{BLOCK}",
               (kvol, _cdiv(n, BLOCK), 1), (launch.aligned(indices), out), n, kvol, cells,
               *_per_axis(out_shape, 1), *_per_axis(kernel_size, 1), *_per_axis(stride, 1),
               *_per_axis(padding, 0), *_per_axis(dilation, 1), NDIM=ndim, BLOCK=BLOCK)
    return out


def lookup_blocks(kvol: int):
    """(rows, offsets) of a lookup program's block: whole rows, BLOCK entries in all."""
    block_k = min(map_plan.pow2(kvol), MAX_LOOKUP_OFFSETS)
    return max(1, BLOCK // block_k), block_k


def sorted_key_lookup(query_keys, sorted_keys, key_deltas, group, key_bound):
    s, kvol, c = query_keys.shape[0], key_deltas.shape[0], sorted_keys.shape[0]
    if s * kvol >= INT32_LIMIT or c >= INT32_LIMIT:
        return fallback.sorted_key_lookup(query_keys, sorted_keys, key_deltas, group, key_bound)
    out = torch.empty((s, kvol), dtype=torch.int32, device=query_keys.device)
    if c == 0 or s == 0 or kvol == 0:
        return out.fill_(fallback.NO_NEIGHBOR)
    # the rows' neighbour bitmasks come with the positions (same launch): kept with the result,
    # for the map a builder makes from it (built_maps.lookup_row_key; map_plan.py reads them)
    key = torch.empty((s,), dtype=map_plan.key_dtype(kvol), device=query_keys.device)
    block_s, block_k = lookup_blocks(kvol)
    launch.run(launch.map_kernels().sorted_key_lookup_kernel, "sorted_key_lookup", "int64", f"b{block_s}x{block_k}",
               (_cdiv(s, block_s),), (*launch.aligned_all(query_keys, sorted_keys, key_deltas), out, key),
               s, kvol, c, c.bit_length(), map_plan.key_bits(kvol), BLOCK_S=block_s, BLOCK_K=block_k)
    built_maps.keep_lookup_row_key(out, key)
    return out


def unique_sorted_keys(sorted_keys):
    c, dev = sorted_keys.shape[0], sorted_keys.device
    if c >= INT32_LIMIT:
        return fallback.unique_sorted_keys(sorted_keys)
    unique = torch.empty((c,), dtype=torch.int64, device=dev)
    count = torch.empty((1,), dtype=torch.int32, device=dev)
    if c == 0:
        return unique, count.zero_()
    sorted_keys = launch.aligned(sorted_keys)
    blocks = _cdiv(c, BLOCK)
    first = torch.empty((c,), dtype=torch.int32, device=dev)
    k = launch.map_kernels()
    launch.run(k.first_of_runs_kernel, "first_of_runs", "int64", f"b{BLOCK}", (blocks,), (sorted_keys, first),
               c, BLOCK=BLOCK)
    runs = torch.cumsum(first, 0, dtype=torch.int32)     # c < 2^31 - 1 (above: the fallback)
    launch.run(k.compact_runs_kernel, "compact_runs", "int64", f"b{BLOCK}", (blocks,),
               (sorted_keys, runs, unique, count), c, BLOCK=BLOCK)
    return unique, count


PRIMITIVES = {
    "_conv_out_keys": conv_out_keys,
    "_sorted_key_lookup": sorted_key_lookup,
    "_unique_sorted_keys": unique_sorted_keys,
}
