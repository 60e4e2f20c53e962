"""Per-gate compacted tile lists of a map plan, for the weight-gradient kernel
(gather_kernels.filter_splits_kernel).

A program of that kernel owns a block of (offset, input channel) rows of dW -- its gate: in
the ALIGNED variant one offset, otherwise the offsets its block of pairs spans -- and sums the
plan's tiles of sorted map rows in which its gate is present. Looping over all tiles with an
``if present`` inside kept the loads from pipelining (no cp.async in the PTX); here each gate
gets the list of its tiles, ascending, so the kernel's loop runs exactly those and has no
branch:

  lists  int32 [T, G]   column g: gate g's tiles in which it is present, ascending, first
                        (then the others, ascending: never read)
  counts int32 [G]      how many of them

Built on the device by torch (running counts and a scatter, no host read) and cached per plan (weakly on its
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
    """(lists, counts) of the plan whose tile gate is ``present`` [T, kvol]. Each tile's place
    in its gate's list is a running count down the tiles (present tiles first, then the absent
    ones), written by a scatter: elementwise work on contiguous tensors, no sort, nothing read
    back (a transposed copy would also do, but fake CUDA tensors refuse it)."""
    flags = _gate_flags(present, aligned, kvol, cin, block_k)                     # [T, G]
    tiles, gates = flags.shape
    live = flags.int()
    counts = live.sum(0, dtype=torch.int32)
    place = torch.where(flags, live.cumsum(0) - 1, counts + (1 - live).cumsum(0) - 1)
    order = torch.zeros((tiles, gates), dtype=torch.int32, device=present.device)
    order += torch.arange(tiles, dtype=torch.int32, device=present.device).unsqueeze(1)
    lists = torch.empty((tiles, gates), dtype=torch.int32, device=present.device).scatter_(0, place, order)
    return lists, counts


def lists(present: torch.Tensor, aligned: bool, kvol: int, cin: int, block_k: int):
    """``build``, cached per plan and gate shape (the aligned gates are the offsets alone)."""
    key = ("offsets",) if aligned else ("pairs", cin, block_k)
    entries = _cache.setdefault(present, {})
    if key not in entries:
        entries[key] = build(present, aligned, kvol, cin, block_k)
    return entries[key]
