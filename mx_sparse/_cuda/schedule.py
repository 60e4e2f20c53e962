"""The work the Triton kernels issue for a given map: multiply-adds of their tl.dot steps
(block_m x block_n x block_k per step), computed from the map, its plan (map_plan.py) and the
tile choice without running a kernel. bench/cuda_work.py reports it beside the useful work
(present map entries x Cin x Cout); tests/cuda/test_interpreted_kernels.py checks it against
the kernels' own executed-step counter under the interpreter.

``ungated_*``: the same for the previous kernels, which ran every (offset, channel) step for
every tile of rows in map order (kept for the before/after comparison of bench/cuda_work.py).
"""
import torch

from . import map_plan, tiles


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def gather_issued_macs(nbr: torch.Tensor, num_rows: int, cin: int, cout: int, dtype: str) -> int:
    """gather_mm_kernel: per tile of sorted rows, ceil(present offsets x Cin / block_k) steps."""
    m, kvol = nbr.shape
    tile = tiles.gather_tile(dtype, kvol, cin, cout)
    plan = map_plan.plan(nbr, tile.block_m, num_rows)
    steps = int(((plan.counts.long() * cin + tile.block_k - 1) // tile.block_k).sum())
    return _cdiv(cout, tile.block_n) * steps * tile.block_m * tile.block_n * tile.block_k


def filter_issued_macs(nbr: torch.Tensor, num_rows: int, cin: int, cout: int, dtype: str) -> int:
    """filter_splits_kernel: a program of block_k (offset, channel) pairs runs the tiles of
    sorted rows in which one of its offsets is present (the splits partition the tiles)."""
    m, kvol = nbr.shape
    tile = tiles.filter_tile(dtype, kvol, cin, cout)
    plan = map_plan.plan(nbr, tile.block_m, num_rows)
    present = plan.present.bool()
    steps = 0
    for r0 in range(0, kvol * cin, tile.block_k):
        first, last = r0 // cin, (min(r0 + tile.block_k, kvol * cin) - 1) // cin
        steps += int(present[:, first:last + 1].any(1).sum())
    return _cdiv(cout, tile.block_n) * steps * tile.block_m * tile.block_n * tile.block_k


def ungated_gather_issued_macs(nbr: torch.Tensor, cin: int, cout: int, dtype: str) -> int:
    m, kvol = nbr.shape
    tile = tiles.gather_tile(dtype, kvol, cin, cout)
    steps = _cdiv(kvol * cin, tile.block_k)
    return _cdiv(m, tile.block_m) * _cdiv(cout, tile.block_n) * steps * tile.block_m * tile.block_n * tile.block_k


def ungated_filter_issued_macs(nbr: torch.Tensor, cin: int, cout: int, dtype: str) -> int:
    m, kvol = nbr.shape
    tile = tiles.filter_tile(dtype, kvol, cin, cout)
    blocks_k, blocks_n = _cdiv(kvol * cin, tile.block_k), _cdiv(cout, tile.block_n)
    splits, split_rows = tiles.filter_splits(m, blocks_k, blocks_n, 1, tile.block_m)
    row_steps = sum(_cdiv(min(split_rows, m - s * split_rows), tile.block_m) for s in range(splits))
    return blocks_k * blocks_n * row_steps * tile.block_m * tile.block_n * tile.block_k
