"""``mx_driving.modules.sparse_structure``: SparseConvTensor, IndiceData, scatter_nd."""
from ....compat.spconv2.pytorch.core import scatter_nd  # noqa: F401
from ....nn.indice_data import IndiceData  # noqa: F401
from ....nn.sparse_tensor import SparseConvTensor  # noqa: F401
