"""An Open3D-ML-compatible surface (``open3d.ml.torch``'s sparse convolutions) over mx_sparse:
``ops`` (``sparse_conv``, ``sparse_conv_transpose`` and their filter gradients, with Open3D's
CSR neighbour lists) and ``layers`` (``SparseConv``, ``SparseConvTranspose``: Open3D's
constructors, forward arguments and parameter names). docs/en/open3d.md maps the arguments."""
from . import layers, ops  # noqa: F401
from .layers import SparseConv, SparseConvTranspose  # noqa: F401
from .ops import (sparse_conv, sparse_conv_backprop_filter, sparse_conv_transpose,  # noqa: F401
                  sparse_conv_transpose_backprop_filter)
