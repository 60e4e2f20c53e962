"""Weight layouts of sparse-convolution kernels, their conversion, and the rules used
when a checkpoint written in another layout is loaded.

Layouts (``kernel`` = the spatial kernel dims ``*k``, ``K`` = their product):

=========  ==========================  ==============================================
name       shape                       who writes it
=========  ==========================  ==============================================
``RSCK``   ``[*k, Cin, Cout]``         mx_sparse / mx_driving / mmcv (and spconv 1.x)
``KRSC``   ``[Cout, *k, Cin]``         spconv 2.x (``spconv.pytorch``)
``RSKC``   ``[*k, Cout, Cin]``         spconv 2.x with ``SPCONV_SAVED_WEIGHT_LAYOUT=RSKC``
``FLAT``   ``[K, Cin, Cout]``          the op-level layout of ``functional.gather_mm``
=========  ==========================  ==============================================

``Cin`` is ``in_channels / groups``. On ``load_state_dict`` a sparse conv compares the
checkpoint's weight shape with what each of ``RSCK``, ``KRSC`` and ``FLAT`` would look like
for this layer. If exactly one interpretation fits (or all fitting ones give the same
tensor) the weight is converted to the layer's own layout, silently: nothing is ambiguous. If several layouts fit and give different tensors (only possible when
every dim is equal, e.g. ``Cin = Cout = 3`` with a 3x3x3 kernel), loading raises unless the
layout is given: ``with mx_sparse.nn.layouts.checkpoint_layout("KRSC"): model.load_state_dict(sd)``
or ``mx_sparse.nn.layouts.load_state_dict(model, sd, layout="KRSC")``. ``RSKC`` is never
guessed (it is indistinguishable from ``RSCK`` whenever ``Cin == Cout``); give it explicitly.

State dicts written by mx_sparse record the layout in their metadata
(``weight_layout``), so round trips never need guessing. Modules of the mmcv surface (and
every sparse conv once mmdet3d's ``register_spconv2()`` has set ``SparseModule._version = 2``)
also honour mmdet3d's convention: metadata ``version == 2`` means the weight was saved by
spconv 2.x (``KRSC``), any other version means mmcv's own ``RSCK``; where that convention
decides between layouts that fit with different results, a one-line warning says so.
"""
import contextlib
import math
import threading
import warnings
from typing import Optional, Sequence

import torch

LAYOUTS = ("RSCK", "KRSC", "RSKC", "FLAT")
DETECTED = ("RSCK", "KRSC", "FLAT")
DESCRIPTION = {
    "RSCK": "RSCK [*kernel, Cin, Cout] (mx_sparse/mmcv)",
    "KRSC": "KRSC [Cout, *kernel, Cin] (spconv 2.x)",
    "RSKC": "RSKC [*kernel, Cout, Cin]",
    "FLAT": "FLAT [K, Cin, Cout]",
}
METADATA_KEY = "weight_layout"

_state = threading.local()


def _check(name: str, layout: str) -> str:
    if not isinstance(layout, str) or layout.upper() not in LAYOUTS:
        raise ValueError(f"{name}: expected one of {list(LAYOUTS)}, got {layout!r}")
    return layout.upper()


def layout_shape(layout: str, kernel_size: Sequence[int], in_channels: int, out_channels: int) -> list:
    """The shape a weight of this geometry has in ``layout`` (``in_channels`` per group)."""
    k = list(kernel_size)
    return {"RSCK": k + [in_channels, out_channels], "KRSC": [out_channels] + k + [in_channels],
            "RSKC": k + [out_channels, in_channels], "FLAT": [math.prod(k), in_channels, out_channels]}[layout]


def convert_weight(weight: torch.Tensor, src: str, dst: str, kernel_size: Optional[Sequence[int]] = None,
                   spconv_1x1: bool = False) -> torch.Tensor:
    """Converts a sparse-conv weight between layouts (see the module docstring).

    ``kernel_size`` is needed only when converting *from* ``FLAT`` (which has lost the
    kernel's shape) to a layout that has it. Returns a contiguous tensor; the result is
    differentiable with respect to ``weight``.

    >>> w = torch.randn(32, 3, 3, 3, 16)                   # spconv 2.x SubMConv3d(16, 32, 3)
    >>> convert_weight(w, "KRSC", "RSCK").shape
    torch.Size([3, 3, 3, 16, 32])

    ``spconv_1x1=True`` reproduces spconv 2.x's kernel-volume-1 path (a 1x1 submanifold
    conv, or a 1x1 conv with stride 1): spconv stores such a weight as ``[Cout, 1.., Cin]``
    but multiplies by its memory read as ``[Cin, Cout]``. With the flag, a ``KRSC`` weight
    of kernel volume 1 is converted by reinterpreting its memory (and the other way round),
    so a spconv checkpoint gives spconv's numbers. It has no effect on other kernels.
    """
    src, dst = _check("src", src), _check("dst", dst)
    if not isinstance(weight, torch.Tensor) or weight.dim() < 3:
        raise ValueError(f"weight: expected a tensor with at least 3 dims, got "
                         f"{getattr(weight, 'shape', type(weight).__name__)}")
    if src == dst:
        return weight.contiguous()
    nd = weight.dim() - 2
    if spconv_1x1 and "KRSC" in (src, dst) and src != "FLAT" and math.prod(
            weight.shape[1:-1] if src == "KRSC" else weight.shape[:-2]) == 1:
        cin, cout = (weight.shape[-1], weight.shape[0]) if src == "KRSC" else \
            ((weight.shape[-2], weight.shape[-1]) if src == "RSCK" else (weight.shape[-1], weight.shape[-2]))
        mat = weight.reshape(cin, cout) if src == "KRSC" else convert_weight(weight, src, "RSCK").reshape(cin, cout)
        ones = [1] * nd
        if dst == "KRSC":
            return mat.contiguous().reshape(cout, *ones, cin)
        return convert_weight(mat.reshape(*ones, cin, cout), "RSCK", dst)
    if src == "RSCK":
        rsck = weight
    elif src == "KRSC":
        rsck = weight.permute(*range(1, nd + 1), nd + 1, 0)
    elif src == "RSKC":
        rsck = weight.transpose(-1, -2)
    else:  # FLAT
        if dst == "FLAT":
            return weight.contiguous()
        if kernel_size is None:
            raise ValueError("kernel_size: converting from FLAT [K, Cin, Cout] needs the kernel_size")
        if math.prod(kernel_size) != weight.shape[0]:
            raise ValueError(f"kernel_size: {list(kernel_size)} has volume {math.prod(kernel_size)}, the FLAT "
                             f"weight has K={weight.shape[0]}")
        rsck = weight.reshape(*kernel_size, weight.shape[1], weight.shape[2])
    nd = rsck.dim() - 2
    if dst == "RSCK":
        out = rsck
    elif dst == "KRSC":
        out = rsck.permute(nd + 1, *range(nd), nd)
    elif dst == "RSKC":
        out = rsck.transpose(-1, -2)
    else:
        out = rsck.reshape(-1, rsck.shape[-2], rsck.shape[-1])
    return out.contiguous()


def detect_layouts(shape: Sequence[int], kernel_size: Sequence[int], in_channels: int, out_channels: int,
                   candidates: Sequence[str] = DETECTED) -> list:
    """Layouts among ``candidates`` whose shape for this geometry equals ``shape``."""
    shape = list(shape)
    return [lay for lay in candidates if layout_shape(lay, kernel_size, in_channels, out_channels) == shape]


@contextlib.contextmanager
def checkpoint_layout(layout: str):
    """Within the block, sparse-conv weights being loaded are taken to be in ``layout``
    (no guessing from the shape). Thread-local."""
    layout = _check("layout", layout)
    previous = getattr(_state, "layout", None)
    _state.layout = layout
    try:
        yield
    finally:
        _state.layout = previous


def load_state_dict(module: torch.nn.Module, state_dict, layout: Optional[str] = None, strict: bool = True):
    """``module.load_state_dict(state_dict, strict)``, with sparse-conv weights taken to be
    in ``layout`` when it is given (else detected from their shapes)."""
    if layout is None:
        return module.load_state_dict(state_dict, strict=strict)
    with checkpoint_layout(layout):
        return module.load_state_dict(state_dict, strict=strict)


def spconv_1x1_path(module) -> bool:
    """True for layers that spconv 2.x runs through its 1x1 matmul path (kernel volume 1 and
    submanifold or stride 1), where it reads the KRSC weight's memory as ``[Cin, Cout]``."""
    return (math.prod(module.kernel_size) == 1 and getattr(module, "groups", 1) == 1
            and (getattr(module, "subm", False) or math.prod(module.stride) == 1))


def scale_output_channels(module, scale: torch.Tensor) -> None:
    """In place: multiplies the weight of output channel ``c`` by ``scale[c]``, whatever the
    module's layout (used to fold a BatchNorm into the conv)."""
    own = getattr(module, "weight_layout", "RSCK")
    quirk = spconv_1x1_path(module)
    with torch.no_grad():
        rsck = convert_weight(module.weight, own, "RSCK", module.kernel_size, quirk) * scale
        module.weight.copy_(convert_weight(rsck, "RSCK", own, module.kernel_size, quirk))


def _message(src, dst):
    # no per-layer text: Python shows an identical warning once, so a whole model gives one line
    return (f"mx_sparse: sparse-conv checkpoint weights fit several layouts; mmdet3d's version mark chose "
            f"{DESCRIPTION[src]} (converted to {DESCRIPTION[dst]}); if that is wrong, state the layout with "
            f"mx_sparse.nn.layouts.checkpoint_layout")


def adapt_loaded_weight(module, state_dict, prefix: str, local_metadata: dict) -> None:
    """Load hook of the sparse convolutions: rewrites ``state_dict[prefix + 'weight']`` into
    the module's own layout (``module.weight_layout``), following the rules of this module."""
    key = prefix + "weight"
    if key not in state_dict or getattr(module, "weight", None) is None:
        return
    w = state_dict[key]
    if not isinstance(w, torch.Tensor):
        return
    own = getattr(module, "weight_layout", "RSCK")
    quirk = spconv_1x1_path(module)
    geometry = (module.kernel_size, module.in_channels // module.groups, module.out_channels)
    target = list(module.weight.shape)
    src = getattr(_state, "layout", None)          # stated by the user: trusted, never second-guessed
    hint = (local_metadata or {}).get(METADATA_KEY)  # recorded by mx_sparse on save: used when the shape agrees
    if src is None and hint in LAYOUTS and list(w.shape) == layout_shape(hint, *geometry):
        src = hint
    mmdet3d_rule = getattr(module, "mmdet3d_version_rule", False) or getattr(type(module), "_version", 1) == 2
    # Warned about: only a layout that a convention picked among several that fit with different
    # results. A stated or recorded layout, or a shape only one layout fits, is not ambiguous.
    ruled_ambiguity = False
    if src is None and mmdet3d_rule and local_metadata is not None:
        # mmdet3d: SparseModule._version == 2 marks spconv 2.x (KRSC) weights.
        implied = "KRSC" if local_metadata.get("version") == 2 else "RSCK"
        if list(w.shape) == layout_shape(implied, *geometry):
            src = implied
            chosen = convert_weight(w, implied, own, module.kernel_size, quirk)
            ruled_ambiguity = any(not torch.equal(chosen, convert_weight(w, lay, own, module.kernel_size, quirk))
                                  for lay in detect_layouts(w.shape, *geometry) if lay != implied)
    if src is None:
        fits = detect_layouts(w.shape, *geometry)
        if not fits:
            return  # torch reports the size mismatch
        converted = [convert_weight(w, lay, own, module.kernel_size, quirk) for lay in fits]
        if any(not torch.equal(converted[0], c) for c in converted[1:]):
            raise ValueError(
                f"{key}: checkpoint weight shape {list(w.shape)} fits several layouts ({', '.join(fits)}) for this "
                f"layer (kernel_size={list(module.kernel_size)}, in_channels={geometry[1]}, "
                f"out_channels={geometry[2]}); state it: `with mx_sparse.nn.layouts.checkpoint_layout('KRSC'): "
                f"model.load_state_dict(sd)` (or 'RSCK' / 'FLAT')")
        src = own if own in fits else fits[0]
    src = _check("layout", src)
    if src == own:
        return
    if list(w.shape) != layout_shape(src, *geometry):
        raise ValueError(f"{key}: checkpoint weight shape {list(w.shape)} is not {DESCRIPTION[src]} for this layer "
                         f"(expected {layout_shape(src, *geometry)})")
    state_dict[key] = convert_weight(w, src, own, module.kernel_size, quirk)
    if ruled_ambiguity and list(state_dict[key].shape) == target:
        warnings.warn(_message(src, own), stacklevel=2)


def record_layout(module, destination, prefix: str) -> None:
    """Save hook: writes the module's weight layout into the state dict's metadata."""
    meta = getattr(destination, "_metadata", None)
    if meta is not None:
        meta.setdefault(prefix[:-1], {})[METADATA_KEY] = getattr(module, "weight_layout", "RSCK")


class LayoutAware:
    """Mixin for sparse convolutions: converts checkpoint weights on load and records the
    layout on save (``weight_layout`` class attribute names the module's own layout)."""
    weight_layout = "RSCK"

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args, **kwargs):
        adapt_loaded_weight(self, state_dict, prefix, local_metadata)
        # the weight is now in this module's own layout; mmdet3d's register_spconv2() replaces
        # SparseModule._load_from_state_dict by a hook that permutes unless version == 2
        local_metadata = dict(local_metadata or {}, version=2)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args, **kwargs)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        record_layout(self, destination, prefix)
