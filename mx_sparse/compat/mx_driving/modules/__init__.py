"""``mx_driving.modules``."""
from . import sparse_conv, sparse_modules, sparse_structure, voxelization  # noqa: F401
