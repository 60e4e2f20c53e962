"""What a sparse convolution's autograd keeps for backward, made smaller.

Features that are the output of a fused BatchNorm1d+ReLU go to gather_mm with what makes them
(``activation_of``: the BatchNorm input, kept anyway, and two per-channel vectors): its autograd
keeps those instead, and its weight gradient applies the activation as it reads the input
(kernels/schema/autograd.cpp; on CUDA inside the kernel, with no launch that recomputes them).

Two kinds of tensors a convolution saves are stood in for while the op is called:
- features that are the output of a fused BatchNorm1d+ReLU and reach autograd otherwise (a
  weighted gather, mx_sparse/functional/importance.py): their ``Recipe``, recomputed in
  backward (batch_norm_relu.py);
- neighbor maps held by a ``HeldMap``: their packed form, unpacked in backward
  (packed_map.py).
Every other saved tensor is kept as it is, with its version checked at unpack as
autograd would.
"""
import contextlib

import torch

from .batch_norm_relu import Recipe, recipe_of
from .compile_support import is_compiling
from .packed_map import packed_form


def _pack(t: torch.Tensor):
    # A recipe is for a float tensor (a BatchNorm output), a packed form for an int32 map: one
    # registry lookup per saved tensor, by its dtype, not two.
    if t.is_floating_point():
        recipe = recipe_of(t)
        if recipe is not None:
            return recipe
    else:
        packed = packed_form(t)
        if packed is not None:
            return packed
    return t, t._version


def _unpack(saved):
    if type(saved) is not tuple:
        if isinstance(saved, Recipe):
            return saved.recompute()
        return saved.unpack()   # a PackedMap
    t, version = saved
    if t._version != version:
        raise RuntimeError("mx_sparse: a tensor saved by a sparse convolution for backward was modified in place "
                           f"(version {version} -> {t._version})")
    return t


# Both contexts hold no state of their own (entering pushes the two hooks, leaving pops them), so
# one instance of each serves every call: a layer's call allocates no context object.
_COMPACT = torch.autograd.graph.saved_tensors_hooks(_pack, _unpack)
_NOTHING = contextlib.nullcontext()
# The hooks on top of autograd's stack (None: none); torch's private function, looked up once.
_top_hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)


def activation_of(features: torch.Tensor, saving) -> tuple:
    """``(source, source_scale, source_shift)`` for gather_mm when ``features`` are a fused
    BatchNorm1d+ReLU output unchanged since, and ``saving`` (what compact_saved_tensors returned
    for this call) is this module's hooks; else ``()``: where other hooks are in force
    (torch.utils.checkpoint, offloading), without grad mode or while compiling, the convolution
    saves its features as it did before."""
    if saving is not _COMPACT:
        return ()
    recipe = recipe_of(features)
    if recipe is None:
        return ()
    return recipe.x, recipe.scale, recipe.shift


def compact_saved_tensors():
    """Context for a sparse convolution's op call, in grad mode. No-op when other saved-tensor
    hooks are active (torch.utils.checkpoint, offloading): they keep precedence, and under
    torch.compile (AOTAutograd decides what the compiled backward saves)."""
    if not torch.is_grad_enabled() or is_compiling() or _top_hooks is None or _top_hooks(False) is not None:
        return _NOTHING
    return _COMPACT
