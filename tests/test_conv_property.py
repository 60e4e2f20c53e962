"""Property test: random grids, voxel sets and layer parameters against the dense
float64 reference (hypothesis explores what the fixed grid does not)."""
import torch
from hypothesis import given, settings, strategies as st

import mx_sparse
from dense_reference import conv_reference, subm_reference
from helpers import random_features, random_voxels

axis = st.integers(min_value=1, max_value=3)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(3, 7), min_size=3, max_size=3), batch=st.integers(1, 3),
       kernel=st.tuples(axis, axis, axis), stride=st.tuples(axis, axis, axis),
       padding=st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1)),
       dilation=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2)),
       density=st.floats(0.05, 0.6), seed=st.integers(0, 10_000), subm=st.booleans())
def test_random_layers_match_dense(shape, batch, kernel, stride, padding, dilation, density, seed, subm):
    out_shape = [(s + 2 * p - d * (k - 1) - 1) // st_ + 1
                 for s, k, st_, p, d in zip(shape, kernel, stride, padding, dilation)]
    if not subm and min(out_shape) < 1:
        return  # rejected with a ValueError, covered by the validation tests
    idx = random_voxels(shape, batch, density=density, seed=seed)
    feats = random_features(idx.shape[0], 3, seed=seed + 1)
    x = mx_sparse.SparseConvTensor(feats, idx, shape, batch)
    if subm:
        conv = mx_sparse.SubMConv3d(3, 2, kernel, dilation=dilation).double()
        ref = subm_reference(feats, idx, shape, batch, conv.weight, conv.bias, conv.dilation, 1)
        torch.testing.assert_close(conv(x).features, ref, rtol=1e-10, atol=1e-10)
    else:
        conv = mx_sparse.SparseConv3d(3, 2, kernel, stride=stride, padding=padding, dilation=dilation).double()
        y = conv(x)
        ref, ref_idx, _ = conv_reference(feats, idx, shape, batch, conv.weight, conv.bias, conv.stride,
                                         conv.padding, conv.dilation, 1)
        assert torch.equal(y.indices, ref_idx)
        torch.testing.assert_close(y.features, ref, rtol=1e-10, atol=1e-10)
