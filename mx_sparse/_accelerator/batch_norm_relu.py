"""The fused BatchNorm+ReLU ops of the accelerator backends (CUDA, NPU; contract: kernels/schema/schema.cpp, CPU
kernels in kernels/cpu/batch_norm_relu_cpu.cpp): the argument checks, then three computations
(coefficients: statistics, running blend, scale and shift; scale_shift_relu; backward) from the
device's kernels. With them ``SparseSequential`` keeps one activation per BatchNorm1d+ReLU block
on an accelerator as on the CPU.

Kernels: CUDA registers its Triton kernels (mx_sparse/_cuda/batch_norm_relu.py, the CPU kernels'
bits, a few launches per call; registration.py); every other device runs TorchOperatorKernels
below: a handful of element-wise and per-channel reduction kernels per call, no host sync.
Their statistics: torch's mean and var in the compute dtype (float32, float64 for float64
features; their CUDA reductions have a fixed order), float32 channels that overflow taken again
in float64; the backward's two sums per channel in float64. bfloat16 features are computed in
float32 and each stored value is rounded once; a NaN stays NaN. The property-based fuzz holds
these ops to the same contracts as the CPU kernels (tests/test_fuzz.py, MXS_CUDA_ON_CPU=1 for the
Triton kernels; the NPU path for the torch operators).
"""
import torch

from .. import _contract as op_args

FEATURE_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def _compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_features(x, name):
    if x.dim() != 2:
        raise ValueError(f"{name}: expected a [N, C] tensor, got {x.dim()} dimensions")
    if x.dtype not in FEATURE_DTYPES:
        raise ValueError(f"{name}: expected float32, float64 or bfloat16, got {op_args.dtype_name(x.dtype)}")


def _check_channel(t, c, name):
    """A per-channel vector: [C] of a feature dtype, as the CPU kernels require."""
    if t is None:
        return
    if t.dim() != 1 or t.shape[0] != c:
        raise ValueError(f"{name}: expected [{c}] (one per channel), got {list(t.shape)}")
    if t.dtype not in FEATURE_DTYPES:
        raise ValueError(f"{name}: expected float32, float64 or bfloat16, got {op_args.dtype_name(t.dtype)}")


def _channel_values(t, c, fill, name, device):
    """A per-channel vector in float64 (``fill`` where absent)."""
    _check_channel(t, c, name)
    if t is None:
        return torch.full((c,), fill, dtype=torch.float64, device=device)
    return t.double()


def _blend_into(running, batch, momentum):
    """running <- (1 - momentum) * running + momentum * batch, computed in float64 and rounded once
    into running's dtype, as on the CPU (written with index_copy_, see neighbor_map.py on tracing)."""
    if running is not None:
        blended = (1 - momentum) * running.double() + momentum * batch
        running.index_copy_(0, torch.arange(running.shape[0], device=running.device), blended.to(running.dtype))


def _pre_relu(x, scale, shift):
    """x * scale + shift in float64 from compute-dtype operands: for float32 and bfloat16 that is
    the exact product plus one rounding, as the CPU kernels compute it (pre_relu in
    kernels/cpu/batch_norm_relu_rows.h), so values and the backward's mask (the sign) are the
    CPU's; float64 operands take the two roundings of the CPU kernels and the float64 reference. On a GPU that is a few element-wise kernels through float64 temporaries:
    memory-bound, and small next to the convolutions (not fused, not measured on a GPU)."""
    return x.double() * scale.double() + shift.double()


def _scale_shift_relu(x, scale, shift):
    held = _compute_dtype(x.dtype)
    return torch.relu(_pre_relu(x.to(held), scale.to(held), shift.to(held))).to(held).to(x.dtype)


def _batch_statistics(input, held):
    """(mean, biased var) per channel in float64, taken in the compute dtype; a float32 channel
    whose sums overflow (|x| beyond ~1e19) is taken again in float64, as on the CPU (without a
    host sync, both are computed). The mean is a plain sum, so an infinite value gives an
    infinite mean as on the CPU (var_mean's running update would make it NaN)."""
    def stats(x):
        return x.mean(0).double(), torch.var(x, dim=0, correction=0).double()

    mean, var = stats(input.to(held))
    if held != torch.float64:
        mean64, var64 = stats(input.double())
        finite = torch.isfinite(mean) & torch.isfinite(var)
        mean, var = torch.where(finite, mean, mean64), torch.where(finite, var, var64)
    return mean, var


class TorchOperatorKernels:
    """The three computations from torch's operators: every device without kernels of its own
    (the NPU, and CUDA where ``use_kernels`` was not called) runs these."""

    @staticmethod
    def coefficients(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
        n, c = input.shape
        dev, held = input.device, _compute_dtype(input.dtype)
        if batch_stats:
            mean, var = _batch_statistics(input, held)
            _blend_into(running_mean, mean, momentum)
            _blend_into(running_var, var * (n / (n - 1) if n > 1 else 1.0), momentum)
        else:
            mean = _channel_values(running_mean, c, 0.0, "running_mean", dev)
            var = _channel_values(running_var, c, 0.0, "running_var", dev)
        gamma = _channel_values(weight, c, 1.0, "weight", dev)
        beta = _channel_values(bias, c, 0.0, "bias", dev)
        invstd = torch.rsqrt(var + eps)
        scale = gamma * invstd
        shift = beta - mean * scale
        return mean, invstd, scale.to(held), shift.to(held)

    scale_shift_relu = staticmethod(_scale_shift_relu)

    @staticmethod
    def backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
        """The CPU kernel's computation: g = grad where the ReLU passed, xhat = (x - mean) * invstd;
        dbeta = sum g, dgamma = sum g * xhat (float64 sums); dx = k_g * g + k_x * (x - mean) + k_0 with
        k_g = gamma * invstd and, with batch statistics, k_x = -k_g * invstd * dgamma / n,
        k_0 = -k_g * dbeta / n (else 0, and the k_x term is left out, so a NaN input gives 0 there)."""
        n, c = input.shape
        held, dev = _compute_dtype(input.dtype), input.device
        mean = _channel_values(mean, c, 0.0, "mean", dev)
        invstd = _channel_values(invstd, c, 0.0, "invstd", dev)
        gamma = _channel_values(weight, c, 1.0, "weight", dev)
        scale = _channel_values(scale, c, 0.0, "scale", dev).to(held)
        shift = _channel_values(shift, c, 0.0, "shift", dev).to(held)
        x, dy = input.to(held), grad.to(input.dtype).to(held)
        mean_h = mean.to(held)
        g = torch.where(_pre_relu(x, scale, shift) > 0, dy, 0)
        dbeta = g.sum(0, dtype=torch.float64)
        dgamma = (g * ((x - mean_h) * invstd.to(held))).sum(0, dtype=torch.float64)
        a = gamma * invstd
        dx = g * a.to(held)
        if batch_stats:
            k_x = (-a * invstd * dgamma / n).to(held)
            k_0 = (-a * dbeta / n).to(held)
            dx = dx + torch.where(k_x == 0, 0, k_x * (x - mean_h)) + k_0
        return dx.to(input.dtype), dgamma.to(input.dtype), dbeta.to(input.dtype)


# {device type: kernels} of the devices with BatchNorm kernels of their own (registration.py:
# the Triton kernels for "cuda", and for "cpu" under MXS_CUDA_ON_CPU=1); the rest run
# TorchOperatorKernels.
_device_kernels = {}


def use_kernels(device_type: str, kernels) -> None:
    """Tensors of ``device_type`` run ``kernels`` (an object with coefficients, scale_shift_relu
    and backward, as TorchOperatorKernels) from now on; None: the torch operators again."""
    if kernels is None:
        _device_kernels.pop(device_type, None)
    else:
        _device_kernels[device_type] = kernels


def kernels_for(device: torch.device):
    return _device_kernels.get(device.type, TorchOperatorKernels)


def batch_norm_relu_forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    _check_features(input, "input")
    op_args.same_device("input", input, weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    n, c = input.shape
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        _check_channel(t, c, name)   # all before anything is written
    if batch_stats and n == 0:
        raise ValueError("input: expected at least one row to take statistics over, got 0")
    if not batch_stats and (running_mean is None or running_var is None):
        raise ValueError("running_mean, running_var: expected both when batch_stats is false (normalising with "
                         "the running statistics)")
    kernels = kernels_for(input.device)
    mean, invstd, scale, shift = kernels.coefficients(input, weight, bias, running_mean, running_var, batch_stats,
                                                      momentum, eps)
    return kernels.scale_shift_relu(input, scale, shift), mean, invstd, scale, shift


def scale_shift_relu(input, scale, shift):
    _check_features(input, "input")
    op_args.same_device("input", input, scale=scale, shift=shift)
    for name, v in (("scale", scale), ("shift", shift)):
        if v.dim() != 1 or v.shape[0] != input.shape[1]:
            raise ValueError(f"{name}: expected [{input.shape[1]}] (one per channel), got {list(v.shape)}")
    return kernels_for(input.device).scale_shift_relu(input, scale, shift)


def batch_norm_relu_backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    _check_features(input, "input")
    op_args.same_device("input", input, grad=grad, mean=mean, invstd=invstd, weight=weight, scale=scale, shift=shift)
    if grad.shape != input.shape:
        raise ValueError(f"grad: expected the shape of input {list(input.shape)}, got {list(grad.shape)}")
    c = input.shape[1]
    for name, t in (("mean", mean), ("invstd", invstd), ("weight", weight), ("scale", scale), ("shift", shift)):
        _check_channel(t, c, name)
    return kernels_for(input.device).backward(grad, input, mean, invstd, weight, scale, shift, batch_stats)
