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

Host path: what a call's launches take besides its tensors (layout, kernels, keyword arguments,
output dtypes) is prepared once per (call, rows, channels, dtype, flags) and kept (``_Prepared``:
a network has a few such keys); a call then aligns its operands, allocates its outputs and
launches. The outputs stay separate allocations: carving mean and invstd (or scale and shift)
out of one buffer costs a view per output, as much host time as the allocation it saves (on CPU
tensors, measured), and would tie the outputs' storages together.
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
    launch.batch_norm_kernels()    # where triton is missing: the error that says what to install
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


class _Prepared:
    """What the launches of one call take besides its tensors, for one (call, rows, channels, dtype,
    flags): the layout, the kernels with their keyword arguments and the dtypes of the outputs; made
    once per such key (``_kept``), so a call builds no dict, f-string or layout of its own."""
    __slots__ = ("held", "type_name", "tile", "grid", "block_rows", "nblocks", "partial_shape", "first", "second",
                 "channel_dtype")

    def __init__(self, n, c, dtype, first, second=None, channel_dtype=None):
        width, tile_r, self.block_rows, self.nblocks, self.grid = layout(n, c)
        self.held, self.type_name, self.tile = compute_dtype(dtype), launch.operand_type(dtype), f"c{width}"
        self.partial_shape, self.channel_dtype = (self.nblocks, 2, c), channel_dtype
        self.first = _kernel_launch(dtype, width, tile_r, *first)
        self.second = None if second is None else _kernel_launch(dtype, width, tile_r, *second)


def _kernel_launch(dtype, width, tile_r, kernel_name, record_name, constexprs):
    """(kernel, launch record name, keyword arguments) of one kernel of a call."""
    return (getattr(launch.batch_norm_kernels(), kernel_name), record_name,
            _constexprs(dtype, TILE_R=tile_r, BLOCK_C=width, **constexprs))


# (call, rows, channels, dtype, flags...) -> _Prepared. A network has a few such keys; the cache is
# emptied when full (a stream of new shapes) rather than grown without bound.
_prepared = {}
MAX_PREPARED = 4096


def _kept(key, make):
    found = _prepared.get(key)
    if found is None:
        if len(_prepared) >= MAX_PREPARED:
            _prepared.clear()
        found = _prepared[key] = make()
    return found


def _forward_launches(n, c, dtype, batch_stats, has_weight, has_bias, has_mean, has_var):
    normalize = ("normalize_relu_kernel", "bn_normalize_relu",
                 dict(T=True, BATCH_STATS=batch_stats, HAS_WEIGHT=has_weight, HAS_BIAS=has_bias,
                      HAS_RUNNING_MEAN=has_mean, HAS_RUNNING_VAR=has_var, CHUNK_B=CHUNK_B))
    # first: the moments (batch statistics without a gather_mm's tile moments), second: normalize
    return _Prepared(n, c, dtype, ("moments_kernel", "bn_moments", {}), normalize)


def _backward_launches(n, c, dtype, batch_stats, weight_dtype):
    channel_dtype = dtype if weight_dtype is None else _wider(dtype, weight_dtype)
    return _Prepared(n, c, dtype, ("backward_sums_kernel", "bn_backward_sums", dict(T=True)),
                     ("backward_dx_kernel", "bn_backward_dx",
                      dict(T=True, BATCH_STATS=batch_stats, HAS_WEIGHT=weight_dtype is not None, CHUNK_B=CHUNK_B)),
                     channel_dtype)


def _recompute_launch(n, c, dtype):
    return _Prepared(n, c, dtype, ("scale_shift_relu_kernel", "bn_scale_shift_relu", dict(T=True)))


@functools.lru_cache(maxsize=64)
def _momentum_eps(momentum: float, eps: float):
    return (*double_halves(momentum), *double_halves(eps))


def _aligned_or_none(*tensors):
    """``launch.aligned`` of each tensor given (None stays None)."""
    return tuple(None if t is None else launch.aligned(t) for t in tensors)


def forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    """(y, mean, invstd, scale, shift) as batch_norm_relu_forward returns them, the running
    statistics blended in place (batch statistics, where given)."""
    batch_stats = bool(batch_stats)
    if weight is None or bias is None or running_mean is None or running_var is None:
        x, params0, params1, target0, target1 = _aligned_or_none(input, weight, bias, running_mean, running_var)
    else:   # (the usual layer: everything present, asked at once)
        x, params0, params1, target0, target1 = launch.aligned_all(input, weight, bias, running_mean, running_var)
    n, c = x.shape
    p = _kept((0, n, c, x.dtype, batch_stats, params0 is not None, params1 is not None, target0 is not None,
               target1 is not None),
              lambda: _forward_launches(n, c, x.dtype, batch_stats, params0 is not None, params1 is not None,
                                        target0 is not None, target1 is not None))
    dev, held = x.device, p.held
    y = torch.empty_like(x)
    mean = torch.empty((c,), dtype=torch.float64, device=dev)
    invstd = torch.empty((c,), dtype=torch.float64, device=dev)
    scale = torch.empty((c,), dtype=held, device=dev)
    shift = torch.empty((c,), dtype=held, device=dev)
    # the partial moments: the producing gather_mm's per-tile ones where it wrote them, else moments_kernel's
    moments = gather_mm.tile_stats(input) if batch_stats and n > 0 else None
    if moments is not None:
        partial, stat_rows = moments
        stat_blocks = partial.shape[0]
    elif batch_stats:
        partial, stat_blocks, stat_rows = torch.empty(p.partial_shape, dtype=torch.float64, device=dev), p.nblocks, \
            p.block_rows
        kernel, name, constexprs = p.first
        launch.run(kernel, name, p.type_name, p.tile, p.grid, (x, partial), n, c, p.block_rows, **constexprs)
    else:
        partial, stat_blocks, stat_rows = mean, 0, p.block_rows    # never read
    # an absent vector's pointer is never read (its flag is off): x stands in for it
    kernel, name, constexprs = p.second
    launch.run(kernel, name, p.type_name, p.tile, p.grid,
               (x, partial, y, mean, invstd, scale, shift, x if params0 is None else params0,
                x if params1 is None else params1, x if target0 is None else target0,
                x if target1 is None else target1),
               n, c, stat_blocks, stat_rows, p.block_rows, *_momentum_eps(momentum, eps), **constexprs)
    if batch_stats:
        if target0 is not None and target0 is not running_mean:
            running_mean.copy_(target0)
        if target1 is not None and target1 is not running_var:
            running_var.copy_(target1)
    return y, mean, invstd, scale, shift


def scale_shift_relu(input, scale, shift):
    """y = max(input * scale + shift, 0); scale and shift in the compute dtype."""
    dtype = input.dtype
    n, c = input.shape
    p = _kept((1, n, c, dtype), lambda: _recompute_launch(n, c, dtype))
    held = p.held
    if scale.dtype == held and shift.dtype == held:   # (as forward returned them)
        x, s, b = launch.aligned_all(input, scale, shift)
    else:
        x, s, b = launch.aligned(input), _operand(scale, held), _operand(shift, held)
    y = torch.empty_like(x)
    kernel, name, constexprs = p.first
    launch.run(kernel, name, p.type_name, p.tile, p.grid, (x, s, b, y), n, c, p.block_rows, **constexprs)
    return y


def backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """(dx, dgamma, dbeta); dgamma and dbeta in the wider of the features' and the weight's dtype
    (float32 for float32 master weights under autocast; the CPU kernels' features dtype otherwise)."""
    dtype = input.dtype
    n, c = input.shape
    batch_stats = bool(batch_stats)
    p = _kept((2, n, c, dtype, batch_stats, None if weight is None else weight.dtype),
              lambda: _backward_launches(n, c, dtype, batch_stats, None if weight is None else weight.dtype))
    held = p.held
    if weight is not None and (grad.dtype, mean.dtype, invstd.dtype, scale.dtype, shift.dtype) == (
            dtype, torch.float64, torch.float64, held, held):
        x, dy, m, inv, s, b, gamma = launch.aligned_all(input, grad, mean, invstd, scale, shift, weight)
    else:   # (another dtype given, or no weight)
        x, dy = launch.aligned(input), _operand(grad, dtype)
        m, inv = _operand(mean, torch.float64), _operand(invstd, torch.float64)
        s, b = _operand(scale, held), _operand(shift, held)
        gamma = None if weight is None else launch.aligned(weight)
    dev = x.device
    partial = torch.empty(p.partial_shape, dtype=torch.float64, device=dev)
    dgamma = torch.empty((c,), dtype=p.channel_dtype, device=dev)
    dbeta = torch.empty((c,), dtype=p.channel_dtype, device=dev)
    dx = torch.empty_like(x)
    kernel, name, constexprs = p.first
    launch.run(kernel, name, p.type_name, p.tile, p.grid, (x, dy, s, b, m, inv, partial), n, c, p.block_rows,
               **constexprs)
    kernel, name, constexprs = p.second
    launch.run(kernel, name, p.type_name, p.tile, p.grid,
               (x, dy, s, b, m, inv, x if gamma is None else gamma, partial, dx, dgamma, dbeta), n, c, p.nblocks,
               p.block_rows, **constexprs)
    return dx, dgamma, dbeta
