"""mx_sparse: sparse 3D convolution for LiDAR networks (mx_driving API) on Ascend NPU,
CUDA and CPU. The device of the tensors picks the backend through the PyTorch
dispatcher."""
from .ascend_build_info import point_runtime_at_vendor_tree as _point_at_ops
_point_at_ops()  # the installed AscendC op package on ASCEND_CUSTOM_OPP_PATH, before _op_registration imports torch_npu
from . import environment as _environment
try:
    # every invalid MXS_* value (and MXS_CUDA_ON_CPU with Triton's interpreter off) refused at once,
    # before the registrations read the switches
    _environment.check()
except (ImportError, ValueError) as _error:
    _environment.exit_if_reporting(_error)   # python -m mx_sparse: the message, no traceback
    raise
from . import _op_registration  # noqa: F401  (loads the compiled ops first)
from . import cpu_memory, functional
from .conv import (SparseConv1d, SparseConv2d, SparseConv3d, SparseConv4d, SparseConvolution,
                   SparseConvTranspose1d, SparseConvTranspose2d, SparseConvTranspose3d, SparseConvTranspose4d,
                   SparseInverseConv1d, SparseInverseConv2d, SparseInverseConv3d, SparseInverseConv4d,
                   SubMConv1d, SubMConv2d, SubMConv3d, SubMConv4d)
from .device import best_device
from .modules import SparseModule, SparseSequential, ToDense, bn_relu
from .sparse_tensor import SparseConvTensor
from .compat import patch_mmcv, patch_spconv, unpatch_mmcv, unpatch_spconv  # compat surfaces
from .compat.patching import patch_mx_driving, unpatch_mx_driving
from .layouts import convert_weight
from . import serialization  # noqa: F401  (SparseConvTensor and its map cache load under weights_only=True)
from .voxelize import PointToVoxel, Voxels, voxelize
from .compat.mx_driving import Voxelization, voxelization  # mx_driving's voxelization names
from .config import compiled_backends, show_config
from .version import __version__

__all__ = [
    "SparseConvTensor", "SparseConvolution", "SparseModule", "SparseSequential", "ToDense", "bn_relu",
    "SparseConv1d", "SparseConv2d", "SparseConv3d", "SparseConv4d",
    "SubMConv1d", "SubMConv2d", "SubMConv3d", "SubMConv4d",
    "SparseInverseConv1d", "SparseInverseConv2d", "SparseInverseConv3d", "SparseInverseConv4d",
    "SparseConvTranspose1d", "SparseConvTranspose2d", "SparseConvTranspose3d", "SparseConvTranspose4d",
    "functional", "cpu_memory", "best_device",
    "patch_spconv", "unpatch_spconv", "patch_mmcv", "unpatch_mmcv", "convert_weight",
    "PointToVoxel", "Voxels", "voxelize", "Voxelization", "voxelization",
    "patch_mx_driving", "unpatch_mx_driving", "show_config", "compiled_backends",
]
