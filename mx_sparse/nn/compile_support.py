"""What the Python layer needs to run under ``torch.compile`` as one graph.

A strided convolution's number of output voxels is data-dependent: its fake kernel
returns an *unbacked* symbolic size (mx_sparse/_core/op_registration.py), and every later layer's
voxel count is that symbol or one derived from it. Dynamo cannot guard on such a
size, so no branch of the Python layer may depend on its value; the few checks that
look at a voxel count go through ``maybe_nonzero`` below. The eager-only memory
savings (maps held packed, fused BatchNorm+ReLU recipes, saved-tensor hooks) keep
registries that dynamo cannot trace and are switched off while compiling
(``is_compiling``); the compiled graph plans its own memory.
"""
import sys

import torch

try:
    from torch.compiler import is_compiling
except ImportError:  # torch < 2.3
    def is_compiling() -> bool:
        return False


def maybe_nonzero(n) -> bool:
    """``n > 0`` for a voxel count. For an unbacked symbolic count (inside a compiled graph,
    after a strided convolution) the answer is taken as True without a guard: a count that
    turns out to be 0 at run time then reaches torch's own modules, which raise for an empty
    batch in training mode, instead of silently being skipped."""
    if not is_compiling():
        return n > 0
    from torch.fx.experimental.symbolic_shapes import guard_or_true  # (loaded by then; slow to import)
    return guard_or_true(n > 0)


def mark_voxels_dynamic(*tensors: torch.Tensor) -> None:
    """Marks dim 0 (the voxel count) of each tensor as dynamic for torch.compile, so that the
    first compiled graph takes any voxel count: without it dynamo specialises the first graph
    to the first step's count and compiles again at the second step. Done for every
    SparseConvTensor made outside a compiled region once torch.compile is in use
    (``torch._dynamo`` imported; before that there is nothing to tell and it costs nothing).
    ``maybe_mark_dynamic`` is a hint, never an error where a graph does specialise."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None or is_compiling():
        return
    for t in tensors:
        # what a layer derives in training (grad_fn set) never enters a compiled region from
        # outside, and an indices tensor passed on by submanifold layers is marked already:
        # skipped, as marking costs several microseconds (torch._dynamo is loaded in every
        # training loop: optimizers import it)
        if t.grad_fn is None and 0 not in getattr(t, "_dynamo_weak_dynamic_indices", ()):
            dynamo.maybe_mark_dynamic(t, 0)


def check_batch_norm_rows(module, features: torch.Tensor) -> None:
    """Under torch.compile, states what a BatchNorm needs of the voxel count as a run-time
    check: at least one voxel, more than one in training mode. torch's own checks (empty input,
    ``_verify_batch_size``) would have to guard on an unbacked count and break the graph; with
    this check they are decided at trace time and the compiled graph raises at run time where
    eager mode would raise or (zero voxels, SparseSequential) skip the BatchNorm. Nothing in
    eager mode."""
    # (SyncBatchNorm has rules of its own for one or zero voxels on a process; left to torch)
    if is_compiling() and isinstance(module, torch.nn.modules.batchnorm._BatchNorm) \
            and not isinstance(module, torch.nn.SyncBatchNorm):
        if module.training:
            _check_rows(features.shape[0] >= 2, "input: BatchNorm in training mode needs more than one voxel "
                                                "(torch.compile)")
        else:
            _check_rows(features.shape[0] >= 1, "input: BatchNorm needs at least one voxel (torch.compile)")


def _check_rows(cond, message: str) -> None:
    """torch._check with a message, except under torch.export: strict export (dynamo) fails on the
    message callable once the voxel count is a dynamic dimension ("'function' object has no
    attribute 'is_quantized'"), so there the check goes in without one."""
    if torch.compiler.is_exporting():
        torch._check(cond)
    else:
        torch._check(cond, lambda: message)
