"""The fused BatchNorm+ReLU from a few torch operators: the NPU's implementation (no AscendC
BatchNorm kernel exists; each operator is one aclnn call there) and that of every device without
kernels of its own. The accelerator orchestration (batch_norm_relu.py) checks the arguments
first.

  forward           ~18 operators: mean and var, the running blend (lerp), rsqrt, scale and shift
                    (float64 [C] vectors, then rounded), one addcmul + relu for y
  scale_shift_relu  2 operators (3 for float16 / bfloat16 features: a cast)
  backward          ~18 operators

Computed in float32 for float32, float16 and bfloat16 features (float64 for float64): the
statistics are torch's var_mean (its reductions have a fixed order on each device), the
backward's sums torch's sum; the per-channel arithmetic on [C] vectors in float64 (the contract
returns mean and invstd in float64); the backward's ReLU mask from a float64 product (one
temporary of the features' size: the CPU kernels' exact decision at the boundary). No host
read. Within 1e-5 relative of the CPU kernels, not their bits
(tests/accelerator/test_batch_norm_operators.py, the NPU path's training step and fuzz).
"""
import torch


def compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _held(t, dtype):
    return t if t.dtype == dtype else t.to(dtype)


def _blend_into(running, batch, momentum):
    """running <- (1 - momentum) * running + momentum * batch from the float64 batch statistic:
    one lerp where momentum is in [0, 1] (torch's rule for momentum), else in float64 and stored
    once (a momentum beyond float32's range is not rounded into it)."""
    if running is None:
        return
    if 0.0 <= momentum <= 1.0:
        running.lerp_(_held(batch, running.dtype), momentum)
    else:
        running.copy_(torch.add(running.double() * (1.0 - momentum), batch, alpha=momentum))


def _pre_relu(x, scale, shift):
    return torch.addcmul(shift, x, scale)


def _passed_relu(x, scale, shift):
    """x * scale + shift > 0 as the CPU kernels decide it (the backward's mask): the exact product
    of the compute-dtype operands plus one rounding for float32 (a float64 product), two roundings
    for float64 (no fused multiply-add). At the boundary (a one-row batch: x * scale == -shift) a
    float32 product rounded first would flip the gradient of a whole channel."""
    if x.dtype != torch.float64:
        x = x.double()
    return torch.mul(x, scale).add_(shift) > 0


def forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    """The statistics in the compute dtype over the features; the per-channel arithmetic ([C]
    vectors: invstd, scale, shift, the running blend) in float64, as the contract's float64 mean
    and invstd ask."""
    held = compute_dtype(input.dtype)
    x = _held(input, held)
    n = x.shape[0]
    if batch_stats:
        # the mean as a plain sum: var_mean's running update turns an infinite mean into NaN
        mean, var = x.mean(0).double(), torch.var(x, 0, correction=0).double()
        _blend_into(running_mean, mean, momentum)
        _blend_into(running_var, var * (n / (n - 1) if n > 1 else 1.0), momentum)
    else:
        mean, var = running_mean.double(), running_var.double()
    invstd = torch.rsqrt(var + eps)
    scale64 = invstd if weight is None else invstd * weight
    shift64 = torch.mul(mean, scale64).neg_() if bias is None else torch.addcmul(bias.double(), mean, scale64,
                                                                                  value=-1)
    scale, shift = _held(scale64, held), _held(shift64, held)
    y = _pre_relu(x, scale, shift).relu_()
    return _held(y, input.dtype), mean, invstd, scale, shift


def scale_shift_relu(input, scale, shift):
    held = compute_dtype(input.dtype)
    y = _pre_relu(_held(input, held), _held(scale, held), _held(shift, held)).relu_()
    return _held(y, input.dtype)


def backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """g = grad where the ReLU passed, xhat = (x - mean) * invstd; dbeta = sum g, dgamma = sum g * xhat;
    dx = gamma * invstd * (g - (dbeta + xhat * dgamma) / n) with batch statistics, else
    gamma * invstd * g. dgamma and dbeta in the wider of the features' and the weight's dtype."""
    held = compute_dtype(input.dtype)
    x, dy = _held(input, held), _held(grad, held)
    mean, invstd = _held(mean, held), _held(invstd, held)
    g = torch.where(_passed_relu(x, _held(scale, held), _held(shift, held)), dy, 0)
    xhat = (x - mean).mul_(invstd)
    dbeta = g.sum(0)
    dgamma = (g * xhat).sum(0)
    a = invstd if weight is None else invstd * _held(weight, held)
    if batch_stats:
        dx = torch.sub(g, torch.addcmul(dbeta, xhat, dgamma), alpha=1.0 / max(x.shape[0], 1)).mul_(a)
    else:
        dx = g * a
    channel_dtype = input.dtype if weight is None else torch.promote_types(input.dtype, weight.dtype)
    return _held(dx, input.dtype), _held(dgamma, channel_dtype), _held(dbeta, channel_dtype)
