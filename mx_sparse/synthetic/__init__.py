"""Synthetic inputs for sparse-convolution tests and benchmarks.

The public names are re-exported lazily (PEP 562) so that
``python -m mx_sparse.synthetic.lidar_scene`` does not import the module twice.
"""
import importlib

__all__ = ["PRESETS", "CLASSES", "generate_points", "generate_labeled_frame", "LabeledFrame", "voxelize", "make_batch", "mean_active_neighbors"]


def __getattr__(name):
    if name in __all__:
        return getattr(importlib.import_module(".lidar_scene", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
