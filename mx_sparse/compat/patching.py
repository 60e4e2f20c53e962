"""``patch_spconv`` / ``patch_mmcv``: make ``import spconv...`` / ``import mmcv.ops...`` resolve
to mx_sparse by placing mx_sparse's module objects in ``sys.modules`` (the import system
looks there first, so this works even when the real packages are installed). Modules the
surfaces do not provide (e.g. ``spconv.pytorch.hash``) are not importable while patched.
``unpatch_*`` restores what ``sys.modules`` held before."""
import importlib
import sys
import types

_SPCONV = {
    "spconv": "mx_sparse.compat.spconv2",
    "spconv.constants": "mx_sparse.compat.spconv2.constants",
    "spconv.core": "mx_sparse.compat.spconv2.core",
    "spconv.pytorch": "mx_sparse.compat.spconv2.pytorch",
    "spconv.pytorch.conv": "mx_sparse.compat.spconv2.pytorch.conv",
    "spconv.pytorch.core": "mx_sparse.compat.spconv2.pytorch.core",
    "spconv.pytorch.modules": "mx_sparse.compat.spconv2.pytorch.modules",
    "spconv.pytorch.functional": "mx_sparse.compat.spconv2.pytorch.functional",
    "spconv.pytorch.ops": "mx_sparse.compat.spconv2.pytorch.ops",
    "spconv.pytorch.pool": "mx_sparse.compat.spconv2.pytorch.pool",
    "spconv.pytorch.tables": "mx_sparse.compat.spconv2.pytorch.tables",
    "spconv.pytorch.constants": "mx_sparse.compat.spconv2.pytorch.constants",
    "spconv.pytorch.utils": "mx_sparse.compat.spconv2.pytorch.utils",
    "spconv.utils": "mx_sparse.compat.spconv2.utils",
    "spconv.test_utils": "mx_sparse.compat.spconv2.test_utils",
}
_MX_DRIVING = {
    "mx_driving": "mx_sparse.compat.mx_driving",
    "mx_driving._C": "mx_sparse.compat.mx_driving._C",
    "mx_driving.spconv": "mx_sparse.compat.mx_driving.spconv",
    "mx_driving.point": "mx_sparse.compat.mx_driving.point",
    "mx_driving.modules": "mx_sparse.compat.mx_driving.modules",
    "mx_driving.modules.sparse_conv": "mx_sparse.compat.mx_driving.modules.sparse_conv",
    "mx_driving.modules.sparse_modules": "mx_sparse.compat.mx_driving.modules.sparse_modules",
    "mx_driving.modules.sparse_structure": "mx_sparse.compat.mx_driving.modules.sparse_structure",
    "mx_driving.modules.voxelization": "mx_sparse.compat.mx_driving.modules.voxelization",
    "mx_driving.ops": "mx_sparse.compat.mx_driving.ops",
    "mx_driving.ops.voxelization": "mx_sparse.compat.mx_driving.ops.voxelization",
}
_MMCV_SUBMODULES = {
    "mmcv.ops.sparse_conv": "mx_sparse.compat.mmcv.sparse_conv",
    "mmcv.ops.sparse_structure": "mx_sparse.compat.mmcv.sparse_structure",
    "mmcv.ops.sparse_modules": "mx_sparse.compat.mmcv.sparse_modules",
    "mmcv.ops.sparse_pool": "mx_sparse.compat.mmcv.sparse_pool",
    "mmcv.ops.voxelize": "mx_sparse.compat.mmcv.voxelize",
}
_saved = {}
_replaced_attrs = {}
_MISSING = object()


def _save(prefix):
    if prefix not in _saved:
        _saved[prefix] = {n: m for n, m in sys.modules.items() if n == prefix or n.startswith(prefix + ".")}


def _install(prefix, mapping):
    _save(prefix)
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]
    for name, target in mapping.items():
        sys.modules[name] = importlib.import_module(target)


def _restore(prefix):
    if prefix not in _saved:
        return
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]
    sys.modules.update(_saved.pop(prefix))


def _install_tensorview_if_missing():
    """OpenPCDet-style code hands spconv's point-to-voxel classes ``cumm.tensorview`` tensors;
    without cumm (it comes with spconv) a minimal stand-in module serves them."""
    try:
        importlib.import_module("cumm.tensorview")
        return
    except ImportError:
        pass
    _save("cumm")
    cumm = types.ModuleType("cumm", "minimal cumm package created by mx_sparse.patch_spconv()")
    cumm.__path__ = []
    cumm.tensorview = importlib.import_module("mx_sparse.compat.cumm_tensorview")
    sys.modules["cumm"] = cumm
    sys.modules["cumm.tensorview"] = cumm.tensorview


def patch_spconv() -> types.ModuleType:
    """After this call ``import spconv``, ``import spconv.pytorch as spconv`` and
    ``from spconv.pytorch import SubMConv3d`` give mx_sparse's spconv-2.x surface (weights
    in spconv's ``[Cout, *kernel, Cin]`` layout), ``spconv.utils.Point2VoxelCPU3d`` and
    ``spconv.pytorch.utils.PointToVoxel`` its voxelization (and, where cumm is not
    installed, ``cumm.tensorview`` a minimal stand-in). Returns the ``spconv.pytorch`` module."""
    _install("spconv", _SPCONV)
    _install_tensorview_if_missing()
    return sys.modules["spconv.pytorch"]


def unpatch_spconv() -> None:
    """Restores the ``spconv`` (and ``cumm``) modules present before ``patch_spconv()``."""
    _restore("spconv")
    _restore("cumm")


def patch_mx_driving() -> types.ModuleType:
    """After this call ``import mx_driving`` and its module paths (``mx_driving.spconv``,
    ``mx_driving.modules.sparse_conv`` / ``sparse_modules`` / ``sparse_structure`` /
    ``voxelization``, ``mx_driving.ops.voxelization``, ``mx_driving.point``, ``mx_driving._C``)
    give mx_sparse's mx_driving surface: its sparse convolutions and voxelization, on every
    device mx_sparse supports. Returns the ``mx_driving`` module."""
    _install("mx_driving", _MX_DRIVING)
    return sys.modules["mx_driving"]


def unpatch_mx_driving() -> None:
    """Restores the ``mx_driving`` modules present before ``patch_mx_driving()``."""
    _restore("mx_driving")


def patch_mmcv(register: bool = True) -> types.ModuleType:
    """After this call ``from mmcv.ops import SubMConv3d, SparseConvTensor, ...`` and the
    submodules ``mmcv.ops.sparse_conv / sparse_structure / sparse_modules / sparse_pool``
    give mx_sparse's mmcv surface. With a full mmcv installed, only the sparse names of
    its ``mmcv.ops`` are replaced (its other ops stay); without a working ``mmcv.ops``
    (mmcv-lite, or no mmcv) ``mmcv.ops`` becomes ``mx_sparse.ops`` (and, without mmcv, a
    minimal ``mmcv`` package holding it). ``register=True`` also registers the conv type
    names for ``build_conv_layer`` (mmengine ``MODELS`` / mmcv 1.x ``CONV_LAYERS``).
    Returns the ``mmcv.ops`` module."""
    ours = importlib.import_module("mx_sparse.compat.mmcv")
    _save("mmcv")
    try:
        mmcv = importlib.import_module("mmcv")
    except ImportError:
        mmcv = types.ModuleType("mmcv", "minimal mmcv package created by mx_sparse.patch_mmcv()")
        mmcv.__path__ = []
        mmcv.__version__ = "2.1.0"
        mmcv.__mx_sparse_stub__ = True
        sys.modules["mmcv"] = mmcv
    try:
        real_ops = importlib.import_module("mmcv.ops")
        if getattr(real_ops, "__name__", "") == ours.__name__:
            real_ops = None
    except Exception:
        real_ops = None
    if real_ops is None:
        sys.modules["mmcv.ops"] = ours
        mmcv.ops = ours
        ops = ours
    else:
        originals = {}
        for name in ours.SPARSE_NAMES + [n.rsplit(".", 1)[1] for n in _MMCV_SUBMODULES]:
            originals[name] = getattr(real_ops, name, _MISSING)
        _replaced_attrs.setdefault(id(real_ops), (real_ops, originals))
        for name in ours.SPARSE_NAMES:
            setattr(real_ops, name, getattr(ours, name))
        ops = real_ops
    for name, target in _MMCV_SUBMODULES.items():
        module = importlib.import_module(target)
        sys.modules[name] = module
        setattr(ops, name.rsplit(".", 1)[1], module)
    if register:
        ours.register_conv_layers()
    return ops


def unpatch_mmcv() -> None:
    """Restores the ``mmcv`` modules present before ``patch_mmcv()`` (registrations made in
    mmengine's registry stay)."""
    if "mmcv" not in _saved:
        return
    for module, originals in _replaced_attrs.values():      # a full mmcv's own mmcv.ops
        for name, value in originals.items():
            if value is _MISSING:
                if hasattr(module, name):
                    delattr(module, name)
            else:
                setattr(module, name, value)
    _replaced_attrs.clear()
    for name in [n for n in sys.modules if n == "mmcv" or n.startswith("mmcv.")]:
        del sys.modules[name]
    sys.modules.update(_saved.pop("mmcv"))
