"""Map builders of the CUDA backend, from torch's own operators (sort, searchsorted, cumsum,
scatter_reduce), which run on the GPU for CUDA tensors.

The contract is the CPU builders' (kernels/cpu/neighbor_map_cpu.cpp): voxels packed into int64
keys ((b*D + z)*H + y)*W + x, memory O(N*K) and nothing proportional to the grid volume, the
same checks with the same ValueErrors, and the same maps bit for bit. Both follow the rules of
kernels/common/ (kernel offsets in row-major order, submanifold centre k//2, the strided
output rule); a map is a function of its inputs alone (each cell names the one voxel at that
position), so no order of work can change it:

- submanifold: the input keys sorted once; offset k shifts every key by one constant, so a
  binary search (searchsorted) of the shifted keys finds each neighbour;
- strided: every (input, offset) pair that reaches an in-range output gives that output's key;
  the pairs sorted by key (stable) list the output voxels in canonical (batch, *spatial) order,
  and a running count of distinct keys is each pair's output row.

Each builder reads the device once (host_sync.py): its value checks, and for the strided map
the number of outputs, travel in one small tensor.

Indexing is spelled with select / narrow / take and columns are written with index_copy_:
the same operators as Python's indexing, without the device guard that Python's indexing and
copy_ construct, which a CPU-only torch build cannot make for (fake) CUDA tensors; so the
whole builder can be traced on fake CUDA tensors here (tests/cuda/test_fake_cuda_trace.py).
"""
import math

import torch

from . import host_sync, op_args

NO_NEIGHBOR = -1
# Offsets are handled in chunks whose temporaries hold about this many int64 values.
CHUNK_VALUES = 1 << 23


def _kernel_positions(kernel, device) -> list:
    """Per axis, the kernel position of every offset k (row-major, last axis fastest)."""
    k = torch.arange(math.prod(kernel), device=device)
    pos = [None] * len(kernel)
    for d in reversed(range(len(kernel))):
        pos[d] = k % kernel[d]
        k = k // kernel[d]
    return pos


def _pack(batch, coords, shape):
    key = batch
    for c, s in zip(coords, shape):
        key = key * s + c
    return key


def _sorted_keys(indices, shape, batch_size):
    """(sorted keys, their rows, [lowest row outside the grid or batch, later row of the lowest
    duplicate pair]) with n meaning none; nothing read yet."""
    n = indices.shape[0]
    idx = indices.long()
    batch, coords = idx.select(1, 0), [idx.select(1, 1 + d) for d in range(len(shape))]
    outside = (batch < 0) | (batch >= batch_size)
    for c, s in zip(coords, shape):
        outside |= (c < 0) | (c >= s)
    rows = torch.arange(n, device=indices.device)
    bad_row = torch.where(outside, rows, n).amin()
    keys, order = torch.sort(_pack(batch, coords, shape), stable=True)
    # equal keys are adjacent, rows ascending among them (stable): the later row of each pair
    later = torch.where(keys.narrow(0, 1, n - 1) == keys.narrow(0, 0, n - 1), order.narrow(0, 1, n - 1), n)
    dup_row = later.amin() if n > 1 else torch.full_like(bad_row, n)
    return keys, order, torch.stack([bad_row, dup_row])


def _raise_bad_rows(indices, shape, batch_size, bad_row, dup_row):
    n = indices.shape[0]

    def row_str(r):
        return "(" + ", ".join(str(v) for v in host_sync.read(indices.select(0, r), "error message")) + ")"

    if bad_row < n:
        raise ValueError(f"indices: row {bad_row} is (batch, *coords) = {row_str(bad_row)}, expected 0 <= batch < "
                         f"batch_size ({batch_size}) and 0 <= coord < spatial_shape {list(shape)} on every axis")
    if dup_row < n:
        raise ValueError(f"indices: duplicate voxel {row_str(dup_row)} at row {dup_row}; expected every "
                         f"(batch, *coords) row to be unique")


def _offset_chunks(n, kvol, ndim):
    per_chunk = max(1, min(kvol, CHUNK_VALUES // max(1, n * (ndim + 2))))
    return [(k0, min(kvol, k0 + per_chunk)) for k0 in range(0, kvol, per_chunk)]


def build_subm_map(indices, spatial_shape, batch_size, kernel_size, dilation):
    shape = op_args.grid(spatial_shape, batch_size)
    ndim = len(shape)
    op_args.indices(indices, ndim)
    kernel = op_args.per_axis("kernel_size", kernel_size, ndim, 1)
    dilation = op_args.per_axis("dilation", dilation, ndim, 1)
    op_args.kernel_volume(kernel)
    n, kvol, dev = indices.shape[0], math.prod(kernel), indices.device
    nbr = torch.empty((n, kvol), dtype=torch.int32, device=dev)
    if n == 0:
        return nbr
    keys, order, flags = _sorted_keys(indices, shape, batch_size)
    _raise_bad_rows(indices, shape, batch_size, *host_sync.read(flags, "build_subm_map: value checks"))
    idx = indices.long()
    coords = [idx.select(1, 1 + d).unsqueeze(1) for d in range(ndim)]
    key = _pack(idx.select(1, 0).unsqueeze(1), coords, shape)
    pos = _kernel_positions(kernel, dev)
    for k0, k1 in _offset_chunks(n, kvol, ndim):
        # offset (kp - k//2) * dilation per axis: in the grid, and its key shift
        inside = torch.ones((n, k1 - k0), dtype=torch.bool, device=dev)
        shift = torch.zeros((k1 - k0,), dtype=torch.long, device=dev)
        for d in range(ndim):
            off = (pos[d].narrow(0, k0, k1 - k0) - kernel[d] // 2) * dilation[d]
            c = coords[d] + off
            inside &= (c >= 0) & (c < shape[d])
            shift = shift * shape[d] + off
        query = key + shift
        at = torch.searchsorted(keys, query).clamp_(max=n - 1)
        found = inside & (torch.take(keys, at) == query)
        column = torch.where(found, torch.take(order, at), NO_NEIGHBOR).int()
        nbr.index_copy_(1, torch.arange(k0, k1, device=dev), column)
    return nbr


def build_conv_map(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation):
    shape = op_args.grid(spatial_shape, batch_size)
    ndim = len(shape)
    op_args.indices(indices, ndim)
    kernel = op_args.per_axis("kernel_size", kernel_size, ndim, 1)
    stride = op_args.per_axis("stride", stride, ndim, 1)
    padding = op_args.per_axis("padding", padding, ndim, 0)
    dilation = op_args.per_axis("dilation", dilation, ndim, 1)
    op_args.kernel_volume(kernel)
    out_shape = op_args.conv_output_shape(shape, kernel, stride, padding, dilation, batch_size)
    n, kvol, dev = indices.shape[0], math.prod(kernel), indices.device
    if n == 0:
        return (torch.empty((0, 1 + ndim), dtype=torch.int32, device=dev),
                torch.empty((0, kvol), dtype=torch.int32, device=dev))
    _, _, flags = _sorted_keys(indices, shape, batch_size)
    idx = indices.long()
    # pair (input i, offset k) reaches output o with i = o*s - p + kp*d on every axis
    pos = _kernel_positions(kernel, dev)
    reach = torch.ones((n, kvol), dtype=torch.bool, device=dev)
    out_key = idx.select(1, 0).unsqueeze(1).expand(n, kvol)
    for d in range(ndim):
        num = idx.select(1, 1 + d).unsqueeze(1) + padding[d] - pos[d] * dilation[d]
        o = torch.div(num, stride[d], rounding_mode="floor")
        reach &= (num >= 0) & (o * stride[d] == num) & (o < out_shape[d])
        out_key = out_key * out_shape[d] + o
    out_key = torch.where(reach, out_key, torch.iinfo(torch.int64).max).view(-1)
    keys, pair = torch.sort(out_key, stable=True)        # unreached pairs last
    live = keys != torch.iinfo(torch.int64).max
    total = keys.shape[0]
    new_key = torch.cat([live.new_ones(1), keys.narrow(0, 1, total - 1) != keys.narrow(0, 0, total - 1)])
    first = live & new_key
    row = torch.cumsum(first, 0) - 1                      # output row of each sorted pair
    bad_row, dup_row, m = host_sync.read(torch.cat([flags, row.narrow(0, total - 1, 1) + 1]),
                                         "build_conv_map: value checks and output count")
    _raise_bad_rows(indices, shape, batch_size, bad_row, dup_row)
    if m >= op_args.INT32_MAX:
        raise ValueError(f"indices: {m} rows do not fit the int32 neighbor map; expected fewer than 2^31 - 1")
    out_keys = torch.full((m,), -1, dtype=torch.long, device=dev)
    nbr = torch.full((m * kvol,), NO_NEIGHBOR, dtype=torch.int32, device=dev)
    if m > 0:
        # one writer per cell (an output and an offset determine the input); the pairs that
        # write nothing send -1 to cell 0, which max-reduction leaves unchanged
        out_keys.scatter_reduce_(0, torch.where(first, row, 0), torch.where(first, keys, -1), "amax")
        cell = row * kvol + pair % kvol
        nbr.scatter_reduce_(0, torch.where(live, cell, 0),
                            torch.where(live, pair // kvol, NO_NEIGHBOR).int(), "amax")
    columns = []
    rest = out_keys
    for d in reversed(range(ndim)):
        columns.append(rest % out_shape[d])
        rest = rest // out_shape[d]
    out_indices = torch.stack([rest] + columns[::-1], dim=1).int()
    return out_indices, nbr.view(m, kvol)


def transpose_map(nbr, num_rows):
    op_args.neighbor_map(nbr, "nbr")
    if not 0 <= num_rows < op_args.INT32_MAX:
        raise ValueError(f"num_rows: expected 0 <= num_rows < 2^31 - 1, got {num_rows}")
    m, kvol = nbr.shape
    cells = num_rows * kvol
    if m == 0 or kvol == 0:
        return torch.full((num_rows, kvol), NO_NEIGHBOR, dtype=torch.int32, device=nbr.device)
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
    if bad_row < m:
        raise ValueError(f"nbr: row {bad_row} holds an input row outside [0, num_rows={num_rows})")
    if dup_row < m:
        at = torch.where(twice[dup_row], cell[dup_row], cells).amin()
        at, earlier = host_sync.read(torch.stack([at, first.take(at)]), "transpose_map: the error message")
        raise ValueError(f"nbr: rows {earlier} and {dup_row} both name input row {at // kvol} at offset "
                         f"{at % kvol}; a neighbor map names each (input row, offset) at most once")
    # each cell named once at most: its only row is the transpose
    named = first.narrow(0, 0, cells)
    return torch.where(named < m, named, NO_NEIGHBOR).int().view(num_rows, kvol)
