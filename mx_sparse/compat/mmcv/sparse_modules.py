"""``mmcv.ops.sparse_modules``: SparseModule, SparseSequential, ToDense (mx_sparse's own)."""
from ...nn.modules import SparseModule, SparseSequential, ToDense, is_sparse_module  # noqa: F401
from ..spconv2.pytorch.modules import is_spconv_module  # noqa: F401
