"""Open3D's neighbour lists (CSR: ``neighbors_index``, ``neighbors_kernel_index``,
``neighbors_row_splits``, optional ``neighbors_importance``) as mx_sparse's neighbour map.

Output ``m`` owns the list entries ``row_splits[m] .. row_splits[m+1]``; entry ``e`` applies
filter element ``kernel_index[e]`` to input ``index[e]``. The map is ``nbr[m, s*K + k]``: the
``s``-th entry of output ``m`` with filter element ``k`` (a list may name one filter element of
one output several times; each further occurrence goes to a further block of K columns, whose
weight is the same filter element, so its sum is Open3D's). ``S = 1`` for lists made on a grid of
distinct voxels."""
from typing import Optional, Tuple

import torch

_INDEX_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def integer_vector(name: str, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a tensor, got {type(value).__name__}")
    if value.dim() != 1 or value.dtype not in _INDEX_DTYPES:
        raise ValueError(f"{name}: expected a 1-D integer tensor, got shape {list(value.shape)} of {value.dtype}")
    return value.long()


def optional_vector(name: str, value, length: int, what: str, dtype) -> Optional[torch.Tensor]:
    """Open3D's 'zero-length tensor disables it' convention: None for an empty (or None)
    ``value``, else the vector, which must hold ``length`` floats."""
    if value is None:
        return None
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name}: expected a tensor, got {type(value).__name__}")
    if value.numel() == 0:
        return None
    if value.dim() != 1 or value.shape[0] != length:
        raise ValueError(f"{name}: expected shape [{length}] (one value per {what}) or a zero-length tensor, "
                         f"got {list(value.shape)}")
    if not value.is_floating_point():
        raise ValueError(f"{name}: expected a floating-point tensor, got {value.dtype}")
    return value.to(dtype)


def row_counts(name: str, row_splits, rows: Optional[int], entries: Optional[int]) -> torch.Tensor:
    """The list lengths of ``row_splits`` (an exclusive prefix sum starting at 0, ``rows + 1``
    values, ending at ``entries``), after checking it."""
    splits = integer_vector(name, row_splits)
    if splits.numel() == 0 or (rows is not None and splits.numel() != rows + 1):
        expected = "at least one value" if rows is None else f"{rows + 1} values (one per point + 1)"
        raise ValueError(f"{name}: expected {expected}, got {splits.numel()}")
    counts = splits[1:] - splits[:-1]
    first, last = int(splits[0]), int(splits[-1])
    if first != 0 or bool((counts < 0).any()) or (entries is not None and last != entries):
        raise ValueError(f"{name}: expected a non-decreasing prefix sum from 0 to {entries} (the list length), "
                         f"got {splits.tolist() if splits.numel() <= 8 else f'{first} ... {last}'}")
    return counts


def _in_range(name: str, values: torch.Tensor, bound: int, what: str):
    if values.numel() and (int(values.min()) < 0 or int(values.max()) >= bound):
        raise ValueError(f"{name}: expected values in [0, {bound}) ({what}), got values in "
                         f"[{int(values.min())}, {int(values.max())}]")


def csr_to_map(neighbors_index, neighbors_kernel_index, neighbors_row_splits, neighbors_importance,
               num_inputs: int, kernel_volume: int, dtype) -> Tuple[torch.Tensor, Optional[torch.Tensor], int]:
    """``(nbr [M, S*K] int32, nbr_importance [M, S*K] or None, S)`` of an Open3D neighbour list."""
    index = integer_vector("neighbors_index", neighbors_index)
    kernel = integer_vector("neighbors_kernel_index", neighbors_kernel_index)
    if kernel.numel() != index.numel():
        raise ValueError(f"neighbors_kernel_index: expected {index.numel()} values (one per entry of "
                         f"neighbors_index), got {kernel.numel()}")
    counts = row_counts("neighbors_row_splits", neighbors_row_splits, None, index.numel())
    importance = optional_vector("neighbors_importance", neighbors_importance, index.numel(),
                                 "entry of neighbors_index", dtype)
    _in_range("neighbors_index", index, num_inputs, "rows of inp_features")
    _in_range("neighbors_kernel_index", kernel, kernel_volume, "elements of the filter")
    rows = counts.numel()
    owner = torch.repeat_interleave(torch.arange(rows, device=index.device), counts.to(index.device))
    cell = owner * kernel_volume + kernel
    occurrence = _occurrence(cell)
    blocks = int(occurrence.max()) + 1 if occurrence.numel() else 1
    column = occurrence * kernel_volume + kernel
    nbr = torch.full((rows, blocks * kernel_volume), -1, dtype=torch.int32, device=index.device)
    nbr[owner, column] = index.to(torch.int32)
    nbr_importance = None
    if importance is not None:
        nbr_importance = torch.zeros(nbr.shape, dtype=dtype, device=index.device).index_put((owner, column), importance)
    return nbr, nbr_importance, blocks


def _occurrence(cell: torch.Tensor) -> torch.Tensor:
    """For each entry, how many earlier entries name the same (output, filter element)."""
    if cell.numel() == 0:
        return cell
    order = torch.argsort(cell, stable=True)
    ordered = cell[order]
    starts = torch.ones_like(ordered, dtype=torch.bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    position = torch.arange(cell.numel(), device=cell.device)
    run_start = torch.cummax(torch.where(starts, position, torch.zeros_like(position)), 0).values
    occurrence = torch.empty_like(cell)
    occurrence[order] = position - run_start
    return occurrence
