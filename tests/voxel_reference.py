"""A plain reference of voxelization, written as the peers describe it: one pass over the
points in input order (per sample), a dict from cell to voxel row, the first ``max_voxels``
new cells of a sample kept, the first ``max_points`` points of a voxel stored. Cells follow
spconv's / mmcv's arithmetic in NumPy float32 (float64 for float64 points):
``floor((p - min) / size)``, extents ``round_half_away((max - min) / size)``.

Returns NumPy arrays shaped like the ops' outputs (coordinates with the batch column)."""
import math

import numpy as np


def extents(voxel_size, point_cloud_range):
    nd = len(voxel_size)
    out = []
    for j in range(nd):
        lo, hi, size = (np.float32(point_cloud_range[j]), np.float32(point_cloud_range[nd + j]),
                        np.float32(voxel_size[j]))
        q = np.float32(np.float32(hi - lo) / size)
        out.append(int(math.floor(float(q) + 0.5)))   # q >= 0: floor(q + 0.5) is roundf(q)
    return out


def cells(points: np.ndarray, voxel_size, point_cloud_range):
    """[N, ndim] cell per point axis (x, y, z...) and an [N] in-range mask."""
    nd = len(voxel_size)
    acc = np.float64 if points.dtype == np.float64 else np.float32
    lo = np.array([np.float32(v) for v in point_cloud_range[:nd]]).astype(acc)
    size = np.array([np.float32(v) for v in voxel_size]).astype(acc)
    with np.errstate(invalid="ignore"):
        c = np.floor((points[:, :nd].astype(acc) - lo) / size)
    ext = np.array(extents(voxel_size, point_cloud_range))
    inside = np.all((c >= 0) & (c < ext), axis=1)
    return np.where(inside[:, None], c, 0).astype(np.int64), inside


def voxelize(points, voxel_size, point_cloud_range, max_points=None, max_voxels=None, batch=None):
    """(voxels or None, coordinates [M, 1+ndim] int32, num_points [M] int32, point_voxel [N] int64)."""
    points = np.asarray(points)
    n, c = points.shape
    nd = len(voxel_size)
    cell, inside = cells(points, voxel_size, point_cloud_range)
    batch = np.zeros(n, np.int64) if batch is None else np.asarray(batch, np.int64)
    coords, rows_of, point_voxel = [], [], np.full(n, -1, np.int64)
    for b in sorted(set(batch.tolist())):
        row_of_cell = {}
        for i in np.nonzero(batch == b)[0]:
            if not inside[i]:
                continue
            key = tuple(cell[i][::-1])
            if key not in row_of_cell:
                if max_voxels is not None and len(row_of_cell) >= max_voxels:
                    point_voxel[i] = -2
                    continue
                row_of_cell[key] = len(coords)
                coords.append((b,) + key)
                rows_of.append([])
            point_voxel[i] = row_of_cell[key]
            rows_of[row_of_cell[key]].append(i)
    m = len(coords)
    coordinates = np.array(coords, np.int32).reshape(m, 1 + nd)
    if max_points is None:
        return None, coordinates, np.array([len(r) for r in rows_of], np.int32), point_voxel
    voxels = np.zeros((m, max_points, c), points.dtype)
    num = np.zeros(m, np.int32)
    for v, rows in enumerate(rows_of):
        kept = rows[:max_points]
        voxels[v, :len(kept)] = points[kept]
        num[v] = len(kept)
    return voxels, coordinates, num, point_voxel


def scene_points(seed=0, n=20000, voxel_size=(0.2, 0.2, 0.4), point_cloud_range=(-8, -8, -2, 8, 8, 2), channels=4,
                 dtype=np.float32):
    """Points that stress the cell rule: uniform ones, clusters (many points per voxel),
    points on exact cell boundaries (k * size + min, also one float32 step below / above)
    and points outside the range on every side."""
    rng = np.random.default_rng(seed)
    nd = len(voxel_size)
    lo = np.array(point_cloud_range[:nd], np.float64)
    hi = np.array(point_cloud_range[nd:], np.float64)
    size = np.array(voxel_size, np.float64)
    parts = [rng.uniform(lo - 0.5, hi + 0.5, (n // 2, nd))]
    centres = rng.uniform(lo, hi, (n // 100 + 1, nd))
    parts.append(centres[rng.integers(0, len(centres), n // 4)] + rng.normal(0, size.min(), (n // 4, nd)))
    k = rng.integers(0, np.round((hi - lo) / size).astype(np.int64) + 1, (n // 4, nd))
    edge = (lo + k * size).astype(np.float32)
    step = rng.integers(-1, 2, edge.shape)   # one float32 ulp down, none, up
    edge = np.where(step < 0, np.nextafter(edge, np.float32(-np.inf)),
                    np.where(step > 0, np.nextafter(edge, np.float32(np.inf)), edge))
    parts.append(edge)
    xyz = np.concatenate(parts)
    xyz = xyz[rng.permutation(len(xyz))]
    extra = rng.normal(0, 1, (len(xyz), channels - nd))
    return np.concatenate([xyz, extra], 1).astype(dtype)
