"""``spconv.pytorch.ops``: output-size helpers (spconv's formulas)."""
from typing import List

from ..core import ConvAlgo  # noqa: F401


def get_conv_output_size(input_size, kernel_size, stride, padding, dilation) -> List[int]:
    out = []
    for i in range(len(input_size)):
        if kernel_size[i] == -1:
            out.append(1)
        else:
            out.append((input_size[i] + 2 * padding[i] - dilation[i] * (kernel_size[i] - 1) - 1) // stride[i] + 1)
    return out


def get_deconv_output_size(input_size, kernel_size, stride, padding, dilation, output_padding) -> List[int]:
    out = []
    for i in range(len(input_size)):
        if kernel_size[i] == -1:
            raise ValueError("deconv don't support kernel_size < 0")
        out.append((input_size[i] - 1) * stride[i] - 2 * padding[i] + kernel_size[i] + output_padding[i])
    return out


def get_current_stream():
    return 0
