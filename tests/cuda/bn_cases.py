"""Inputs and comparisons of the CUDA backend's BatchNorm+ReLU kernels against the C++ CPU
kernels (tests/cuda/test_batch_norm_kernels.py on CPU tensors under Triton's interpreter,
tests/cuda/test_gpu.py on a GPU). ``TRITON_BN`` is the accelerator orchestration with the Triton
kernels whatever the tensors' device.

Bit for bit against the CPU kernels' portable build. This CPU's AVX-512 copy of the float32 and
bfloat16 row loops contracts multiply-adds (the squared deviations, the backward's sums and dx)
that the portable copy and the Triton kernels round twice: against it, float32 and bfloat16
results are compared within cuda_cases.TOLERANCE (NaN positions still exact);
test_batch_norm_kernels.py runs itself once more with MXS_CPU_PORTABLE=1 for the bitwise check."""
import torch

import mx_sparse
from cuda_cases import TOLERANCE
from mx_sparse._accelerator import batch_norm_relu as orchestration
from mx_sparse._cuda import batch_norm_relu as triton_kernels

CPU = torch.ops.mx_sparse
DTYPES = [torch.float32, torch.float64, torch.bfloat16]
# The BatchNorm row loops take the AVX-512 copy under the same condition as the GEMM rows
# (avx512f and not MXS_CPU_PORTABLE, kernels/cpu/batch_norm_relu_cpu.cpp's rows_for).
CPU_AVX512 = mx_sparse._C.cpu_gemm_kernels()["float32"] != "generic"


def _with_triton(op):
    def call(*args):
        dev = args[1].device if op is orchestration.batch_norm_relu_backward else args[0].device
        before = orchestration._device_kernels.get(dev.type)
        orchestration.use_kernels(dev.type, triton_kernels)
        try:
            return op(*args)
        finally:
            orchestration.use_kernels(dev.type, before)
    return call


TRITON_BN = {name: _with_triton(getattr(orchestration, name))
             for name in ("batch_norm_relu_forward", "scale_shift_relu", "batch_norm_relu_backward")}


def features(n, c, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, c, generator=g, dtype=torch.float64) * 2 + 0.7).to(dtype)


def channel(c, dtype, lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(c, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def same_bits(a, b, what, features_dtype=torch.float64):
    """Equal values, NaN where NaN, +0.0 and -0.0 told apart; for float32 and bfloat16 features
    against the CPU's AVX-512 build: within cuda_cases.TOLERANCE of the largest value (Inf where Inf)."""
    a, b = a.cpu(), b.cpu()
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)}"
    nan = a.isnan()
    assert torch.equal(nan, b.isnan()), f"{what}: NaN positions differ"
    x, y = a[~nan], b[~nan]
    if CPU_AVX512 and features_dtype != torch.float64:
        assert torch.equal(x.isinf(), y.isinf()) and torch.equal(x[x.isinf()], y[y.isinf()]), f"{what}: Inf differs"
        finite = ~x.isinf()
        x, y = x[finite].double(), y[finite].double()
        scale = max(y.abs().max().item(), 1e-30) if y.numel() else 1.0
        err = (x - y).abs().max().item() / scale if y.numel() else 0.0
        assert err <= TOLERANCE[features_dtype], f"{what}: max error {err:.2e} of the largest value"
        return
    assert torch.equal(x, y) and torch.equal(x.signbit(), y.signbit()), \
        f"{what}: {(x != y).sum().item()} of {x.numel()} values differ, largest {(x.double() - y.double()).abs().max()}"


def forward_case(n, c, dtype, batch_stats, affine, running, seed, device="cpu"):
    """(args, running tensors) of batch_norm_relu_forward; the running statistics in the
    features' dtype as the fused layer passes them."""
    x = features(n, c, dtype, seed).to(device)
    w = channel(c, dtype, 0.5, 1.5, seed + 1).to(device) if affine else None
    b = channel(c, dtype, -0.5, 0.5, seed + 2).to(device) if affine else None
    rm = channel(c, dtype, -1, 1, seed + 3).to(device) if running else None
    rv = channel(c, dtype, 0.5, 2, seed + 4).to(device) if running else None
    return [x, w, b, rm, rv, batch_stats, 0.1, 1e-5]


def clone_args(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def compare_forward_and_backward(args, grad_seed=9):
    """Runs forward, recompute and backward on the Triton kernels and on the CPU kernels (on CPU
    copies) and compares every output and the updated running statistics bit for bit."""
    ours, ref = clone_args(args), [a.cpu() if isinstance(a, torch.Tensor) else a for a in clone_args(args)]
    out = TRITON_BN["batch_norm_relu_forward"](*ours)
    expected = CPU.batch_norm_relu_forward(*ref)
    dtype = args[0].dtype
    for name, a, b in zip(("y", "mean", "invstd", "scale", "shift"), out, expected):
        same_bits(a, b, name, dtype)
    for name, i in (("running_mean", 3), ("running_var", 4)):
        if ours[i] is not None:
            same_bits(ours[i], ref[i], name, dtype)
    x, w = ours[0], ours[1]
    _, mean, invstd, scale, shift = expected
    same_bits(TRITON_BN["scale_shift_relu"](x, *(t.to(x.device) for t in (scale, shift))),
              CPU.scale_shift_relu(ref[0], scale, shift), "recompute", dtype)
    dy = features(x.shape[0], x.shape[1], x.dtype, grad_seed).to(x.device)
    batch_stats = args[5]
    got = TRITON_BN["batch_norm_relu_backward"](dy, x, *(t.to(x.device) for t in (mean, invstd)), w,
                                                *(t.to(x.device) for t in (scale, shift)), batch_stats)
    want = CPU.batch_norm_relu_backward(dy.cpu(), ref[0], mean, invstd, ref[1], scale, shift, batch_stats)
    for name, a, b in zip(("dx", "dgamma", "dbeta"), got, want):
        same_bits(a, b, name, dtype)


