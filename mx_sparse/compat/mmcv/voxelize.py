"""``mmcv.ops.voxelize``: mmcv's ``Voxelization`` / ``voxelization`` over mx_sparse's
voxelization ops. Hard (``max_points`` and ``max_voxels`` not -1): ``(voxels [M, max_points,
C], coors [M, 3] int32 (z, y, x), num_points_per_voxel [M] int32)``, voxels in order of their
first point, a voxel's points in input order -- what mmcv's CPU kernel and its deterministic
CUDA kernel produce. Dynamic: ``coors`` [N, 3] per point, a row of -1 outside the range.
``deterministic`` is accepted; mx_sparse is always deterministic. As in mmcv, no points give
no voxels (an empty result, not an error)."""
from typing import Sequence, Tuple, Union

import torch
from torch import nn
from torch.nn.modules.utils import _pair

from ...functional.voxelize import voxelize


def voxelization(points: torch.Tensor, voxel_size: Sequence[float], coors_range: Sequence[float],
                 max_points: int = 35, max_voxels: int = 20000, deterministic: bool = True):
    ndim = len(voxel_size)
    if max_points == -1 or max_voxels == -1:
        if points.shape[0] == 0:
            return torch.zeros((0, ndim), dtype=torch.int32, device=points.device)
        return voxelize(points, voxel_size, coors_range).point_coordinates()
    if points.shape[0] == 0:
        return (points.new_zeros((0, max_points, points.shape[1])),
                torch.zeros((0, ndim), dtype=torch.int32, device=points.device),
                torch.zeros((0,), dtype=torch.int32, device=points.device))
    r = voxelize(points, voxel_size, coors_range, max_points, max_voxels)
    return r.voxels, r.coordinates[:, 1:].contiguous(), r.num_points


class Voxelization(nn.Module):
    """``Voxelization(voxel_size, point_cloud_range, max_num_points, max_voxels=20000,
    deterministic=True)``; ``max_voxels`` an int or a (training, testing) pair. ``grid_size``
    and ``pcd_shape`` as mmcv computes them (``grid_size`` with ``torch.round``, which rounds
    halves to even; the kernels round the grid extent half away from zero, as mmcv's do)."""

    def __init__(self, voxel_size: Sequence[float], point_cloud_range: Sequence[float], max_num_points: int,
                 max_voxels: Union[Tuple[int, int], int] = 20000, deterministic: bool = True):
        super().__init__()
        self.voxel_size = voxel_size
        self.point_cloud_range = point_cloud_range
        self.max_num_points = max_num_points
        self.max_voxels = max_voxels if isinstance(max_voxels, tuple) else _pair(max_voxels)
        self.deterministic = deterministic
        pcr = torch.tensor(point_cloud_range, dtype=torch.float32)
        grid = torch.round((pcr[3:] - pcr[:3]) / torch.tensor(voxel_size, dtype=torch.float32)).long()
        self.grid_size = grid
        self.pcd_shape = [*grid[:2], 1][::-1]

    def forward(self, input: torch.Tensor):
        max_voxels = self.max_voxels[0] if self.training else self.max_voxels[1]
        return voxelization(input, self.voxel_size, self.point_cloud_range, self.max_num_points, max_voxels,
                            self.deterministic)

    def __repr__(self):
        return (f"{self.__class__.__name__}(voxel_size={self.voxel_size}, point_cloud_range={self.point_cloud_range}, "
                f"max_num_points={self.max_num_points}, max_voxels={self.max_voxels}, "
                f"deterministic={self.deterministic})")
