"""The CUDA backend's fused BatchNorm+ReLU kernels (host side): launch of the Triton kernels of
batch_norm_kernels.py for the three computations of the accelerator orchestration
(mx_sparse/_accelerator/batch_norm_relu.py, which checks the arguments first and picks these for
CUDA tensors, and for CPU tensors under MXS_CUDA_ON_CPU=1).

  coefficients      statistics (or the running ones), running blend, invstd, scale, shift:
                    batch statistics 4 launches (row sums, mean, squared deviations,
                    coefficients), running statistics 1
  scale_shift_relu  y = max(x * scale + shift, 0): 1 launch
  backward          dx, dgamma, dbeta: 3 launches (sums, coefficients, dx)

No torch operator runs besides the allocations (and a conversion where an argument comes in a
dtype other than the one the fused layer passes), no host read. The results are the CPU
kernels' bits (see batch_norm_kernels.py for the one exception, the CPU's AVX-512 build).
"""
import struct

import torch

from . import launch

# The CPU kernels' row block (kRowBlock in kernels/cpu/batch_norm_relu_cpu.cpp): the reductions
# sum blocks of this many rows separately and then the blocks in order, so must the kernels here.
ROWS = 512
# Rows (reductions) or blocks (block totals) loaded per unrolled step.
UNROLL = 32
# Channels per program of the reductions and the per-channel kernels (one warp each).
REDUCE_C = 32
REDUCE_WARPS = 1
# Element-wise kernels: tiles of APPLY_ELEMENTS elements, BLOCK_C = the channels rounded up to a
# power of two within these bounds.
APPLY_C = (16, 128)
APPLY_ELEMENTS = 2048
APPLY_WARPS = 4
# The GPU compiler would contract a * b + c into one rounding; the CPU kernels' portable build
# does not (batch_norm_kernels.py).
OPTIONS = {"enable_fp_fusion": False}


def _kernels():
    """The Triton kernel module, imported on first use (as launch.kernels does for the gathers)."""
    try:
        from . import batch_norm_kernels
    except ImportError as e:
        raise RuntimeError(f"mx_sparse: the CUDA backend's BatchNorm kernels are written in Triton, which is not "
                           f"installed ({e}); {launch.TRITON_HINT}") from e
    return batch_norm_kernels


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _held(dtype):
    """The dtype the kernels compute in for features of ``dtype`` (torch, triton)."""
    import triton.language as tl
    return (torch.float64, tl.float64) if dtype == torch.float64 else (torch.float32, tl.float32)


def apply_block_c(c: int) -> int:
    lo, hi = APPLY_C
    return min(hi, max(lo, 1 << max(0, c - 1).bit_length()))


def _check_rows(n: int, name: str) -> None:
    """Row counts travel as int32 scalars (the one compiled variant)."""
    if n >= 2**31:
        raise ValueError(f"{name}: {n} rows exceed the CUDA kernels' int32 row count")


def double_halves(value: float):
    """(hi, lo): the bits of a float64 as two int32 values (see batch_norm_kernels._double)."""
    bits = struct.unpack("<q", struct.pack("<d", float(value)))[0]
    lo = bits & 0xFFFFFFFF
    return bits >> 32, lo - (1 << 32) if lo >= 1 << 31 else lo


def _in_place_target(t):
    """A running statistic the kernel can write: itself, or a contiguous aligned copy to copy back."""
    if t is None:
        return None
    return launch.aligned(t) if t.is_contiguous() else t.contiguous()


def _launch(kernel_name, op, dtype, tile, grid, tensors, *args, warps, **constexprs):
    launch.run(getattr(_kernels(), kernel_name), op, launch.operand_type(dtype), tile, grid, tensors, *args,
               num_warps=warps, num_stages=1, **OPTIONS, **constexprs)


def _reduce_grid(n, c):
    return (_cdiv(n, ROWS), _cdiv(c, REDUCE_C))


def _reduce(kernel_name, op, x, tensors, n, c, T):
    _launch(kernel_name, op, x.dtype, f"r{ROWS}c{REDUCE_C}", _reduce_grid(n, c), tensors, n, c,
            warps=REDUCE_WARPS, T=T, ROWS=ROWS, UNROLL=UNROLL, BLOCK_C=REDUCE_C)


def coefficients(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    """(mean, invstd, scale, shift) as the CPU's batch_norm_relu_forward returns them, the running
    statistics blended in place (batch statistics, where given)."""
    x = launch.aligned(input)
    n, c = x.shape
    _check_rows(n, "input")
    held, T = _held(x.dtype)
    dev = x.device
    mean = torch.empty((c,), dtype=torch.float64, device=dev)
    invstd = torch.empty((c,), dtype=torch.float64, device=dev)
    scale = torch.empty((c,), dtype=held, device=dev)
    shift = torch.empty((c,), dtype=held, device=dev)
    targets = [_in_place_target(t) for t in (running_mean, running_var)]
    params = [None if t is None else launch.aligned(t) for t in (weight, bias)]
    nblocks = _cdiv(n, ROWS)
    partial = torch.empty((nblocks, c) if batch_stats else (0,), dtype=torch.float64, device=dev)
    if batch_stats:
        _reduce("row_sums_kernel", "bn_row_sums", x, (x, partial), n, c, T)
        _launch("mean_kernel", "bn_mean", x.dtype, f"c{REDUCE_C}", (_cdiv(c, REDUCE_C),), (partial, mean),
                n, c, nblocks, warps=REDUCE_WARPS, UNROLL=UNROLL, BLOCK_C=REDUCE_C)
        _reduce("squared_deviations_kernel", "bn_squared_deviations", x, (x, mean, partial), n, c, T)
    present = {"HAS_WEIGHT": params[0] is not None, "HAS_BIAS": params[1] is not None,
               "HAS_RUNNING_MEAN": targets[0] is not None, "HAS_RUNNING_VAR": targets[1] is not None}
    # an absent vector's pointer is never read (its flag is off): x stands in for it
    pointers = [x if t is None else t for t in params + targets]
    _launch("coefficients_kernel", "bn_coefficients", x.dtype, f"c{REDUCE_C}", (_cdiv(c, REDUCE_C),),
            (x, partial, mean, invstd, scale, shift, *pointers), n, c, nblocks,
            *double_halves(momentum), *double_halves(eps), warps=REDUCE_WARPS, T=T, BATCH_STATS=bool(batch_stats),
            UNROLL=UNROLL, BLOCK_C=REDUCE_C, **present)
    for running, target in zip((running_mean, running_var), targets):
        if batch_stats and target is not None and target is not running:
            running.copy_(target)
    return mean, invstd, scale, shift


def scale_shift_relu(input, scale, shift):
    """y = max(input * scale + shift, 0); scale and shift in the compute dtype."""
    x = launch.aligned(input)
    n, c = x.shape
    _check_rows(n, "input")
    held, T = _held(x.dtype)
    s, b = launch.aligned(scale.to(held)), launch.aligned(shift.to(held))
    y = torch.empty_like(x)
    block_c = apply_block_c(c)
    block_r = APPLY_ELEMENTS // block_c
    _launch("scale_shift_relu_kernel", "bn_scale_shift_relu", x.dtype, f"c{block_c}",
            (_cdiv(n, block_r), _cdiv(c, block_c)), (x, s, b, y), n, c, warps=APPLY_WARPS,
            T=T, BLOCK_R=block_r, BLOCK_C=block_c)
    return y


def backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """(dx, dgamma, dbeta) as the CPU's batch_norm_relu_backward computes them."""
    x = launch.aligned(input)
    n, c = x.shape
    _check_rows(n, "input")
    held, T = _held(x.dtype)
    dev = x.device
    dy = launch.aligned(grad.to(x.dtype))
    m, inv = launch.aligned(mean.to(torch.float64)), launch.aligned(invstd.to(torch.float64))
    s, b = launch.aligned(scale.to(held)), launch.aligned(shift.to(held))
    gamma = None if weight is None else launch.aligned(weight)
    nblocks = _cdiv(n, ROWS)
    partial = torch.empty((nblocks, 2, c), dtype=torch.float64, device=dev)
    k = torch.empty((3, c), dtype=held, device=dev)
    dgamma = torch.empty((c,), dtype=x.dtype, device=dev)
    dbeta = torch.empty((c,), dtype=x.dtype, device=dev)
    dx = torch.empty_like(x)
    _reduce("backward_sums_kernel", "bn_backward_sums", x, (x, dy, s, b, m, inv, partial), n, c, T)
    _launch("backward_coefficients_kernel", "bn_backward_coefficients", x.dtype, f"c{REDUCE_C}",
            (_cdiv(c, REDUCE_C),), (partial, inv, x if gamma is None else gamma, k, dgamma, dbeta), n, c, nblocks,
            warps=REDUCE_WARPS, T=T, BATCH_STATS=bool(batch_stats), HAS_WEIGHT=gamma is not None,
            UNROLL=UNROLL, BLOCK_C=REDUCE_C)
    block_c = apply_block_c(c)
    block_r = APPLY_ELEMENTS // block_c
    _launch("backward_dx_kernel", "bn_backward_dx", x.dtype, f"c{block_c}", (_cdiv(n, block_r), _cdiv(c, block_c)),
            (x, dy, s, b, m, k, dx), n, c, warps=APPLY_WARPS, T=T, BLOCK_R=block_r, BLOCK_C=block_c)
    return dx, dgamma, dbeta
