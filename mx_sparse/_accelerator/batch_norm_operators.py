"""The fused BatchNorm+ReLU from a few torch operators: the NPU's implementation (no AscendC
BatchNorm kernel exists; each operator is one aclnn call there) and that of every device without
kernels of its own. The accelerator orchestration (batch_norm_relu.py) checks the arguments
first.

The common case is C++ (kernels/orchestration/batch_norm_operators.cpp, bound as
mx_sparse._C.batch_norm_operators: no Python per call, issue 32), with the contract's checks; the NPU path (PrivateUse1, and the CPU
key under MXS_NPU_ON_CPU=1) has it registered as the three ops' kernels (registration.py:
NPU_NATIVE_OPS), and ``forward``, ``scale_shift_relu`` and ``backward`` here (every other device
without kernels of its own) call it. The C++ calls the general route here for every other case.

The common case (features in their compute dtype, float32 or float64, per-channel tensors of the
same dtype, momentum in [0, 1]; autocast's float16 / bfloat16 features add one cast) is built on
torch's own BatchNorm operators, one aten operator each (torch_npu serves them with aclnnBatchNorm
and aclnnBatchNormBackward; never run on an NPU here). native_batch_norm also writes a normalised
output that is not used: one more pass over the features on the device, for 11 fewer host
operators a call:

  forward           7 operators: native_batch_norm (mean, invstd and the running blend with the
                    unbiased variance), scale and shift ([C]), one addcmul + relu_ for y, mean,
                    invstd and shift widened to float64 (the rows of one [3, C] tensor: one
                    stack, one cast; mean and invstd are the contract's float64 outputs, the
                    shift row is the backward's ReLU gate)
  scale_shift_relu  2 operators (3 for float16 / bfloat16 features: a cast)
  backward          4 operators: the ReLU gate (one float64 addcmul narrowed to float32, one
                    leaky_relu_backward of slope 0), then native_batch_norm_backward over x
                    with the forward's own mean and invstd (dx, dgamma, dbeta)

The backward finds the forward's float32 mean and invstd and the float64 shift through the
float64 mean it gets (the C++ twins table: by identity, with version counters, so a tensor changed
in place, another caller's or an inference tensor takes the casts instead, 3 operators more).

Everything else (a mixture of dtypes, a momentum outside [0, 1], running statistics of a one-row
batch, no channels, running statistics instead of batch statistics in the backward) takes the
general route below: torch's mean and var in the compute dtype, the per-channel arithmetic in
float64, ~18 operators a call.

Computed in float32 for float32, float16 and bfloat16 features (float64 for float64). The
backward's ReLU gate comes from a float64 product (one temporary of the features' size): the CPU
kernels' exact decision at the boundary (a one-row batch: x * scale == -shift: one more or one
less rounding would flip the gradient of a whole channel). The gate is leaky_relu_backward of
slope 0 (one operator for a comparison and a where); float32's pre-activation is narrowed from
float64 first, which keeps its sign except where |x * scale + shift| <= 2^-150 (counted as not
passed), and a gated element is grad * 0: NaN for an infinite or NaN grad (a diverged step),
where the kernels give 0. No host read.
Within 1e-6 relative of the CPU kernels, not their bits, and bit for bit from run to run
(tests/accelerator/test_batch_norm_operators.py, the NPU path's training step and fuzz).
"""
import torch

from .. import _C

_native = _C.batch_norm_operators


def compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _held(t, dtype):
    return t if t.dtype == dtype else t.to(dtype)


# ---------------------------------------------------------------- the ops (C++, checks included)

def forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    return _native.forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps)


def scale_shift_relu(input, scale, shift):
    return _native.scale_shift_relu(input, scale, shift)


def backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """g = grad where the ReLU passed; with batch statistics dbeta = sum g, dgamma = sum g * xhat,
    dx = gamma * invstd * (g - (dbeta + xhat * dgamma) / n), xhat = (x - mean) * invstd: in the
    common case one native_batch_norm_backward over x with the mean and invstd in the compute dtype
    (the forward's own, else the float64 ones cast: the same values). dgamma and dbeta in the wider
    of the features' and the weight's dtype."""
    return _native.backward(grad, input, mean, invstd, weight, scale, shift, batch_stats)


# ---------------------------------------------------------------- the general route

def _blend_into(running, batch, momentum):
    """running <- (1 - momentum) * running + momentum * batch in float64 from the float64 batch
    statistic, stored once: the CPU kernels' formula for every momentum (a lerp turns an infinite
    running value into NaN; a fused multiply-add would not cancel (1 - m) * r + m * b exactly
    where the two terms are equal and opposite)."""
    if running is not None:
        running.copy_(torch.add(running.double() * (1.0 - momentum), batch * momentum))


def _general_forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
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
    scale64, shift64 = _native.scale_shift(mean, invstd, weight, bias)   # float64: weight and bias promoted
    scale, shift = _held(scale64, held), _held(shift64, held)
    y = torch.addcmul(shift, x, scale).relu_()
    return _held(y, input.dtype), mean, invstd, scale, shift


def _general_backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """xhat = (x - mean) * invstd; dbeta = sum g, dgamma = sum g * xhat; dx = gamma * invstd * (g -
    (dbeta + xhat * dgamma) / n) with batch statistics, else gamma * invstd * g."""
    held = compute_dtype(input.dtype)
    x, dy = _held(input, held), _held(grad, held)
    mean, invstd = _held(mean, held), _held(invstd, held)
    g = _native.relu_gate(dy, x, _held(scale, held), _held(shift, held))
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


# the C++ kernels call these for the cases outside the common one (their arguments checked)
_native.use_general_route(_general_forward, _general_backward)
