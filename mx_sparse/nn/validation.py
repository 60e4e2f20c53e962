"""Argument checks of the Python layer. Each message names the argument, says what
was expected and what came. What the layers accept beyond the ops (an int for every axis,
int64 indices, Python types) is checked here; bounds the ops share come from the C++
contract through mx_sparse._core.contract. Value checks over all voxels (coordinate ranges,
batch indices, duplicates) run inside the map builders and raise ValueError with the same style."""
import math
import operator
from typing import Sequence, Tuple, Union

import torch

from .._core import contract as _contract
from .._core.contract import FLOAT_DTYPES, MAX_GEOMETRY_VALUE, MAX_KERNEL_VOLUME, MAX_SPATIAL_DIMS  # noqa: F401

IntOrSeq = Union[int, Sequence[int]]


def per_axis(name: str, value: IntOrSeq, ndim: int, minimum: int) -> Tuple[int, ...]:
    """Expands an int to ``ndim`` values and checks each is an int >= minimum here, then within
    the ops' bound (2^31 - 1, the contract's per_axis)."""
    values = tuple(value) if isinstance(value, (list, tuple)) else (value,) * ndim
    if len(values) != ndim:
        raise ValueError(f"{name}: expected an int or {ndim} values (one per spatial axis), got {value!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise ValueError(f"{name}: expected integers >= {minimum}, got {value!r}")
    return tuple(_contract.per_axis(name, values, ndim, minimum))


def kernel_volume(kernel_size: Tuple[int, ...]) -> int:
    return _contract.kernel_volume(kernel_size)


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
    if type(value) in (list, tuple) and 1 <= len(value) <= MAX_SPATIAL_DIMS:
        # the usual case (every layer's output shape): plain positive ints, taken as they are; any
        # other value goes the general way below, which converts or names what is wrong
        for s in value:
            if type(s) is not int or s < 1:
                break
        else:
            return list(value)
    if isinstance(value, torch.Tensor):
        value = value.tolist()
    try:
        shape = [_integral_extent(s, value) for s in value]
    except TypeError:
        raise ValueError(f"spatial_shape: expected a sequence of positive ints, got {value!r}") from None
    if not 1 <= len(shape) <= MAX_SPATIAL_DIMS or any(s < 1 for s in shape):
        raise ValueError(f"spatial_shape: expected 1 to {MAX_SPATIAL_DIMS} positive ints, got {list(value)!r}")
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
