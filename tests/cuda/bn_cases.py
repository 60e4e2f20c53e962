"""Inputs and comparisons of the accelerators' fused BatchNorm+ReLU (CUDA's Triton kernels, the
NPU's torch operators) against the C++ CPU kernels and a float64 reference
(tests/cuda/test_batch_norm_kernels.py and tests/accelerator/test_batch_norm_operators.py on CPU
tensors, the Triton kernels under Triton's interpreter; tests/cuda/test_gpu.py on a GPU).
``on(implementation)`` is the accelerator orchestration with that implementation whatever the
tensors' device.

Neither implementation is the CPU kernels' bits: the CPU sums 512-row blocks row after row in
float32; the Triton kernels sum by a fixed tree in float64, torch's var_mean by its own order.
Compared within a relative tolerance of the largest value of each output."""
import torch

from mx_sparse._accelerator import batch_norm_operators
from mx_sparse._accelerator import batch_norm_relu as orchestration
from mx_sparse._cuda import batch_norm_relu as triton_kernels

CPU = {name: getattr(torch.ops.mx_sparse, name) for name in ("batch_norm_relu_forward", "scale_shift_relu",
                                                          "batch_norm_relu_backward")}
DTYPES = [torch.float32, torch.float64, torch.bfloat16]
# One rounding of a bfloat16 value (8 significant bits) that may go either way, relative to the largest.
BFLOAT16_ROUNDING = 2.0 ** -7
# Against the CPU kernels, both within 1e-6 relative: the Triton kernels (float64 statistics) and
# the torch operators (the NPU's implementation: torch's BatchNorm operators, float32 statistics
# summed in float64 on CPU tensors).
TOLERANCE = {torch.float32: 1e-6, torch.bfloat16: 1e-6, torch.float64: 1e-12}
OPERATORS_TOLERANCE = TOLERANCE
OPS = ("batch_norm_relu_forward", "scale_shift_relu", "batch_norm_relu_backward")


def on(implementation):
    """{op name: the orchestration's op running ``implementation`` on tensors of any device}."""
    def wrap(op):
        def call(*args):
            dev = args[1].device if op is orchestration.batch_norm_relu_backward else args[0].device
            before = orchestration._device_kernels.get(dev.type)
            orchestration.use_kernels(dev.type, implementation)
            try:
                return op(*args)
            finally:
                orchestration.use_kernels(dev.type, before)
        return call
    return {name: wrap(getattr(orchestration, name)) for name in OPS}


TRITON_BN = on(triton_kernels)
OPERATORS_BN = on(batch_norm_operators)


def features(n, c, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, c, generator=g, dtype=torch.float64) * 2 + 0.7).to(dtype)


def channel(c, dtype, lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(c, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def same_bits(a, b, what):
    a, b = a.cpu(), b.cpu()
    assert a.dtype == b.dtype and a.shape == b.shape, \
        f"{what}: {a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)}"
    nan = a.isnan()
    assert torch.equal(nan, b.isnan()), f"{what}: NaN positions differ"
    assert torch.equal(a[~nan], b[~nan]), f"{what}: {(a[~nan] != b[~nan]).sum().item()} values differ"


def relative_error(a, b, what, check_dtype=True):
    """max |a - b| / max |b| over the finite values (NaN and Inf where the other has them)."""
    a, b = a.cpu(), b.cpu()
    assert a.shape == b.shape, f"{what}: {tuple(a.shape)} vs {tuple(b.shape)}"
    assert not check_dtype or a.dtype == b.dtype, f"{what}: {a.dtype} vs {b.dtype}"
    a, b = a.double(), b.double()
    assert torch.equal(a.isnan(), b.isnan()), f"{what}: NaN positions differ"
    inf = b.isinf()
    assert torch.equal(a.isinf(), inf) and torch.equal(a[inf], b[inf]), f"{what}: Inf differs"
    finite = b.isfinite()
    if not finite.any():
        return 0.0
    x, y = a[finite], b[finite]
    return ((x - y).abs().max() / y.abs().max().clamp_min(1e-300)).item()


def forward_case(n, c, dtype, batch_stats, affine, running, seed, channel_dtype=None, device="cpu"):
    """batch_norm_relu_forward's arguments; per-channel tensors in ``channel_dtype`` (default: the
    features' dtype, as the fused layer passes them outside autocast)."""
    cd = channel_dtype or dtype
    x = features(n, c, dtype, seed).to(device)
    w = channel(c, cd, 0.5, 1.5, seed + 1).to(device) if affine else None
    b = channel(c, cd, -0.5, 0.5, seed + 2).to(device) if affine else None
    rm = channel(c, cd, -1, 1, seed + 3).to(device) if running else None
    rv = channel(c, cd, 0.5, 2, seed + 4).to(device) if running else None
    return [x, w, b, rm, rv, batch_stats, 0.1, 1e-5]


def clone_args(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def run_all(ops, args, grad_seed=9):
    """{name: tensor} of forward (outputs and the updated running statistics), recompute and backward."""
    args = clone_args(args)
    y, mean, invstd, scale, shift = ops["batch_norm_relu_forward"](*args)
    out = dict(y=y, mean=mean, invstd=invstd, scale=scale, shift=shift)
    for name, i in (("running_mean", 3), ("running_var", 4)):
        if args[i] is not None:
            out[name] = args[i]
    x, w = args[0], args[1]
    out["recompute"] = ops["scale_shift_relu"](x, scale, shift)
    dy = features(x.shape[0], x.shape[1], x.dtype, grad_seed).to(x.device)
    out["dx"], out["dgamma"], out["dbeta"] = ops["batch_norm_relu_backward"](dy, x, mean, invstd, w, scale, shift,
                                                                             args[5])
    return out


def compare_with_cpu(ops, args, tolerance):
    """Every output of ``ops`` within ``tolerance`` (relative to each output's largest value) of the
    CPU kernels'; those stored in bfloat16 within BFLOAT16_ROUNDING (a rounding to bfloat16 may go
    the other way). Returns {name: error}."""
    ours, cpu = run_all(ops, args), run_all(CPU, [a.cpu() if isinstance(a, torch.Tensor) else a for a in args])
    errors = {}
    # the CPU kernels return dgamma and dbeta in the features' dtype, the accelerators in the wider
    # of it and the weight's (float32 master weights under autocast)
    mixed = args[1] is not None and args[1].dtype != args[0].dtype
    for name, want in cpu.items():
        errors[name] = relative_error(ours[name], want, name, check_dtype=not (mixed and name in ("dgamma", "dbeta")))
        bound = BFLOAT16_ROUNDING if torch.bfloat16 in (want.dtype, ours[name].dtype) else tolerance
        assert errors[name] <= bound, f"{name}: {errors[name]:.2e} of the largest value > {bound:.0e}"
    same_bits(ours["recompute"], ours["y"], "the recompute against the forward's y")
    return errors


def float64_reference(args, dy):
    """(y, mean, biased var, dx, dgamma, dbeta) by torch's batch_norm + relu in float64 (autograd)."""
    x, w, b, rm, rv, batch_stats, momentum, eps = args
    xd = x.detach().double().requires_grad_()
    wd = None if w is None else w.detach().double().requires_grad_()
    bd = None if b is None else b.detach().double().requires_grad_()
    if batch_stats:
        mean, var = xd.detach().mean(0), xd.detach().var(0, unbiased=False)
        y = torch.relu(torch.nn.functional.batch_norm(xd, None, None, wd, bd, True, 0.0, eps))
    else:
        mean, var = rm.double(), rv.double()
        y = torch.relu(torch.nn.functional.batch_norm(xd, mean, var, wd, bd, False, 0.0, eps))
    grads = torch.autograd.grad(y, [t for t in (xd, wd, bd) if t is not None], dy.double())
    dx, dgamma, dbeta = (grads + (None, None))[:3]
    return y.detach(), mean, var, dx, dgamma, dbeta
