"""``mx_driving`` served by mx_sparse: after ``mx_sparse.patch_mx_driving()``, code written
for Huawei's mx_driving (``import mx_driving``, ``from mx_driving.spconv import SubMConv3d``,
``from mx_driving import Voxelization``, the module paths ``mx_driving.modules.*`` /
``mx_driving.ops.voxelization`` / ``mx_driving.point``) runs on mx_sparse, on every device
mx_sparse supports. Only mx_driving's sparse-convolution and voxelization API is provided;
other names raise ``AttributeError`` saying so."""
from ...nn.conv import SparseConv3d, SparseConvolution, SparseInverseConv3d, SubMConv3d  # noqa: F401
from ...nn.modules import SparseModule, SparseSequential  # noqa: F401
from ...nn.sparse_tensor import SparseConvTensor  # noqa: F401
from . import _C, modules, ops, point, spconv  # noqa: F401  (spconv: also mx_sparse.spconv)
from .modules.voxelization import Voxelization  # noqa: F401
from .ops.voxelization import voxelization  # noqa: F401

__all__ = ["SparseConv3d", "SparseInverseConv3d", "SubMConv3d", "SparseConvolution", "SparseConvTensor",
           "SparseModule", "SparseSequential", "Voxelization", "voxelization"]
__mx_sparse__ = True   # marks the mx_sparse implementation


def __getattr__(name):
    raise AttributeError(f"mx_driving.{name} is not provided by mx_sparse, which serves mx_driving's sparse "
                         f"convolution and voxelization API only")
