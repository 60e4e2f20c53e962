"""``spconv.pytorch.ops``: output-size helpers (spconv's formulas)."""
from typing import List

from ...._core import contract as _contract
from ..core import ConvAlgo  # noqa: F401


def get_conv_output_size(input_size, kernel_size, stride, padding, dilation) -> List[int]:
    """The core's output extent per axis; as in spconv, an axis with kernel_size -1 (a global
    kernel) has one output cell."""
    n = len(input_size)
    extent = _contract.conv_output_extent(input_size, [1 if k == -1 else k for k in kernel_size[:n]], stride[:n],
                                          padding[:n], dilation[:n])
    return [1 if kernel_size[i] == -1 else extent[i] for i in range(n)]


def get_deconv_output_size(input_size, kernel_size, stride, padding, dilation, output_padding) -> List[int]:
    """The transposed conv's output extent as spconv computes it: without dilation (every axis
    as if dilation were 1), whatever ``dilation`` says."""
    n = len(input_size)
    if any(k == -1 for k in kernel_size[:n]):
        raise ValueError("deconv don't support kernel_size < 0")
    return _contract.conv_transpose_output_extent(input_size, kernel_size[:n], stride[:n], padding[:n], padding[:n],
                                                  [1] * n, output_padding[:n])


def get_current_stream():
    return 0
