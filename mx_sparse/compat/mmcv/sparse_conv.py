"""``mmcv.ops.sparse_conv``: mmcv's sparse convolution classes (mmcv's positional order),
over mx_sparse's single convolution. Weights in mmcv's layout ``[*kernel, Cin, Cout]``.

Checkpoints: mmdet3d's convention is honoured on load - state-dict metadata
``version == 2`` (written by mmdet3d when spconv 2.x was installed) means spconv 2.x's
``[Cout, *kernel, Cin]``, any other version mmcv's own layout; shapes that fit only one
layout are converted regardless (see ``mx_sparse.nn.layouts``).

As in mmcv, a layer of kernel volume 1 is a plain matmul on the features: it keeps the
input voxels and spatial shape (whatever its stride) and ignores ``indice_key``."""
import math

from ..layers import CompatConvolution


class SparseConvolution(CompatConvolution):
    weight_layout = "RSCK"
    mmdet3d_version_rule = True

    def __init__(self, ndim, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, subm=False, output_padding=0, transposed=False, inverse=False, indice_key=None,
                 fused_bn=False):
        super().__init__(ndim, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         subm, output_padding, transposed, inverse, indice_key, fused_bn, mode="mmcv")
        self.conv1x1 = math.prod(self.kernel_size) == 1

    def forward(self, input, add_input=None):
        if self.conv1x1 and self.groups == 1:
            self._check_input(input)
            w = self.weight.reshape(self.in_channels, self.out_channels).to(input.features.dtype)
            return self._finish(input, input.features @ w, input.indices, input.spatial_shape, add_input)
        return super().forward(input, add_input)


def _named(ndim, **kind):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 indice_key=None):
        SparseConvolution.__init__(self, ndim, in_channels, out_channels, kernel_size, stride, padding, dilation,
                                   groups, bias, indice_key=indice_key, **kind)
    return __init__


def _named_inverse(ndim):
    def __init__(self, in_channels, out_channels, kernel_size, indice_key=None, bias=True):
        SparseConvolution.__init__(self, ndim, in_channels, out_channels, kernel_size, bias=bias, inverse=True,
                                   indice_key=indice_key)
    return __init__


def _make(name, init):
    return type(name, (SparseConvolution,), {"__init__": init, "__module__": __name__})


SparseConv2d, SparseConv3d, SparseConv4d = (_make(f"SparseConv{d}d", _named(d)) for d in (2, 3, 4))
SubMConv2d, SubMConv3d, SubMConv4d = (_make(f"SubMConv{d}d", _named(d, subm=True)) for d in (2, 3, 4))
SparseConvTranspose2d, SparseConvTranspose3d = (_make(f"SparseConvTranspose{d}d", _named(d, transposed=True))
                                                for d in (2, 3))
SparseInverseConv2d, SparseInverseConv3d = (_make(f"SparseInverseConv{d}d", _named_inverse(d)) for d in (2, 3))

CONV_TYPES = {c.__name__: c for c in (SparseConv2d, SparseConv3d, SparseConv4d, SubMConv2d, SubMConv3d, SubMConv4d,
                                      SparseConvTranspose2d, SparseConvTranspose3d, SparseInverseConv2d,
                                      SparseInverseConv3d)}
