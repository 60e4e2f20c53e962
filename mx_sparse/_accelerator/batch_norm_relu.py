"""The fused BatchNorm+ReLU ops of the accelerator backends (CUDA, NPU; contract:
kernels/schema/schema.cpp, CPU kernels in kernels/cpu/batch_norm_relu_cpu.cpp): the argument
checks, then the device's implementation of three computations (forward: statistics, running
blend, scale, shift and y; scale_shift_relu; backward). With them ``SparseSequential`` keeps one
activation per BatchNorm1d+ReLU block on an accelerator as on the CPU.

Implementations, by device type (registration.py picks them with ``use_kernels``):
- CUDA: the Triton kernels (mx_sparse/_cuda/batch_norm_relu.py): at most 2 launches per call,
  statistics by a fixed-order tree in float64.
- NPU, and every device without kernels of its own: a few torch operators
  (batch_norm_operators.py), statistics by torch's mean and var in the compute dtype.

Both take float32, float64, float16 and bfloat16 features (float16 and bfloat16 computed in
float32: autocast's activations, with float32 parameters) and repeat bit for bit from run to run;
neither is the CPU kernels' bits (the CPU kernels take no float16): they agree with them within
1e-6 relative (CUDA) or the fused-BatchNorm tolerances (torch operators). The property-based
fuzz holds these ops to the CPU kernels' contracts (tests/test_fuzz.py, MXS_CUDA_ON_CPU=1 and
MXS_NPU_ON_CPU=1).
"""
import torch

from .. import _contract as op_args
from . import batch_norm_operators

FEATURE_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_DTYPE_NAMES = "float32, float64, float16 or bfloat16"


def _check_features(x, name):
    if x.dim() != 2:
        raise ValueError(f"{name}: expected a [N, C] tensor, got {x.dim()} dimensions")
    if x.dtype not in FEATURE_DTYPES:
        raise ValueError(f"{name}: expected {_DTYPE_NAMES}, got {x.dtype}")


def _check_channels(c, **vectors):
    """Per-channel vectors: [C] of a feature dtype (None: absent), all checked before anything is written."""
    for name, t in vectors.items():
        if t is None:
            continue
        if t.dim() != 1 or t.shape[0] != c:
            raise ValueError(f"{name}: expected [{c}] (one per channel), got {list(t.shape)}")
        if t.dtype not in FEATURE_DTYPES:
            raise ValueError(f"{name}: expected {_DTYPE_NAMES}, got {t.dtype}")


# {device type: implementation} of the devices with kernels of their own (registration.py: the
# Triton kernels for "cuda", and for "cpu" under MXS_CUDA_ON_CPU=1); the rest run the torch operators.
_device_kernels = {}


def use_kernels(device_type: str, kernels) -> None:
    """Tensors of ``device_type`` run ``kernels`` (a module or object with forward, scale_shift_relu
    and backward, as batch_norm_operators) from now on; None: the torch operators again."""
    if kernels is None:
        _device_kernels.pop(device_type, None)
    else:
        _device_kernels[device_type] = kernels


def kernels_for(device: torch.device):
    return _device_kernels.get(device.type, batch_norm_operators)


def batch_norm_relu_forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    _check_features(input, "input")
    op_args.same_device("input", input, weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    n, c = input.shape
    _check_channels(c, running_mean=running_mean, running_var=running_var, weight=weight, bias=bias)
    if batch_stats and n == 0:
        raise ValueError("input: expected at least one row to take statistics over, got 0")
    if not batch_stats and (running_mean is None or running_var is None):
        raise ValueError("running_mean, running_var: expected both when batch_stats is false (normalising with "
                         "the running statistics)")
    return kernels_for(input.device).forward(input, weight, bias, running_mean, running_var, batch_stats, momentum,
                                             eps)


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
    _check_channels(input.shape[1], mean=mean, invstd=invstd, weight=weight, scale=scale, shift=shift)
    return kernels_for(input.device).backward(grad, input, mean, invstd, weight, scale, shift, batch_stats)
