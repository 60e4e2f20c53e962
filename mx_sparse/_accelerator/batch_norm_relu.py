"""The fused BatchNorm+ReLU ops of the accelerator backends (CUDA, NPU; contract:
kernels/schema/schema.cpp, CPU kernels in kernels/cpu/batch_norm_relu_cpu.cpp): the argument
checks, then the device's implementation of three computations (forward: statistics, running
blend, scale, shift and y; scale_shift_relu; backward). With them ``SparseSequential`` keeps one
activation per BatchNorm1d+ReLU block on an accelerator as on the CPU.

Implementations, by device type (registration.py picks them with ``use_kernels``):
- CUDA: the Triton kernels (mx_sparse/_cuda/batch_norm_relu.py): at most 2 launches per call,
  statistics by a fixed-order tree in float64.
- NPU, and every device without kernels of its own: a few torch operators
  (batch_norm_operators.py), statistics by torch's native_batch_norm in the compute dtype. The
  NPU's dispatched ops run their common case as C++ kernels over the same operators, without
  this module (registration.NPU_NATIVE_OPS; batch_norm_operators.py's docstring).

Both take float32, float64, float16 and bfloat16 features (float16 and bfloat16 computed in
float32: autocast's activations, with float32 parameters) and repeat bit for bit from run to run;
neither is the CPU kernels' bits (the CPU kernels take no float16): they agree with them within
1e-6 relative (CUDA) or the fused-BatchNorm tolerances (torch operators). The property-based
fuzz holds these ops to the CPU kernels' contracts (tests/test_fuzz.py, MXS_CUDA_ON_CPU=1 and
MXS_NPU_ON_CPU=1).
"""
import torch

from . import batch_norm_operators
from . import op_args   # the argument checks of the CPU kernels (kernels/contract/batch_norm_relu_args.h)


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
    op_args.batch_norm_relu_forward_operands(input, weight, bias, running_mean, running_var, batch_stats, half_ok=True)
    return kernels_for(input.device).forward(input, weight, bias, running_mean, running_var, batch_stats, momentum,
                                             eps)


def scale_shift_relu(input, scale, shift):
    op_args.scale_shift_relu_operands(input, scale, shift, half_ok=True)
    return kernels_for(input.device).scale_shift_relu(input, scale, shift)


def batch_norm_relu_backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    op_args.batch_norm_relu_backward_operands(grad, input, mean, invstd, weight, scale, shift, half_ok=True)
    return kernels_for(input.device).backward(grad, input, mean, invstd, weight, scale, shift, batch_stats)
