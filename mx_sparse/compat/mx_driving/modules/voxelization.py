"""``mx_driving.modules.voxelization``: mx_driving's ``Voxelization`` module -- mmcv's
(``max_voxels`` an int or a (training, testing) pair) with mx_driving's ``layout`` and
return values (see ``mx_driving.ops.voxelization``)."""
from ...mmcv.voxelize import Voxelization as _MmcvVoxelization
from ..ops.voxelization import voxelization


class Voxelization(_MmcvVoxelization):
    def __init__(self, voxel_size, point_cloud_range, max_num_points, max_voxels=20000, deterministic=True,
                 layout="XYZ"):
        super().__init__(voxel_size, point_cloud_range, max_num_points, max_voxels, deterministic)
        self.layout = layout

    def forward(self, points):
        max_voxels = self.max_voxels[0] if self.training else self.max_voxels[1]
        return voxelization(points, self.voxel_size, self.point_cloud_range, self.max_num_points, max_voxels,
                            self.deterministic, self.layout)

    def __repr__(self):
        return super().__repr__()[:-1] + f", layout={self.layout!r})"
