"""``mx_driving.ops``: the voxelization op (mx_driving's other ops are not provided)."""
from . import voxelization  # noqa: F401
