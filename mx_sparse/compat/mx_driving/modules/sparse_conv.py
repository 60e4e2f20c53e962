"""``mx_driving.modules.sparse_conv``: the convolution classes (mx_sparse's own objects) and
mx_driving's output-size helpers."""
from typing import List, Sequence

from ....compat.spconv2.pytorch.ops import get_conv_output_size, get_deconv_output_size  # noqa: F401
from ....conv import SparseConv3d, SparseConvolution, SparseInverseConv3d, SubMConv3d  # noqa: F401


def get_inverse_conv_output_size(input_size: Sequence[int], kernel_size: Sequence[int], stride: Sequence[int],
                                 padding: Sequence[int], dilation: Sequence[int],
                                 output_padding: Sequence[int]) -> List[int]:
    """Per axis ``(in - 1) * s - 2p + d(k - 1) + output_padding + 1`` (1 where k == -1)."""
    out = []
    for i, n in enumerate(input_size):
        if kernel_size[i] == -1:
            out.append(1)
        else:
            out.append((n - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel_size[i] - 1)
                       + output_padding[i] + 1)
    return out
