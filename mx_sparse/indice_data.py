"""What an ``indice_key`` caches: the neighbor map of one layer and everything
needed to reuse it (submanifold layers) or to invert it (SparseInverseConv)."""
from dataclasses import dataclass
from typing import List, Tuple

import torch


@dataclass
class IndiceData:
    kind: str                   # "subm" or "conv"
    in_indices: torch.Tensor    # voxels the map reads from
    out_indices: torch.Tensor   # voxels the map writes to (subm: same tensor)
    nbr: torch.Tensor           # [M, K] int32, output row -> input row per offset
    nbr_t: torch.Tensor         # [N, K] int32, the transpose
    in_spatial_shape: List[int]
    out_spatial_shape: List[int]
    kernel_size: Tuple[int, ...]
    stride: Tuple[int, ...]
    padding: Tuple[int, ...]
    dilation: Tuple[int, ...]

    def describe(self) -> str:
        return (f"{self.kind} map (kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, spatial_shape={self.in_spatial_shape})")


def same_voxels(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Cheap identity test first (layers pass one indices tensor along), exact compare otherwise."""
    if a is b or (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()):
        return True
    return a.shape == b.shape and torch.equal(a, b)
