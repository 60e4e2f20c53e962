"""Per-gate compacted tile lists of a map plan, for the weight-gradient kernel
(gather_kernels.filter_splits_kernel).

A program of that kernel owns a block of (offset, input channel) rows of dW -- its gate: in
the ALIGNED variant one offset, otherwise the offsets its block of pairs spans -- and sums the
plan's tiles of sorted map rows in which its gate is present. Looping over all tiles with an
``if present`` inside kept the loads from pipelining (no cp.async in the PTX); here each gate
gets the list of its tiles, ascending, so the kernel's loop runs exactly those and has no
branch:

  lists  int32 [G, T]   gate g's tiles in which it is present, ascending, first (then the
                        others, ascending: never read)
  counts int32 [G]      how many of them

Built on the device by torch (a stable sort, no host read) and cached per plan (weakly on its
``present`` tensor, which a rebuilt plan replaces), so a map shared by several layers builds
its offset lists once.
"""
import torch
from torch.utils.weak import WeakIdKeyDictionary

_cache = WeakIdKeyDictionary()


def _gate_flags(present: torch.Tensor, aligned: bool, kvol: int, cin: int, block_k: int) -> torch.Tensor:
    """[T, G] bool: gate g present in tile t."""
    if aligned:
        return present.bool()
    pairs = kvol * cin
    starts = torch.arange(0, pairs, block_k, device=present.device)
    first = starts // cin
    last = (torch.clamp(starts + block_k, max=pairs) - 1) // cin
    # presence over the offset range [first, last] of each block: a difference of running sums
    running = torch.nn.functional.pad(present.int().cumsum(1), (1, 0))
    return (running.index_select(1, last + 1) - running.index_select(1, first)) > 0


def build(present: torch.Tensor, aligned: bool, kvol: int, cin: int, block_k: int):
    """(lists, counts) of the plan whose tile gate is ``present`` [T, kvol]."""
    flags = _gate_flags(present, aligned, kvol, cin, block_k).t()          # [G, T]
    lists = torch.sort(flags.logical_not().to(torch.uint8), dim=1, stable=True).indices
    return lists.to(torch.int32).contiguous(), flags.sum(1, dtype=torch.int32)


def lists(present: torch.Tensor, aligned: bool, kvol: int, cin: int, block_k: int):
    """``build``, cached per plan and gate shape (the aligned gates are the offsets alone)."""
    key = ("offsets",) if aligned else ("pairs", cin, block_k)
    entries = _cache.setdefault(present, {})
    if key not in entries:
        entries[key] = build(present, aligned, kvol, cin, block_k)
    return entries[key]
