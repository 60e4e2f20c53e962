"""BatchNorm1d followed by ReLU as one step that keeps half the activations.

Per conv-BN-ReLU block, torch's modules keep two ``[N, C]`` tensors for backward:
the BatchNorm input ``x`` and the ReLU output ``y`` (also the saved input of the
next convolution). Here the backward needs only ``x`` (it recomputes the ReLU
mask), and ``y`` has a *recipe* (``x``, per-channel scale and shift; ``recipe_of``): a
sparse convolution taking ``y`` saves the recipe instead (saved_tensors.py) and
recomputes ``y`` in its own backward (one elementwise pass). ``SparseSequential`` uses this
for every ``BatchNorm1d, ReLU`` pair of plain torch modules on CPU, CUDA and NPU features
(float32, float64, and bfloat16 computed in float32; on CUDA and NPU also float16, and under
autocast float16 / bfloat16 features with float32 parameters: statistics in float32 or better,
y in the features' dtype, the parameters' gradients in theirs), and ``mx_sparse.bn_relu``
offers it to hand-written blocks (``SparseSequential.fuse_bn_relu = False`` turns both off).

Same results as the two modules up to float rounding, running statistics
included (momentum, ``momentum=None``, unbiased running variance, eval mode).
"""
import functools
from dataclasses import dataclass

import torch
from torch import nn

from .._core.op_registration import has_kernel, ops
from .._core.weak_id_map import WeakIdMap
from .compile_support import is_compiling

# How to recompute each fused output, keyed by the output tensor (weakly, by identity: an
# entry goes with its tensor; a WeakIdMap: one lookup per tensor a convolution saves). Not an
# attribute of the tensor: attributes travel with it into pickles and torch.save files, which
# torch.load(weights_only=True) then rejects.
_RECIPES = WeakIdMap()
_FUSED_DTYPES = (torch.float32, torch.float64, torch.bfloat16)          # the C++ CPU kernels
_ACCELERATOR_DTYPES = _FUSED_DTYPES + (torch.float16,)                 # CUDA, NPU


@dataclass
class Recipe:
    x: torch.Tensor
    x_version: int
    y_version: int
    scale: torch.Tensor
    shift: torch.Tensor

    def recompute(self) -> torch.Tensor:
        if self.x._version != self.x_version:
            raise RuntimeError("mx_sparse: the input of a fused BatchNorm1d+ReLU was modified in place after the "
                               "forward pass; its output cannot be recomputed for backward")
        return ops.scale_shift_relu(self.x, self.scale, self.shift)


@functools.lru_cache(maxsize=None)
def _has_fused_kernels(device_type: str) -> bool:
    return all(has_kernel(device_type, op)
               for op in ("batch_norm_relu_forward", "scale_shift_relu", "batch_norm_relu_backward"))


@functools.lru_cache(maxsize=None)
def _takes_mixed_dtypes(device_type: str) -> bool:
    """The accelerator implementations (CUDA, NPU) take float16 features too, and parameters of
    another dtype than the features (autocast: float16 / bfloat16 activations, float32 parameters);
    the C++ CPU kernels take float32, float64 and bfloat16 features with parameters of their dtype."""
    from .._accelerator import registration
    return registration.orchestration_serves(device_type)


def _dtypes_fit(features: torch.Tensor, tensors) -> bool:
    if _takes_mixed_dtypes(features.device.type):
        return features.dtype in _ACCELERATOR_DTYPES and all(t is None or t.dtype in _ACCELERATOR_DTYPES
                                                            for t in tensors)
    return features.dtype in _FUSED_DTYPES and all(t is None or t.dtype == features.dtype for t in tensors)


def can_fuse(bn: nn.Module, relu: nn.Module, features: torch.Tensor) -> bool:
    """Plain ``BatchNorm1d`` then plain ``ReLU`` (no hooks), on features of a device with the
    fused kernels (CPU, CUDA, NPU) in a dtype they take (``_dtypes_fit``: under autocast on an
    accelerator too), with at least one voxel; not while compiling (the recipe registry is
    eager-only; the compiled graph fuses BatchNorm and ReLU itself)."""
    if is_compiling():
        return False
    if type(bn) is not nn.BatchNorm1d or type(relu) is not nn.ReLU:
        return False
    if bn._forward_hooks or bn._forward_pre_hooks or relu._forward_hooks or relu._forward_pre_hooks:
        return False
    if nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks:
        return False
    if features.dim() != 2 or features.shape[0] == 0 or not _has_fused_kernels(features.device.type):
        return False
    # the dicts directly: nn.Module.__getattr__ per tensor costs more than the fused kernel saves
    # on a small batch
    tensors = list(bn._parameters.values()) + [bn._buffers.get("running_mean"), bn._buffers.get("running_var")]
    return _dtypes_fit(features, tensors)


def _tensors_of(bn: nn.BatchNorm1d):
    """(running_mean, running_var, num_batches_tracked, weight, bias): from the module's dicts for
    a plain BatchNorm1d (nn.Module.__getattr__ per tensor was ~1 % of an accelerator step's host
    time), through the attributes for a subclass (which may define them otherwise)."""
    if type(bn) is nn.BatchNorm1d:
        buffers, params = bn._buffers, bn._parameters
        return (buffers.get("running_mean"), buffers.get("running_var"), buffers.get("num_batches_tracked"),
                params.get("weight"), params.get("bias"))
    return bn.running_mean, bn.running_var, bn.num_batches_tracked, bn.weight, bn.bias


def batch_norm_relu(x: torch.Tensor, bn: nn.BatchNorm1d) -> torch.Tensor:
    """``relu(bn(x))`` for ``x [N, C]``, updating ``bn``'s running statistics as ``bn(x)`` would
    (torch's rules: batch statistics in training or without running statistics; the batch
    counter; ``momentum=None`` is the cumulative average)."""
    running_mean, running_var, batches, weight, bias = _tensors_of(bn)
    training = bn.training
    batch_stats = training or (running_mean is None and running_var is None)
    if batch_stats and training and x.shape[0] < 2:
        raise ValueError(f"input: BatchNorm1d in training mode needs more than 1 value per channel, "
                         f"got input of shape {list(x.shape)}")
    momentum = bn.momentum if bn.momentum is not None else 0.0
    if training and bn.track_running_stats and batches is not None:
        batches.add_(1)   # as torch's BatchNorm: the counter a user reads (state_dict) counts this batch
        if bn.momentum is None:
            momentum = 1.0 / float(batches)
    use_running = not training or bn.track_running_stats
    running = (running_mean, running_var) if use_running else (None, None)
    gamma, beta = (weight, bias) if bn.affine else (None, None)
    if not torch.is_grad_enabled() or not any(t is not None and t.requires_grad for t in (x, gamma, beta)):
        # nothing to differentiate (inference_mode, no_grad, frozen layers): the kernel alone, without a
        # graph node or a recipe (no backward will recompute y; inference tensors have no version counter)
        return ops.batch_norm_relu_forward(x, gamma, beta, *running, batch_stats, momentum, bn.eps)[0]
    # the layer's autograd node is C++ (kernels/schema/autograd.cpp: batch_norm_relu_backward,
    # differentiable in x, gamma and beta; double backward raises); scale and shift come back
    # without a gradient, for the recipe
    y, scale, shift = ops._batch_norm_relu(x, gamma, beta, *running, batch_stats, momentum, bn.eps)
    if not x.is_inference():   # an inference tensor cannot be saved: the op has said so already
        _RECIPES[y] = Recipe(x, x._version, y._version, scale, shift)
    return y


def recipe_of(y: torch.Tensor):
    """The Recipe that recomputes ``y``, if ``y`` is a fused output and neither it nor its input
    changed since; else None."""
    recipe = _RECIPES.get(y)
    if recipe is not None and y._version == recipe.y_version and recipe.x._version == recipe.x_version:
        return recipe
    return None
