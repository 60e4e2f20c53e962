"""The import paths modules had before the package's top level was grouped into nn/, functional/,
runtime/ and _core/ (issue 34), and the two documented alias names, served without a file of
their own: ``import mx_sparse.conv`` gives the module ``mx_sparse.nn.conv`` itself (the same
object, so ``isinstance``, monkeypatching and pickled class paths such as
``mx_sparse.sparse_tensor.SparseConvTensor`` work), and a name below an old one maps the same way
(``mx_sparse.ops.sparse_conv`` is ``mx_sparse.compat.mmcv.sparse_conv``).

``install()`` (called by ``mx_sparse/__init__.py``) puts a finder first on ``sys.meta_path``, so an
old name is never loaded a second time from a file under a new name; ``register_loaded()`` enters the
old names whose modules are already imported into ``sys.modules`` at once (so importing an old
name cannot replace an attribute of ``mx_sparse`` of the same name, such as the function
``mx_sparse.voxelize``); ``old_name_attribute`` answers ``mx_sparse.conv`` after a plain
``import mx_sparse``. Checkpoints saved under ``weights_only=True`` with old class paths load
through ``weights_only_paths`` (mx_sparse/nn/serialization.py).
"""
import importlib
import importlib.abc
import importlib.util
import sys
from typing import List, Optional, Tuple

# old module -> the module it is now. Names below an old one map the same way.
MOVED = {
    **{f"mx_sparse.{name}": f"mx_sparse.nn.{name}" for name in (
        "sparse_tensor", "conv", "modules", "batch_norm_relu", "given_outputs", "conv_padding",
        "weight_init", "layouts", "indice_data", "packed_map", "saved_tensors", "serialization",
        "validation", "compile_support")},
    **{f"mx_sparse.{name}": f"mx_sparse.functional.{name}" for name in ("importance", "voxelize")},
    **{f"mx_sparse.{name}": f"mx_sparse.runtime.{name}" for name in (
        "config", "environment", "device", "version", "cpu_memory", "ascend_build_info", "ascend")},
    "mx_sparse._op_registration": "mx_sparse._core.op_registration",
    "mx_sparse._contract": "mx_sparse._core.contract",
}
# the documented names of two compat surfaces (docs/*/architecture.md says why they exist)
ALIASES = {
    "mx_sparse.ops": "mx_sparse.compat.mmcv",                    # mmcv's module name, mmcv.ops
    "mx_sparse.spconv": "mx_sparse.compat.mx_driving.spconv",    # mx_driving.spconv
}
OLD_NAMES = {**MOVED, **ALIASES}


def current_name(name: str) -> Optional[str]:
    """The module an old name stands for now (``mx_sparse.ops.sparse_conv`` ->
    ``mx_sparse.compat.mmcv.sparse_conv``), or None when ``name`` is not an old name."""
    old, _, below = name.partition(".")
    while True:
        if old in OLD_NAMES:
            return OLD_NAMES[old] + (f".{below}" if below else "")
        head, _, rest = below.partition(".")
        if not head:
            return None
        old, below = f"{old}.{head}", rest


class _SameModule(importlib.abc.Loader):
    """Loads an old name as the module of its new name: the module object itself, with its own
    ``__spec__`` kept (the import system would otherwise write the alias's spec onto it)."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = self._spec


class OldPathFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        new = current_name(name) if name.startswith("mx_sparse.") else None
        if new is None:
            return None
        return importlib.util.spec_from_loader(name, _SameModule(new))


def install() -> None:
    if not any(isinstance(finder, OldPathFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder())


def register_loaded() -> None:
    """Every old module name whose module is imported, into sys.modules under the old name too."""
    for old, new in MOVED.items():
        if new in sys.modules:
            sys.modules.setdefault(old, sys.modules[new])


def old_name_attribute(name: str):
    """``mx_sparse.<name>`` for an old module name (module ``__getattr__``: only names the package
    does not have); raises AttributeError for any other."""
    if f"mx_sparse.{name}" not in OLD_NAMES:
        raise AttributeError(f"module 'mx_sparse' has no attribute '{name}'")
    return importlib.import_module(f"mx_sparse.{name}")


def weights_only_paths(classes) -> List[Tuple[type, str]]:
    """(class, old class path) for each class whose module has an old name: the names a checkpoint
    written before the move holds, for torch's weights_only allowlist (which matches by name)."""
    old_of = {new: old for old, new in MOVED.items()}
    return [(cls, f"{old_of[cls.__module__]}.{cls.__qualname__}") for cls in classes if cls.__module__ in old_of]
