"""Compatibility surfaces: ``patch_spconv`` (spconv 2.x), ``patch_mmcv`` (mmcv.ops /
mmdet3d). Both are thin adapters over mx_sparse's single implementation."""
from .patching import patch_mmcv, patch_spconv, unpatch_mmcv, unpatch_spconv  # noqa: F401
