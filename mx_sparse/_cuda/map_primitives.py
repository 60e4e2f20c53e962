"""The CUDA backend's map primitives (host side): _conv_out_keys, _sorted_key_lookup and
_unique_sorted_keys as one Triton launch each (map_kernels.py; the last a single-pass scan),
instead of the torch-operator fallbacks (fallback.py), whose contracts (kernels/schema/schema.cpp)
and results they keep bit for bit; and the optional _conv_output_rows and _sorted_key_lookup_rows
(no fallbacks: the builders do their work with ATen operators where a device has no kernel for
them) in the unique scan's and the lookup's launches. Nothing is read on the host.

The lookup's launch also writes each result row's neighbour bitmask, the row key of a map plan
(map_plan.py), kept with its result (built_maps.keep_result_row_key): a builder that makes a map
from it keeps the keys with the map, and the map's plans skip their row_mask launch. So does
_conv_out_keys' launch for each input row (bit k where offset k reaches an output): the row keys
of the strided map's transpose (built_maps.keep_result_row_key).
"""
import torch

from .._C import map_orchestration
from .._core import contract as op_args
from .._accelerator import built_maps, fallback
from . import launch, map_plan

# Elements per program (lookup entries: whole rows, offsets at most MAX_LOOKUP_OFFSETS at a time;
# unique_runs_kernel: keys); conv_out_keys_kernel: whole input rows per program, every offset.
BLOCK = 1024
MAX_LOOKUP_OFFSETS = 128
OUT_KEY_ROWS = 128
# conv_out_keys_kernel's axes (more: the fallback).
MAX_AXES = 4
# The kernels take their sizes as int32 scalars; larger problems run the fallbacks.
INT32_LIMIT = 2**31 - 1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _per_axis(values, fill):
    return list(values) + [fill] * (MAX_AXES - len(values))


class _OutKeysShape:
    """What a conv_out_keys launch takes that the geometry alone decides: the slot and kernel
    volumes, the output grid's cells and the per-axis scalars; made once per geometry (a network
    repeats a few) and shared by every launch on it."""
    __slots__ = ("kvol", "slots", "cells", "scalars")

    def __init__(self, spatial_shape, kernel_size, stride, padding, dilation):
        out_shape = op_args.conv_output_extent(spatial_shape, kernel_size, stride, padding, dilation)
        lattice = fallback.lattice(kernel_size, stride, dilation)
        self.kvol, self.slots, self.cells = 1, 1, 1
        for k, o, axis in zip(kernel_size, out_shape, lattice):
            self.kvol, self.slots, self.cells = self.kvol * k, self.slots * axis[0], self.cells * o
        per_axis = [_per_axis(values, fill) for values, fill in (
            (out_shape, 1), (kernel_size, 1), (stride, 1), (padding, 0), (dilation, 1))]
        per_axis += [_per_axis([axis[i] for axis in lattice], fill) for i, fill in enumerate((1, 1, 0, 1))]
        self.scalars = tuple(v for values in per_axis for v in values)


# (spatial_shape, kernel_size, stride, padding, dilation) -> _OutKeysShape
_out_keys_shapes = launch.ShapeCache(1024)


def _out_keys_shape(spatial_shape, kernel_size, stride, padding, dilation) -> _OutKeysShape:
    return _out_keys_shapes.get((*spatial_shape, None, *kernel_size, *stride, *padding, *dilation),
                                lambda: _OutKeysShape(spatial_shape, kernel_size, stride, padding, dilation))


def conv_out_keys(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation):
    ndim = len(spatial_shape)
    if ndim > MAX_AXES or indices.shape[1] != 1 + ndim or indices.shape[0] >= INT32_LIMIT:
        return fallback.conv_out_keys(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation)
    shaped = _out_keys_shape(spatial_shape, kernel_size, stride, padding, dilation)
    n = indices.shape[0]
    out = torch.empty((shaped.slots * n,), dtype=torch.int64, device=indices.device)
    # each input row's offset bitmask comes with the keys (same launch): kept with the result, for
    # the transpose of the map a builder makes from it (built_maps.result_row_key; map_plan.py reads it)
    key = torch.empty((n,), dtype=map_plan.key_dtype(shaped.kvol), device=indices.device)
    launch.run(launch.map_kernels().conv_out_keys_kernel, "conv_out_keys", "int64", f"b{OUT_KEY_ROWS}",
               (_cdiv(n, OUT_KEY_ROWS),), (launch.aligned(indices), out, key), n, shaped.slots, shaped.cells,
               map_plan.key_bits(shaped.kvol), *shaped.scalars, NDIM=ndim, BLOCK=OUT_KEY_ROWS)
    built_maps.keep_result_row_key(out, key)
    return out


def lookup_blocks(kvol: int):
    """(rows, offsets) of a lookup program's block: whole rows, BLOCK entries in all."""
    block_k = min(map_plan.pow2(kvol), MAX_LOOKUP_OFFSETS)
    return max(1, BLOCK // block_k), block_k


def lookup_warps(kvol: int, scatter: bool) -> int:
    """Warps of a lookup program: Triton's default 4, and 8 where each query's entries go to its
    own row (SCATTER) in a program of 1024 one-offset rows, which at 4 warps spills the rows'
    targets on sm_90 (cubins.py)."""
    return 8 if scatter and lookup_blocks(kvol)[1] == 1 else 4


def sorted_key_lookup(query_keys, sorted_keys, key_deltas, group, key_bound):
    if _too_large(query_keys, sorted_keys, key_deltas):
        return fallback.sorted_key_lookup(query_keys, sorted_keys, key_deltas, group, key_bound)
    return _lookup(query_keys, sorted_keys, key_deltas, query_keys, False, False, None)


def sorted_key_lookup_rows(query_keys, sorted_keys, key_deltas, group, key_bound, order, scatter_rows,
                           transpose_rows):
    """_sorted_key_lookup_rows: the lookup's positions written as the rows ``order`` holds (and, with
    ``scatter_rows``, query s's entries at row order[s]; with ``transpose_rows``, the map's transpose
    beside it) by the lookup's launch (ROWS, SCATTER, TRANSPOSE)."""
    kvol = key_deltas.shape[0]
    if scatter_rows and transpose_rows:
        raise ValueError("transpose_rows: a transpose is written for a lookup whose rows stay the queries' "
                         f"(scatter_rows False), got {transpose_rows} with scatter_rows True")
    if _too_large(query_keys, sorted_keys, key_deltas):
        return lookup_rows_by_operators(fallback.sorted_key_lookup(query_keys, sorted_keys, key_deltas, group,
                                                                   key_bound), order, scatter_rows, transpose_rows)
    # the transpose's cells no entry names stay -1
    tpose = torch.full((transpose_rows, kvol), fallback.NO_NEIGHBOR, dtype=torch.int32,
                       device=query_keys.device) if transpose_rows else None
    nbr = _lookup(query_keys, sorted_keys, key_deltas, query_keys if order is None else launch.aligned(order),
                  order is not None, scatter_rows, tpose)
    return nbr, nbr.new_empty((0, kvol)) if tpose is None else tpose


def lookup_rows_by_operators(found, order, scatter_rows, transpose_rows):
    """_sorted_key_lookup_rows' results from a lookup's positions ``found`` with ATen operators (the
    orchestration's rows_of, un-permutation and scatter_transpose: what the builders do without the
    primitive): the kernel's fallback for sizes past int32, and bench.host_ops' reference."""
    nbr = found
    if order is not None:
        nbr = map_orchestration.rows_of(nbr, order)
        nbr = torch.empty_like(nbr).index_copy_(0, order, nbr) if scatter_rows else nbr
    return nbr, (map_orchestration.scatter_transpose(nbr, transpose_rows) if transpose_rows
                 else nbr.new_empty((0, found.shape[1])))


def _too_large(query_keys, sorted_keys, key_deltas) -> bool:
    """Sizes past the kernel's int32 scalars (the fallbacks take them)."""
    return query_keys.shape[0] * key_deltas.shape[0] >= INT32_LIMIT or sorted_keys.shape[0] >= INT32_LIMIT


def _lookup(query_keys, sorted_keys, key_deltas, order, rows, scatter, tpose):
    """One lookup launch; ``order`` (any int64 tensor where not ROWS: never read), ``tpose`` (the
    transpose to write, prefilled with -1, or None)."""
    s, kvol, c = query_keys.shape[0], key_deltas.shape[0], sorted_keys.shape[0]
    out = torch.empty((s, kvol), dtype=torch.int32, device=query_keys.device)
    if c == 0 or s == 0 or kvol == 0:
        return out.fill_(fallback.NO_NEIGHBOR)
    # the rows' neighbour bitmasks come with the positions (same launch): kept with the result,
    # for the map a builder makes from it (built_maps.result_row_key; map_plan.py reads them)
    key = torch.empty((s,), dtype=map_plan.key_dtype(kvol), device=query_keys.device)
    block_s, block_k = lookup_blocks(kvol)
    launch.run(launch.map_kernels().sorted_key_lookup_kernel, "sorted_key_lookup", "int64", f"b{block_s}x{block_k}",
               (_cdiv(s, block_s),),
               (*launch.aligned_all(query_keys, sorted_keys, key_deltas), out, key, order, out if tpose is None else tpose),
               s, kvol, c, c.bit_length(), map_plan.key_bits(kvol), BLOCK_S=block_s, BLOCK_K=block_k, ROWS=rows,
               SCATTER=scatter, TRANSPOSE=tpose is not None, num_warps=lookup_warps(kvol, scatter))
    built_maps.keep_result_row_key(out, key)
    return out


# unique_runs_kernel's per-axis scalars (output extents, strides, query-grid extents) where it
# makes no rows: never read
_NO_AXES = (1,) * (3 * MAX_AXES)


def unique_sorted_keys(sorted_keys):
    c, dev = sorted_keys.shape[0], sorted_keys.device
    if c >= INT32_LIMIT:
        return fallback.unique_sorted_keys(sorted_keys)
    unique = torch.empty((c,), dtype=torch.int64, device=dev)
    count = torch.empty((1,), dtype=torch.int32, device=dev)
    if c == 0:
        return unique, count.zero_()
    blocks = _cdiv(c, BLOCK)
    launch.run(launch.map_kernels().unique_runs_kernel, "unique_runs", "int64", f"b{BLOCK}", (blocks,),
               (launch.aligned(sorted_keys), unique, count, scan_scratch(sorted_keys, blocks), unique, unique), c,
               *_NO_AXES, NDIM=0, BLOCK=BLOCK)
    return unique, count


def output_rows_by_operators(unique, count, out_shape, query_shape, stride):
    """_conv_output_rows' results from the unique keys and their count with the orchestration's key
    arithmetic (what the strided builder does without the primitive): the kernel's fallback for sizes
    or axes it does not take, and bench.host_ops' reference."""
    rows = map_orchestration.unpack(unique, list(out_shape))
    return rows.int(), map_orchestration.pack(rows, list(query_shape), [], list(stride)), count


# (out_shape, query_shape, stride) -> unique_runs_kernel's per-axis scalars: made once per geometry
_output_axes = launch.ShapeCache(1024)


def conv_output_rows(sorted_keys, out_shape, query_shape, stride):
    """_conv_output_rows in _unique_sorted_keys' one launch (unique_runs_kernel with NDIM): each
    run's key unpacked into its row and the row's query key beside the compaction."""
    c, dev, ndim = sorted_keys.shape[0], sorted_keys.device, len(out_shape)
    if c >= INT32_LIMIT or not 0 < ndim <= MAX_AXES:
        return output_rows_by_operators(*unique_sorted_keys(sorted_keys), out_shape, query_shape, stride)
    rows = torch.empty((c, 1 + ndim), dtype=torch.int32, device=dev)
    query = torch.empty((c,), dtype=torch.int64, device=dev)
    unique = torch.empty((c,), dtype=torch.int64, device=dev)
    count = torch.empty((1,), dtype=torch.int32, device=dev)
    if c == 0:
        return rows, query, count.zero_()
    axes = _output_axes.get((*out_shape, None, *query_shape, None, *stride), lambda: (
        *_per_axis(out_shape, 1), *_per_axis(stride, 1), *_per_axis(query_shape, 1)))
    blocks = _cdiv(c, BLOCK)
    launch.run(launch.map_kernels().unique_runs_kernel, "unique_runs", "int64", f"b{BLOCK}-{ndim}d", (blocks,),
               (launch.aligned(sorted_keys), unique, count, scan_scratch(sorted_keys, blocks), rows, query), c,
               *axes, NDIM=ndim, BLOCK=BLOCK)
    return rows, query, count


# (device, stream) -> unique_runs_kernel's scratch: int64 zeros (two tickets, one state word per
# tile), which the launch's last program sets back to zeros (so no launch zero-fills it). Launches
# on one stream run one after another; another stream has its own. Grown (a fresh zeroed tensor)
# when a launch has more tiles.
_scratch = {}
MIN_SCAN_TILES = 4096


def scan_scratch(like: torch.Tensor, blocks: int) -> torch.Tensor:
    if launch.is_fake(like):
        return like.new_zeros((2 + blocks,), dtype=torch.int64)
    stream = torch.cuda.current_stream(like.device).stream_id if like.is_cuda else None
    found = _scratch.get((like.device, stream))
    if found is None or found.numel() < 2 + blocks:
        found = _scratch[(like.device, stream)] = like.new_zeros((2 + max(blocks, MIN_SCAN_TILES),),
                                                                 dtype=torch.int64)
    return found


PRIMITIVES = {
    "_conv_out_keys": conv_out_keys,
    "_sorted_key_lookup": sorted_key_lookup,
    "_unique_sorted_keys": unique_sorted_keys,
    "_conv_output_rows": conv_output_rows,
    "_sorted_key_lookup_rows": sorted_key_lookup_rows,
}
