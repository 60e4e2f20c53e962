"""``mx_driving.modules.voxelization``: mx_driving's ``Voxelization`` module
(``max_voxels`` an int or a (training, testing) pair)."""
from torch import nn
from torch.nn.modules.utils import _pair

from ..ops.voxelization import voxelization


class Voxelization(nn.Module):
    def __init__(self, voxel_size, point_cloud_range, max_num_points, max_voxels=20000, deterministic=True,
                 layout="XYZ"):
        super().__init__()
        self.voxel_size = voxel_size
        self.point_cloud_range = point_cloud_range
        self.max_num_points = max_num_points
        self.max_voxels = max_voxels if isinstance(max_voxels, tuple) else _pair(max_voxels)
        self.deterministic = deterministic
        self.layout = layout

    def forward(self, points):
        max_voxels = self.max_voxels[0] if self.training else self.max_voxels[1]
        return voxelization(points, self.voxel_size, self.point_cloud_range, self.max_num_points, max_voxels,
                            self.deterministic, self.layout)

    def extra_repr(self) -> str:
        return (f"voxel_size={self.voxel_size}, point_cloud_range={self.point_cloud_range}, "
                f"max_num_points={self.max_num_points}, max_voxels={self.max_voxels}, layout={self.layout!r}")
