"""``spconv.pytorch`` served by mx_sparse (``mx_sparse.patch_spconv()``). Weights are in
spconv 2.x's layout ``[Cout, *kernel, Cin]``; see docs/en/migration_spconv.md."""
from torch import nn

from ....nn.modules import SparseModule, SparseSequential
from ....nn.modules import ToDense as _ToDense
from . import constants, core, functional, ops  # noqa: F401
from .conv import (SparseConv1d, SparseConv2d, SparseConv3d, SparseConv4d, SparseConvolution,  # noqa: F401
                   SparseConvTranspose1d, SparseConvTranspose2d, SparseConvTranspose3d, SparseConvTranspose4d,
                   SparseInverseConv1d, SparseInverseConv2d, SparseInverseConv3d, SparseInverseConv4d, SubMConv1d,
                   SubMConv2d, SubMConv3d, SubMConv4d)
from .core import SparseConvTensor
from .modules import (SparseBatchNorm, SparseIdentity, SparseReLU, SparseSyncBatchNorm,  # noqa: F401
                      assign_name_for_sparse_modules)
from .ops import ConvAlgo  # noqa: F401
from .pool import (SparseAvgPool1d, SparseAvgPool2d, SparseAvgPool3d, SparseGlobalAvgPool,  # noqa: F401
                   SparseGlobalMaxPool, SparseMaxPool1d, SparseMaxPool2d, SparseMaxPool3d, SparseMaxPool4d)
from .tables import AddTable, ConcatTable, JoinTable  # noqa: F401

Identity = nn.Identity
ToDense = _ToDense   # SparseConvTensor -> dense [B, C, *spatial]


class RemoveGrid(SparseModule):
    """Drops the pre-allocated grid buffer (``x.grid = None``)."""

    def forward(self, x: SparseConvTensor):
        x.grid = None
        return x
