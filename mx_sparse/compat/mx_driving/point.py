"""``mx_driving.point``: the voxelization names (mx_driving's other point ops are not provided)."""
from .modules.voxelization import Voxelization  # noqa: F401
from .ops.voxelization import voxelization  # noqa: F401


def __getattr__(name):
    raise AttributeError(f"mx_driving.point.{name} is not provided by mx_sparse (only Voxelization, voxelization)")
