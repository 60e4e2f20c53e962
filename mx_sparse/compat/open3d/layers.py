"""Open3D-ML's ``SparseConv`` / ``SparseConvTranspose`` layers (``open3d.ml.torch.layers``):
Open3D's constructor and forward arguments, its parameter names and shapes (``kernel``
``[*kernel_size, in_channels, filters]``, ``bias [filters]``, the buffer ``offset [3]``), so an
Open3D ``state_dict`` loads unchanged. The neighbour map comes from the core builder
``build_conv_map_at`` on the voxels of the points (positions.py), the convolution is the core
``weighted_gather_mm``; this module only translates arguments.

Differences from Open3D 0.20: points must lie on one voxel grid (positions.py says why), input
points in distinct voxels; one point cloud per call (no RaggedTensor batches); no
``fixed_radius_search_hash_table``; unknown keyword arguments raise TypeError (Open3D ignores them)."""
import math

import numpy as np
import torch

from ... import functional as F
from ...functional import importance as weighting
from . import positions as grid
from .neighbor_lists import optional_vector


def _uniform_005(x):
    return torch.nn.init.uniform_(x, -0.05, 0.05)


def _cubic_kernel_size(kernel_size):
    sizes = [kernel_size] * 3 if isinstance(kernel_size, int) else list(kernel_size)
    if len(sizes) != 3 or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in sizes):
        raise ValueError(f"kernel_size: expected 3 positive integers, got {kernel_size!r}")
    if len(set(sizes)) != 1:
        raise ValueError(f"kernel_size: expected a cubic kernel (Open3D supports only those), got {kernel_size!r}")
    return [int(k) for k in sizes]


def _distinct_voxels(name: str, indices: torch.Tensor):
    if indices.shape[0] < 2:
        return
    unique = torch.unique(indices, dim=0)
    if unique.shape[0] != indices.shape[0]:
        raise ValueError(f"{name}: expected points in distinct voxels, got {indices.shape[0] - unique.shape[0]} "
                         f"point(s) in a voxel another point is in")


class _SparseConvBase(torch.nn.Module):
    transposed = False

    def __init__(self, in_channels, filters, kernel_size, activation=None, use_bias=True,
                 kernel_initializer=_uniform_005, bias_initializer=torch.nn.init.zeros_, normalize=False,
                 offset=None, allow_tf32=False, **kwargs):
        super().__init__()
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) {sorted(kwargs)}")
        self.in_channels, self.filters = in_channels, filters
        self.kernel_size = _cubic_kernel_size(kernel_size)
        self.activation, self.use_bias, self.normalize, self.allow_tf32 = activation, use_bias, normalize, allow_tf32
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer
        if offset is None:   # Open3D's default: centred for odd sizes, half a voxel down for even ones
            offset = torch.full((3,), 0.0 if self.kernel_size[0] % 2 else -0.5, dtype=torch.float32)
        offset = torch.as_tensor(offset, dtype=torch.float32)
        if offset.shape != (3,):
            raise ValueError(f"offset: expected 3 values (x, y, z), got shape {list(offset.shape)}")
        grid.kernel_pads(self.kernel_size[0], offset)   # refuses offsets off the grid now, not at forward
        self.register_buffer("offset", offset)
        self.kernel = torch.nn.Parameter(torch.empty(*self.kernel_size, in_channels, filters))
        kernel_initializer(self.kernel)
        if use_bias:
            self.bias = torch.nn.Parameter(torch.empty(filters))
            bias_initializer(self.bias)

    def extra_repr(self):
        return (f"in_channels={self.in_channels}, filters={self.filters}, kernel_size={self.kernel_size}, "
                f"normalize={self.normalize}, offset={self.offset.tolist()}")

    def _neighbor_map(self, inp_features, inp_positions, out_positions, voxel_size, hash_table):
        if hash_table is not None:
            raise ValueError("fixed_radius_search_hash_table: expected None (mx_sparse builds its own neighbour "
                             "map; Open3D's hash table has no use here)")
        if not isinstance(inp_features, torch.Tensor) or inp_features.dim() != 2 \
                or inp_features.shape[1] != self.in_channels:
            got = list(inp_features.shape) if isinstance(inp_features, torch.Tensor) else type(inp_features).__name__
            raise ValueError(f"inp_features: expected a tensor [num_points, {self.in_channels}] (in_channels), got {got}")
        if isinstance(inp_positions, torch.Tensor) and inp_positions.shape[0] != inp_features.shape[0]:
            raise ValueError(f"inp_positions: expected {inp_features.shape[0]} rows (one per row of inp_features), "
                             f"got {inp_positions.shape[0]}")
        size = grid.voxel_size_value(voxel_size)
        ks = self.kernel_size[0]
        pads = grid.kernel_pads(ks, self.offset)
        inp, out, shape = grid.grid_voxels(inp_positions, out_positions, size, pads, ks, self.transposed)
        _distinct_voxels("inp_positions", inp)
        if self.transposed:   # a transposed map names an (input, filter element) once: outputs distinct too
            _distinct_voxels("out_positions", out)
            rows = None
        else:                 # outputs in one voxel share its result
            out, rows = torch.unique(out, dim=0, return_inverse=True)
        pads_begin = [grid.map_pads(ks, self.transposed)] * 3
        nbr = F.build_conv_map_at(inp, out, shape, 1, self.kernel_size, [1, 1, 1], pads_begin, [1, 1, 1],
                                  transposed=self.transposed)
        return nbr, rows

    def _finish(self, out):
        if self.use_bias:
            out = out + self.bias.to(out.dtype)
        if self.activation:
            out = self.activation(out)
        return out

    def _weight(self, dtype):
        return self.kernel.reshape(math.prod(self.kernel_size), self.in_channels, self.filters).to(dtype)


class SparseConv(_SparseConvBase):
    """Open3D's ``SparseConv``: the convolution evaluated at ``out_positions``;
    ``out[o] = sum_k inp_importance[i] * inp_features[i] @ kernel[k]`` over the inputs ``i`` at
    voxel ``o + k - P`` (positions.py), divided by their number with ``normalize``."""

    def forward(self, inp_features, inp_positions, out_positions, voxel_size, inp_importance=None,
                fixed_radius_search_hash_table=None):
        nbr, rows = self._neighbor_map(inp_features, inp_positions, out_positions, voxel_size,
                                       fixed_radius_search_hash_table)
        importance = optional_vector("inp_importance", inp_importance, inp_features.shape[0],
                                     "row of inp_features", inp_features.dtype)
        out = weighting.weighted_gather_mm(inp_features, self._weight(inp_features.dtype), nbr,
                                           inp_importance=importance, normalize=bool(self.normalize))
        return self._finish(out[rows])


class SparseConvTranspose(_SparseConvBase):
    """Open3D's ``SparseConvTranspose``: input ``i`` adds ``inp_features[i] @ kernel[k]`` to the
    output at voxel ``i + k - P`` (positions.py) when there is one; ``normalize`` divides each input
    by the number of outputs it reaches; ``out_importance`` scales the outputs (before the bias)."""
    transposed = True

    def forward(self, inp_features, inp_positions, out_positions, voxel_size, out_importance=None,
                fixed_radius_search_hash_table=None):
        nbr, _ = self._neighbor_map(inp_features, inp_positions, out_positions, voxel_size,
                                    fixed_radius_search_hash_table)
        importance = optional_vector("out_importance", out_importance, nbr.shape[0], "row of out_positions",
                                     inp_features.dtype)
        out = weighting.weighted_gather_mm(inp_features, self._weight(inp_features.dtype), nbr,
                                           out_importance=importance,
                                           normalize="input" if self.normalize else False)
        return self._finish(out)
