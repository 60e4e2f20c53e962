"""``spconv.pytorch.conv``: spconv 2.x's convolution classes over mx_sparse's single
convolution. Positional order and defaults are spconv's; ``algo``, ``fp32_accum``,
``record_voxel_count``, ``act_*`` (inference fusion only), ``large_kernel_fast_algo``,
``name``, ``device``, ``dtype`` are accepted (``device``/``dtype`` place the parameters, the
others are ignored).

Weights use spconv 2.x's layout ``[Cout, *kernel, Cin]`` (KRSC), so a spconv ``state_dict``
loads with ``strict=True``. Like spconv 2.3.8, layers of kernel volume 1 that are
submanifold or have stride 1 compute ``features @ weight.view(Cin, Cout)`` - the KRSC
buffer read as ``[Cin, Cout]`` - so spconv checkpoints of such layers give spconv's
numbers (see docs/en/migration_spconv.md, "1x1 layers")."""
import math

import torch
from torch import nn

from ...._core import contract as _contract
from ...layers import CompatConvolution
from ..core import ConvAlgo  # noqa: F401
from .core import SparseConvTensor  # noqa: F401

_IGNORED = ("algo", "fp32_accum", "record_voxel_count", "act_type", "act_alpha", "act_beta",
            "large_kernel_fast_algo")


class SparseConvolution(CompatConvolution):
    weight_layout = "KRSC"

    def __init__(self, ndim, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, subm=False, output_padding=0, transposed=False, inverse=False, indice_key=None,
                 algo=None, fp32_accum=None, record_voxel_count=False, act_type=None, act_alpha=0, act_beta=0,
                 large_kernel_fast_algo=False, name=None, device=None, dtype=None):
        super().__init__(ndim, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         subm, output_padding, transposed, inverse, indice_key, mode="spconv")
        self.name = name
        self._sparse_unique_name = ""
        self.algo = algo
        self.fp32_accum = fp32_accum
        self.conv1x1 = math.prod(self.kernel_size) == 1 and (subm or math.prod(self.stride) == 1)
        if self.conv1x1 and not subm and any(self.padding):
            raise ValueError("padding must be zero for 1x1 conv (k=1,s=1)")
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    def reset_parameters(self):
        if getattr(self, "_building", False):
            return
        # spconv 2.x: uniform(+-sqrt(3)*gain/sqrt(fan_in)) drawn directly in KRSC, then the bias
        fan_in = self.in_channels * math.prod(self.kernel_size)
        bound = math.sqrt(3.0) * nn.init.calculate_gain("leaky_relu", math.sqrt(5)) / math.sqrt(fan_in)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))

    def gemm_weight(self) -> torch.Tensor:
        if self.conv1x1 and self.groups == 1:   # spconv 2.3.8's 1x1 path: the buffer read as [Cin, Cout]
            return self.weight.reshape(1, self.in_channels, self.out_channels)
        return super().gemm_weight()

    def is_inverseable(self):
        return self.indice_key is not None and not self.subm

    def forward(self, input, add_input=None):
        if self.conv1x1 and self.groups == 1:
            self._check_input(input)
            w = self.gemm_weight()[0].to(input.features.dtype)
            shape = input.spatial_shape if (self.subm or self.inverse) else \
                self._conv1x1_shape(input.spatial_shape)
            return self._finish(input, input.features @ w, input.indices, shape, add_input)
        return super().forward(input, add_input)

    def _conv1x1_shape(self, shape):
        """The output grid of a 1x1 kernel (no padding: the constructor rejects it)."""
        one, zero = [1] * len(shape), [0] * len(shape)
        if self.transposed:
            return _contract.conv_transpose_output_extent(shape, one, self.stride, zero, zero, one, self.output_padding)
        return _contract.conv_output_extent(shape, one, self.stride, zero, one)


def _named(ndim, **kind):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 indice_key=None, algo=None, fp32_accum=None, record_voxel_count=False, large_kernel_fast_algo=False,
                 name=None):
        SparseConvolution.__init__(self, ndim, in_channels, out_channels, kernel_size, stride, padding, dilation,
                                   groups, bias, indice_key=indice_key, algo=algo, fp32_accum=fp32_accum,
                                   record_voxel_count=record_voxel_count,
                                   large_kernel_fast_algo=large_kernel_fast_algo, name=name, **kind)
    return __init__


def _named_inverse(ndim):
    def __init__(self, in_channels, out_channels, kernel_size, indice_key, bias=True, algo=None, fp32_accum=None,
                 large_kernel_fast_algo=False, name=None):
        SparseConvolution.__init__(self, ndim, in_channels, out_channels, kernel_size, bias=bias, inverse=True,
                                   indice_key=indice_key, algo=algo, fp32_accum=fp32_accum,
                                   large_kernel_fast_algo=large_kernel_fast_algo, name=name)
    return __init__


def _make(name, init):
    return type(name, (SparseConvolution,), {"__init__": init, "__module__": __name__})


SparseConv1d, SparseConv2d, SparseConv3d, SparseConv4d = (_make(f"SparseConv{d}d", _named(d)) for d in (1, 2, 3, 4))
SubMConv1d, SubMConv2d, SubMConv3d, SubMConv4d = (_make(f"SubMConv{d}d", _named(d, subm=True)) for d in (1, 2, 3, 4))
SparseConvTranspose1d, SparseConvTranspose2d, SparseConvTranspose3d, SparseConvTranspose4d = (
    _make(f"SparseConvTranspose{d}d", _named(d, transposed=True)) for d in (1, 2, 3, 4))
SparseInverseConv1d, SparseInverseConv2d, SparseInverseConv3d, SparseInverseConv4d = (
    _make(f"SparseInverseConv{d}d", _named_inverse(d)) for d in (1, 2, 3, 4))
