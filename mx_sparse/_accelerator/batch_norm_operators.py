"""The fused BatchNorm+ReLU from a few torch operators: the NPU's implementation (no AscendC
BatchNorm kernel exists; each operator is one aclnn call there) and that of every device without
kernels of its own. The accelerator orchestration (batch_norm_relu.py) checks the arguments
first.

  forward           ~13 operators: mean and var, the running blend (lerp), rsqrt, scale and shift,
                    one addcmul + relu for y, the float64 copies of mean and invstd
  scale_shift_relu  2 operators (3 for float16 / bfloat16 features: a cast)
  backward          ~16 operators

Computed in float32 for float32, float16 and bfloat16 features (float64 for float64): the
statistics are torch's var_mean (its reductions have a fixed order on each device), the
backward's sums torch's sum. No float64 temporaries of the features' size (the NPU computes
float64 slowly, or not at all), no host read. Within the fused-BatchNorm tolerances of the CPU
kernels, not their bits (tests/test_batch_norm_relu.py, the NPU path's training step).
"""
import torch


def compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _held(t, dtype):
    return t if t.dtype == dtype else t.to(dtype)


def _blend_into(running, batch, momentum):
    """running <- (1 - momentum) * running + momentum * batch, in the compute dtype, stored once."""
    if running is None:
        return
    if running.dtype == batch.dtype:
        running.lerp_(batch, momentum)
    else:
        running.copy_(torch.lerp(running.to(batch.dtype), batch, momentum))


def _pre_relu(x, scale, shift):
    return torch.addcmul(shift, x, scale)


def forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    held = compute_dtype(input.dtype)
    x = _held(input, held)
    n = x.shape[0]
    if batch_stats:
        # the mean as a plain sum: var_mean's running update turns an infinite mean into NaN
        mean, var = x.mean(0), torch.var(x, 0, correction=0)
        _blend_into(running_mean, mean, momentum)
        _blend_into(running_var, var * (n / (n - 1) if n > 1 else 1.0), momentum)
    else:
        mean, var = _held(running_mean, held), _held(running_var, held)
    invstd = torch.rsqrt(var + eps)
    scale = invstd if weight is None else invstd * _held(weight, held)
    shift = torch.mul(mean, scale).neg_() if bias is None else torch.addcmul(_held(bias, held), mean, scale, value=-1)
    y = _pre_relu(x, scale, shift).relu_()
    return _held(y, input.dtype), mean.double(), invstd.double(), scale, shift


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
    g = torch.where(_pre_relu(x, _held(scale, held), _held(shift, held)) > 0, dy, 0)
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
