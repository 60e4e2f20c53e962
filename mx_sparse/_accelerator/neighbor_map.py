"""Map builders and map transpose of the accelerator backends (CUDA, NPU), written once with
torch operators around the device primitives (kernels/schema/schema.cpp), reached through the
dispatcher. The algorithm is the one the NPU binding ran (keys on a padded grid, a sorted-key
lookup, un-permutation); on CUDA the three map primitives are Triton kernels (mx_sparse/_cuda/map_kernels.py).

The contract is the CPU builders' (kernels/cpu/neighbor_map_cpu.cpp): the same checks with the
same ValueErrors, and the same maps bit for bit. A map is a function of its inputs alone (each
cell names the one voxel at that position), so no order of work can change it:

- submanifold: input keys packed on the grid padded by the kernel's reach (k//2 * dilation per
  side), sorted once; offset k is the constant key delta of its (centred) window offset, so
  ``_sorted_key_lookup(keys, keys, deltas)`` finds every neighbour's sorted position, and the
  sort's permutation turns positions into rows and puts the rows back in input order;
- strided: ``_conv_out_keys`` gives the output key each (offset, input) pair reaches, sorted
  and compacted by ``_unique_sorted_keys`` into the output voxels in canonical (batch, *spatial)
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
construct, which a CPU-only torch build cannot make for (fake) CUDA tensors; so the whole
builder can be traced on fake CUDA tensors here (tests/cuda/test_fake_cuda_trace.py).
"""
import torch

from . import built_maps, host_sync, index_checks, op_args, voxel_keys

NO_NEIGHBOR = -1
primitives = torch.ops.mx_sparse


def _rows(found, order):
    """Sorted positions [S, K] (or -1) -> the input rows they hold (or -1), int32: one gather
    from the rows behind a leading -1 (position p is entry p + 1; index_select takes the int32
    positions as they are)."""
    absent = voxel_keys.constant(("absent row",), found.device,
                                 lambda dev: torch.full((1,), NO_NEIGHBOR, dtype=torch.int32, device=dev))
    rows = torch.cat([absent, order.int()])
    return rows.index_select(0, (found + 1).view(-1)).view(found.shape)


def build_subm_map(indices, spatial_shape, batch_size, kernel_size, dilation):
    shape = op_args.grid(spatial_shape, batch_size)
    ndim = len(shape)
    op_args.indices(indices, ndim)
    kernel = op_args.per_axis("kernel_size", kernel_size, ndim, 1)
    dilation = op_args.per_axis("dilation", dilation, ndim, 1)
    kvol = op_args.kernel_volume(kernel)
    n, dev = indices.shape[0], indices.device
    if n == 0:
        return torch.empty((0, kvol), dtype=torch.int32, device=dev)
    reach, padded = voxel_keys.subm_padding(shape, kernel, dilation)
    bound = voxel_keys.key_bound(batch_size, padded)
    keys, order = torch.sort(voxel_keys.pack(indices, padded, shift=reach), stable=True)
    if not built_maps.indices_checked(indices, shape, batch_size):
        # indices a builder emitted, or checked before on this grid, are not read again
        flags = index_checks.flags(indices.long(), shape, batch_size, keys, order)
        index_checks.raise_bad_rows(indices, shape, batch_size,
                                    *host_sync.read(flags, "build_subm_map: value checks"))
        built_maps.vouch_indices(indices, shape, batch_size)
    deltas = voxel_keys.deltas(kernel, dilation, padded, True, dev)
    found = primitives._sorted_key_lookup(keys, keys, deltas, kernel[-1], bound)
    nbr = torch.empty((n, kvol), dtype=torch.int32, device=dev)
    nbr.index_copy_(0, order, _rows(found, order))    # sorted row s is input row order[s]
    built_maps.vouch_map(nbr, n)
    return nbr


def build_conv_map(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, pads_end=None):
    shape = op_args.grid(spatial_shape, batch_size)
    ndim = len(shape)
    op_args.indices(indices, ndim)
    kernel = op_args.per_axis("kernel_size", kernel_size, ndim, 1)
    stride = op_args.per_axis("stride", stride, ndim, 1)
    padding = op_args.per_axis("padding", padding, ndim, 0)
    dilation = op_args.per_axis("dilation", dilation, ndim, 1)
    kvol = op_args.kernel_volume(kernel)
    # pads_end (asymmetric padding) is checked with the output grid, as build_conv_map_cpu does
    out_shape = op_args.conv_output_shape(shape, kernel, stride, padding, dilation, batch_size, pads_end)
    pads_end = padding if pads_end is None else list(pads_end)
    n, dev = indices.shape[0], indices.device
    if n == 0:
        return (torch.empty((0, 1 + ndim), dtype=torch.int32, device=dev),
                torch.empty((0, kvol), dtype=torch.int32, device=dev), out_shape)
    shift, padded = voxel_keys.conv_padding(shape, out_shape, kernel, stride, padding, dilation)
    bound = voxel_keys.key_bound(batch_size, padded)
    in_keys, order = torch.sort(voxel_keys.pack(indices, padded, shift=shift), stable=True)
    checked = built_maps.indices_checked(indices, shape, batch_size)
    if checked:     # indices a builder emitted or checked on this grid: only the count is read
        pair_keys = _conv_out_keys(indices, shape, batch_size, kernel, stride, padding, pads_end, dilation)
        out_keys, count = primitives._unique_sorted_keys(torch.sort(pair_keys).values)
        m, = host_sync.read(count, "build_conv_map: output count")
    else:
        flags, outside = index_checks.flags_and_outside(indices.long(), shape, batch_size, in_keys, order)
        # the primitive takes rows inside the grid; until the one read below says whether the indices
        # are valid, rows outside stand in as row (0, 0, ...), and a bad row raises before any result is used
        inside = torch.where(outside.unsqueeze(1), 0, indices)
        pair_keys = _conv_out_keys(inside, shape, batch_size, kernel, stride, padding, pads_end, dilation)
        out_keys, count = primitives._unique_sorted_keys(torch.sort(pair_keys).values)
        bad_row, dup_row, m = host_sync.read(torch.cat([flags, count.long()]),
                                             "build_conv_map: value checks and output count")
        index_checks.raise_bad_rows(indices, shape, batch_size, bad_row, dup_row)
        built_maps.vouch_indices(indices, shape, batch_size)
    op_args.row_count(m)
    out_idx = voxel_keys.unpack(out_keys.narrow(0, 0, m), out_shape)
    query = voxel_keys.pack(out_idx, padded, scale=stride)
    deltas = voxel_keys.deltas(kernel, dilation, padded, False, dev)
    found = primitives._sorted_key_lookup(query, in_keys, deltas, kernel[-1], bound)
    out_idx, nbr = out_idx.int(), _rows(found, order)
    built_maps.vouch_indices(out_idx, out_shape, batch_size)    # distinct and in the output grid
    built_maps.vouch_map(nbr, n)
    return out_idx, nbr, out_shape


def _conv_out_keys(indices, shape, batch_size, kernel, stride, pads_begin, pads_end, dilation):
    """The primitive, which pads symmetrically: with pads_begin != pads_end it runs on the grid
    padded by their difference on the larger side, padding min(pads_begin, pads_end) both
    ways (inputs shifted up by pads_begin - that), which has the same outputs, reached by the
    same offsets: o = (i + pads_begin - kp*d) / s, 0 <= o < O."""
    if list(pads_begin) == list(pads_end):
        return primitives._conv_out_keys(indices.contiguous(), shape, batch_size, kernel, stride, pads_begin, dilation)
    grown = [s + abs(b - e) for s, b, e in zip(shape, pads_begin, pads_end)]
    if max(grown) > op_args.INT32_MAX:
        raise ValueError(f"pads_begin, pads_end: {pads_begin} and {pads_end} differ by more than int32 coordinates "
                         f"address on the grid {shape} (accelerator map builder)")
    low = [min(b, e) for b, e in zip(pads_begin, pads_end)]
    lifted = torch.stack([indices.select(1, 0)] + [indices.select(1, 1 + d) + (b - lo)
                                                   for d, (b, lo) in enumerate(zip(pads_begin, low))], 1)
    return primitives._conv_out_keys(lifted.contiguous(), grown, batch_size, kernel, stride, low, dilation)


def transpose_map(nbr, num_rows):
    op_args.transpose_map_operands(nbr, num_rows)
    m, kvol = nbr.shape
    cells = num_rows * kvol
    if m == 0 or kvol == 0:
        return torch.full((num_rows, kvol), NO_NEIGHBOR, dtype=torch.int32, device=nbr.device)
    rows = built_maps.built_rows(nbr)
    if rows is not None and rows <= num_rows:
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


def _scatter_transpose(nbr, num_rows):
    """The transpose of a valid map (entries in [-1, num_rows), each (input row, offset) once):
    row m goes to cell (nbr[m, k], k); absent entries go to a spare row num_rows (-1 mod
    num_rows + 1), dropped. Each kept cell has one writer: the result does not depend on the order."""
    m, kvol = nbr.shape
    target = nbr.long().remainder_(num_rows + 1)
    out = torch.full((num_rows + 1, kvol), NO_NEIGHBOR, dtype=torch.int32, device=nbr.device)
    rows = torch.arange(m, dtype=torch.int32, device=nbr.device).unsqueeze(1).expand(m, kvol)
    return out.scatter_(0, target, rows).narrow(0, 0, num_rows)
