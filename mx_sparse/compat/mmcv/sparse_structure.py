"""``mmcv.ops.sparse_structure``: SparseConvTensor (mx_sparse's own class: mutable
``.features``, ``(features, indices, spatial_shape, batch_size, grid=None)``) and scatter_nd."""
from ..spconv2.pytorch.core import scatter_nd  # noqa: F401
from ...nn.sparse_tensor import SparseConvTensor  # noqa: F401
