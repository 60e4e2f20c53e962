"""mx_sparse's data types under ``torch.load(weights_only=True)`` (torch's default since 2.6).

Module and optimizer state dicts hold only tensors and builtins and need nothing here. A
pickled ``SparseConvTensor`` also holds its map cache (``IndiceData``, ``HeldMap``,
``PackedMap``); these classes are plain data (unpickling sets attributes and re-registers a
held map, nothing else runs), so they are added to torch's allowlist of safe globals when
mx_sparse is imported, and a saved SparseConvTensor loads like a tensor does. The allowlist
matches a class by the path the checkpoint names, so each class is also allowed under its path
before the package's top level was grouped (``mx_sparse.nn.sparse_tensor.SparseConvTensor``, ...).
"""
import torch

from .._core.old_paths import weights_only_paths
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
try:
    allow(*weights_only_paths(SAFE_GLOBALS))
except TypeError:   # torch < 2.5 takes no (class, path) pairs; checkpoints with old paths need weights_only=False there
    pass
