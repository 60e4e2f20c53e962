"""The map builders' index value checks (every row inside the grid and batch, no voxel twice),
with the CPU builders' messages (kernels/cpu/neighbor_map_cpu.cpp). The flags are computed on
the device and travel to the host inside the builder's one read (host_sync.py); raising reads
the offending row for the message (a second read, on the error path only).
"""
import torch

from . import op_args


def flags(idx, shape, batch_size, sorted_keys, order):
    """[lowest row outside the grid or batch, later row of the lowest duplicate pair], n meaning
    none, from idx int64 [N, 1+nd] and its keys sorted stably (order: their rows). Nothing read."""
    return flags_and_outside(idx, shape, batch_size, sorted_keys, order)[0]


def flags_and_outside(idx, shape, batch_size, sorted_keys, order):
    """(flags, [N] bool: the rows outside the grid or batch)."""
    n = idx.shape[0]
    batch = idx.select(1, 0)
    outside = (batch < 0) | (batch >= batch_size)
    for d, s in enumerate(shape):
        c = idx.select(1, 1 + d)
        outside |= (c < 0) | (c >= s)
    if n == 0:   # nothing to check (and nothing for amin to reduce)
        return torch.zeros(2, dtype=torch.long, device=idx.device), outside
    rows = torch.arange(n, device=idx.device)
    bad_row = torch.where(outside, rows, n).amin()
    if n < 2:
        return torch.stack([bad_row, torch.full_like(bad_row, n)]), outside
    # equal keys are adjacent, rows ascending among them (stable): the later row of each pair
    same = sorted_keys.narrow(0, 1, n - 1) == sorted_keys.narrow(0, 0, n - 1)
    dup_row = torch.where(same, order.narrow(0, 1, n - 1), n).amin()
    return torch.stack([bad_row, dup_row]), outside


def raise_bad_rows(indices, shape, batch_size, bad_row, dup_row, name="indices", grid_name="spatial_shape"):
    """The CPU builders' ValueError for the first failed check (values as read by the host): the
    message is built once, in C++ (kernels/contract/index_errors.h), which reads the offending row.
    ``name`` / ``grid_name``: the argument holding the rows and the one naming their grid."""
    op_args.index_error(indices, shape, batch_size, bad_row, dup_row, name, grid_name)
