"""Argument checks of the CUDA backend's ops: the checks of kernels/ops/op_args.h and of the
CPU kernels, with the same ValueErrors naming the argument, plus the device checks a
multi-device backend needs (the dispatcher sends a call here when ANY tensor argument is on
CUDA, so a call mixing devices lands here and is rejected naming the argument)."""
import math
from typing import Optional, Sequence

import torch

MAX_SPATIAL_DIMS = 4
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# kMaxGeometryValue and kMaxKernelVolume of op_args.h (the reasons are given there)
MAX_GEOMETRY_VALUE = INT32_MAX
MAX_KERNEL_VOLUME = 2**20
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def same_device(reference_name: str, reference: torch.Tensor, **tensors: Optional[torch.Tensor]) -> None:
    """Every given tensor on the device of ``reference``."""
    for name, t in tensors.items():
        if t is not None and t.device != reference.device:
            raise ValueError(f"{name}: expected a tensor on {reference.device} like {reference_name}, "
                             f"got one on {t.device}")


def grid(spatial_shape: Sequence[int], batch_size: int) -> list:
    """make_grid: 1..4 positive extents whose batch_size x product fits an int64 key."""
    shape = list(spatial_shape)
    if not 1 <= len(shape) <= MAX_SPATIAL_DIMS:
        raise ValueError(f"spatial_shape: expected 1 to {MAX_SPATIAL_DIMS} dimensions, got {len(shape)} ({shape})")
    if batch_size < 1:
        raise ValueError(f"batch_size: expected >= 1, got {batch_size}")
    if any(s < 1 for s in shape):
        raise ValueError(f"spatial_shape: expected every dimension >= 1, got {shape}")
    if batch_size * math.prod(shape) > INT64_MAX:
        raise ValueError(f"spatial_shape: batch_size ({batch_size}) x prod(spatial_shape {shape}) exceeds the "
                         f"int64 voxel-key range; use a smaller grid or batch")
    return shape


def per_axis(name: str, values: Sequence[int], ndim: int, minimum: int) -> list:
    values = list(values)
    if len(values) != ndim:
        raise ValueError(f"{name}: expected {ndim} values (one per spatial axis), got {values}")
    if any(not minimum <= v <= MAX_GEOMETRY_VALUE for v in values):
        raise ValueError(f"{name}: expected every value in [{minimum}, 2^31 - 1], got {values}")
    return values


def kernel_volume(kernel_size: Sequence[int]) -> int:
    """prod(kernel_size), at most MAX_KERNEL_VOLUME (the columns of a neighbor map)."""
    volume = math.prod(kernel_size)
    if volume > MAX_KERNEL_VOLUME:
        raise ValueError(f"kernel_size: {list(kernel_size)} has more than {MAX_KERNEL_VOLUME} offsets "
                         f"(the columns of a neighbor map)")
    return volume


def conv_output_shape(shape, kernel, stride, padding, dilation, batch_size) -> list:
    """conv_output_grid: conv_out_extent per axis (floor division, also for a negative span),
    every axis non-empty and within int32 coordinates, every output key within int64."""
    out = []
    for d, (s, k, st, p, dl) in enumerate(zip(shape, kernel, stride, padding, dilation)):
        extent = (s + 2 * p - dl * (k - 1) - 1) // st + 1
        if extent < 1:
            raise ValueError(f"spatial_shape: the convolution output is empty on axis {d} (spatial_shape {shape}, "
                             f"kernel_size {k}, stride {st}, padding {p}, dilation {dl} on that axis)")
        if extent > MAX_GEOMETRY_VALUE:
            raise ValueError(f"padding: the convolution output has {extent} cells on axis {d}, more than int32 "
                             f"coordinates address (spatial_shape {shape}, padding {p}, stride {st})")
        out.append(extent)
    if batch_size * math.prod(out) > INT64_MAX:
        raise ValueError(f"batch_size, padding: batch_size ({batch_size}) x the convolution's output grid exceeds "
                         f"the int64 voxel-key range")
    return out


def indices(t: torch.Tensor, ndim: int) -> None:
    if t.dtype != torch.int32:
        raise ValueError(f"indices: expected dtype int32, got {t.dtype}")
    if t.dim() != 2 or t.shape[1] != 1 + ndim:
        raise ValueError(f"indices: expected shape [N, {1 + ndim}] (batch + {ndim} spatial coordinates), "
                         f"got {list(t.shape)}")
    if t.shape[0] >= INT32_MAX:
        raise ValueError(f"indices: {t.shape[0]} rows do not fit the int32 neighbor map; "
                         f"expected fewer than 2^31 - 1")


def neighbor_map(t: torch.Tensor, name: str) -> None:
    if t.dtype != torch.int32 or t.dim() != 2:
        raise ValueError(f"{name}: expected an int32 neighbor map [M, K], got {t.dtype} {list(t.shape)}")


def gather_operands(features, name, operand, nbr, nbr_t, groups) -> None:
    """check_gather_operands plus the dtype checks of the float kernels; ``operand`` (``name``)
    is the weight of gather_mm or the grad of the filter gradient."""
    same_device("features", features, **{name: operand}, nbr=nbr, nbr_t=nbr_t)
    neighbor_map(nbr, "nbr")
    if features.dim() != 2:
        raise ValueError(f"features: expected [N, C], got {list(features.shape)}")
    if groups < 1:
        raise ValueError(f"groups: expected >= 1, got {groups}")
    if features.dtype not in FLOAT_DTYPES:
        raise ValueError(f"features: expected float32, float64, float16 or bfloat16, got {features.dtype}")
    if nbr_t is not None:
        neighbor_map(nbr_t, "nbr_t")
        if nbr_t.shape[1] != nbr.shape[1]:
            raise ValueError(f"nbr_t: expected {nbr.shape[1]} kernel offsets like nbr, got {nbr_t.shape[1]}")
    if operand.dtype != features.dtype:
        raise ValueError(f"{name}: expected dtype {features.dtype} like features, got {operand.dtype}")


def gather_mm_shapes(features, weight, nbr, nbr_t, groups):
    """(cin_g, cout_g) of a gather_mm call, after its checks."""
    gather_operands(features, "weight", weight, nbr, nbr_t, groups)
    if weight.dim() != 3 or weight.shape[0] != nbr.shape[1]:
        raise ValueError(f"weight: expected [K={nbr.shape[1]}, Cin/groups, Cout], got {list(weight.shape)}")
    cin, cin_g, cout = features.shape[1], weight.shape[1], weight.shape[2]
    if cin_g * groups != cin:
        raise ValueError(f"weight: expected Cin/groups = {cin}/{groups} input channels per group, "
                         f"got weight {list(weight.shape)}")
    if cout % groups:
        raise ValueError(f"weight: out channels {cout} are not divisible by groups={groups}")
    return cin_g, cout // groups


def backprop_filter_shapes(features, grad, nbr, nbr_t, groups):
    """(cin_g, cout_g) of a gather_mm_backprop_filter call, after its checks."""
    gather_operands(features, "grad", grad, nbr, nbr_t, groups)
    if grad.dim() != 2 or grad.shape[0] != nbr.shape[0]:
        raise ValueError(f"grad: expected [M={nbr.shape[0]}, Cout], got {list(grad.shape)}")
    cin, cout = features.shape[1], grad.shape[1]
    if cin % groups or cout % groups:
        raise ValueError(f"groups: {groups} must divide the input channels ({cin}) and output channels ({cout})")
    return cin // groups, cout // groups
