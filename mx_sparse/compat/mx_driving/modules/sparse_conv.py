"""``mx_driving.modules.sparse_conv``: the convolution classes (mx_sparse's own objects) and
mx_driving's output-size helpers."""
from typing import List, Sequence

from ...._core import contract as _contract
from ....compat.spconv2.pytorch.ops import get_conv_output_size, get_deconv_output_size  # noqa: F401
from ....nn.conv import SparseConv3d, SparseConvolution, SparseInverseConv3d, SubMConv3d  # noqa: F401


def get_inverse_conv_output_size(input_size: Sequence[int], kernel_size: Sequence[int], stride: Sequence[int],
                                 padding: Sequence[int], dilation: Sequence[int],
                                 output_padding: Sequence[int]) -> List[int]:
    """Per axis ``(in - 1) * s - 2p + d(k - 1) + output_padding + 1`` (the core's transposed
    extent, conv_transpose_out_extent, with padding p on both sides), 1 where k == -1."""
    n = len(input_size)
    extent = _contract.conv_transpose_output_extent(input_size, [1 if k == -1 else k for k in kernel_size[:n]],
                                                    stride[:n], padding[:n], padding[:n], dilation[:n],
                                                    output_padding[:n])
    return [1 if kernel_size[i] == -1 else extent[i] for i in range(n)]
