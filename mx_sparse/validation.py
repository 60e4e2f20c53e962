"""Argument checks of the Python layer. Each message names the argument, says what
was expected and what came. Value checks over all voxels (coordinate ranges,
batch indices, duplicates) run inside the C++ map builders, in the same parallel
pass that hashes the voxels, and raise ValueError with the same style."""
import math
import operator
from typing import Sequence, Tuple, Union

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
IntOrSeq = Union[int, Sequence[int]]


MAX_GEOMETRY_VALUE = 2 ** 31 - 1   # like the int32 coordinates (kernels/ops/op_args.h)
MAX_KERNEL_VOLUME = 2 ** 20        # columns of a neighbor map (kernels/ops/op_args.h)


def per_axis(name: str, value: IntOrSeq, ndim: int, minimum: int) -> Tuple[int, ...]:
    """Expands an int to ``ndim`` values and checks each is an int in [minimum, 2^31 - 1]."""
    values = tuple(value) if isinstance(value, (list, tuple)) else (value,) * ndim
    if len(values) != ndim:
        raise ValueError(f"{name}: expected an int or {ndim} values (one per spatial axis), got {value!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise ValueError(f"{name}: expected integers >= {minimum}, got {value!r}")
        if v > MAX_GEOMETRY_VALUE:
            raise ValueError(f"{name}: expected integers <= 2^31 - 1 (coordinates are int32), got {value!r}")
    return values


def kernel_volume(kernel_size: Tuple[int, ...]) -> int:
    volume = math.prod(kernel_size)
    if volume > MAX_KERNEL_VOLUME:
        raise ValueError(f"kernel_size: {list(kernel_size)} has {volume} offsets, more than the "
                         f"{MAX_KERNEL_VOLUME} a neighbor map supports")
    return volume


def _integral_extent(s, value) -> int:
    """One extent of spatial_shape as an int: ints (numpy's too) and integral floats (8.0) only;
    8.9 used to be truncated to 8 silently."""
    if isinstance(s, bool):
        raise ValueError(f"spatial_shape: expected integers, got {value!r}")
    try:
        return operator.index(s)
    except TypeError:
        pass
    if isinstance(s, float) and s.is_integer():
        return int(s)
    raise ValueError(f"spatial_shape: expected integers, got {s!r} in {value!r}")


def spatial_shape(value: Sequence[int]) -> list:
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    try:
        shape = [_integral_extent(s, value) for s in value]
    except TypeError:
        raise ValueError(f"spatial_shape: expected a sequence of positive ints, got {value!r}") from None
    if not 1 <= len(shape) <= 4 or any(s < 1 for s in shape):
        raise ValueError(f"spatial_shape: expected 1 to 4 positive ints, got {list(value)!r}")
    return shape


def batch_size(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"batch_size: expected an int >= 1, got {value!r}")
    return value


def indices(value: torch.Tensor, ndim: int) -> torch.Tensor:
    """Checks the layout and returns int32 indices (int64 converted only if every value fits)."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"indices: expected a torch.Tensor, got {type(value).__name__}")
    if value.dim() != 2 or value.shape[1] != 1 + ndim:
        raise ValueError(f"indices: expected shape [N, {1 + ndim}] (batch + {ndim} coordinates "
                         f"for spatial_shape of {ndim} dims), got {list(value.shape)}")
    if value.dtype == torch.int32:
        return value
    if value.dtype != torch.int64:
        raise ValueError(f"indices: expected dtype int32 or int64, got {value.dtype}")
    if value.numel() and (value.min() < -2**31 or value.max() >= 2**31):
        raise ValueError("indices: int64 values outside the int32 range cannot be voxel coordinates")
    return value.int()


def features(value: torch.Tensor, num_rows: int, device: torch.device) -> torch.Tensor:
    """Features for ``num_rows`` voxels whose indices live on ``device``."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"features: expected a torch.Tensor, got {type(value).__name__}")
    if value.device != device:
        raise ValueError(f"features: expected a tensor on {device}, the device of indices, got one on {value.device} "
                         f"(move both to one device)")
    if value.dim() != 2:
        raise ValueError(f"features: expected shape [N, C], got {list(value.shape)}")
    if value.dtype not in FLOAT_DTYPES:
        raise ValueError(f"features: expected dtype float32, float16, bfloat16 or float64, got {value.dtype}")
    if value.shape[0] != num_rows:
        raise ValueError(f"features: expected {num_rows} rows (one per row of indices), got {value.shape[0]}")
    return value


def channels(in_channels: int, out_channels: int, groups: int) -> None:
    for name, v in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: expected an int >= 1, got {v!r}")
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"groups: expected a divisor of in_channels ({in_channels}) and out_channels "
                         f"({out_channels}), got {groups}")
