"""Tile configurations of the Triton kernels, chosen from the shapes and the dtype alone.

No run-time autotuning: a tuner picks by timing, so two runs (or two machines) could pick
different tiles and sum in different orders. Here a layer's shapes fix its tiles, and the
tiles fix every summation order, so results repeat bit for bit run to run on a given GPU.

Every configuration the choosers below can return is listed in ``GATHER_TILES`` /
``FILTER_TILES``: the tests run each one under Triton's interpreter and compile each one to
sm_80 and sm_90 cubins (``tools/cuda_compile_check/cubins.py``), checking registers, spills and shared
memory. A chooser that returned anything else fails the tests.
"""
import functools
from dataclasses import dataclass

# The kernels' operand types: "fp32" (IEEE, or TF32 when the user allows it), "fp16" and "bf16"
# (fp32 accumulation), "fp64".
DTYPES = ("fp32", "fp16", "bf16", "fp64")


@dataclass(frozen=True)
class Tile:
    """block_m: map rows (gather_mm: output rows per program; filter: rows per reduction step);
    block_n: output channels per program; block_k: (offset, input channel) pairs per step
    (gather_mm) or per program (filter)."""
    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4          # 2 for 16-wide output blocks: 16-byte loads need >= 8 half values a thread
    num_stages: int = 2
    aligned: bool = False       # the kernels' ALIGNED variant: Cin a multiple of block_k, Cout of 16

    def name(self) -> str:
        return (f"m{self.block_m}n{self.block_n}k{self.block_k}w{self.num_warps}s{self.num_stages}"
                + ("a" if self.aligned else ""))


def _block(size: int, widest: int) -> int:
    """The smallest of 16, 32, 64, ... up to ``widest`` that holds ``size`` (16 is the smallest
    tl.dot operand side); larger sizes loop over blocks of ``widest``."""
    block = 16
    while block < size and block < widest:
        block *= 2
    return block


def _widest_n(dtype: str) -> int:
    # fp32 (CUDA-core FMA dot under IEEE) and fp64 hold twice the bytes of a half value: 64-wide
    # tiles keep them within the register file without spills (checked per config on sm_80/sm_90).
    return 128 if dtype in ("fp16", "bf16") else 64


def _widest_k(dtype: str) -> int:
    # fp32 steps of 32 pairs spilled registers (sm_80 gather m64n32k32: 428 B; filter n64k32
    # on both architectures, IEEE and TF32), and so did fp64's with the gated gather's per-pair
    # offset table (sm_80 m32n64k32: 40 B): fp32 and fp64 take steps of 16 (cubins.py measures it).
    return 32 if dtype in ("fp16", "bf16") else 16


# Shape classes: "aligned" -- Cin a multiple of 16 and Cout a multiple of 16 (every layer of the
# LiDAR backbones after the first), where a step of block_k pairs is block_k channels of one
# offset (block_k the widest step dividing Cin), so a row's channels load as 16-byte vectors; and
# "generic" -- everything else (a network's first layer: Cin 3-5), where steps span offsets.
ALIGN = 16
# Rows per tile of both kernels (and of the map plan they share).
ROWS_PER_TILE = 32


def aligned_shape(cin_g: int, cout_g: int) -> bool:
    return cin_g % ALIGN == 0 and cout_g % ALIGN == 0


def _aligned_k(dtype: str, cin_g: int) -> int:
    block = _widest_k(dtype)
    while cin_g % block:
        block //= 2
    return block


def _step_k(dtype: str, kvol: int, cin_g: int, cout_g: int):
    """(block_k, aligned) of a shape class."""
    if aligned_shape(cin_g, cout_g):
        return _aligned_k(dtype, cin_g), True
    return _block(kvol * cin_g, _widest_k(dtype)), False


@functools.lru_cache(maxsize=4096)     # a function of its arguments, asked per launch
def gather_tile(dtype: str, kvol: int, cin_g: int, cout_g: int) -> Tile:
    """gather_mm: 32 sorted output rows per program (map_plan.py: the rows of a tile share their
    offsets best when tiles are small -- 64-row tiles issued 1.36x the useful work over a KITTI
    step, 32-row ones 1.27x, bench/cuda_work.py), the group's Cout in blocks of block_n, its
    present (offset, channel) pairs summed in steps of block_k."""
    block_n = _block(cout_g, _widest_n(dtype))
    block_k, aligned = _step_k(dtype, kvol, cin_g, cout_g)
    return Tile(ROWS_PER_TILE, block_n, block_k, num_warps=_warps(dtype, block_n, block_k, aligned, False),
                aligned=aligned)


def _warps(dtype: str, block_n: int, block_k: int, aligned: bool, filter_kernel: bool) -> int:
    """Warps per program, from the compile check (tools/cuda_compile_check/cubins.py) on triton
    3.8 and 3.6: 2 for 16-wide half/fp32 tiles (16-byte loads need enough values per thread);
    the generic filter kernel's half tiles 4 at 16 columns (2 took 162-166 registers on 3.6) and
    8 at 32+ (4 spilled 8 B); 8 where 4 spilled on triton 3.6's sm_90: the generic gather's
    32-column half tiles of 32 pairs (4 B) and fp64 ones (24 B), the aligned fp64 filter tile of
    64 columns (40 B); and the generic one since the filter kernel adds its splits itself (4 B on
    triton 3.8's sm_90)."""
    half = dtype in ("fp16", "bf16")
    if filter_kernel and not aligned and half:
        return 4 if block_n <= 16 else 8
    if block_n <= 16 and dtype != "fp64":
        return 2
    if not filter_kernel and not aligned and block_n == 32 and ((half and block_k == 32) or dtype == "fp64"):
        return 8
    if filter_kernel and dtype == "fp64" and block_n == 64:
        return 8
    return 4


@functools.lru_cache(maxsize=4096)     # a function of its arguments, asked per launch
def filter_tile(dtype: str, kvol: int, cin_g: int, cout_g: int) -> Tile:
    """gather_mm_backprop_filter: a program owns block_k (offset, channel) rows x block_n
    columns of dW and sums the tiles of sorted map rows of its split in which one of its
    offsets is present (the same 32-row tiles as gather_mm: one plan per map)."""
    block_n = _block(cout_g, 64)
    block_k, aligned = _step_k(dtype, kvol, cin_g, cout_g)
    return Tile(ROWS_PER_TILE, block_n, block_k, num_warps=_warps(dtype, block_n, block_k, aligned, True),
                aligned=aligned)


# Hopper's warpgroup MMA (wgmma) takes M = 64 rows per warpgroup; Ampere's mma.sync 16.
WGMMA_M = 64


def tensor_cores(dtype: str, precision: str) -> bool:
    """Whether the kernels' tl.dot runs on the fp16/bf16/TF32 tensor cores: fp16/bf16 always
    (fp32 accumulation), fp32 only as TF32 (torch.backends.cuda.matmul.allow_tf32); fp32 IEEE
    (the default) runs as FMA. fp64 is left as Triton compiles it (the FP64 mma.sync of sm_80 and
    sm_90), never channels first."""
    return dtype in ("fp16", "bf16") or (dtype == "fp32" and precision == "tf32")


def channels_first(dtype: str, precision: str, tile: Tile) -> bool:
    """The kernels' CHANNELS_FIRST: the dot computed transposed, output channels on the MMA's M
    side. A tile has 32 map rows (ROWS_PER_TILE: larger tiles issue more padded work), too few
    for wgmma's 64; a block of 64+ output channels is enough. Only where tensor cores run:
    elsewhere the untransposed dot is the one measured (registers, no spills)."""
    return tensor_cores(dtype, precision) and tile.block_n >= WGMMA_M and tile.num_warps % 4 == 0


def filter_warps(dtype: str, precision: str, tile: Tile, activation: bool) -> int:
    """num_warps of a weight-gradient launch: the tile's, but 8 for the activation variant
    (gather_kernels.py ACTIVATION) of a channels-first float32 TF32 tile, whose float64
    activation arithmetic in the dot operand's layout needs 145 registers a thread on sm_80
    with 4 warps (the filter kernel's budget is 128; with 8: 79, no spills; cubins.py)."""
    if activation and dtype == "fp32" and precision == "tf32" and channels_first(dtype, precision, tile):
        return max(tile.num_warps, 8)
    return tile.num_warps


# Splits of the filter gradient: split s of a program sums entries s, s + splits, ... of its
# tile list; the splits are added in ascending order afterwards (by the block's last split
# program, gather_kernels.filter_splits_kernel), so the split count (from the shapes alone)
# changes the summation order only with the shapes.
MIN_SPLIT_ROWS = 256
TARGET_FILTER_PROGRAMS = 1024
MAX_SPLITS = 64


def filter_splits(m: int, blocks_k: int, blocks_n: int, groups: int, block_m: int):
    """(splits, rows per split) of the filter gradient: enough programs to fill a GPU (about
    TARGET_FILTER_PROGRAMS), each split at least MIN_SPLIT_ROWS rows (a whole number of
    block_m steps), at most MAX_SPLITS."""
    base = max(1, blocks_k * blocks_n * groups)
    wanted = -(-TARGET_FILTER_PROGRAMS // base)
    by_rows = max(1, m // MIN_SPLIT_ROWS)
    splits = max(1, min(wanted, by_rows, MAX_SPLITS))
    rows = -(-max(m, 1) // splits)
    rows = -(-rows // block_m) * block_m      # whole steps of block_m rows
    return max(1, -(-m // rows)), rows


# Sizes on both sides of every block boundary (the blocks are powers of two and saturate at
# 128); a test checks that every shape up to K = 125, 300 channels picks a listed tile.
_BOUNDARY_SIZES = (1, 16, 17, 32, 33, 64, 65, 128, 129, 256)


def _all(chooser):
    """Every (dtype, tile) ``chooser`` can return."""
    sizes = _BOUNDARY_SIZES
    return sorted({(d, chooser(d, 1, ci, co)) for d in DTYPES for ci in sizes for co in sizes},
                  key=lambda e: (DTYPES.index(e[0]), e[1].block_m, e[1].block_n, e[1].block_k, e[1].aligned))


GATHER_TILES = _all(gather_tile)
FILTER_TILES = _all(filter_tile)
