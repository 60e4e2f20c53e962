"""The accelerator's checks of index values, with the C++ CPU kernels' messages (built once, in
kernels/contract): the map builders' (every row inside the grid and batch, no voxel twice) and the
map entries of the gathers and of pooling (-1 or an input row).

Builders: the flags are computed on the device (for build_subm_map and build_conv_map in C++,
kernels/orchestration/neighbor_map_orchestration.cpp) and travel to the host inside the builder's one
read (host_sync.py); raising reads the offending row for the message (a second read, on the error
path only). build_subm_map reads a summary instead (each column's lowest and highest value, whether
a key repeats: fewer kernels) and computes the flags only for indices that fail it (one more read,
on the error path). Map entries: on CPU tensors (MXS_CUDA_ON_CPU=1, MXS_NPU_ON_CPU=1) they are read on
the host, where that is free, and a bad one raises the CPU kernel's ValueError; on a CUDA device
the gathers' and pooling's checks stay device-side assertions (no host synchronisation: a
RuntimeError at the next synchronisation, as torch's own indexing reports a bad index); on the NPU
the gathers and pooling read a map the builders did not make on the host (check_gather_map says
why), with the CPU kernels' ValueErrors.
"""
import torch

from .._C import map_orchestration as _orchestration
from . import built_maps, op_args


def flags(idx, shape, batch_size, sorted_keys, order):
    """[lowest row outside the grid or batch, later row of the lowest duplicate pair], n meaning
    none, from idx int64 [N, 1+nd] and its keys sorted stably (order: their rows). Nothing read."""
    return flags_and_outside(idx, shape, batch_size, sorted_keys, order)[0]


def flags_and_outside(idx, shape, batch_size, sorted_keys, order):
    """(flags, [N] bool: the rows outside the grid or batch): the C++ builders' own check
    (kernels/orchestration/neighbor_map_orchestration.cpp, one implementation)."""
    if idx.shape[0] == 0:   # nothing to check (and nothing for amin to reduce)
        return torch.zeros(2, dtype=torch.long, device=idx.device), idx.new_zeros((0,), dtype=torch.bool)
    return _orchestration.flags_and_outside(idx, list(shape), int(batch_size), sorted_keys, order)


def raise_bad_rows(indices, shape, batch_size, bad_row, dup_row, name="indices", grid_name="spatial_shape"):
    """The CPU builders' ValueError for the first failed check (values as read by the host): the
    message is built once, in C++ (kernels/contract/index_errors.h), which reads the offending row.
    ``name`` / ``grid_name``: the argument holding the rows and the one naming their grid."""
    op_args.index_error(indices, shape, batch_size, bad_row, dup_row, name, grid_name)


def check_gather_map(nbr, num_rows, name="nbr"):
    """A gather's map entries in [-1, num_rows), read on the host: the CPU kernel's ValueError for
    the lowest map row holding another. On CPU tensors the read is free; on the NPU (any device but
    CUDA) it is one host read per call of a map the builders did not make, because the AscendC
    gathers read the rows a map names unchecked and torch's device-side assertion
    (``_assert_async``) has kernels for CPU and CUDA only (torch_npu's is not known here). On CUDA
    nothing here: the map's plan asserts it device-side, once per map and row count
    (``assert_map_rows`` from map_plan.plan). A builder's unchanged map is vouched for where it
    was made, on every device: a training step reads nothing here."""
    if nbr.numel() == 0 or nbr.device.type == "cuda" or built_maps.built_for(nbr, num_rows):
        return
    lo, hi = torch.aminmax(nbr)
    if lo >= -1 and hi < num_rows:
        return
    bad = ((nbr < -1) | (nbr >= num_rows)).any(1)
    op_args.map_row_error(name, int(bad.nonzero()[0, 0]), num_rows)


def assert_map_rows(nbr, num_rows, name="nbr"):
    """A device-side assertion that every entry of ``nbr`` lies in [-1, num_rows): no host read (a
    RuntimeError at the next synchronisation, as torch's own indexing reports a bad index; at once
    on CPU tensors). The CUDA gathers' plans run it (map_plan.plan)."""
    if nbr.numel() == 0:
        return
    lo, hi = torch.aminmax(nbr)
    torch._assert_async((lo >= -1) & (hi < num_rows),
                        f"{name}: holds an entry outside [-1, {num_rows}), i.e. not an input row")


def check_pool_map(nbr, num_rows, name="nbr"):
    """A pooling map's entries in [-1, num_rows): on CUDA a device-side assertion; elsewhere (CPU
    tensors, the NPU: see check_gather_map for why not an assertion there) read on the host, the
    CPU kernel's ValueError (lowest and highest entry in the message). A builder's unchanged map is
    vouched for where it was made: nothing is read or asserted."""
    if nbr.numel() == 0 or built_maps.built_for(nbr, num_rows):
        return
    lo, hi = torch.aminmax(nbr)
    if nbr.device.type == "cuda":
        torch._assert_async((lo >= -1) & (hi < num_rows), f"{name}: expected entries in [-1, {num_rows})")
    else:
        op_args.pool_entries(name, int(lo), int(hi), num_rows)
