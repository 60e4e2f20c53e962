"""spconv 2.3.8 behaviour that client code relies on, checked against spconv itself:
``replace_feature`` with another row count (VoxelNeXt, Pointcept), inverse convolutions built
without ``indice_key`` (mmcv's build_conv_layer, spconv's tests), ``spconv.test_utils``."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import mx_sparse

from .conftest import compare_outputs, make_tensor, oracle, ours, random_input, real, record


def _voxelnext_merge(api, net, idx, f, shape):
    """VoxelNeXt's pattern: replace the features with more rows, then assign matching indices,
    then run a layer on the result."""
    x, _ = make_tensor(api, idx, f, shape, 2, requires_grad=False)
    extra = idx.clone()
    extra[:, 1] = (extra[:, 1] + 1) % shape[0]              # other voxels of the same batch items
    keep = ~torch.isin(extra[:, 1] * 10 ** 6 + extra[:, 2] * 1000 + extra[:, 3] + extra[:, 0] * 10 ** 9,
                       idx[:, 1] * 10 ** 6 + idx[:, 2] * 1000 + idx[:, 3] + idx[:, 0] * 10 ** 9)
    extra = extra[keep]
    y = x.replace_feature(torch.cat([x.features, f[keep] * 2]))
    assert y.features.shape[0] != y.indices.shape[0]        # accepted, as spconv accepts it
    y.indices = torch.cat([x.indices, extra])
    return net(y)


def test_replace_feature_accepts_another_row_count_like_spconv():
    idx, f = random_input(real, [6, 7, 8], channels=3, density=0.2, seed=3)
    net_r = real.SubMConv3d(3, 5, 3, indice_key="m").double()
    net_o = ours.SubMConv3d(3, 5, 3, indice_key="m").double()
    net_o.load_state_dict(net_r.state_dict())
    with oracle():
        out_r = _voxelnext_merge(real, net_r, idx, f.double(), [6, 7, 8])
    out_o = _voxelnext_merge(ours, net_o, idx, f.double(), [6, 7, 8])
    record("replace_feature with another row count, then indices (VoxelNeXt pattern)",
           compare_outputs(out_o, out_r, 1e-10))


@pytest.mark.parametrize("api", [mx_sparse, ours], ids=["mx_sparse", "spconv surface"])
def test_replace_feature_errors(api):
    idx, f = random_input(real, [4, 4, 4], channels=2, density=0.3)
    x = api.SparseConvTensor(f, idx, [4, 4, 4], 2)
    with pytest.raises(AssertionError):                     # spconv rejects a non-2-D tensor too
        real.SparseConvTensor(f, idx, [4, 4, 4], 2).replace_feature(f[:, :, None])
    with pytest.raises(ValueError, match=r"features: expected shape \[N, C\], got"):
        x.replace_feature(f[:, :, None])
    with pytest.raises(ValueError, match="features: expected a torch.Tensor"):
        x.replace_feature(f.numpy())
    y = x.replace_feature(f[:-1])                           # rows differ and stay so: the layer says it
    conv = api.SubMConv3d(2, 2, 3, indice_key="k")
    with pytest.raises(ValueError, match=r"input.features: expected \d+ rows .* assign the matching indices"):
        conv(y)
    z = x.replace_feature(f * 2)                            # same voxels, same map cache
    assert z.indice_dict is x.indice_dict and z.indices is x.indices and type(z) is type(x)


@pytest.mark.parametrize("name", ["SparseInverseConv2d", "SparseInverseConv3d"])
def test_inverse_conv_constructible_without_indice_key(name):
    # spconv's signature has indice_key positional but takes None (its tests pass None); mmcv's
    # and mx_driving's default it to None (mmcv's build_conv_layer passes no key)
    real_layer = getattr(real, name)(4, 8, 3, None)
    for api in (mx_sparse, ours, mx_sparse.ops):
        layer = getattr(api, name)(4, 8, 3, None) if api is ours else getattr(api, name)(4, 8, 3)
        assert layer.indice_key is None and tuple(layer.weight.shape) in {(3,) * layer.ndim + (4, 8),
                                                                           tuple(real_layer.weight.shape)}
        ndim = layer.ndim
        idx, f = random_input(real, [4] * ndim, channels=4, density=0.5)
        x = api.SparseConvTensor(f, idx, [4] * ndim, 2)
        with pytest.raises(ValueError, match=f"indice_key: {name} was built without one"):
            layer(x)


def test_spconv_test_utils_match_spconv():
    from spconv import test_utils as theirs

    from mx_sparse.compat.spconv2 import test_utils as mine
    for args, kw in [(([9, 8, 7], [30, 20], 4), {}),
                     (([6, 10], [5, 7, 3], 2), dict(integer=True, data_range=(0, 5), shape_scale=2)),
                     (([4, 5, 6], [10], 3), dict(with_dense=False, dtype=np.float64))]:
        np.random.seed(3)
        a = theirs.generate_sparse_data(*args, **kw)
        np.random.seed(3)
        b = mine.generate_sparse_data(*args, **kw)
        assert a.keys() == b.keys()
        for k in a:
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
    assert mine.params_grid([1, 2], [3, 4, 5], [6]) == theirs.params_grid([1, 2], [3, 4, 5], [6])
    t = mine.TestCase()
    t.assertAllClose({"a": [1.0, 2.0]}, {"a": [1.0, 2.0 + 1e-9]})
    t.assertAllEqual([1.0, np.nan], [1.0, np.nan])
    with pytest.raises(AssertionError):
        t.assertAllClose([1.0], [1.1])
    with pytest.raises(AssertionError):
        t.assertAllEqual([[1, 2]], [1, 2])


def test_spconv_test_utils_importable_after_patch_spconv():
    code = textwrap.dedent("""
        import mx_sparse
        mx_sparse.patch_spconv()
        from spconv.test_utils import TestCase, generate_sparse_data, params_grid
        import spconv.test_utils
        assert spconv.test_utils.__name__ == "mx_sparse.compat.spconv2.test_utils"
        print("OK")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]
