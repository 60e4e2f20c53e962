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

Built on the device by one Triton launch (plan_kernels.tile_lists_kernel: a program per gate, a
count then a running count down the tiles; no host read) -- or, in a training step, by extra
programs of the forward gather_mm launch on the plan (``to_fill``; gather_kernels.py LISTS), so
no launch of its own -- and cached per plan (weakly on its
``present`` tensor, which a rebuilt plan replaces), so a map shared by several layers builds
its offset lists once. ``reference_build`` is the same table from torch operators (about a
dozen per plan), what the kernel is tested against.
"""
import torch
from .._core.weak_id_map import WeakIdMap

from . import launch

_cache = WeakIdMap()
# Tiles per step of the kernel's loop, and its warps (the compile check, cubins.py: 1024 tiles
# spilled a few bytes on sm_80 with 4, 8 and 16 warps, 256 on sm_90 with 4; 512 with 4 none).
BLOCK_T = 512
WARPS = 4


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


def gates(aligned: bool, kvol: int, cin: int, block_k: int) -> int:
    """The weight-gradient kernel's gates: the offsets (aligned), else its blocks of block_k pairs."""
    return kvol if aligned else -(-kvol * cin // block_k)


def span(cin: int, block_k: int) -> int:
    """The most offsets one block of ``block_k`` (offset, channel) pairs can touch."""
    return (block_k - 1) // cin + 2


def build(present: torch.Tensor, aligned: bool, kvol: int, cin: int, block_k: int):
    """(lists, counts) of the plan whose tile gate is ``present`` [T, kvol] (int32, 1 where the
    offset is present): one launch of plan_kernels.tile_lists_kernel."""
    tiles, dev = present.shape[0], present.device
    g = gates(aligned, kvol, cin, block_k)
    lists = torch.empty((tiles, g), dtype=torch.int32, device=dev)
    counts = torch.empty((g,), dtype=torch.int32, device=dev)
    if tiles == 0:
        return lists, counts.zero_()
    if present.dtype != torch.int32:
        present = present.int()
    launch.run(launch.plan_kernels().tile_lists_kernel, "tile_lists", "int32", f"t{BLOCK_T}" + ("a" if aligned else ""),
               (g,), (launch.aligned(present), lists, counts), tiles, kvol, g, cin, block_k, span(cin, block_k),
               ALIGNED=bool(aligned), BLOCK_T=BLOCK_T, num_warps=WARPS)
    return lists, counts


def reference_build(present: torch.Tensor, aligned: bool, kvol: int, cin: int, block_k: int):
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


def _key(aligned: bool, cin: int, block_k: int):
    return ("offsets",) if aligned else ("pairs", cin, block_k)   # the aligned gates: the offsets alone


def lists(present: torch.Tensor, aligned: bool, kvol: int, cin: int, block_k: int):
    """``build``, cached per plan and gate shape."""
    key = _key(aligned, cin, block_k)
    entries = _cache.setdefault(present, {})
    if key not in entries:
        entries[key] = build(present, aligned, kvol, cin, block_k)
    return entries[key]


def to_fill(present: torch.Tensor, aligned: bool, kvol: int, cin: int, block_k: int):
    """Uninitialised (lists, counts) of the plan, kept as its lists from now on, for a launch that
    fills them before anything reads them (gather_mm_kernel's LISTS programs, launched next on
    the stream the weight-gradient kernel later runs on); None where the plan has them already."""
    key = _key(aligned, cin, block_k)
    entries = _cache.setdefault(present, {})
    if key in entries:
        return None
    g = gates(aligned, kvol, cin, block_k)
    found = entries[key] = (present.new_empty((present.shape[0], g)), present.new_empty((g,)))
    return found
