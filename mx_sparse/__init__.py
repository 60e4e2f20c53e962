"""mx_sparse: sparse 3D convolution for LiDAR networks (mx_driving API) on Ascend NPU,
CUDA and CPU. The device of the tensors picks the backend through the PyTorch
dispatcher.

The package, by what a user reaches for (docs/en/architecture.md, "Package map"):
  nn/          the tensor and the layers (SparseConvTensor, SubMConv3d..., SparseSequential) and
               what they keep (neighbor-map caches, packed maps, saved tensors, weight layouts)
  functional/  the operators as functions (maps, gather_mm, importance weights, voxelization)
  compat/      other libraries' names: spconv 2.x, mmcv.ops, mx_driving, Open3D
  runtime/     what this installation is and how it runs (config, MXS_* switches, device, version,
               CPU memory pool, Ascend build info, the AscendC emulator switch)
  models/      reference backbones;  synthetic/  the LiDAR scene generator
  _core/       op registration and the C++ contract's Python face; _accelerator/, _cuda/ the
               CUDA/NPU orchestration and the Triton kernels
The modules' names before this grouping (``conv`` for ``nn.conv``, ``sparse_tensor`` for
``nn.sparse_tensor``, ...) still import, as the same module objects (_core/old_paths.py)."""
from ._core import old_paths as _old_paths
_old_paths.install()   # first: any import below may name a module by its old path
__getattr__ = _old_paths.old_name_attribute   # the old names as attributes after a plain `import mx_sparse`
from .runtime.ascend_build_info import point_runtime_at_vendor_tree as _point_at_ops
_point_at_ops()  # the installed AscendC op package on ASCEND_CUSTOM_OPP_PATH, before _op_registration imports torch_npu
from .runtime import environment as _environment
try:
    # every invalid MXS_* value (and MXS_CUDA_ON_CPU with Triton's interpreter off) refused at once,
    # before the registrations read the switches
    _environment.check()
except (ImportError, ValueError) as _error:
    _environment.exit_if_reporting(_error)   # python -m mx_sparse: the message, no traceback
    raise
from ._core import op_registration as _op_registration  # noqa: F401  (loads the compiled ops first)
from . import functional
from .runtime import cpu_memory
from .nn.conv import (SparseConv1d, SparseConv2d, SparseConv3d, SparseConv4d, SparseConvolution,
                      SparseConvTranspose1d, SparseConvTranspose2d, SparseConvTranspose3d, SparseConvTranspose4d,
                      SparseInverseConv1d, SparseInverseConv2d, SparseInverseConv3d, SparseInverseConv4d,
                      SubMConv1d, SubMConv2d, SubMConv3d, SubMConv4d)
from .runtime.device import best_device
from .nn.modules import SparseModule, SparseSequential, ToDense, bn_relu
from .nn.sparse_tensor import SparseConvTensor
from .compat import patch_mmcv, patch_spconv, unpatch_mmcv, unpatch_spconv  # compat surfaces
from .compat.patching import patch_mx_driving, unpatch_mx_driving
from .nn.layouts import convert_weight
from .nn import serialization  # noqa: F401  (SparseConvTensor and its map cache load under weights_only=True)
from .functional.voxelize import PointToVoxel, Voxels, voxelize
from .compat.mx_driving import Voxelization, voxelization  # mx_driving's voxelization names
from .runtime.config import compiled_backends, show_config
from .runtime.version import __version__
_old_paths.register_loaded()

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
