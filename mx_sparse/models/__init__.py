"""Reference sparse backbones of LiDAR detectors, built from mx_sparse layers.

The CenterPoint detector that trains on top of VoxelBackBone8x in the main job is a demo,
not part of the library: it lives beside the package in ``examples/detection/centerpoint.py``
(a source checkout; not in the wheel)."""
from .backbones import SparseUNet, VoxelBackBone8x, VoxelResBackBone8x

__all__ = ["VoxelBackBone8x", "VoxelResBackBone8x", "SparseUNet"]
