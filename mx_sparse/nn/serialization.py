"""mx_sparse's data types under ``torch.load(weights_only=True)`` (torch's default since 2.6).

Module and optimizer state dicts hold only tensors and builtins and need nothing here. A
pickled ``SparseConvTensor`` also holds its map cache (``IndiceData``, ``HeldMap``,
``PackedMap``); these classes are plain data (unpickling sets attributes and re-registers a
held map, nothing else runs), so they are added to torch's allowlist of safe globals when
mx_sparse is imported, and a saved SparseConvTensor loads like a tensor does.
"""
import torch

from .indice_data import IndiceData
from .packed_map import HeldMap, PackedMap
from .sparse_tensor import SparseConvTensor

SAFE_GLOBALS = [SparseConvTensor, IndiceData, HeldMap, PackedMap]


def allow(*classes) -> None:
    """Adds classes to torch's weights_only allowlist (no-op before torch 2.4, which has none)."""
    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is not None:
        add(list(classes))


allow(*SAFE_GLOBALS)
