"""Voxelization: point clouds [N, C] -> voxels, the step before the first sparse
convolution. ``PointToVoxel`` / ``voxelize`` run the ``voxelize_hard`` and
``voxelize_dynamic`` ops (CPU kernel; on CUDA and NPU tensors a torch-operator
implementation), with spconv's and mmcv's cell rules and keep-first order:

* voxels are listed per sample in order of their first point, a voxel's points
  in input order;
* hard: the first ``max_voxels`` voxels of each sample and the first
  ``max_points_per_voxel`` points of each voxel are kept (zero-padded);
* dynamic: every point inside ``point_cloud_range`` is mapped to its voxel.

Coordinates are ``(batch, z, y, x)`` int32 rows, directly the indices of a
``SparseConvTensor`` whose ``spatial_shape`` is ``PointToVoxel.spatial_shape``.
"""
import math
from typing import Dict, List, NamedTuple, Optional, Sequence, Union

import torch

from .._core import contract as _contract
from .._core.op_registration import ops

PointsLike = Union[torch.Tensor, Sequence[torch.Tensor]]


class Voxels(NamedTuple):
    """Result of a voxelization.

    ``voxels`` [M, max_points_per_voxel, C] (hard; ``None`` for dynamic), ``coordinates``
    [M, 1+ndim] int32 ``(batch, z, y, x)``, ``num_points`` [M] int32 (points stored per voxel;
    dynamic: all its points), ``point_voxel`` [N] int64: the voxel row of each point, -1 for a
    point outside ``point_cloud_range``, -2 for a point whose voxel was beyond ``max_voxels``
    (a point beyond ``max_points_per_voxel`` keeps its voxel's row)."""
    voxels: Optional[torch.Tensor]
    coordinates: torch.Tensor
    num_points: torch.Tensor
    point_voxel: torch.Tensor

    @property
    def dropped(self) -> Dict[str, int]:
        """How many points are in no voxel, by reason: ``out_of_range``, ``max_voxels``
        (their voxel was not kept) and ``max_points`` (their voxel was full)."""
        pv = self.point_voxel
        mapped = int((pv >= 0).sum())
        return {"out_of_range": int((pv == -1).sum()), "max_voxels": int((pv == -2).sum()),
                "max_points": mapped - int(self.num_points.sum()) if self.voxels is not None else 0}

    def point_coordinates(self) -> torch.Tensor:
        """Spatial coordinates ``(z, y, x)`` of every point's voxel, [N, ndim] int32, a row of
        -1 for a point in no voxel (mmcv's dynamic ``coors``)."""
        ndim = self.coordinates.shape[1] - 1
        out = torch.full((self.point_voxel.shape[0], ndim), -1, dtype=torch.int32, device=self.coordinates.device)
        keep = self.point_voxel >= 0
        out[keep] = self.coordinates[self.point_voxel[keep], 1:]
        return out

    def mean(self, points: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Mean point of every voxel, [M, C]: of its stored points (hard, ``points`` not
        given), else of all its points in ``points`` (the tensor that was voxelized)."""
        if points is None:
            if self.voxels is None:
                raise ValueError("points: a dynamic voxelization keeps no points; pass the voxelized points")
            return self.voxels.sum(1) / self.num_points.clamp(min=1).unsqueeze(1).to(self.voxels.dtype)
        if points.dim() != 2 or points.shape[0] != self.point_voxel.shape[0]:
            raise ValueError(f"points: expected the {self.point_voxel.shape[0]} voxelized points [N, C], "
                             f"got {tuple(points.shape)}")
        keep = self.point_voxel >= 0
        ids = self.point_voxel[keep]
        m = self.coordinates.shape[0]
        sums = points.new_zeros(m, points.shape[1]).index_add_(0, ids, points[keep])
        counts = torch.bincount(ids, minlength=m).clamp(min=1).to(points.dtype)
        return sums / counts.unsqueeze(1)


def grid_size(voxel_size: Sequence[float], point_cloud_range: Sequence[float]) -> List[int]:
    """Cells per point axis ``[x, y, z, ...]``: round((max - min) / size) in float32, as
    spconv and mmcv compute it. Raises ``ValueError`` for arguments the ops reject."""
    return _contract.voxel_grid_extent(voxel_size, point_cloud_range)


def _batched(points: PointsLike, batch: Optional[torch.Tensor]):
    if isinstance(points, torch.Tensor):
        return points, batch
    if batch is not None:
        raise ValueError("batch: give either a list of point clouds or one tensor with batch, not both")
    clouds = list(points)
    if not clouds:
        raise ValueError("points: expected a tensor [N, C] or a non-empty list of them, got an empty list")
    lengths = torch.tensor([c.shape[0] for c in clouds], device=clouds[0].device)
    return torch.cat(clouds), torch.repeat_interleave(torch.arange(len(clouds), device=clouds[0].device), lengths)


def voxelize(points: PointsLike, voxel_size: Sequence[float], point_cloud_range: Sequence[float],
             max_points_per_voxel: Optional[int] = None, max_voxels: Optional[int] = None,
             batch: Optional[torch.Tensor] = None) -> Voxels:
    """Voxelizes ``points`` ([N, C], columns x, y, z, ... first; or a list of such clouds,
    which become samples 0, 1, ...; or one tensor with ``batch`` [N], the sample of each
    point). ``max_points_per_voxel=None`` gives the dynamic variant; ``max_voxels=None``
    keeps every voxel. See ``Voxels`` for the result."""
    points, batch = _batched(points, batch)
    points = points.detach()
    if max_points_per_voxel is None:
        if max_voxels is not None:
            raise ValueError("max_voxels: only a hard voxelization caps voxels; give max_points_per_voxel too")
        coords, num, pv = ops.voxelize_dynamic(points, batch, [float(v) for v in voxel_size],
                                               [float(v) for v in point_cloud_range])
        return Voxels(None, coords, num, pv)
    voxels, coords, num, pv = ops.voxelize_hard(points, batch, [float(v) for v in voxel_size],
                                                [float(v) for v in point_cloud_range], int(max_points_per_voxel),
                                                -1 if max_voxels is None else int(max_voxels))
    return Voxels(voxels, coords, num, pv)


class PointToVoxel(torch.nn.Module):
    """``PointToVoxel(voxel_size, point_cloud_range, max_points_per_voxel=None, max_voxels=None)``

    ``voxel_size`` [x, y, z] (1 to 4 axes), ``point_cloud_range`` [x_min, y_min, z_min,
    x_max, y_max, z_max]. ``max_points_per_voxel`` given: hard voxelization (``max_voxels``
    per sample, ``None`` = no cap); omitted: dynamic. Calling it on points (a tensor, a
    list of clouds, or a tensor plus ``batch``) returns ``Voxels``. ``spatial_shape``
    ([z, y, x]) is the grid to build a ``SparseConvTensor`` on."""

    def __init__(self, voxel_size: Sequence[float], point_cloud_range: Sequence[float],
                 max_points_per_voxel: Optional[int] = None, max_voxels: Optional[int] = None):
        super().__init__()
        self.voxel_size = [float(v) for v in voxel_size]
        self.point_cloud_range = [float(v) for v in point_cloud_range]
        self.grid_size = grid_size(self.voxel_size, self.point_cloud_range)   # validates
        if max_points_per_voxel is None and max_voxels is not None:
            raise ValueError("max_voxels: only a hard voxelization caps voxels; give max_points_per_voxel too")
        if max_points_per_voxel is not None and max_points_per_voxel < 1:
            raise ValueError(f"max_points_per_voxel: expected >= 1 or None (dynamic), got {max_points_per_voxel}")
        if max_voxels is not None and max_voxels < 1:
            raise ValueError(f"max_voxels: expected >= 1 or None (no cap), got {max_voxels}")
        self.max_points_per_voxel = max_points_per_voxel
        self.max_voxels = max_voxels

    @property
    def ndim(self) -> int:
        return len(self.voxel_size)

    @property
    def spatial_shape(self) -> List[int]:
        """Grid extent in coordinate order ``[z, y, x]``."""
        return self.grid_size[::-1]

    @property
    def num_cells(self) -> int:
        return math.prod(self.grid_size)

    def forward(self, points: PointsLike, batch: Optional[torch.Tensor] = None) -> Voxels:
        return voxelize(points, self.voxel_size, self.point_cloud_range, self.max_points_per_voxel, self.max_voxels,
                        batch)

    def extra_repr(self) -> str:
        return (f"voxel_size={self.voxel_size}, point_cloud_range={self.point_cloud_range}, "
                f"max_points_per_voxel={self.max_points_per_voxel}, max_voxels={self.max_voxels}, "
                f"spatial_shape={self.spatial_shape}")
