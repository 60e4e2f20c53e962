"""Functional form of the operators: thin, documented calls of ``torch.ops.mx_sparse``.
Each calls the op's one overload (``.default``) directly: the same kernel as the packet
``torch.ops.mx_sparse.<op>``, without the packet's overload resolution per call.

Neighbor map: ``nbr[M, K]`` int32; ``nbr[m, k]`` is the input row that weight
slice ``W[k]`` multiplies for output row ``m``, or -1. ``k`` runs over the kernel
window in row-major order of ``kernel_size``. Weights are ``[K, Cin/groups, Cout]``.
"""
from typing import List, Optional, Sequence, Tuple

import torch

from .._core.op_registration import ops
# gather_mm with Open3D's importance weights and normalisation, differentiable in features, weight
# and the importances: the function of mx_sparse/functional/importance.py (which uses ops, not this module).
from .importance import weighted_gather_mm  # noqa: F401


def build_subm_map(indices: torch.Tensor, spatial_shape: Sequence[int], batch_size: int,
                   kernel_size: Sequence[int], dilation: Sequence[int]) -> torch.Tensor:
    """Submanifold map ``[N, K]``: output row i is input row i; ``nbr[i, k]`` is the input at
    ``coord_i + (kernel_pos(k) - kernel_size // 2) * dilation``."""
    return ops.build_subm_map.default(indices, list(spatial_shape), batch_size, list(kernel_size), list(dilation))


def build_conv_map(indices: torch.Tensor, spatial_shape: Sequence[int], batch_size: int,
                   kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                   dilation: Sequence[int], pads_end: Optional[Sequence[int]] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Strided-conv map. Returns ``(out_indices [M, 1+ndim], nbr [M, K])``; outputs are every
    in-range ``o`` with ``i = o*stride - padding + kernel_pos(k)*dilation`` for some active ``i``,
    sorted by (batch, *spatial). ``padding`` pads below each axis, ``pads_end`` above
    (default: ``padding``); the output extent is
    ``(s + padding + pads_end - dilation*(k-1) - 1) // stride + 1`` (the op's third result, which
    ``build_conv_map_and_shape`` returns too)."""
    return build_conv_map_and_shape(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation,
                                    pads_end)[:2]


def build_conv_map_and_shape(indices: torch.Tensor, spatial_shape: Sequence[int], batch_size: int,
                             kernel_size: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                             dilation: Sequence[int], pads_end: Optional[Sequence[int]] = None
                             ) -> Tuple[torch.Tensor, torch.Tensor, List[int]]:
    """``build_conv_map``'s ``(out_indices, nbr)`` and the output spatial shape the builder used."""
    if pads_end is None:
        out = ops.build_conv_map.default(indices, list(spatial_shape), batch_size, list(kernel_size), list(stride),
                                         list(padding), list(dilation))
    else:
        out = ops.build_conv_map.default(indices, list(spatial_shape), batch_size, list(kernel_size), list(stride),
                                         list(padding), list(dilation), list(pads_end))
    return out[0], out[1], list(out[2])


def build_conv_transpose_map(indices: torch.Tensor, spatial_shape: Sequence[int], batch_size: int,
                             kernel_size: Sequence[int], stride: Sequence[int], pads_begin: Sequence[int],
                             pads_end: Sequence[int], dilation: Sequence[int],
                             output_padding: Sequence[int]) -> Tuple[torch.Tensor, torch.Tensor]:
    """Transposed (generative) conv map. Returns ``(out_indices [M, 1+ndim], nbr [M, K])``: input
    ``i`` reaches every in-range ``o = i*stride - pads_begin + kernel_pos(k)*dilation`` and
    ``nbr[o, k] = i``; outputs sorted by (batch, *spatial) on the grid
    ``(s - 1)*stride - pads_begin - pads_end + dilation*(k - 1) + 1 + output_padding``
    (``conv_transpose_output_shape``); ``output_padding`` < stride or < dilation per axis."""
    return build_conv_transpose_map_and_shape(indices, spatial_shape, batch_size, kernel_size, stride, pads_begin,
                                              pads_end, dilation, output_padding)[:2]


def build_conv_transpose_map_and_shape(indices: torch.Tensor, spatial_shape: Sequence[int], batch_size: int,
                                       kernel_size: Sequence[int], stride: Sequence[int], pads_begin: Sequence[int],
                                       pads_end: Sequence[int], dilation: Sequence[int],
                                       output_padding: Sequence[int]) -> Tuple[torch.Tensor, torch.Tensor, List[int]]:
    """``build_conv_transpose_map``'s ``(out_indices, nbr)`` and the output spatial shape the builder used."""
    out = ops.build_conv_transpose_map.default(indices, list(spatial_shape), batch_size, list(kernel_size),
                                               list(stride), list(pads_begin), list(pads_end), list(dilation),
                                               list(output_padding))
    return out[0], out[1], list(out[2])


def build_conv_map_at(indices: torch.Tensor, out_indices: torch.Tensor, spatial_shape: Sequence[int],
                      batch_size: int, kernel_size: Sequence[int], stride: Sequence[int], pads_begin: Sequence[int],
                      dilation: Sequence[int], transposed: bool = False,
                      out_spatial_shape: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Map ``nbr [M, K]`` of a convolution evaluated at the given output voxels ``out_indices``
    (rows in their order, none added or dropped). ``nbr[m, k]`` is the input at
    ``o*stride - pads_begin + kernel_pos(k)*dilation`` (``transposed=False``), or the input ``i``
    with ``i*stride - pads_begin + kernel_pos(k)*dilation == o`` (``transposed=True``), or -1.
    ``out_indices`` must be unique and inside ``out_spatial_shape``, by default the outputs whose
    window meets the input grid: ``(s - 1 + pads_begin) // stride + 1`` cells per axis (strided),
    ``(s - 1)*stride - pads_begin + dilation*(k - 1) + 1`` (transposed)."""
    shape = None if out_spatial_shape is None else list(out_spatial_shape)
    return ops.build_conv_map_at.default(indices, out_indices, list(spatial_shape), batch_size, list(kernel_size),
                                         list(stride), list(pads_begin), list(dilation), bool(transposed), shape)


def conv_output_shape(spatial_shape: Sequence[int], batch_size: int, kernel_size: Sequence[int],
                      stride: Sequence[int], pads_begin: Sequence[int], pads_end: Sequence[int],
                      dilation: Sequence[int]) -> list:
    """Output spatial shape of ``build_conv_map`` (its argument checks and ValueErrors)."""
    from .._core import contract as _contract
    return _contract.conv_output_shape(spatial_shape, kernel_size, stride, pads_begin, dilation, batch_size, pads_end)


def conv_transpose_output_shape(spatial_shape: Sequence[int], batch_size: int, kernel_size: Sequence[int],
                                stride: Sequence[int], pads_begin: Sequence[int], pads_end: Sequence[int],
                                dilation: Sequence[int], output_padding: Sequence[int]) -> list:
    """Output spatial shape of ``build_conv_transpose_map`` (its argument checks and ValueErrors)."""
    from .._core import contract as _contract
    return _contract.conv_transpose_output_shape(spatial_shape, kernel_size, stride, pads_begin, pads_end, dilation,
                                                 output_padding, batch_size)


def transpose_map(nbr: torch.Tensor, num_rows: int) -> torch.Tensor:
    """``nbr_t[num_rows, K]`` with ``nbr_t[i, k] = m`` wherever ``nbr[m, k] = i``."""
    return ops.transpose_map.default(nbr, num_rows)


def gather_mm(features: torch.Tensor, weight: torch.Tensor, nbr: torch.Tensor, nbr_t: Optional[torch.Tensor],
              groups: int = 1, symmetric: bool = False) -> torch.Tensor:
    """``out[m] = sum_k features[nbr[m, k]] @ weight[k]`` (per group); differentiable in
    ``features`` and ``weight``. The input gradient uses ``nbr_t``; with ``None`` it is derived
    in backward: from ``nbr`` itself when ``symmetric`` (its transpose is ``nbr.flip(1)``, as for
    the submanifold map of an odd kernel), else with ``transpose_map`` (dropped after use)."""
    return ops.gather_mm.default(features, weight, nbr, nbr_t, groups, symmetric)


def gather_mm_backprop_filter(features: torch.Tensor, grad: torch.Tensor, nbr: torch.Tensor,
                              nbr_t: Optional[torch.Tensor], groups: int = 1, symmetric: bool = False) -> torch.Tensor:
    """Weight gradient ``dW[k] = sum_m features[nbr[m, k]]^T (x) grad[m]``, shape ``[K, Cin/groups, Cout]``."""
    return ops.gather_mm_backprop_filter.default(features, grad, nbr, nbr_t, groups, symmetric)
