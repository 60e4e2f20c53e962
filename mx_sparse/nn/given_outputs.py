"""Strided and transposed convolutions evaluated at output voxels the caller gives
(``layer(x, out_indices=...)``): Open3D's SparseConv / SparseConvTranspose, or a dense
convolution read at chosen outputs. The layer's output grid is the one it derives (padding,
auto_pad, output_padding), the outputs are the given rows in their order, and the map comes
from ``build_conv_map_at``. A map cached under an ``indice_key`` belongs to the outputs it was
built for: it is reused only for the same output voxels, never for a layer deriving its outputs."""
from typing import List, Optional, Tuple

import torch

from .. import functional as F
from .indice_data import IndiceData, same_voxels
from .sparse_tensor import SparseConvTensor


def output_grid(layer, x: SparseConvTensor) -> List[int]:
    """The output spatial shape ``layer`` derives for ``x`` (with its checks)."""
    begin, end = layer.pads_for(x.spatial_shape)
    if layer.transposed:
        return F.conv_transpose_output_shape(x.spatial_shape, x.batch_size, layer.kernel_size, layer.stride, begin,
                                             end, layer.dilation, layer.output_padding)
    return F.conv_output_shape(x.spatial_shape, x.batch_size, layer.kernel_size, layer.stride, begin, end,
                               layer.dilation)


def resolve(layer, x: SparseConvTensor, out_indices) -> Tuple[torch.Tensor, List[int]]:
    """(the output voxels, the layer's output grid) of ``out_indices``: a SparseConvTensor on
    that grid (its indices) or an int32 tensor [M, 1 + ndim] of (batch, *coords) rows."""
    if layer.subm or layer.inverse:
        kind = "submanifold" if layer.subm else "inverse"
        raise ValueError(f"out_indices: a {kind} convolution's output voxels are fixed (its input's / the inverted "
                         f"conv's); out_indices applies to strided and transposed convolutions")
    shape = output_grid(layer, x)
    if isinstance(out_indices, SparseConvTensor):
        if list(out_indices.spatial_shape) != list(shape):
            raise ValueError(f"out_indices: a SparseConvTensor with spatial_shape {list(out_indices.spatial_shape)}, "
                             f"expected this layer's output grid {shape} for an input of {list(x.spatial_shape)}")
        return out_indices.indices, shape
    if not isinstance(out_indices, torch.Tensor):
        raise TypeError(f"out_indices: expected a SparseConvTensor or an int32 tensor [M, {1 + layer.ndim}] of "
                        f"(batch, *coords) rows, got {type(out_indices).__name__}")
    return out_indices, shape


def build_data(layer, x: SparseConvTensor, out_indices: torch.Tensor, out_shape: List[int]) -> IndiceData:
    """The map of ``layer`` on ``x`` at ``out_indices`` (checked inside ``out_shape``)."""
    begin, end = layer.pads_for(x.spatial_shape)
    nbr = F.build_conv_map_at(x.indices, out_indices, x.spatial_shape, x.batch_size, layer.kernel_size,
                              layer.stride, begin, layer.dilation, layer.transposed, out_spatial_shape=out_shape)
    data = IndiceData("conv", x.indices, out_indices, nbr, list(x.spatial_shape), out_shape, tuple(layer.kernel_size),
                      tuple(layer.stride), tuple(begin), tuple(layer.dilation), pads_end=tuple(end),
                      transposed=layer.transposed,
                      output_padding=tuple(layer.output_padding) if layer.transposed else None)
    data.batch_size = x.batch_size
    data.given_outputs = True
    return data


def check_reuse(key, cached: IndiceData, out_indices: Optional[torch.Tensor], batch_size: int) -> None:
    """ValueError unless the cached map was built for these outputs: the same given voxels (still
    holding the values it was built from), or derived ones when none are given."""
    given = cached.given_outputs
    if out_indices is None and given:
        raise ValueError(f"indice_key {key!r}: holds a map evaluated at given out_indices; this layer derives its "
                         f"output voxels and cannot reuse it; use another indice_key")
    if out_indices is None:
        return
    if not given:
        raise ValueError(f"indice_key {key!r}: holds a map of the output voxels a layer derives; a layer evaluated "
                         f"at out_indices cannot reuse it; use another indice_key")
    if not same_voxels(cached.out_indices, out_indices):
        raise ValueError(f"indice_key {key!r}: the cached map was evaluated at other out_indices "
                         f"({cached.out_indices.shape[0]} voxels, got {out_indices.shape[0]}); use another indice_key")
    cached.check_reusable(key, out_indices, batch_size, side="out")
