"""Layers the compatibility surfaces need on top of the core convolution, written once and
shared by the spconv-2.x and mmcv surfaces:

- ``CompatConvolution``: the core ``SparseConvolution`` plus generative transposed
  convolution (``transposed=True``), a weight in any layout named by ``weight_layout``,
  and outputs of the same SparseConvTensor class as the input.
- ``SparsePool``: max / average pooling over the strided (or submanifold) conv map, through the
  ``sparse_max_pool`` / ``sparse_avg_pool`` ops.
- ``SparseGlobalPool``: per-sample max / mean over all active voxels.

Transposed convolution (``transposed=True``) is the core layer's (mx_sparse/nn/conv.py): its map
comes from the ``build_conv_transpose_map`` op on every backend.
"""

import torch

from .._core.op_registration import has_kernel, ops
from ..nn.conv import SparseConvolution
from ..nn.indice_data import IndiceData, build_conv_data, build_subm_data
from ..nn.layouts import convert_weight
from ..nn.modules import SparseModule
from ..nn.sparse_tensor import SparseConvTensor
from ..nn import validation


class CompatConvolution(SparseConvolution):
    """Core convolution + transposed mode + weight layout (``weight_layout``: the layout of
    ``self.weight``, ``"RSCK"`` or ``"KRSC"``). Outputs keep the input's tensor class."""

    weight_layout = "RSCK"

    def __init__(self, ndim, in_channels, out_channels, kernel_size=3, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, subm=False, output_padding=0, transposed=False, inverse=False,
                 indice_key=None, fused_bn=False, mode="mmcv"):
        self._building = True
        super().__init__(ndim, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         subm, output_padding, transposed, inverse, indice_key, fused_bn, mode)
        if self.weight_layout != "RSCK":
            shape = [out_channels, *self.kernel_size, in_channels // groups]
            self.weight = torch.nn.Parameter(torch.empty(shape))
        self._building = False
        self.reset_parameters()

    def reset_parameters(self):
        if getattr(self, "_building", False):
            return  # the core constructor calls this before the weight has its final layout
        super().reset_parameters()

    def gemm_weight(self) -> torch.Tensor:
        """The weight as the ops take it: ``[K, Cin/groups, Cout]``."""
        return convert_weight(self.weight, self.weight_layout, "FLAT")

    def forward(self, x: SparseConvTensor, add_input=None) -> SparseConvTensor:
        out = super().forward(x)
        if add_input is not None:  # spconv's fused residual: added after the bias
            out = out.derive(out.features + add_input.features, out.indices, out.spatial_shape)
        return out

    def _finish(self, x, features, out_indices, out_shape, add_input=None):
        """Bias, optional residual and output tensor, for the 1x1 paths that skip the map."""
        if self.bias is not None:
            features = features + self.bias.to(features.dtype)
        if add_input is not None:
            features = features + add_input.features
        return x.derive(features, out_indices, out_shape)


class SparsePool(SparseModule):
    """Max (``mode='max'``) or average (``'avg'``) pooling over the voxels a conv with the same
    geometry would combine; outputs are the strided conv's voxels (or the inputs when
    ``subm``). Max takes the largest active input, average divides by the number of active
    inputs. With ``indice_key`` the map is cached so a SparseInverseConv can undo the pooling."""

    def __init__(self, ndim, kernel_size=3, stride=1, padding=0, dilation=1, indice_key=None, subm=False,
                 mode="max"):
        super().__init__()
        if mode not in ("max", "avg"):
            raise ValueError(f"mode: expected 'max' or 'avg', got {mode!r}")
        self.ndim, self.mode, self.subm, self.indice_key = ndim, mode, subm, indice_key
        self.kernel_size = validation.per_axis("kernel_size", kernel_size, ndim, 1)
        self.stride = self.kernel_size if stride is None else validation.per_axis("stride", stride, ndim, 1)
        self.padding = validation.per_axis("padding", padding, ndim, 0)
        self.dilation = validation.per_axis("dilation", dilation, ndim, 1)

    def extra_repr(self):
        return (f"{self.mode}, kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, subm={self.subm}")

    def _geometry(self):
        if self.subm:
            return self.kernel_size, (1,) * self.ndim, (0,) * self.ndim, self.dilation
        return self.kernel_size, self.stride, self.padding, self.dilation

    def forward(self, x: SparseConvTensor) -> SparseConvTensor:
        if not isinstance(x, SparseConvTensor):
            raise TypeError(f"input: expected a SparseConvTensor, got {type(x).__name__}")
        if x.ndim != self.ndim:
            raise ValueError(f"input: expected a {self.ndim}D SparseConvTensor, got spatial_shape {x.spatial_shape}")
        data = x.find_indice_pair(self.indice_key)
        if data is None or data.kind != ("subm" if self.subm else "conv") or (
                data.kernel_size, data.stride, data.padding, data.dilation) != self._geometry() or \
                data.in_indices is not x.indices:
            if data is not None:
                raise ValueError(f"indice_key {self.indice_key!r}: already used by another layer; a pooling layer "
                                 f"needs its own key")
            data = self._build(x)
            if self.indice_key is not None:
                x.indice_dict[self.indice_key] = data
        feats = pool_features(x.features, data.nbr, self.mode)
        return x.derive(feats, data.out_indices, data.out_spatial_shape)

    def _build(self, x) -> IndiceData:
        ks, st, pd, dl = self._geometry()
        if self.subm:
            return build_subm_data(x.indices, x.spatial_shape, x.batch_size, ks, dl)
        return build_conv_data(x.indices, x.spatial_shape, x.batch_size, ks, st, pd, dl)


def pool_features(features: torch.Tensor, nbr: torch.Tensor, mode: str) -> torch.Tensor:
    """Max or average of each window's active inputs, through the schema ops (one pass over the
    window, no [M, K, C] gather; argmax kept for backward as int8 kernel offsets). A device
    without kernels for them runs their torch-operator version, with autograd from its ops."""
    name = "sparse_max_pool" if mode == "max" else "sparse_avg_pool"
    if has_kernel(features.device.type, name):
        impl = getattr(ops, name)
    else:
        from .._accelerator import sparse_pool
        impl = getattr(sparse_pool, name)
    return impl(features, nbr)[0] if mode == "max" else impl(features, nbr)


class SparseGlobalPool(SparseModule):
    """Per-sample max or mean over all active voxels: ``[batch_size, C]`` dense (samples
    without voxels give zeros)."""

    def __init__(self, is_mean: bool):
        super().__init__()
        self.is_mean = is_mean

    def forward(self, x: SparseConvTensor) -> torch.Tensor:
        f = x.features
        batch = x.indices[:, 0].long()[:, None].expand_as(f)
        out = f.new_zeros(x.batch_size, f.shape[1])
        return out.scatter_reduce(0, batch, f, "mean" if self.is_mean else "amax", include_self=False)
