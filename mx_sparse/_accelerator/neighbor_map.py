"""Map builders and map transpose of the accelerator backends (CUDA, NPU), written once with
ATen operators around the device primitives (kernels/schema/schema.cpp), reached through the
dispatcher. The algorithm is the one the NPU binding ran (keys on a padded grid, a sorted-key
lookup, un-permutation); on CUDA the three map primitives are Triton kernels (mx_sparse/_cuda/map_kernels.py).

The builders' work runs in C++ (kernels/orchestration/neighbor_map_orchestration.cpp, bound as
mx_sparse._C.map_orchestration; issue 32: in Python it was ~30% of a CUDA training step's host
time), in two stages around what stays here: the host read (host_sync.read), the bad-row
ValueError (index_checks.raise_bad_rows) and the built_maps registry. The argument checks are the
contract's (kernels/contract/op_args.h), the CPU builders' with the same messages.

The contract is the CPU builders' (kernels/cpu/neighbor_map_cpu.cpp): the same checks with the
same ValueErrors, and the same maps bit for bit. A map is a function of its inputs alone (each
cell names the one voxel at that position), so no order of work can change it:

- submanifold: input keys packed on the grid padded by the kernel's reach (k//2 * dilation per
  side), sorted once; offset k is the constant key delta of its (centred) window offset, so
  ``_sorted_key_lookup(keys, keys, deltas)`` finds every neighbour's sorted position, and the
  sort's permutation turns positions into rows and puts the rows back in input order;
- strided: ``_conv_out_keys`` gives the output key each (offset, input) pair reaches (only the
  offsets on the stride's lattice per axis: 8 candidates per input for 3x3x3 at stride 2, not
  27; kernels/schema/schema.cpp), sorted and compacted by ``_unique_sorted_keys`` into the output voxels in canonical (batch, *spatial)
  order; output o reaches input o*s - p + kp*d, i.e. on the input grid shifted by the padding
  (and padded above by the kernel's reach) the key of o*s plus offset k's (uncentred) delta, so
  the same lookup of those query keys in the sorted input keys gives the map.

Each builder reads the device at most once (host_sync.py): its value checks, and for the strided
map the number of outputs, travel in one small tensor; the lookup runs only on checked indices,
and ``_conv_out_keys`` (which runs before that read) sees rows outside the grid replaced by a
valid one, so every primitive gets input inside its contract. What a builder establishes it
vouches for (built_maps.py): checked or emitted indices are not checked again (a submanifold
map on them reads nothing, a strided one only its output count), and a built map's transpose is
one scatter with no checks, kept with the map.

Indexing is spelled with select / narrow / take and rows are written with index_copy_: the
same operators as Python's indexing, without the device guard that Python's indexing and copy_
construct, which a CPU-only torch build cannot make for (fake) CUDA tensors; the C++ stages call
ATen operators and the primitives through the dispatcher, which fake tensors answer, so the whole
builder can be traced on fake CUDA tensors here (tests/cuda/test_fake_cuda_trace.py).
"""
import torch

from .._C import map_orchestration as _orchestration
from . import built_maps, host_sync, index_checks, op_args

NO_NEIGHBOR = -1

# Sorted positions [S, K] (or -1) -> the input rows they hold (or -1), int32: one gather from the
# rows behind a leading -1 (position p is entry p + 1). Also used by conv_transpose_map, conv_map_at.
_rows = _orchestration.rows_of


def build_subm_map(indices, spatial_shape, batch_size, kernel_size, dilation):
    # checks, padded keys, their sort (none for rows vouched ascending) and (for unvouched indices)
    # the value checks: C++
    build = _orchestration.SubmMapBuild(indices, spatial_shape, batch_size, kernel_size, dilation,
                                        *built_maps.indices_state(indices, spatial_shape, batch_size))
    if build.checks is not None:
        # indices a builder emitted, or checked before on this grid, are not read again; those that
        # fail are read once more, for the row the error names
        if not build.passes(host_sync.read(build.checks, "build_subm_map: value checks")):
            index_checks.raise_bad_rows(indices, spatial_shape, batch_size,
                                        *host_sync.read(build.flags(), "build_subm_map: the error message"))
        built_maps.vouch_indices(indices, spatial_shape, batch_size)
    nbr, found = build.finish()    # the lookup and the rows in input order
    if indices.shape[0]:
        # the row keys a device lookup wrote (CUDA), put in the map's row order as its rows
        key = built_maps.result_row_key(found)
        built_maps.vouch_map(nbr, indices.shape[0], None if key is None else build.in_input_order(key))
    return nbr


def build_conv_map(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, pads_end=None):
    # checks, the output grid, keys, the output keys and their count (with the value checks of
    # unvouched indices): C++, up to the one read
    checked, ascending = built_maps.indices_state(indices, spatial_shape, batch_size)
    build = _orchestration.ConvMapBuild(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation,
                                        pads_end, checked, ascending)
    if build.to_read is None:   # no input rows
        return build.finish(0)[:3]
    if checked:     # indices a builder emitted or checked on this grid: only the count is read
        m, = host_sync.read(build.to_read, "build_conv_map: output count")
    else:
        bad_row, dup_row, m = host_sync.read(build.to_read, "build_conv_map: value checks and output count")
        index_checks.raise_bad_rows(indices, spatial_shape, batch_size, bad_row, dup_row)
        built_maps.vouch_indices(indices, spatial_shape, batch_size)
    # the input rows' offset bitmasks a device _conv_out_keys wrote (CUDA): the transpose's row keys
    transpose_key = built_maps.result_row_key(build.take_pair_keys())
    out_idx, nbr, out_shape, found, nbr_t = build.finish(m)    # the outputs, the lookup and the rows
    # distinct, in the output grid and ascending (the sorted distinct output keys, unpacked)
    built_maps.vouch_indices(out_idx, out_shape, batch_size, ascending=True)
    # the map's rows are the lookup's: the row keys a device lookup wrote (CUDA) are the map's
    built_maps.vouch_map(nbr, indices.shape[0], built_maps.result_row_key(found), transpose_key)
    if nbr_t is not None:   # the transpose the lookup's launch wrote (CUDA): transpose_map finds it kept
        built_maps.keep_transpose(nbr, nbr_t)
    return out_idx, nbr, out_shape


def transpose_map(nbr, num_rows):
    op_args.transpose_map_operands(nbr, num_rows)
    m, kvol = nbr.shape
    cells = num_rows * kvol
    if m == 0 or kvol == 0:
        return torch.full((num_rows, kvol), NO_NEIGHBOR, dtype=torch.int32, device=nbr.device)
    if built_maps.built_for(nbr, num_rows):
        # a map a builder made: valid by construction, nothing to check or read; its transpose is
        # kept with it for the next call
        kept = built_maps.transpose_of(nbr)
        if kept is None or kept.shape[0] != num_rows:
            kept = _scatter_transpose(nbr, num_rows)
            built_maps.keep_transpose(nbr, kept)
        return kept
    nbr = nbr.contiguous()
    rows = torch.arange(m, device=nbr.device)
    bad = ((nbr < NO_NEIGHBOR) | (nbr >= num_rows)).any(1)
    live = (nbr >= 0) & (nbr < num_rows)   # out-of-range entries are reported below, never written
    cell = torch.where(live, nbr.long() * kvol + torch.arange(kvol, device=nbr.device), cells)
    # the lowest row naming each (input row, offset) cell, m for none (one extra cell absorbs the
    # absent entries); a map names each cell at most once, or no transpose exists: a row naming a
    # cell that a lower row names already is a duplicate
    first = torch.full((cells + 1,), m, dtype=torch.long, device=nbr.device)
    first.scatter_reduce_(0, cell.view(-1), rows.unsqueeze(1).expand(m, kvol).reshape(-1), "amin")
    twice = live & (rows.unsqueeze(1) > first.take(cell))
    bad_row, dup_row = host_sync.read(torch.stack([torch.where(bad, rows, m).amin(),
                                                   torch.where(twice.any(1), rows, m).amin()]),
                                      "transpose_map: entries in range, each (input row, offset) once")
    op_args.transpose_map_rows(bad_row, m, num_rows)
    if dup_row < m:
        at = torch.where(twice[dup_row], cell[dup_row], cells).amin()
        at, earlier = host_sync.read(torch.stack([at, first.take(at)]), "transpose_map: the error message")
        op_args.transpose_map_named_twice(earlier, dup_row, at // kvol, at % kvol)
    # each cell named once at most: its only row is the transpose
    named = first.narrow(0, 0, cells)
    return torch.where(named < m, named, NO_NEIGHBOR).int().view(num_rows, kvol)


# The transpose of a valid map (entries in [-1, num_rows), each (input row, offset) once): one
# scatter, each kept cell with one writer (C++: kernels/orchestration/neighbor_map_orchestration.cpp).
_scatter_transpose = _orchestration.scatter_transpose
