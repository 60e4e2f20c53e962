"""``spconv.test_utils``: the helpers spconv's own test suite imports (``TestCase`` with numpy
array assertions, ``params_grid``, ``generate_sparse_data``), so that suite runs unmodified
under ``patch_spconv()``. Same signatures and results as spconv 2.3.8's module: sparse data
comes from the global numpy generator in the same order of draws, indices carry the batch
index in their last column, the dense copy is ``[B, C, *shape]``."""
import itertools
import unittest

import numpy as np


def _array(a) -> np.ndarray:
    return a if isinstance(a, np.ndarray) else np.array(a)


class TestCase(unittest.TestCase):
    def assertAllEqual(self, a, b):
        """a and b (arrays or what converts to one) have one shape and equal values (NaN
        equals NaN in float arrays)."""
        a, b = _array(a), _array(b)
        self.assertEqual(a.shape, b.shape, f"Shape mismatch: expected {a.shape}, got {b.shape}.")
        np.testing.assert_array_equal(a, b)

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg: str = ""):
        """Element-wise |a - b| <= atol + rtol * |b|; a and b may be dicts of arrays with the
        same keys (not nested)."""
        if isinstance(a, dict) != isinstance(b, dict):
            raise ValueError(f"Can't compare dict to non-dict, {a} vs {b}. {msg}")
        if isinstance(a, dict):
            self.assertCountEqual(a.keys(), b.keys(), msg=f"mismatched keys, expected {a.keys()}, got {b.keys()}. {msg}")
            for k in a:
                self._assert_close(a[k], b[k], rtol, atol, f"{k}: {msg}")
        else:
            self._assert_close(a, b, rtol, atol, msg)

    def _assert_close(self, a, b, rtol, atol, msg):
        a, b = _array(a), _array(b)
        self.assertEqual(a.shape, b.shape, f"Shape mismatch: expected {a.shape}, got {b.shape}.")
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=msg)


def params_grid(*params):
    """Every combination of the given value lists, the last list varying fastest."""
    return [list(combo) for combo in itertools.product(*params)]


def generate_sparse_data(shape, num_points, num_channels, integer=False, data_range=(-1, 1), with_dense=True,
                         dtype=np.float32, shape_scale=1):
    """Random sparse data: ``num_points[b]`` distinct voxels of ``shape`` for each batch item b
    (coordinates multiples of ``shape_scale``), ``num_channels`` features drawn uniformly from
    ``data_range`` (integers when ``integer``). Returns ``{"features": [N, C], "indices": [N,
    ndim + 1] int32 (coordinates, then the batch index), "features_dense": [B, C, *shape]}``."""
    ndim = len(shape)
    num_points = np.array(num_points)
    # every candidate coordinate, in numpy meshgrid's default (x-y) order; each batch item
    # shuffles the same list again and takes its first num_points[b] rows
    grid = np.stack(np.meshgrid(*[np.arange(0, s // shape_scale) for s in shape]), axis=-1)
    candidates = grid.reshape(-1, ndim) * shape_scale
    per_batch = []
    for b, n in enumerate(num_points):
        np.random.shuffle(candidates)
        chosen = candidates[:n]
        per_batch.append(np.concatenate([chosen, np.full((chosen.shape[0], 1), b, chosen.dtype)], axis=1))
    size = [int(num_points.sum()), num_channels]
    if integer:
        features = np.random.randint(data_range[0], data_range[1], size=size).astype(dtype)
    else:
        features = np.random.uniform(data_range[0], data_range[1], size=size).astype(dtype)
    result = {"features": features}
    indices = np.concatenate(per_batch, axis=0)
    if with_dense:
        dense = np.zeros([len(num_points), num_channels, *shape], dtype=features.dtype)
        # advanced indices around a slice: the indexed view is [N, C], one row per voxel
        dense[(indices[:, -1], slice(None), *indices[:, :-1].T)] = features
        result["features_dense"] = dense.astype(dtype)
    result["indices"] = indices.astype(np.int32)
    return result
