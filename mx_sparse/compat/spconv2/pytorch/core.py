"""``spconv.pytorch.core``: SparseConvTensor with spconv 2.x's full API, as a thin subclass
of mx_sparse's SparseConvTensor (same storage, same map cache; layers of every surface
accept it)."""
from typing import List, Optional, Union

import numpy as np
import torch

from ....nn.indice_data import IndiceData  # noqa: F401  (spconv.pytorch.core.IndiceData)
from ....nn.serialization import allow
from ....nn.sparse_tensor import SparseConvTensor as _CoreTensor
from ..core import ConvAlgo  # noqa: F401


def scatter_nd(indices: torch.Tensor, updates: torch.Tensor, shape: List[int]) -> torch.Tensor:
    """Dense tensor of ``shape`` with ``updates`` written at ``indices`` (no accumulation)."""
    ret = torch.zeros(*shape, dtype=updates.dtype, device=updates.device)
    ndim = indices.shape[-1]
    flat = indices.reshape(-1, ndim).long()
    ret[tuple(flat[:, i] for i in range(ndim))] = updates.reshape(flat.shape[0], *shape[ndim:])
    return ret


def expand_nd(ndim: int, val) -> List[int]:
    res = [val] * ndim if isinstance(val, int) else list(val)
    if len(res) != ndim:
        raise ValueError(f"expected an int or {ndim} values, got {val!r}")
    return [int(v) for v in res]


def _as_int(value, name):
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return int(value.item())
    if isinstance(value, np.integer):
        return int(value)
    return value


class SparseConvTensor(_CoreTensor):
    """``SparseConvTensor(features, indices, spatial_shape, batch_size, grid=None,
    voxel_num=None, indice_dict=None, benchmark=False)``, spconv 2.x's constructor.
    Differences from spconv: ``features`` may also be assigned directly (spconv raises;
    ``replace_feature`` works in both), ``indices`` may be int64 (converted to int32)."""

    def __init__(self, features: torch.Tensor, indices: torch.Tensor, spatial_shape, batch_size,
                 grid: Optional[torch.Tensor] = None, voxel_num: Optional[torch.Tensor] = None,
                 indice_dict: Optional[dict] = None, benchmark: bool = False,
                 permanent_thrust_allocator: bool = False, enable_timer: bool = False, force_algo=None):
        super().__init__(features, indices, spatial_shape, _as_int(batch_size, "batch_size"), grid)
        if indice_dict is not None:
            self.indice_dict = indice_dict
        self.voxel_num = voxel_num
        self.benchmark = benchmark
        self.benchmark_record = {}
        self.thrust_allocator = None
        self.force_algo = force_algo
        self.int8_scale = None

    # --- tensors derived from this one keep the class and spconv's extra fields
    def derive(self, features, indices, spatial_shape) -> "SparseConvTensor":
        out = type(self)(features, indices, spatial_shape, self.batch_size, self.grid, self.voxel_num,
                         self.indice_dict, self.benchmark)
        out.benchmark_record = self.benchmark_record
        out.force_algo = self.force_algo
        out.int8_scale = self.int8_scale
        return out

    def shadow_copy(self) -> "SparseConvTensor":
        """A new tensor sharing every member (features, indices, map cache)."""
        return self.derive(self.features, self.indices, self.spatial_shape)

    def select_by_index(self, valid_indices: torch.Tensor) -> "SparseConvTensor":
        """The voxels selected by ``valid_indices`` (bool mask or row indices); the map cache
        is not carried over (it describes other voxels)."""
        out = self.derive(self.features[valid_indices], self.indices[valid_indices], self.spatial_shape)
        out.indice_dict = {}
        return out

    def minus(self) -> "SparseConvTensor":
        return self.replace_feature(-self.features)

    @property
    def is_quantized(self) -> bool:
        return self.features.dtype == torch.qint8

    def dequantize(self):
        return self.replace_feature(self.features.dequantize())

    def __add__(self, other: Union["SparseConvTensor", torch.Tensor]) -> "SparseConvTensor":
        other_f = other.features if isinstance(other, _CoreTensor) else other
        if not isinstance(other_f, torch.Tensor):
            return NotImplemented
        return self.replace_feature(self.features + other_f)

    __radd__ = __add__

    def __iadd__(self, other):
        other_f = other.features if isinstance(other, _CoreTensor) else other
        if not isinstance(other_f, torch.Tensor):
            return NotImplemented
        self.features = self.features + other_f
        return self

    def __repr__(self):
        return f"SparseConvTensor[shape={self.features.shape}]"


allow(SparseConvTensor, ConvAlgo)   # loads under torch.load(weights_only=True) like the core class
