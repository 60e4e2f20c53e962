"""``spconv.utils``: spconv 2.x's point-to-voxel classes over mx_sparse's voxelization ops.

``Point2VoxelCPU{1,2,3,4}d(vsize_xyz, coors_range_xyz, num_point_features, max_num_voxels,
max_num_points_per_voxel)`` with ``point_to_voxel(points, clear_voxels=True)`` /
``point_to_voxel_empty_mean(...)`` -> ``(voxels [M, P, C] float32, indices [M, ndim] int32
(z, y, x), num_per_voxel [M] int32)``, the same cells, voxels, order and point order as
spconv 2.3.8 (tests/compat/test_voxelize_spconv.py). ``points`` may be a ``cumm.tensorview``
tensor (results are then tensorview tensors owning a copy: ``tv.from_numpy`` does not keep
a NumPy array alive), a NumPy array (NumPy results) or a torch tensor (torch results). The
``voxels``, ``indices`` and ``num_per_voxel`` attributes are the last results ([M] rows;
spconv's are its preallocated [max_num_voxels] buffers).

``Point2VoxelGPU{1,2,3,4}d`` take the same arguments and offer ``point_to_voxel_hash(points,
clear_voxels=True, empty_mean=False, stream_int=0)``; on torch tensors they run on the
tensors' device. Their voxel order is first appearance, as on the CPU (spconv's GPU order
is its hash table's, unspecified).

Differences: ``empty_mean`` fills with each voxel's true mean (spconv 2.3.8 adds the
previous voxel's mean into every voxel's sum after the first); no dense cell table
(``densehashdata``) is kept; ``clear_voxels`` is accepted, padding is always zero."""
import numpy as np
import torch

from ...functional.voxelize import grid_size, voxelize


def _tensorview():
    import importlib
    return importlib.import_module("cumm.tensorview")


def _owned_tensorview(array: np.ndarray):
    """A tensorview tensor holding its own copy of ``array`` (an empty one has no data to own)."""
    t = _tensorview().from_numpy(array)
    return t.clone() if array.size else t


def _as_torch(points):
    """(torch tensor, kind) for a tensorview tensor, NumPy array or torch tensor."""
    if isinstance(points, torch.Tensor):
        return points, "torch"
    if isinstance(points, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(points)), "numpy"
    if hasattr(points, "numpy_view"):
        if getattr(points, "device", -1) != -1:
            raise ValueError("points: a GPU tensorview tensor cannot be read here; pass a torch tensor instead")
        return torch.from_numpy(np.ascontiguousarray(points.numpy_view())), "tv"
    raise ValueError(f"points: expected a cumm.tensorview Tensor, a NumPy array or a torch tensor, got "
                     f"{type(points).__name__}")


def fill_empty_with_mean(voxels: torch.Tensor, num_points: torch.Tensor) -> None:
    """Writes each voxel's mean point into its unused slots (``empty_mean``). The sum runs
    over the slots in order, in the voxels' dtype, then is divided by the count (spconv's
    arithmetic for its first voxel)."""
    if voxels.shape[0] == 0:
        return
    valid = torch.arange(voxels.shape[1], device=voxels.device)[None, :] < num_points[:, None].long()
    total = voxels[:, 0].clone()
    for j in range(1, voxels.shape[1]):
        total += voxels[:, j] * valid[:, j, None]
    mean = total / num_points.clamp(min=1)[:, None].to(voxels.dtype)
    empty = ~valid
    voxels[empty] = mean[:, None, :].expand_as(voxels)[empty]


def calc_meta_data_for(ndim, vsize_xyz, coors_range_xyz):
    """spconv's ``calc_meta_data``: (vsize, grid_size, grid_stride, coors_range), all in
    (z, y, x) order, the floats as float32 values."""
    if len(vsize_xyz) != ndim or len(coors_range_xyz) != 2 * ndim:
        raise ValueError(f"vsize_xyz / coors_range_xyz: expected {ndim} and {2 * ndim} values, got "
                         f"{list(vsize_xyz)} and {list(coors_range_xyz)}")
    grid = grid_size(vsize_xyz, coors_range_xyz)[::-1]
    stride, prod = [0] * ndim, 1
    for i in range(ndim - 1, -1, -1):
        stride[i] = prod
        prod *= grid[i]
    f32 = [float(np.float32(v)) for v in coors_range_xyz]
    return ([float(np.float32(v)) for v in vsize_xyz][::-1], grid, stride, f32[:ndim][::-1] + f32[ndim:][::-1])


class _Point2VoxelCPU:
    NDIM = 3

    def __init__(self, vsize_xyz, coors_range_xyz, num_point_features: int, max_num_voxels: int,
                 max_num_points_per_voxel: int):
        self._vsize_xyz = [float(v) for v in vsize_xyz]
        self._coors_range_xyz = [float(v) for v in coors_range_xyz]
        self._grid = calc_meta_data_for(self.NDIM, self._vsize_xyz, self._coors_range_xyz)[1]
        for name, value in (("num_point_features", num_point_features), ("max_num_voxels", max_num_voxels),
                            ("max_num_points_per_voxel", max_num_points_per_voxel)):
            if int(value) < 1:
                raise ValueError(f"{name}: expected >= 1, got {value}")
        self._shape = (int(max_num_voxels), int(max_num_points_per_voxel), int(num_point_features))
        self._last = (np.zeros((0,) + self._shape[1:], np.float32), np.zeros((0, self.NDIM), np.int32),
                      np.zeros((0,), np.int32))

    @classmethod
    def calc_meta_data(cls, vsize_xyz, coors_range_xyz):
        return calc_meta_data_for(cls.NDIM, vsize_xyz, coors_range_xyz)

    @property
    def grid_size(self):
        return list(self._grid)

    @property
    def voxels(self):
        return _owned_tensorview(self._last[0])

    @property
    def indices(self):
        return _owned_tensorview(self._last[1])

    @property
    def num_per_voxel(self):
        return _owned_tensorview(self._last[2])

    def point_to_voxel(self, points, clear_voxels: bool = True):
        return self._run(points, False)

    def point_to_voxel_empty_mean(self, points, clear_voxels: bool = True):
        return self._run(points, True)

    def _voxelize(self, pts: torch.Tensor, empty_mean: bool):
        max_voxels, max_points, features = self._shape
        if pts.dim() != 2 or pts.shape[1] != features:
            raise ValueError(f"points: expected [N, {features}] (num_point_features columns), got {tuple(pts.shape)}")
        if pts.shape[0] == 0:   # spconv returns no voxels for no points
            return (pts.new_zeros((0, max_points, features), dtype=torch.float32),
                    torch.zeros((0, self.NDIM), dtype=torch.int32, device=pts.device),
                    torch.zeros((0,), dtype=torch.int32, device=pts.device))
        r = voxelize(pts, self._vsize_xyz, self._coors_range_xyz, max_points, max_voxels)
        voxels = r.voxels.to(torch.float32)
        if empty_mean:
            fill_empty_with_mean(voxels, r.num_points)
        return voxels, r.coordinates[:, 1:].contiguous(), r.num_points

    def _run(self, points, empty_mean: bool):
        pts, kind = _as_torch(points)
        result = self._voxelize(pts, empty_mean)
        if kind == "torch":
            return result
        self._last = tuple(t.cpu().numpy() for t in result)
        if kind == "numpy":
            return self._last
        return tuple(_owned_tensorview(a) for a in self._last)


class _Point2VoxelGPU(_Point2VoxelCPU):
    def point_to_voxel_hash(self, points, clear_voxels: bool = True, empty_mean: bool = False, stream_int: int = 0):
        return self._run(points, empty_mean)


def _named(base, ndim, prefix):
    return type(f"{prefix}{ndim}d", (base,), {"NDIM": ndim, "__module__": __name__})


Point2VoxelCPU1d, Point2VoxelCPU2d, Point2VoxelCPU3d, Point2VoxelCPU4d = (
    _named(_Point2VoxelCPU, d, "Point2VoxelCPU") for d in (1, 2, 3, 4))
Point2VoxelGPU1d, Point2VoxelGPU2d, Point2VoxelGPU3d, Point2VoxelGPU4d = (
    _named(_Point2VoxelGPU, d, "Point2VoxelGPU") for d in (1, 2, 3, 4))


def __getattr__(name):
    raise AttributeError(f"spconv.utils.{name} is not provided by mx_sparse (it provides the Point2Voxel classes)")
