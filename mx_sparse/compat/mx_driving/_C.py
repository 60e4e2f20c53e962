"""``mx_driving._C``: the low-level functions of mx_driving's extension for which mx_sparse has
the same operation. Every other name raises ``AttributeError`` saying it is not provided."""
import math

import torch

from ..._core.op_registration import ops
from .ops.voxelization import hard_voxelize  # noqa: F401  (the same function)

PROVIDED = ("npu_sparse_conv3d_grad", "hard_voxelize")


def npu_sparse_conv3d_grad(former_sorted_indices: torch.Tensor, indices_offset: torch.Tensor,
                           feature: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor):
    """Input and weight gradients of a strided sparse convolution given mx_driving's rulebook:
    ``former_sorted_indices`` lists ``input_row * K + k`` grouped by output voxel, output ``m``
    owning the entries ``[indices_offset[m], indices_offset[m + 1])``; ``weight`` is
    ``[*kernel, Cin, Cout]``, ``grad`` ``[M, Cout]``. The rulebook becomes mx_sparse's
    neighbor map ``nbr[m, k] = input_row``, and the gradients are the ones autograd of
    ``gather_mm`` computes: ``gather_mm`` on the transposed map and
    ``gather_mm_backprop_filter``. Returns ``(feature_grad [N, Cin], weight_grad)``."""
    if weight.dim() < 3:
        raise ValueError(f"weight: expected [*kernel, Cin, Cout], got {tuple(weight.shape)}")
    kvol, cin, cout = math.prod(weight.shape[:-2]), weight.shape[-2], weight.shape[-1]
    if feature.dim() != 2 or feature.shape[1] != cin:
        raise ValueError(f"feature: expected [N, {cin}] (Cin of weight), got {tuple(feature.shape)}")
    offsets = indices_offset.long()
    if offsets.dim() != 1 or offsets.numel() < 1 or bool((offsets.diff() < 0).any()) or \
            int(offsets[0]) < 0 or int(offsets[-1]) > former_sorted_indices.numel():
        raise ValueError(f"indices_offset: expected non-decreasing positions into former_sorted_indices "
                         f"({former_sorted_indices.numel()} entries), got {tuple(indices_offset.shape)} values")
    m = offsets.numel() - 1
    if grad.dim() != 2 or grad.shape[0] != m or grad.shape[1] != cout:
        raise ValueError(f"grad: expected [{m}, {cout}] (one row per output voxel), got {tuple(grad.shape)}")
    entries = former_sorted_indices[int(offsets[0]):int(offsets[-1])].long()
    rows, k = entries // kvol, entries % kvol
    if entries.numel() and (int(entries.min()) < 0 or int(rows.max()) >= feature.shape[0]):
        raise ValueError(f"former_sorted_indices: expected input_row * {kvol} + k with 0 <= input_row < "
                         f"{feature.shape[0]}")
    out_row = torch.repeat_interleave(torch.arange(m, device=entries.device), offsets.diff())
    nbr = torch.full((m, kvol), -1, dtype=torch.int32, device=feature.device)
    nbr[out_row, k] = rows.int()
    nbr_t = ops.transpose_map(nbr, feature.shape[0])
    w = weight.reshape(kvol, cin, cout).to(feature.dtype)
    feature_grad = ops.gather_mm(grad.to(feature.dtype), w.transpose(1, 2).contiguous(), nbr_t, nbr, 1)
    weight_grad = ops.gather_mm_backprop_filter(feature, grad.to(feature.dtype), nbr, nbr_t, 1)
    return feature_grad, weight_grad.reshape(weight.shape)


def __getattr__(name):
    raise AttributeError(f"mx_driving._C.{name} is not provided by mx_sparse: no operation of mx_sparse does "
                         f"the same (provided: {', '.join(PROVIDED)})")
