"""The mx_driving surface: ``mx_sparse.spconv`` (this module under its
documented name, an alias: mx_sparse/_core/old_paths.py) and, after ``patch_mx_driving()``, ``mx_driving.spconv`` expose what
``mx_driving.spconv`` does - the very same objects as the top level of mx_sparse (weights
``[*kernel, Cin, Cout]``, ``mode='mmcv'|'spconv'`` selects the initialisation)."""
from ...nn.conv import (SparseConv1d, SparseConv2d, SparseConv3d, SparseConv4d, SparseConvolution,  # noqa: F401
                    SparseInverseConv1d, SparseInverseConv2d, SparseInverseConv3d, SparseInverseConv4d, SubMConv1d,
                    SubMConv2d, SubMConv3d, SubMConv4d)
from ...nn.modules import SparseModule, SparseSequential, ToDense  # noqa: F401
from ...nn.sparse_tensor import SparseConvTensor  # noqa: F401

__all__ = ["SparseConv3d", "SubMConv3d", "SparseInverseConv3d", "SparseConvolution", "SparseConvTensor",
           "SparseModule", "SparseSequential", "ToDense", "SparseConv1d", "SparseConv2d", "SparseConv4d",
           "SubMConv1d", "SubMConv2d", "SubMConv4d", "SparseInverseConv1d", "SparseInverseConv2d",
           "SparseInverseConv4d"]
