"""The fused BatchNorm+ReLU ops of the CUDA backend (contract: kernels/ops/schema.cpp, CPU
kernels in kernels/cpu/batch_norm_relu_cpu.cpp), from torch's operators: a handful of
element-wise and per-channel reduction kernels per call, no host sync. With them
``SparseSequential`` keeps one activation per BatchNorm1d+ReLU block on CUDA as on the CPU.

Statistics: torch.var_mean in the compute dtype (float32, float64 for float64 features; its
CUDA reduction has a fixed order); the backward's two sums per channel in float64. bfloat16
features are computed in float32 and each stored value is rounded once; a NaN stays NaN.
"""
import torch

from . import op_args

FEATURE_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def _compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_features(x, name):
    if x.dim() != 2:
        raise ValueError(f"{name}: expected a [N, C] tensor, got {x.dim()} dimensions")
    if x.dtype not in FEATURE_DTYPES:
        raise ValueError(f"{name}: expected float32, float64 or bfloat16, got {x.dtype}")


def _channel_values(t, c, fill, name, device):
    """A per-channel vector in float64 (``fill`` where absent)."""
    if t is None:
        return torch.full((c,), fill, dtype=torch.float64, device=device)
    if t.dim() != 1 or t.shape[0] != c:
        raise ValueError(f"{name}: expected [{c}] (one per channel), got {list(t.shape)}")
    if t.dtype not in FEATURE_DTYPES:
        raise ValueError(f"{name}: expected float32, float64 or bfloat16, got {t.dtype}")
    return t.double()


def _blend_into(running, batch, momentum):
    """running <- (1 - momentum) * running + momentum * batch, in running's dtype as torch's
    BatchNorm does (in place without copy_, see neighbor_map.py on tracing)."""
    if running is not None:
        running.mul_(1 - momentum).add_(batch.to(running.dtype), alpha=momentum)


def _scale_shift_relu(x, scale, shift):
    held = _compute_dtype(x.dtype)
    return torch.relu(torch.addcmul(shift.to(held), x.to(held), scale.to(held))).to(x.dtype)


def batch_norm_relu_forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    _check_features(input, "input")
    op_args.same_device("input", input, weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    n, c = input.shape
    dev, held = input.device, _compute_dtype(input.dtype)
    if batch_stats:
        if n == 0:
            raise ValueError("input: expected at least one row to take statistics over, got 0")
        var, mean = torch.var_mean(input.to(held), dim=0, correction=0)
        mean, var = mean.double(), var.double()
        _blend_into(running_mean, mean, momentum)
        _blend_into(running_var, var * (n / (n - 1) if n > 1 else 1.0), momentum)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("running_mean, running_var: expected both without batch statistics")
        mean = _channel_values(running_mean, c, 0.0, "running_mean", dev)
        var = _channel_values(running_var, c, 0.0, "running_var", dev)
    gamma = _channel_values(weight, c, 1.0, "weight", dev)
    beta = _channel_values(bias, c, 0.0, "bias", dev)
    invstd = torch.rsqrt(var + eps)
    scale = gamma * invstd
    shift = beta - mean * scale
    scale, shift = scale.to(held), shift.to(held)
    return _scale_shift_relu(input, scale, shift), mean, invstd, scale, shift


def scale_shift_relu(input, scale, shift):
    _check_features(input, "input")
    op_args.same_device("input", input, scale=scale, shift=shift)
    for name, v in (("scale", scale), ("shift", shift)):
        if v.dim() != 1 or v.shape[0] != input.shape[1]:
            raise ValueError(f"{name}: expected [{input.shape[1]}] (one per channel), got {list(v.shape)}")
    return _scale_shift_relu(input, scale, shift)


def batch_norm_relu_backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """g = grad where the ReLU passed; dbeta = sum g, dgamma = sum g * xhat; with batch
    statistics dx = gamma * invstd * (g - mean(g) - xhat * mean(g * xhat)), else gamma * invstd * g."""
    _check_features(input, "input")
    op_args.same_device("input", input, grad=grad, mean=mean, invstd=invstd, weight=weight, scale=scale, shift=shift)
    if grad.shape != input.shape:
        raise ValueError(f"grad: expected the shape of input {list(input.shape)}, got {list(grad.shape)}")
    n, c = input.shape
    held, dev = _compute_dtype(input.dtype), input.device
    mean = _channel_values(mean, c, 0.0, "mean", dev)
    invstd = _channel_values(invstd, c, 0.0, "invstd", dev)
    gamma = _channel_values(weight, c, 1.0, "weight", dev)
    scale = _channel_values(scale, c, 0.0, "scale", dev).to(held)
    shift = _channel_values(shift, c, 0.0, "shift", dev).to(held)
    x = input.to(held)
    g = torch.where(torch.addcmul(shift, x, scale) > 0, grad.to(held), 0)
    centred = x - mean.to(held)
    dbeta = g.sum(0, dtype=torch.float64)
    dgamma = (g * centred).sum(0, dtype=torch.float64) * invstd
    a = gamma * invstd
    if batch_stats:
        k_x = (-a * invstd * dgamma / n).to(held)
        k_0 = (-a * dbeta / n).to(held)
        dx = torch.addcmul(k_0, g, a.to(held)) + centred * k_x
    else:
        dx = g * a.to(held)
    return dx.to(input.dtype), dgamma.to(input.dtype), dbeta.to(input.dtype)
