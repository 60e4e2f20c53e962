"""The CUDA backend's fused BatchNorm+ReLU kernels (host side): launch of the Triton kernels of
batch_norm_kernels.py for the three computations of the accelerator orchestration
(mx_sparse/_accelerator/batch_norm_relu.py, which checks the arguments first and picks these for
CUDA tensors, and for CPU tensors under MXS_CUDA_ON_CPU=1).

  forward           statistics, running blend, invstd, scale, shift and y = relu(x * scale + shift):
                    2 launches with batch statistics (moments, normalize), 1 with running ones --
                    and 1 with batch statistics when the input is a gather_mm output whose launch
                    wrote its per-tile moments (gather_mm.tile_stats: a conv's training forward
                    straight into this layer), which normalize combines in place of moments
  scale_shift_relu  y = max(x * scale + shift, 0): 1 launch
  backward          dx, dgamma, dbeta: 2 launches (sums, dx)

Features float32, float64, float16 or bfloat16 (autocast's activations) with per-channel
parameters and running statistics of any of these dtypes (float32 master parameters under
autocast). No torch operator runs besides the allocations (and a conversion where an argument
comes in a dtype other than the one the fused layer passes), no host read. The results repeat
bit for bit from run to run; they are not the CPU kernels' bits (batch_norm_kernels.py).
"""
import functools
import struct

import torch

from . import gather_mm, launch

# Rows of a block of the reductions: a multiple of the tile's rows, at most MAX_BLOCKS blocks
# (each program of the second kernel of a pass combines every block's sums of its channels).
MAX_BLOCKS = 128
# and at least MIN_TILES tiles (a small input in a few blocks: less combining, fewer programs).
MIN_TILES = 8
# Elements per tile (TILE_R rows x BLOCK_C channels), BLOCK_C = the channels rounded up to a
# power of two within BLOCK_C_RANGE; blocks of the tile sums combined CHUNK_B at a time.
TILE_ELEMENTS = 1024
BLOCK_C_RANGE = (16, 64)
CHUNK_B = 16
WARPS = 4
# The interpreter (the test suite) rounds a * b + c twice; the GPU compiler would contract it.
# maxnreg: ptxas otherwise spills a few bytes in some dx variants at ~50 registers (cubins.py).
OPTIONS = {"enable_fp_fusion": False, "maxnreg": 128}
FEATURE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def compute_dtype(dtype):
    """The dtype the kernels compute (and keep scale and shift) in for features of ``dtype``."""
    return torch.float64 if dtype == torch.float64 else torch.float32


@functools.lru_cache(maxsize=None)
def _triton_type(dtype):
    import triton.language as tl
    return tl.float64 if dtype == torch.float64 else tl.float32


def block_c(c: int) -> int:
    lo, hi = BLOCK_C_RANGE
    return min(hi, max(lo, 1 << max(0, c - 1).bit_length()))


@functools.lru_cache(maxsize=4096)
def layout(n: int, c: int):
    """(BLOCK_C, TILE_R, block_rows, nblocks, grid) for n rows of c channels: from n and c alone,
    so the same shapes sum in the same order on every run."""
    if n >= 2**31:
        raise ValueError(f"input: {n} rows exceed the CUDA kernels' int32 row count")
    width = block_c(c)
    tile_r = TILE_ELEMENTS // width
    tiles = -(-n // tile_r)
    block_rows = max(MIN_TILES, -(-tiles // MAX_BLOCKS)) * tile_r
    nblocks = max(1, -(-n // block_rows))   # one program row even without rows: it writes the per-channel outputs
    return width, tile_r, block_rows, nblocks, (nblocks, -(-c // width))


@functools.lru_cache(maxsize=64)
def double_halves(value: float):
    """(hi, lo): the bits of a float64 as two int32 values (see batch_norm_kernels._double)."""
    bits = struct.unpack("<q", struct.pack("<d", float(value)))[0]
    lo = bits & 0xFFFFFFFF
    return bits >> 32, lo - (1 << 32) if lo >= 1 << 31 else lo


def _wider(a, b):
    """torch.promote_types of two floating dtypes, without a dispatcher call (traced as an operator)."""
    if a == b:
        return a
    if a.itemsize != b.itemsize:
        return a if a.itemsize > b.itemsize else b
    return torch.float32     # float16 and bfloat16


def _operand(t, dtype=None):
    """``t`` (in ``dtype`` where given) contiguous and aligned, as the kernels read it."""
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    return launch.aligned(t)


def _in_place_target(t):
    """A running statistic the kernel can write: itself, or a contiguous aligned copy to copy back."""
    if t is None:
        return None
    return launch.aligned(t) if t.is_contiguous() else t.contiguous()


@functools.lru_cache(maxsize=4096)
def _constexprs(dtype, **constexprs):
    """A launch's keyword arguments: ``constexprs`` (T, the triton type of features of ``dtype``, where
    given as True) with the launch options; one dict per variant, made once (no dict built per launch)."""
    if constexprs.get("T"):
        constexprs["T"] = _triton_type(dtype)
    return dict(num_warps=WARPS, num_stages=1, **OPTIONS, **constexprs)


def _launch(kernel_name, op, dtype, tile, grid, tensors, *args, constexprs):
    launch.run(getattr(launch.batch_norm_kernels(), kernel_name), op, launch.operand_type(dtype), tile, grid,
               tensors, *args, **constexprs)


def forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    """(y, mean, invstd, scale, shift) as batch_norm_relu_forward returns them, the running
    statistics blended in place (batch statistics, where given)."""
    x = launch.aligned(input)
    n, c = x.shape
    width, tile_r, block_rows, nblocks, grid = layout(n, c)
    held = compute_dtype(x.dtype)
    dev = x.device
    y = torch.empty_like(x)
    mean = torch.empty((c,), dtype=torch.float64, device=dev)
    invstd = torch.empty((c,), dtype=torch.float64, device=dev)
    scale = torch.empty((c,), dtype=held, device=dev)
    shift = torch.empty((c,), dtype=held, device=dev)
    # (unrolled: no comprehension frame per call)
    targets = (_in_place_target(running_mean), _in_place_target(running_var))
    params = (None if weight is None else launch.aligned(weight), None if bias is None else launch.aligned(bias))
    tile = f"c{width}"
    # the partial moments: the producing gather_mm's per-tile ones where it wrote them, else moments_kernel's
    moments = gather_mm.tile_stats(input) if batch_stats and n > 0 else None
    if moments is not None:
        partial, stat_rows = moments
        stat_blocks = partial.shape[0]
    elif batch_stats:
        partial, stat_blocks, stat_rows = torch.empty((nblocks, 2, c), dtype=torch.float64, device=dev), nblocks, block_rows
        _launch("moments_kernel", "bn_moments", x.dtype, tile, grid, (x, partial), n, c, block_rows,
                constexprs=_constexprs(x.dtype, TILE_R=tile_r, BLOCK_C=width))
    else:
        partial, stat_blocks, stat_rows = mean, 0, block_rows    # never read
    # an absent vector's pointer is never read (its flag is off): x stands in for it
    pointers = (x if params[0] is None else params[0], x if params[1] is None else params[1],
                x if targets[0] is None else targets[0], x if targets[1] is None else targets[1])
    _launch("normalize_relu_kernel", "bn_normalize_relu", x.dtype, tile, grid,
            (x, partial, y, mean, invstd, scale, shift, *pointers), n, c, stat_blocks, stat_rows, block_rows,
            *double_halves(momentum), *double_halves(eps),
            constexprs=_constexprs(x.dtype, T=True, BATCH_STATS=bool(batch_stats), HAS_WEIGHT=params[0] is not None,
                                   HAS_BIAS=params[1] is not None, HAS_RUNNING_MEAN=targets[0] is not None,
                                   HAS_RUNNING_VAR=targets[1] is not None, TILE_R=tile_r, CHUNK_B=CHUNK_B,
                                   BLOCK_C=width))
    if batch_stats:
        for running, target in zip((running_mean, running_var), targets):
            if target is not None and target is not running:
                running.copy_(target)
    return y, mean, invstd, scale, shift


def scale_shift_relu(input, scale, shift):
    """y = max(input * scale + shift, 0); scale and shift in the compute dtype."""
    x = launch.aligned(input)
    n, c = x.shape
    width, tile_r, block_rows, _, grid = layout(n, c)
    held = compute_dtype(x.dtype)
    y = torch.empty_like(x)
    _launch("scale_shift_relu_kernel", "bn_scale_shift_relu", x.dtype, f"c{width}", grid,
            (x, _operand(scale, held), _operand(shift, held), y), n, c, block_rows,
            constexprs=_constexprs(x.dtype, T=True, TILE_R=tile_r, BLOCK_C=width))
    return y


def backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """(dx, dgamma, dbeta); dgamma and dbeta in the wider of the features' and the weight's dtype
    (float32 for float32 master weights under autocast; the CPU kernels' features dtype otherwise)."""
    x = launch.aligned(input)
    n, c = x.shape
    width, tile_r, block_rows, nblocks, grid = layout(n, c)
    held = compute_dtype(x.dtype)
    dev = x.device
    if (grad.dtype, mean.dtype, invstd.dtype, scale.dtype, shift.dtype) == (x.dtype, torch.float64, torch.float64,
                                                                            held, held):
        dy, m, inv, s, b = launch.aligned_all(grad, mean, invstd, scale, shift)   # (as forward returned them)
    else:
        dy = _operand(grad, x.dtype)
        m, inv = _operand(mean, torch.float64), _operand(invstd, torch.float64)
        s, b = _operand(scale, held), _operand(shift, held)
    gamma = None if weight is None else launch.aligned(weight)
    channel_dtype = x.dtype if weight is None else _wider(x.dtype, weight.dtype)
    partial = torch.empty((nblocks, 2, c), dtype=torch.float64, device=dev)
    dgamma = torch.empty((c,), dtype=channel_dtype, device=dev)
    dbeta = torch.empty((c,), dtype=channel_dtype, device=dev)
    dx = torch.empty_like(x)
    tile = f"c{width}"
    _launch("backward_sums_kernel", "bn_backward_sums", x.dtype, tile, grid, (x, dy, s, b, m, inv, partial), n, c,
            block_rows, constexprs=_constexprs(x.dtype, T=True, TILE_R=tile_r, BLOCK_C=width))
    _launch("backward_dx_kernel", "bn_backward_dx", x.dtype, tile, grid,
            (x, dy, s, b, m, inv, x if gamma is None else gamma, partial, dx, dgamma, dbeta), n, c, nblocks,
            block_rows, constexprs=_constexprs(x.dtype, T=True, BATCH_STATS=bool(batch_stats),
                                               HAS_WEIGHT=gamma is not None, TILE_R=tile_r, CHUNK_B=CHUNK_B,
                                               BLOCK_C=width))
    return dx, dgamma, dbeta
