"""``mx_driving.ops.voxelization``: mx_driving's ``voxelization`` over mx_sparse's
voxelization ops (spconv/mmcv cell rules, voxels in order of their first point).

mx_driving's contract: ``max_points`` and ``max_voxels`` both given (not -1) -> hard,
returning ``(voxel_num, voxels [M, max_points, C], coors [M, 3], num_points [M])`` with
``coors`` ordered by ``layout`` (``"XYZ"``: x, y, z columns; ``"ZYX"``: z, y, x); otherwise
dynamic, returning ``coors`` [N, 3] ``(z, y, x)`` per point, -1 rows outside the range.
``deterministic`` is accepted (mx_sparse is always deterministic)."""
from typing import Sequence

import torch

from ....functional.voxelize import voxelize

LAYOUTS = ("XYZ", "ZYX")


def voxelization(points: torch.Tensor, voxel_size: Sequence[float], coors_range: Sequence[float],
                 max_points: int = -1, max_voxels: int = -1, deterministic: bool = True, layout: str = "XYZ"):
    for name, value in (("points", points), ("voxel_size", voxel_size), ("coors_range", coors_range)):
        if len(value) == 0:
            raise ValueError(f"{name}: expected a non-empty {'tensor' if name == 'points' else 'list'}, got {value!r}")
    if max_points != -1 and max_voxels != -1:
        return hard_voxelize(points, voxel_size, coors_range, max_points, max_voxels, layout)
    return voxelize(points, voxel_size, coors_range).point_coordinates()


def hard_voxelize(points: torch.Tensor, voxel_size: Sequence[float], coors_range: Sequence[float], max_points: int,
                  max_voxels: int, layout: str = "XYZ"):
    """The hard branch: ``(voxel_num, voxels, coors, num_points)``."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: expected one of {LAYOUTS}, got {layout!r}")
    r = voxelize(points, voxel_size, coors_range, max_points, max_voxels)
    coors = r.coordinates[:, 1:]
    if layout == "XYZ":
        coors = coors.flip(1)
    return r.voxels.shape[0], r.voxels, coors.contiguous(), r.num_points
