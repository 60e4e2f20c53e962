"""The ``mmcv.ops`` sparse-convolution and voxelization names over mx_sparse (``from mx_sparse.ops import ...`` or,
after ``mx_sparse.patch_mmcv()``, ``from mmcv.ops import ...``). Lives in the compat wing;
``mx_sparse.ops`` is this package under its documented name (an alias, mx_sparse/_core/old_paths.py)."""
from . import sparse_conv, sparse_modules, sparse_pool, sparse_structure, voxelize  # noqa: F401
from .sparse_conv import (SparseConv2d, SparseConv3d, SparseConv4d, SparseConvolution,  # noqa: F401
                          SparseConvTranspose2d, SparseConvTranspose3d, SparseInverseConv2d, SparseInverseConv3d,
                          SubMConv2d, SubMConv3d, SubMConv4d)
from .sparse_modules import SparseModule, SparseSequential  # noqa: F401
from .sparse_pool import SparseMaxPool, SparseMaxPool2d, SparseMaxPool3d  # noqa: F401
from .sparse_structure import SparseConvTensor, scatter_nd  # noqa: F401
from .voxelize import Voxelization, voxelization  # noqa: F401

SPARSE_NAMES = ["SparseConvTensor", "SubMConv2d", "SubMConv3d", "SubMConv4d", "SparseConv2d", "SparseConv3d",
                "SparseConv4d", "SparseInverseConv2d", "SparseInverseConv3d", "SparseConvTranspose2d",
                "SparseConvTranspose3d", "SparseMaxPool2d", "SparseMaxPool3d", "SparseSequential", "SparseModule",
                "scatter_nd", "Voxelization", "voxelization"]
__all__ = SPARSE_NAMES


def register_conv_layers(force: bool = True) -> list:
    """Registers the conv type names (SubMConv3d, SparseConv3d, ...) in mmengine's ``MODELS``
    (mmcv 2.x / mmdet3d 1.x) and in mmcv 1.x's ``CONV_LAYERS``, whichever is importable, so
    ``build_conv_layer(dict(type='SubMConv3d', indice_key='subm1'), 16, 16, 3)`` builds
    mx_sparse layers. Returns the registries used."""
    used = []
    try:
        from mmengine.registry import MODELS
    except ImportError:
        MODELS = None
    if MODELS is not None:
        for name, cls in sparse_conv.CONV_TYPES.items():
            MODELS.register_module(name=name, module=cls, force=force)
        used.append("mmengine.MODELS")
    try:
        from mmcv.cnn import CONV_LAYERS  # mmcv 1.x
    except Exception:
        CONV_LAYERS = None
    if CONV_LAYERS is not None and getattr(CONV_LAYERS, "register_module", None) is not None:
        for name, cls in sparse_conv.CONV_TYPES.items():
            CONV_LAYERS.register_module(name=name, module=cls, force=force)
        used.append("mmcv.CONV_LAYERS")
    return used
