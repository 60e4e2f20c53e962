"""The fused BatchNorm+ReLU from a few torch operators: the NPU's implementation (no AscendC
BatchNorm kernel exists; each operator is one aclnn call there) and that of every device without
kernels of its own. The accelerator orchestration (batch_norm_relu.py) checks the arguments
first.

The NPU path (PrivateUse1, and the CPU key under MXS_NPU_ON_CPU=1) runs the common case below
without Python: kernels/orchestration/batch_norm_operators.cpp is the same operators in the same
order (the same bits) with the contract's checks, registered as the three ops' kernels
(registration.py: NPU_NATIVE_OPS), and keeps the forward's twins in a table of its own; it calls
``forward`` / ``backward`` here for every other case (the general route). This module stays the
implementation of the other devices and the reference the C++ is tested against
(tests/accelerator/test_batch_norm_operators.py).

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
float64 mean it gets (``_FORWARD_TWINS``: by identity, with version counters, so a tensor changed
in place or another caller's tensors take the casts instead, 3 operators more).

Everything else (a mixture of dtypes, a momentum outside [0, 1], running statistics of a one-row
batch, no channels, running statistics instead of batch statistics in the backward) takes the
general route below: torch's mean and var in the compute dtype, the per-channel arithmetic in
float64, ~18 operators a call.

Computed in float32 for float32, float16 and bfloat16 features (float64 for float64). The
backward's ReLU gate comes from a float64 product (one temporary of the features' size): the CPU
kernels' exact decision at the boundary (a one-row batch: x * scale == -shift; _relu_gate says
where it is not theirs). No host read.
Within 1e-6 relative of the CPU kernels, not their bits, and bit for bit from run to run
(tests/accelerator/test_batch_norm_operators.py, the NPU path's training step and fuzz).
"""
from typing import NamedTuple, Optional

import torch

from .._core.weak_id_map import WeakIdMap


def compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def _held(t, dtype):
    return t if t.dtype == dtype else t.to(dtype)


def _all_of(dtype, *tensors):
    return all(t is None or t.dtype == dtype for t in tensors)


def _pre_relu(x, scale, shift):
    return torch.addcmul(shift, x, scale)


def _relu_gate(grad, x, scale, shift, shift64=None):
    """grad where x * scale + shift > 0 as the CPU kernels decide it, else 0 (NaN: 0): for float32
    the exact product plus one rounding (one float64 addcmul: shift widened -- ``shift64`` when the
    forward made it --, x and scale promoted, so whether it fuses the multiply-add does not
    matter), for float64 two roundings (a product, then a sum: no fused multiply-add). At the
    boundary (a one-row batch: x * scale == -shift) one more or one less rounding would flip the
    gradient of a whole channel.

    The gate itself is leaky_relu_backward with slope 0 (grad where pre > 0, else grad * 0: the
    comparison false for NaN, as the kernels'), one operator in place of a comparison and a
    where, and on the CPU ~4x faster than where's unvectorised loop. Its operands share a dtype:
    the float64 pre-activation of float32 features is narrowed first, which keeps its sign (and
    NaN) except where |x * scale + shift| <= 2^-150, float32's underflow, counted as not passed.
    A gated element is grad * 0: 0 (or -0.0) for a finite grad, NaN for an infinite or NaN one
    (a diverged step), where the kernels give 0."""
    if x.dtype == torch.float64:
        pre = torch.mul(x, scale).add_(shift)
    else:
        pre = torch.addcmul(shift.double() if shift64 is None else shift64, x, scale).to(grad.dtype)
    return torch.ops.aten.leaky_relu_backward(grad, pre, 0.0, False)


class _Twins(NamedTuple):
    """What the forward of the common case made beside its outputs, for the backward: the float64
    invstd and the shift it returned (identity checks) with their versions then, and the same
    values in other dtypes (no cast needed in the backward)."""
    invstd64: torch.Tensor
    shift: torch.Tensor
    versions: tuple
    mean: torch.Tensor       # the features' compute dtype, native_batch_norm's own
    invstd: torch.Tensor
    shift64: torch.Tensor


# float64 mean returned by forward -> _Twins (by identity; an entry goes with its mean, i.e. with
# the autograd node that saved it)
_FORWARD_TWINS = WeakIdMap()


def _versions(mean64, shift):
    return mean64._version, shift._version   # invstd64 is a row of mean64's block: the same counter


def _untracked(mean64, shift):
    """Inference tensors (torch.inference_mode) have no version counter: no twins, the casts."""
    return mean64.is_inference() or shift.is_inference()


def _twins_of(mean64, invstd64, shift) -> Optional[_Twins]:
    """The forward's _Twins if mean64, invstd64 and shift are the tensors it returned, unchanged."""
    if _untracked(mean64, shift):
        return None
    twins = _FORWARD_TWINS.get(mean64)
    if twins is None or twins.invstd64 is not invstd64 or twins.shift is not shift \
            or twins.versions != _versions(mean64, shift):
        return None
    return twins


# ---------------------------------------------------------------- forward

def _batch_statistics(x, running_mean, running_var, momentum, eps):
    """(mean, invstd) of the batch by native_batch_norm, which also blends the running statistics
    (torch's rule, the unbiased variance); its normalised output is not used (y is rebuilt below
    from the rounded scale and shift, which the recompute repeats bit for bit)."""
    _, mean, invstd = torch.native_batch_norm(x, None, None, running_mean, running_var, True, momentum, eps)
    return mean, invstd


def _scale_shift(mean, invstd, weight, bias):
    scale = invstd if weight is None else invstd * weight
    if bias is None:
        return scale, torch.mul(mean, scale).neg_()
    return scale, torch.addcmul(bias, mean, scale, value=-1)


def _fits_native(x, weight, bias, running_mean, running_var, batch_stats, momentum):
    """The common case native_batch_norm serves with the contract's rules: batch statistics, every
    per-channel tensor in the compute dtype, both running statistics or neither, a momentum in
    [0, 1], more than one row where the running variance is blended (torch's unbiased variance of
    one row is not the contract's), at least one channel."""
    n, c = x.shape
    has_running = running_mean is not None
    return (batch_stats and c > 0 and n > 0 and has_running == (running_var is not None)
            and (n > 1 or not has_running) and 0.0 <= momentum <= 1.0
            and _all_of(x.dtype, weight, bias, running_mean, running_var))


def forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    held = compute_dtype(input.dtype)
    x = _held(input, held)
    if not _fits_native(x, weight, bias, running_mean, running_var, batch_stats, momentum):
        return _general_forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps)
    mean, invstd = _batch_statistics(x, running_mean, running_var, momentum, eps)
    scale, shift = _scale_shift(mean, invstd, weight, bias)
    y = _pre_relu(x, scale, shift).relu_()
    # one [3, C] float64 block (one stack, one cast): mean and invstd for the contract, shift for
    # the backward's gate
    mean64, invstd64, shift64 = torch.stack([mean, invstd, shift]).double().unbind()
    if not _untracked(mean64, shift):
        _FORWARD_TWINS[mean64] = _Twins(invstd64, shift, _versions(mean64, shift), mean, invstd, shift64)
    return _held(y, input.dtype), mean64, invstd64, scale, shift


def scale_shift_relu(input, scale, shift):
    held = compute_dtype(input.dtype)
    y = _pre_relu(_held(input, held), _held(scale, held), _held(shift, held)).relu_()
    return _held(y, input.dtype)


# ---------------------------------------------------------------- backward

def backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """g = grad where the ReLU passed; with batch statistics dbeta = sum g, dgamma = sum g * xhat,
    dx = gamma * invstd * (g - (dbeta + xhat * dgamma) / n), xhat = (x - mean) * invstd: one
    native_batch_norm_backward over x with the mean and invstd in the compute dtype (the
    forward's own, else the float64 ones cast: the same values), which forms these products and
    sums per channel. dgamma and dbeta in the wider of the features' and the weight's dtype."""
    held = compute_dtype(input.dtype)
    x, dy = _held(input, held), _held(grad, held)
    n, c = x.shape
    if not (batch_stats and n * c > 0 and _all_of(held, weight, scale, shift)):
        return _general_backward(grad, input, mean, invstd, weight, scale, shift, batch_stats)
    twins = _twins_of(mean, invstd, shift)
    if twins is not None and twins.mean.dtype == held:
        mu, inv, shift64 = twins.mean, twins.invstd, twins.shift64
    else:
        mu, inv, shift64 = _held(mean, held), _held(invstd, held), None
    g = _relu_gate(dy, x, scale, shift, shift64)
    dx, dgamma, dbeta = torch.ops.aten.native_batch_norm_backward(
        g, x, weight, None, None, mu, inv, True, 0.0, [True, True, True])
    channel_dtype = input.dtype if weight is None else weight.dtype
    return _held(dx, input.dtype), _held(dgamma, channel_dtype), _held(dbeta, channel_dtype)


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
    scale64, shift64 = _scale_shift(mean, invstd, weight, bias)   # float64: weight and bias promoted
    scale, shift = _held(scale64, held), _held(shift64, held)
    y = _pre_relu(x, scale, shift).relu_()
    return _held(y, input.dtype), mean, invstd, scale, shift


def _general_backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    """xhat = (x - mean) * invstd; dbeta = sum g, dgamma = sum g * xhat; dx = gamma * invstd * (g -
    (dbeta + xhat * dgamma) / n) with batch statistics, else gamma * invstd * g."""
    held = compute_dtype(input.dtype)
    x, dy = _held(input, held), _held(grad, held)
    mean, invstd = _held(mean, held), _held(invstd, held)
    g = _relu_gate(dy, x, _held(scale, held), _held(shift, held))
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
