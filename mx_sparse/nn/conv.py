"""Sparse convolutions: SparseConvolution and its named 1D-4D forms (strided,
submanifold, inverse, transposed). A layer finds or builds its neighbor map (cached under
``indice_key``) and runs one ``gather_mm``; autograd lives on the op."""
import copy
import math
from typing import Tuple

import torch
from torch import nn

from . import conv_padding
from ..functional import importance
from .. import functional as F
from . import given_outputs
from . import validation
from .indice_data import IndiceData, build_conv_data, build_conv_transpose_data, build_subm_data, same_voxels
from .layouts import LayoutAware, scale_output_channels
from .modules import SparseModule
from .packed_map import any_held_dense
from .._core.op_registration import ops
from .saved_tensors import activation_of, compact_saved_tensors
from .sparse_tensor import SparseConvTensor
from .weight_init import INITIALIZERS


def new_weight(shape) -> torch.Tensor:
    """An uninitialised weight; a shape no allocation can hold is reported by its arguments."""
    try:
        return torch.empty(shape)
    except (RuntimeError, MemoryError, TypeError) as e:   # TypeError: a size beyond int64
        raise ValueError(f"in_channels, out_channels, kernel_size: a weight of shape {shape} cannot be allocated "
                         f"({str(e).splitlines()[0]})") from None


def needs_autograd(*tensors: torch.Tensor) -> bool:
    if not torch.is_grad_enabled():
        return False
    for t in tensors:   # (a loop, not any() over a generator: called by every layer)
        if t.requires_grad:
            return True
    return False


class SparseConvolution(LayoutAware, SparseModule):
    """Sparse convolution over ``ndim`` spatial axes (cross-correlation, like
    ``torch.nn.functional.conv3d``). Weight ``[*kernel_size, in_channels/groups,
    out_channels]``. ``subm=True``: outputs are the input voxels; ``inverse=True``:
    transposes the map of the strided conv with the same ``indice_key`` and returns
    to that conv's input voxels; ``transposed=True``: the generative transposed conv
    (``torch.nn.functional.conv_transpose3d``): input ``i`` reaches every output
    ``o = i*stride - pads_begin + k*dilation`` of the grid
    ``(s-1)*stride - pads_begin - pads_end + dilation*(k-1) + 1 + output_padding``.

    Padding (strided and transposed): ``padding`` on both sides of every axis, or per-axis
    ``pads_begin`` / ``pads_end`` (given together), or ``auto_pad`` in "none", "valid",
    "same_upper", "same_lower", as ONNX / oneDNN define them (mx_sparse/nn/conv_padding.py)."""

    def __init__(self, ndim, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, subm=False, output_padding=0, transposed=False, inverse=False,
                 indice_key=None, fused_bn=False, mode="mmcv", pads_begin=None, pads_end=None, auto_pad="none",
                 normalize=False):
        super().__init__()
        if ndim not in (1, 2, 3, 4):
            raise ValueError(f"ndim: expected 1, 2, 3 or 4, got {ndim!r}")
        validation.channels(in_channels, out_channels, groups)
        if mode not in INITIALIZERS:
            raise ValueError(f"mode: expected one of {sorted(INITIALIZERS)}, got {mode!r}")
        if transposed and (subm or inverse):
            raise ValueError("transposed: a transposed conv cannot also be submanifold or inverse")
        if subm and inverse:
            raise ValueError("subm and inverse: a layer can be submanifold or inverse, not both")
        # an inverse conv without indice_key can be built (mmcv's and spconv's layer builders do);
        # it needs the key when it runs (_inverse_data)
        self.ndim, self.in_channels, self.out_channels = ndim, in_channels, out_channels
        self.kernel_size = validation.per_axis("kernel_size", kernel_size, ndim, 1)
        self.stride = validation.per_axis("stride", stride, ndim, 1)
        self.padding = validation.per_axis("padding", padding, ndim, 0)
        self.dilation = validation.per_axis("dilation", dilation, ndim, 1)
        self.output_padding = validation.per_axis("output_padding", output_padding, ndim, 0)
        self.pads_begin, self.pads_end = conv_padding.explicit_pads(ndim, padding, pads_begin, pads_end, auto_pad)
        self.auto_pad = auto_pad
        if subm and (auto_pad != "none" or pads_begin is not None):
            raise ValueError("auto_pad, pads_begin, pads_end: a submanifold conv keeps its input voxels; padding "
                             "does not apply to it")
        if transposed:   # the geometry checks of the map builder (kernels/contract/op_args.h), on a one-cell grid
            F.conv_transpose_output_shape([1] * ndim, 1, self.kernel_size, self.stride, [0] * ndim, [0] * ndim,
                                          self.dilation, self.output_padding)
        self.groups, self.subm, self.inverse, self.transposed = groups, subm, inverse, transposed
        self.indice_key, self.fused_bn, self.mode = indice_key, fused_bn, mode
        importance.normalize_mode(normalize)   # Open3D's normalisation (mx_sparse/functional/importance.py)
        self.normalize = normalize
        validation.kernel_volume(self.kernel_size)
        self.weight = nn.Parameter(new_weight([*self.kernel_size, in_channels // groups, out_channels]))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def fused_with(self, bn: nn.BatchNorm1d) -> "SparseConvolution":
        """A copy computing ``bn(self(x))`` with bn's running statistics (``fuse_batchnorm``)."""
        return fuse_batchnorm(self, bn)

    @property
    def kernel_volume(self) -> int:
        return math.prod(self.kernel_size)

    def reset_parameters(self):
        # As in mx_driving: any mode other than "mmcv" (also one assigned after construction,
        # e.g. None) initialises like spconv.
        INITIALIZERS["mmcv" if self.mode == "mmcv" else "spconv"](self.weight, self.bias)

    def extra_repr(self) -> str:
        kind = "subm" if self.subm else "inverse" if self.inverse else "transposed" if self.transposed else "strided"
        pads = f"padding={self.padding}" if self.pads_begin == self.pads_end else \
            f"pads_begin={self.pads_begin}, pads_end={self.pads_end}"
        if self.auto_pad != "none":
            pads = f"auto_pad={self.auto_pad!r}"
        if self.transposed and any(self.output_padding):
            pads += f", output_padding={self.output_padding}"
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"{pads}, dilation={self.dilation}, groups={self.groups}, {kind}, "
                f"indice_key={self.indice_key!r}, mode={self.mode!r}")

    def forward(self, x: SparseConvTensor, out_indices=None, *, inp_importance=None,
                out_importance=None) -> SparseConvTensor:
        """``out_indices`` (keyword; strided and transposed layers): evaluate at these output voxels
        -- a SparseConvTensor on this layer's output grid, or int32 rows (batch, *coords) -- instead
        of the ones the layer derives (mx_sparse/nn/given_outputs.py). ``inp_importance [N]`` /
        ``out_importance [M]`` weight the input / output voxels, ``normalize`` (constructor) divides
        by the number of contributions, as Open3D-ML defines them (mx_sparse/functional/importance.py)."""
        self._check_input(x)
        data = self._indice_data(x, out_indices)
        x_features = x.features
        weight = self.gemm_weight()
        if weight.dtype != x_features.dtype:   # (.to of the same dtype returns the weight itself)
            weight = weight.to(x_features.dtype)
        if self.inverse:
            nbr, nbr_t, out_indices, out_shape = data.nbr_t, data.nbr, data.in_indices, data.in_spatial_shape
        else:
            nbr, out_indices, out_shape = data.nbr, data.out_indices, data.out_spatial_shape
            # The forward never reads nbr_t; it is there for the input gradient, which derives
            # it when not cached (None). Without autograd (inference) nbr stands in for it.
            nbr_t = data.gradient_map() if needs_autograd(x_features, weight) else nbr
        weighted = (self.normalize is not False and importance.normalize_mode(self.normalize) != "none") or \
            inp_importance is not None or out_importance is not None
        saving = compact_saved_tensors()
        with saving:
            if not weighted:
                # (the op itself: F.gather_mm does not take the features' activation)
                features = ops.gather_mm.default(x_features, weight, nbr, nbr_t, self.groups, data.symmetric,
                                                 *activation_of(x_features, saving))
            else:
                features = importance.weighted_gather_mm(x_features, weight, nbr, nbr_t, self.groups,
                                                         inp_importance=inp_importance, out_importance=out_importance,
                                                         normalize=self.normalize, symmetric=data.symmetric)
        bias = self.bias
        if bias is not None:
            features = features + (bias if bias.dtype == features.dtype else bias.to(features.dtype))
        return x.derive(features, out_indices, out_shape)

    def gemm_weight(self) -> torch.Tensor:
        """The weight as the ops take it: ``[K, Cin/groups, Cout]``."""
        return self.weight.reshape(math.prod(self.kernel_size), self.in_channels // self.groups, self.out_channels)

    def _check_input(self, x):
        if not isinstance(x, SparseConvTensor):
            raise TypeError(f"input: expected a SparseConvTensor, got {type(x).__name__}")
        if x.ndim != self.ndim:
            raise ValueError(f"input: expected a {self.ndim}D SparseConvTensor for {type(self).__name__}, got "
                             f"spatial_shape {x.spatial_shape}")
        shape = x.features.shape
        if shape[0] != x.indices.shape[0]:
            # replace_feature accepts another row count (as spconv does); the indices must match by now
            raise ValueError(f"input.features: expected {x.indices.shape[0]} rows (one per row of indices), got "
                             f"{x.features.shape[0]}; after replace_feature with another row count, assign the "
                             f"matching indices before running a layer")
        if shape[1] != self.in_channels:
            raise ValueError(f"input.features: expected {self.in_channels} channels (in_channels), "
                             f"got {shape[1]}")

    def _indice_data(self, x, out_indices=None) -> IndiceData:
        data = self._find_or_build_data(x, out_indices)
        if torch.is_grad_enabled() and any_held_dense():
            # a training step holds every map until its backward; those no layer is using
            # now are held packed (packed_map.py; where none is held dense, as always on CUDA
            # and NPU, there is nothing to release)
            for other in x.indice_dict.values():
                if other is not data:
                    other.release()
        return data

    def _find_or_build_data(self, x, out_indices=None) -> IndiceData:
        cached = x.find_indice_pair(self.indice_key)
        out_shape = None
        if out_indices is not None:
            out_indices, out_shape = given_outputs.resolve(self, x, out_indices)
        if self.inverse:
            return self._inverse_data(x, cached)
        if cached is not None:
            self._check_reuse(x, cached)
            given_outputs.check_reuse(self.indice_key, cached, out_indices, x.batch_size)
            return cached
        if out_indices is not None:
            data = given_outputs.build_data(self, x, out_indices, out_shape)
        elif self.subm:
            data = build_subm_data(x.indices, x.spatial_shape, x.batch_size, self.kernel_size, self.dilation)
        elif self.transposed:
            begin, end = self.pads_for(x.spatial_shape)
            data = build_conv_transpose_data(x.indices, x.spatial_shape, x.batch_size, self.kernel_size, self.stride,
                                             begin, end, self.dilation, self.output_padding)
        else:
            begin, end = self.pads_for(x.spatial_shape)
            data = build_conv_data(x.indices, x.spatial_shape, x.batch_size, self.kernel_size, self.stride,
                                   begin, self.dilation, pads_end=end)
        if self.indice_key is not None:
            x.indice_dict[self.indice_key] = data
        return data

    def pads_for(self, spatial_shape) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        """(pads_begin, pads_end) of this layer for an input of ``spatial_shape`` (auto_pad's
        same_* pads depend on it)."""
        return conv_padding.resolve(self.auto_pad, (self.pads_begin, self.pads_end), spatial_shape,
                                    self.kernel_size, self.stride, self.dilation,
                                    self.output_padding if self.transposed else None)

    def _geometry(self) -> Tuple:
        if self.subm:  # stride and padding do not apply to submanifold layers
            return self.kernel_size, (1,) * self.ndim, (0,) * self.ndim, self.dilation
        return self.kernel_size, self.stride, self.padding, self.dilation

    def _check_reuse(self, x, cached: IndiceData):
        kind = "subm" if self.subm else "conv"
        key = self.indice_key
        if cached.kind != kind:
            raise ValueError(f"indice_key {key!r}: holds a {cached.kind} map, but {type(self).__name__} needs a "
                             f"{kind} map; use a different key")
        if self.subm:
            begin = end = (0,) * self.ndim
        else:
            begin, end = self.pads_for(x.spatial_shape)
        mine = (self._geometry()[:2], begin, end, self.dilation, self.transposed,
                self.output_padding if self.transposed else (0,) * self.ndim)
        if (cached.kernel_size, cached.stride) != mine[0] or (
                cached.padding, cached.pads_end, cached.dilation, cached.transposed, cached.output_padding) != mine[1:]:
            kind = "transposed " if self.transposed else ""
            raise ValueError(f"indice_key {key!r}: cached {cached.describe()} does not match this {kind}layer "
                             f"(kernel_size={self.kernel_size}, stride={self.stride}, pads_begin={begin}, "
                             f"pads_end={end}, dilation={self.dilation})")
        if cached.in_spatial_shape != x.spatial_shape or not same_voxels(cached.in_indices, x.indices):
            raise ValueError(f"indice_key {key!r}: the cached map was built for other voxels "
                             f"(spatial_shape {cached.in_spatial_shape}, {cached.in_indices.shape[0]} voxels); "
                             f"this input has spatial_shape {x.spatial_shape}, {x.indices.shape[0]} voxels")
        cached.check_reusable(key, x.indices, x.batch_size)

    def _inverse_data(self, x, cached) -> IndiceData:
        key = self.indice_key
        if key is None:
            raise ValueError(f"indice_key: {type(self).__name__} was built without one; an inverse convolution "
                             f"needs the indice_key of the strided conv it inverts to run")
        if cached is None:
            raise ValueError(f"indice_key {key!r}: not found; {type(self).__name__} must follow a strided "
                             f"SparseConv with indice_key={key!r} applied to this tensor's history")
        if cached.kind != "conv":
            raise ValueError(f"indice_key {key!r}: holds a {cached.kind} map; an inverse conv needs the key of a "
                             f"strided (non-submanifold) SparseConv")
        if cached.kernel_size != self.kernel_size:
            raise ValueError(f"indice_key {key!r}: kernel_size {self.kernel_size} differs from the "
                             f"{cached.kernel_size} of the conv being inverted")
        if cached.out_spatial_shape != x.spatial_shape or not same_voxels(cached.out_indices, x.indices):
            raise ValueError(f"indice_key {key!r}: input voxels differ from the output voxels of the conv "
                             f"being inverted ({cached.out_indices.shape[0]} voxels in {cached.out_spatial_shape}, "
                             f"got {x.indices.shape[0]} in {x.spatial_shape})")
        cached.check_reusable(key, x.indices, x.batch_size, side="out")
        return cached


def fuse_batchnorm(conv: SparseConvolution, bn: nn.BatchNorm1d) -> SparseConvolution:
    """A copy of ``conv`` computing ``bn(conv(x))`` with bn's running statistics."""
    fused = copy.deepcopy(conv)
    with torch.no_grad():
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps) if bn.affine else \
            1 / torch.sqrt(bn.running_var + bn.eps)
        shift = -bn.running_mean * scale + (bn.bias if bn.affine else 0)
        if conv.bias is not None:
            shift = shift + conv.bias * scale
        scale_output_channels(fused, scale)  # in the layer's own weight layout
        fused.bias = nn.Parameter(shift.to(conv.weight.dtype))
    return fused


def _named(ndim: int, subm: bool = False, inverse: bool = False):
    """Builds the named classes (SubMConv3d, ...) that fix ndim and the kind and keep
    mx_driving's positional argument order; the padding keywords (pads_begin, pads_end,
    auto_pad) are keyword-only."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, indice_key=None, mode="mmcv", *, pads_begin=None, pads_end=None, auto_pad="none",
                 normalize=False):
        SparseConvolution.__init__(self, ndim, in_channels, out_channels, kernel_size, stride, padding, dilation,
                                   groups, bias, subm=subm, inverse=inverse, indice_key=indice_key, mode=mode,
                                   pads_begin=pads_begin, pads_end=pads_end, auto_pad=auto_pad, normalize=normalize)

    return __init__


def _named_transposed(ndim: int):
    """SparseConvTranspose{1,2,3,4}d: spconv's positional order (in_channels, out_channels,
    kernel_size, stride, padding, dilation, groups, bias, indice_key); output_padding and the
    padding keywords keyword-only."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, indice_key=None, mode="mmcv", *, output_padding=0, pads_begin=None, pads_end=None,
                 auto_pad="none", normalize=False):
        SparseConvolution.__init__(self, ndim, in_channels, out_channels, kernel_size, stride, padding, dilation,
                                   groups, bias, output_padding=output_padding, transposed=True,
                                   indice_key=indice_key, mode=mode, pads_begin=pads_begin, pads_end=pads_end,
                                   auto_pad=auto_pad, normalize=normalize)

    return __init__


class SparseConv1d(SparseConvolution):
    __init__ = _named(1)


class SparseConv2d(SparseConvolution):
    __init__ = _named(2)


class SparseConv3d(SparseConvolution):
    __init__ = _named(3)


class SparseConv4d(SparseConvolution):
    __init__ = _named(4)


class SubMConv1d(SparseConvolution):
    __init__ = _named(1, subm=True)


class SubMConv2d(SparseConvolution):
    __init__ = _named(2, subm=True)


class SubMConv3d(SparseConvolution):
    __init__ = _named(3, subm=True)


class SubMConv4d(SparseConvolution):
    __init__ = _named(4, subm=True)


class SparseInverseConv1d(SparseConvolution):
    __init__ = _named(1, inverse=True)


class SparseInverseConv2d(SparseConvolution):
    __init__ = _named(2, inverse=True)


class SparseInverseConv3d(SparseConvolution):
    __init__ = _named(3, inverse=True)


class SparseInverseConv4d(SparseConvolution):
    __init__ = _named(4, inverse=True)


class SparseConvTranspose1d(SparseConvolution):
    __init__ = _named_transposed(1)


class SparseConvTranspose2d(SparseConvolution):
    __init__ = _named_transposed(2)


class SparseConvTranspose3d(SparseConvolution):
    __init__ = _named_transposed(3)


class SparseConvTranspose4d(SparseConvolution):
    __init__ = _named_transposed(4)
