"""Open3D's float point positions as voxels of mx_sparse's grid.

Open3D's SparseConv layers search, for each output point, the inputs within an L-inf box of
half-width ``0.51 * kernel_size * voxel_size`` around ``out_position - offset * voxel_size`` and
pick the filter element nearest to the relative position. For points on a common voxel grid
(every position ``(c + phase) * voxel_size`` with integer ``c``, one ``phase`` for all points)
that is exactly the grid convolution with ``input = output + k - P``, ``P = (kernel_size - 1) / 2
+ offset`` per axis (filter element ``k`` row-major over (z, y, x), as Open3D's ``kernel
[depth, height, width, in, out]``): the only case these layers support. Positions off the grid
by more than ``GRID_TOLERANCE`` voxels, and offsets that make ``P`` non-integral, are refused
with a ValueError (Open3D would interpolate between filter elements there)."""
from typing import Tuple

import torch

GRID_TOLERANCE = 1e-2   # voxels; Open3D's search box leaves a margin of at least 0.5 - 0.01*kernel_size


def voxel_size_value(voxel_size) -> float:
    if isinstance(voxel_size, torch.Tensor):
        if voxel_size.dim() != 0:
            raise ValueError(f"voxel_size: expected a scalar, got a tensor of shape {list(voxel_size.shape)}")
        voxel_size = voxel_size.item()
    if isinstance(voxel_size, bool) or not isinstance(voxel_size, (int, float)) or not voxel_size > 0:
        raise ValueError(f"voxel_size: expected a positive scalar, got {voxel_size!r}")
    return float(voxel_size)


def kernel_pads(kernel_size: int, offset: torch.Tensor) -> Tuple[int, int, int]:
    """``P`` per grid axis (z, y, x) from Open3D's ``offset`` (x, y, z)."""
    pads = []
    for axis, value in zip("zyx", offset.detach().double().flip(0).tolist()):
        pad = (kernel_size - 1) / 2 + value
        if abs(pad - round(pad)) > 1e-6:
            raise ValueError(f"offset: expected (kernel_size - 1) / 2 + offset to be an integer on every axis (the "
                             f"filter centred on grid points), got {value} on {axis} with kernel_size {kernel_size}")
        pads.append(int(round(pad)))
    return tuple(pads)


def _grid_coordinates(name: str, positions, phase: torch.Tensor, voxel_size: float) -> torch.Tensor:
    """Integer (z, y, x) of each row of ``positions`` [n, 3] on the grid of ``phase``."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name}: expected a tensor [num_points, 3] (Open3D's RaggedTensor batches are not "
                        f"supported), got {type(positions).__name__}")
    if positions.dim() != 2 or positions.shape[1] != 3 or not positions.is_floating_point():
        raise ValueError(f"{name}: expected a float tensor [num_points, 3], got shape {list(positions.shape)} of "
                         f"{positions.dtype}")
    scaled = positions.detach().double() / voxel_size - phase
    coords = torch.round(scaled)
    off = (scaled - coords).abs()
    if off.numel() and float(off.max()) > GRID_TOLERANCE:
        row = int(off.max(1).values.argmax())
        raise ValueError(f"{name}: expected points on the voxel grid of the other points (voxel_size {voxel_size}); "
                         f"row {row} {positions[row].tolist()} is {float(off.max()):.3g} voxels off it")
    return coords.long().flip(1)


def grid_voxels(inp_positions, out_positions, voxel_size: float, pads, kernel_size: int, transposed: bool):
    """``(in_indices [N, 4], out_indices [M, 4], spatial_shape)`` (batch 0, then z, y, x) for
    ``build_conv_map_at`` with stride 1, dilation 1 and ``pads_begin`` = ``map_pads(...)``."""
    for name, value in (("inp_positions", inp_positions), ("out_positions", out_positions)):
        if not isinstance(value, torch.Tensor) or value.dim() != 2 or value.shape[1] != 3:
            raise ValueError(f"{name}: expected a float tensor [num_points, 3], got "
                             f"{list(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__}")
    first = inp_positions if inp_positions.shape[0] else out_positions
    phase = (first[:1].detach().double() / voxel_size).frac() if first.shape[0] else torch.zeros(1, 3, dtype=torch.float64)
    inp = _grid_coordinates("inp_positions", inp_positions, phase, voxel_size)
    out = _grid_coordinates("out_positions", out_positions, phase, voxel_size)
    pads_begin = map_pads(kernel_size, transposed)
    p = torch.tensor(pads, dtype=torch.long)
    # conv: input = output + k - P = mapped - pads_begin + k; transposed: output = input + k - P,
    # i.e. input = mapped + pads_begin - k
    mapped = out - p + pads_begin if not transposed else out + p - pads_begin
    both = torch.cat([inp, mapped]) if inp.numel() + mapped.numel() else torch.zeros(1, 3, dtype=torch.long)
    low = both.min(0).values
    inp, mapped = inp - low, mapped - low
    # the output grid of stride 1 and these pads has extent s + kernel_size - 1
    extent = torch.maximum(inp.max(0).values + 1 if inp.numel() else torch.ones(3, dtype=torch.long),
                           mapped.max(0).values + 2 - kernel_size if mapped.numel() else torch.ones(3, dtype=torch.long))
    shape = [max(int(e), 1) for e in extent]
    batch = lambda c: torch.cat([torch.zeros(c.shape[0], 1, dtype=torch.long), c], 1).to(torch.int32)  # noqa: E731
    return batch(inp).to(inp_positions.device), batch(mapped).to(inp_positions.device), shape


def map_pads(kernel_size: int, transposed: bool) -> int:
    """The ``pads_begin`` (= ``pads_end``) given to ``build_conv_map_at``: with them the output grid
    of both the conv and the transposed conv extends ``kernel_size - 1`` beyond the input grid."""
    return 0 if transposed else kernel_size - 1
