"""``spconv.pytorch.utils``: ``PointToVoxel`` (spconv 2.x's signature and outputs) and
``gather_features_by_pc_voxel_id``, over mx_sparse's voxelization ops.

``PointToVoxel(vsize_xyz, coors_range_xyz, num_point_features, max_num_voxels,
max_num_points_per_voxel, device=cpu)``; calling it on ``pc`` [N, num_point_features] returns
``(voxels [M, P, C] float32, indices [M, ndim] int32 (z, y, x), num_per_voxel [M] int32)``,
``generate_voxel_with_id`` adds ``pc_voxel_id`` [N] int64 (-1 for a point in no voxel). The
same voxels, order and point order as spconv 2.3.8's CPU path; on CUDA tensors (spconv: hash
order, unspecified) the order is the same as on the CPU. ``empty_mean`` fills with each
voxel's true mean (see ``spconv.utils``)."""
from typing import List, Union

import torch

from ..utils import calc_meta_data_for, fill_empty_with_mean
from ....functional.voxelize import voxelize


class PointToVoxel:
    def __init__(self, vsize_xyz: List[float], coors_range_xyz: List[float], num_point_features: int,
                 max_num_voxels: int, max_num_points_per_voxel: int, device: torch.device = torch.device("cpu:0")):
        self.ndim = len(vsize_xyz)
        self.device = torch.device(device)
        self.vsize, self.grid_size, self.grid_stride, self.coors_range = calc_meta_data_for(
            self.ndim, vsize_xyz, coors_range_xyz)
        self._vsize_xyz = [float(v) for v in vsize_xyz]
        self._coors_range_xyz = [float(v) for v in coors_range_xyz]
        for name, value in (("num_point_features", num_point_features), ("max_num_voxels", max_num_voxels),
                            ("max_num_points_per_voxel", max_num_points_per_voxel)):
            if int(value) < 1:
                raise ValueError(f"{name}: expected >= 1, got {value}")
        self.num_point_features = num_point_features
        self.max_num_voxels = max_num_voxels
        self.max_num_points_per_voxel = max_num_points_per_voxel

    def __call__(self, pc: torch.Tensor, clear_voxels: bool = True, empty_mean: bool = False):
        return self.generate_voxel_with_id(pc, clear_voxels, empty_mean)[:3]

    def generate_voxel_with_id(self, pc: torch.Tensor, clear_voxels: bool = True, empty_mean: bool = False):
        if not isinstance(pc, torch.Tensor) or pc.device.type != self.device.type:
            raise ValueError(f"pc: expected a torch tensor on {self.device.type} (this PointToVoxel's device), got "
                             f"{getattr(pc, 'device', type(pc).__name__)}")
        if pc.dim() != 2 or pc.shape[1] != self.num_point_features:
            raise ValueError(f"pc: expected [N, {self.num_point_features}] (num_point_features columns), "
                             f"got {tuple(pc.shape)}")
        if pc.shape[0] == 0:   # spconv returns no voxels for no points
            p = self.max_num_points_per_voxel
            return (pc.new_zeros((0, p, pc.shape[1]), dtype=torch.float32),
                    torch.zeros((0, self.ndim), dtype=torch.int32, device=pc.device),
                    torch.zeros((0,), dtype=torch.int32, device=pc.device),
                    torch.zeros((0,), dtype=torch.int64, device=pc.device))
        r = voxelize(pc, self._vsize_xyz, self._coors_range_xyz, self.max_num_points_per_voxel, self.max_num_voxels)
        voxels = r.voxels.to(torch.float32)
        if empty_mean:
            fill_empty_with_mean(voxels, r.num_points)
        pc_voxel_id = r.point_voxel.clamp(min=-1)   # spconv: -1 also where the voxel was beyond max_num_voxels
        return voxels, r.coordinates[:, 1:].contiguous(), r.num_points, pc_voxel_id


def gather_features_by_pc_voxel_id(seg_res_features: torch.Tensor, pc_voxel_id: torch.Tensor,
                                   invalid_value: Union[int, float] = 0) -> torch.Tensor:
    """Per point, the row of ``seg_res_features`` of its voxel (``invalid_value`` for a point
    in no voxel, ``pc_voxel_id == -1``)."""
    pc_voxel_id = pc_voxel_id.to(seg_res_features.device)
    out = seg_res_features.new_full((pc_voxel_id.shape[0], *seg_res_features.shape[1:]), invalid_value)
    keep = pc_voxel_id != -1
    out[keep] = seg_res_features[pc_voxel_id[keep]]
    return out
