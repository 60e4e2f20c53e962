"""Reference sparse backbones of LiDAR detectors, built from mx_sparse layers."""
from .backbones import SparseUNet, VoxelBackBone8x, VoxelResBackBone8x
from .centerpoint import CenterPoint

__all__ = ["VoxelBackBone8x", "VoxelResBackBone8x", "SparseUNet", "CenterPoint"]
