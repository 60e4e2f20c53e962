"""SparseConvTensor: active voxels as ``features [N, C]`` and ``indices [N, 1+ndim]``
(rows ``(batch, *spatial)``, int32), plus the grid they live in and the cache of
neighbor maps shared by every layer that processes them (``indice_dict``)."""
import copy
import functools
import math
from typing import List, Optional, Sequence

import torch

from . import validation
from .compile_support import is_compiling, mark_voxels_dynamic


def _shallow_copy(t):
    """``copy.copy(t)``: for a class that keeps copy's default protocol (no ``__copy__``,
    ``__reduce__``, ``__getstate__`` / ``__setstate__`` or ``__new__`` of its own) what copy.copy
    does, a new instance holding the same ``__dict__`` entries, done directly (a third of the
    time: copy.copy goes through ``__reduce_ex__``); copy.copy itself for any other class."""
    cls = type(t)
    if not _copies_by_dict(cls):
        return copy.copy(t)
    out = object.__new__(cls)
    out.__dict__.update(t.__dict__)
    return out


@functools.lru_cache(maxsize=None)
def _copies_by_dict(cls) -> bool:
    return (getattr(cls, "__copy__", None) is None and cls.__reduce_ex__ is object.__reduce_ex__
            and cls.__reduce__ is object.__reduce__ and cls.__getstate__ is object.__getstate__
            and getattr(cls, "__setstate__", None) is None and cls.__new__ is object.__new__
            and not hasattr(cls, "__slots__"))


class SparseConvTensor:
    def __init__(self, features: torch.Tensor, indices: torch.Tensor, spatial_shape: Sequence[int],
                 batch_size: int, grid: Optional[torch.Tensor] = None):
        self.spatial_shape: List[int] = validation.spatial_shape(spatial_shape)
        self.indices = validation.indices(indices, len(self.spatial_shape))
        self.batch_size = validation.batch_size(batch_size)
        self.features = features
        self.indice_dict: dict = {}
        self.grid = grid
        mark_voxels_dynamic(self._features, self.indices)

    @property
    def features(self) -> torch.Tensor:
        return self._features

    @features.setter
    def features(self, value: torch.Tensor) -> None:
        self._features = validation.features(value, self.indices.shape[0], self.indices.device)

    @property
    def ndim(self) -> int:
        return len(self.spatial_shape)

    @property
    def spatial_size(self) -> int:
        return math.prod(self.spatial_shape)

    @property
    def sparity(self) -> float:
        """Fraction of the grid that is active (name kept from mx_driving/spconv)."""
        return self.indices.shape[0] / self.spatial_size / self.batch_size

    def find_indice_pair(self, key):
        if key is None:
            return None
        return self.indice_dict.get(key)

    def derive(self, features: torch.Tensor, indices: torch.Tensor, spatial_shape) -> "SparseConvTensor":
        """A tensor of this class on other voxels of the same batch, sharing the map cache
        (what every layer returns; subclasses override it to carry their own fields)."""
        out = type(self)(features, indices, spatial_shape, self.batch_size, self.grid)
        out.indice_dict = self.indice_dict
        return out

    def replace_feature(self, features: torch.Tensor) -> "SparseConvTensor":
        """Same voxels and cached maps, new features. As in spconv 2.3.8 the row count may differ
        from the indices' (VoxelNeXt and Pointcept replace the features, then assign matching
        indices); a layer run while they still differ raises. Like spconv, anything but a 2-D
        tensor is rejected here, as are a device other than the indices' and a non-float dtype."""
        rows = features.shape[0] if isinstance(features, torch.Tensor) and features.dim() == 2 else -1
        out = _shallow_copy(self)   # every field (and subclass field) shared, as derive() shares them
        out._features = validation.features(features, rows, self.indices.device)
        mark_voxels_dynamic(out._features)
        return out

    def dense(self, channels_first: bool = True) -> torch.Tensor:
        """``[B, C, *spatial]`` (or ``[B, *spatial, C]``); inactive voxels are zero."""
        c = self.features.shape[1]
        out = self.features.new_zeros([self.batch_size] + self.spatial_shape + [c])
        idx = self.indices.long()
        self._check_dense_rows(idx)
        out[tuple(idx[:, d] for d in range(idx.shape[1]))] = self.features
        if channels_first:
            out = out.movedim(-1, 1).contiguous()
        return out

    def _check_dense_rows(self, idx: torch.Tensor) -> None:
        """Every row inside [0, batch_size) x [0, spatial_shape): a negative coordinate would
        otherwise be written at the wrapped position (Python indexing), silently."""
        if idx.shape[0] == 0 or is_compiling():
            return
        bounds = torch.tensor([self.batch_size] + self.spatial_shape, device=idx.device)
        bad = ((idx < 0) | (idx >= bounds)).any(1)
        if bool(bad.any()):
            row = int(bad.nonzero()[0, 0])
            raise ValueError(f"indices: row {row} = {idx[row].tolist()} lies outside batch_size {self.batch_size} x "
                             f"spatial_shape {self.spatial_shape} (coordinates must be >= 0 and below the shape)")

    @classmethod
    def from_dense(cls, x: torch.Tensor) -> "SparseConvTensor":
        """From a channels-last dense tensor ``[B, *spatial, C]`` (spconv's convention);
        voxels whose channels are all zero are inactive."""
        if x.dim() < 3:
            raise ValueError(f"x: expected [B, *spatial, C] with 1 to 4 spatial dims, got {list(x.shape)}")
        active = (x != 0).any(dim=-1)
        idx = active.nonzero().int()
        return cls(x[active], idx, list(x.shape[1:-1]), x.shape[0])

    def __repr__(self) -> str:
        return (f"SparseConvTensor(N={self.indices.shape[0]}, C={self.features.shape[1]}, "
                f"spatial_shape={self.spatial_shape}, batch_size={self.batch_size}, "
                f"dtype={self.features.dtype}, device={self.features.device})")
