"""Op-by-op parity of the spconv-2.x surface with spconv 2.3.8 (CPU): same state_dict, same
input; output voxel sets, output features and the gradients of the input features and
of every parameter agree within 1e-4 relative."""
import warnings

import pytest
import torch

from .conftest import (compare_outputs, coord_grad, make_tensor, oracle, ours, random_input, real, record,
                       rel_err)

TOL = 1e-4

# name -> (factory(api) -> module, spatial_shape, in_channels, non-negative input)
CASES = {
    "SubMConv1d": (lambda sp: sp.SubMConv1d(4, 6, 3, indice_key="s"), [40], 4, False),
    "SubMConv2d_k5": (lambda sp: sp.SubMConv2d(4, 6, 5, bias=False), [12, 11], 4, False),
    "SubMConv3d": (lambda sp: sp.SubMConv3d(4, 8, 3, indice_key="s"), [8, 9, 10], 4, False),
    "SubMConv3d_k313_dil2": (lambda sp: sp.SubMConv3d(4, 8, (3, 1, 3), dilation=2), [8, 9, 10], 4, False),
    "SubMConv4d": (lambda sp: sp.SubMConv4d(3, 5, 3), [4, 5, 4, 5], 3, False),
    "SparseConv1d_s2": (lambda sp: sp.SparseConv1d(4, 6, 3, 2, 1), [40], 4, False),
    "SparseConv2d_s2p1": (lambda sp: sp.SparseConv2d(4, 6, 3, 2, 1), [12, 11], 4, False),
    "SparseConv3d_s2p1": (lambda sp: sp.SparseConv3d(4, 8, 3, 2, 1, bias=False), [8, 9, 10], 4, False),
    "SparseConv3d_k311_s211": (lambda sp: sp.SparseConv3d(4, 8, (3, 1, 1), (2, 1, 1)), [9, 6, 7], 4, False),
    "SparseConv3d_k2s2": (lambda sp: sp.SparseConv3d(4, 8, 2, 2), [8, 9, 10], 4, False),
    "SparseConv3d_dil2_p2": (lambda sp: sp.SparseConv3d(4, 8, 3, 1, 2, 2), [8, 9, 10], 4, False),
    "SparseConv4d_s2": (lambda sp: sp.SparseConv4d(3, 5, 3, 2, 1), [5, 6, 5, 4], 3, False),
    "SparseConvTranspose2d_s2p1": (lambda sp: sp.SparseConvTranspose2d(4, 6, 3, 2, 1), [7, 6], 4, False),
    "SparseConvTranspose3d_s2p1": (lambda sp: sp.SparseConvTranspose3d(4, 6, 3, 2, 1), [5, 6, 5], 4, False),
    "SparseConvTranspose3d_k2s2": (lambda sp: sp.SparseConvTranspose3d(4, 6, 2, 2, bias=False), [5, 6, 5], 4, False),
    "SparseConvTranspose3d_k3s1": (lambda sp: sp.SparseConvTranspose3d(4, 6, 3), [5, 6, 5], 4, False),
    # kernel volume 1: spconv's 1x1 path (weight buffer read as [Cin, Cout]) and the normal path
    "SubMConv3d_1x1": (lambda sp: sp.SubMConv3d(4, 8, 1), [8, 9, 10], 4, False),
    "SparseConv3d_1x1": (lambda sp: sp.SparseConv3d(4, 8, 1), [8, 9, 10], 4, False),
    "SparseConv3d_1x1_s2": (lambda sp: sp.SparseConv3d(4, 8, 1, 2), [8, 9, 10], 4, False),
    "SparseInverseConv3d_1x1": (lambda sp: sp.SparseSequential(sp.SparseConv3d(4, 6, 1, indice_key="k"),
                                                               sp.SparseInverseConv3d(6, 5, 1, indice_key="k")),
                                [8, 9, 10], 4, False),
    "SparseInverseConv3d": (lambda sp: sp.SparseSequential(sp.SparseConv3d(4, 8, 3, 2, 1, indice_key="d"),
                                                           sp.SparseInverseConv3d(8, 5, 3, indice_key="d")),
                            [8, 9, 10], 4, False),
    "SparseInverseConv2d": (lambda sp: sp.SparseSequential(sp.SparseConv2d(4, 8, 3, 2, 0, indice_key="d"),
                                                           sp.SparseInverseConv2d(8, 5, 3, indice_key="d")),
                            [12, 11], 4, False),
    # spconv 2.3.8's CPU max pool starts from 0 (a true max only for non-negative inputs, e.g. after ReLU)
    "SparseMaxPool3d_k2": (lambda sp: sp.SparseMaxPool3d(2), [8, 9, 10], 4, True),
    "SparseMaxPool3d_k3s2p1": (lambda sp: sp.SparseMaxPool3d(3, 2, 1), [8, 9, 10], 4, True),
    "SparseMaxPool2d_k3s1": (lambda sp: sp.SparseMaxPool2d(3, 1, 1), [12, 11], 4, True),
    "SparseMaxPool3d_inverse": (lambda sp: sp.SparseSequential(sp.SparseMaxPool3d(2, indice_key="p"),
                                                               sp.SparseInverseConv3d(4, 6, 2, indice_key="p")),
                                [8, 9, 10], 4, True),
    "seq_BatchNorm_ReLU": (lambda sp: sp.SparseSequential(sp.SubMConv3d(4, 8, 3, bias=False), sp.SparseBatchNorm(8),
                                                          sp.SparseReLU(), sp.SparseConv3d(8, 6, 3, 2, bias=False),
                                                          torch.nn.BatchNorm1d(6), torch.nn.ReLU()),
                           [8, 9, 10], 4, False),
}


def _run(api, module, idx, f, shape):
    x, leaf = make_tensor(api, idx, f, shape, 2)
    y = module(x)
    y.features.backward(coord_grad(y))
    return y, leaf.grad


@pytest.mark.parametrize("name", list(CASES))
def test_op_parity(name):
    factory, shape, cin, positive = CASES[name]
    torch.manual_seed(0)
    mod_r = factory(real)
    torch.manual_seed(0)
    mod_o = factory(ours)
    sd = mod_r.state_dict()
    assert sd.keys() == mod_o.state_dict().keys()
    for k, v in sd.items():     # same seed, same initial numbers (spconv's init, KRSC layout)
        assert v.shape == mod_o.state_dict()[k].shape, k
        if k.endswith("weight") or k.endswith("bias"):
            assert torch.allclose(v, mod_o.state_dict()[k]), k
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # spconv's own layout: no conversion, no warning
        mod_o.load_state_dict(sd, strict=True)
    idx, f = random_input(real, shape, channels=cin, seed=3, positive=positive)
    with oracle():
        y_r, g_r = _run(real, mod_r, idx, f, shape)
    y_o, g_o = _run(ours, mod_o, idx, f, shape)
    assert type(y_o).__name__ == "SparseConvTensor"
    errs = [compare_outputs(y_o, y_r, TOL)]
    errs.append(rel_err(g_o, g_r))
    assert errs[-1] <= TOL, f"input grad: {errs[-1]:.3g}"
    params_r = dict(mod_r.named_parameters())
    for k, p in mod_o.named_parameters():
        errs.append(rel_err(p.grad, params_r[k].grad))
        assert errs[-1] <= TOL, f"{k}.grad: {errs[-1]:.3g}"
    record(f"op {name}", *errs)


def test_spconv_1x1_quirk_is_reproduced():
    """spconv 2.3.8 multiplies 1x1 (stride 1) features by the KRSC buffer read as [Cin, Cout]:
    for Cin != Cout that is NOT the transposed matrix; we give the same numbers."""
    torch.manual_seed(0)
    r = real.SubMConv3d(3, 5, 1, bias=False)
    o = ours.SubMConv3d(3, 5, 1, bias=False)
    o.load_state_dict(r.state_dict())
    idx, f = random_input(real, [4, 4, 4], channels=3)
    with oracle():
        y_r = r(real.SparseConvTensor(f, idx, [4, 4, 4], 2))
    y_o = o(ours.SparseConvTensor(f, idx, [4, 4, 4], 2))
    assert torch.allclose(y_o.features, y_r.features, atol=1e-6)
    assert torch.allclose(y_r.features, f @ r.weight.detach().reshape(3, 5), atol=1e-6)
    assert not torch.allclose(y_r.features, f @ r.weight.detach().reshape(5, 3).t(), atol=1e-3)


def test_global_and_avg_pools_against_reference():
    """spconv 2.3.8's CPU wheel runs neither (global pools: 'not implemented in cpu-only
    spconv'; SparseAvgPool: implicit-GEMM only), so these are checked against a direct
    computation."""
    idx, f = random_input(real, [6, 7, 8], channels=3, seed=5)
    x = ours.SparseConvTensor(f, idx, [6, 7, 8], 2)
    gmax = ours.SparseGlobalMaxPool()(x)
    gavg = ours.SparseGlobalAvgPool()(x)
    for b in range(2):
        sel = idx[:, 0] == b
        assert torch.allclose(gmax[b], f[sel].max(0).values)
        assert torch.allclose(gavg[b], f[sel].mean(0))
    y = ours.SparseAvgPool3d(2)(x)      # stride defaults to kernel_size, as in spconv
    dense = x.dense(channels_first=False)
    mask = torch.zeros(dense.shape[:-1])
    mask[tuple(idx.long().t())] = 1
    for row, coord in zip(y.features, y.indices.tolist()):
        b, z, yy, xx = coord
        win = (b, slice(2 * z, 2 * z + 2), slice(2 * yy, 2 * yy + 2), slice(2 * xx, 2 * xx + 2))
        n = mask[win].sum()
        assert n > 0
        assert torch.allclose(row, dense[win].reshape(-1, 3).sum(0) / n, atol=1e-6)


def test_sparse_add_and_tensor_api():
    idx, f = random_input(real, [5, 6, 7], channels=3, seed=1)
    half = idx.shape[0] // 2
    a_r = real.SparseConvTensor(f[:half + 10], idx[:half + 10], [5, 6, 7], 2)
    b_r = real.SparseConvTensor(f[half:], idx[half:], [5, 6, 7], 2)
    a_o = ours.SparseConvTensor(f[:half + 10], idx[:half + 10], [5, 6, 7], 2)
    b_o = ours.SparseConvTensor(f[half:], idx[half:], [5, 6, 7], 2)
    s_r = real.functional.sparse_add(a_r, b_r)
    s_o = ours.functional.sparse_add(a_o, b_o)
    compare_outputs(s_o, s_r, 1e-6)
    # dense, from_dense (NHWC), minus, select_by_index, shadow_copy, +, +=
    assert torch.equal(a_o.dense(), a_r.dense())
    assert torch.equal(a_o.dense(channels_first=False), a_r.dense(channels_first=False))
    d = a_r.dense(channels_first=False)
    fd_r, fd_o = real.SparseConvTensor.from_dense(d), ours.SparseConvTensor.from_dense(d)
    assert isinstance(fd_o, ours.SparseConvTensor)
    compare_outputs(fd_o, fd_r, 0)
    assert torch.equal(a_o.minus().features, a_r.minus().features)
    sel = torch.arange(0, half, 3)
    # (spconv 2.3.8's own select_by_index raises: it assigns .features, which its setter forbids)
    assert torch.equal(a_o.select_by_index(sel).indices, a_r.indices[sel])
    assert torch.equal(a_o.select_by_index(sel).features, a_r.features[sel])
    assert a_o.select_by_index(sel).indice_dict == {}
    sc = a_o.shadow_copy()
    assert sc.features is a_o.features and sc.indice_dict is a_o.indice_dict
    assert torch.equal((a_o + a_o).features, (a_r + a_r).features)
    assert torch.equal((a_o.features + a_o).features, 2 * a_o.features)
    c = a_o.shadow_copy()
    c += a_o
    assert torch.equal(c.features, 2 * a_o.features) and torch.equal(a_o.features, f[:half + 10])
    assert a_o.spatial_size == a_r.spatial_size
    a_o.indices = a_o.indices.clone()          # mutable, like spconv
    ext = ours.SparseConvTensor(f, idx, [5, 6, 7], 2, None, None, {"k": 1}, False)
    assert ext.find_indice_pair("k") == 1 and ext.voxel_num is None and ext.benchmark is False


def test_dense_modules_match():
    """ToDense / RemoveGrid / SparseIdentity after a strided conv: the dense result does not
    depend on voxel order, so it is compared directly."""
    shape = [8, 9, 10]
    idx, f = random_input(real, shape, channels=4, seed=4)
    outs = []
    for api, ctx in ((real, oracle), (ours, None)):
        torch.manual_seed(0)
        net = api.SparseSequential(api.SparseConv3d(4, 6, 3, 2, 1), api.SparseIdentity(), api.RemoveGrid(),
                                   api.ToDense())
        if ctx:
            with ctx():
                outs.append(net(api.SparseConvTensor(f, idx, shape, 2)))
        else:
            outs.append(net(api.SparseConvTensor(f, idx, shape, 2)))
    assert outs[0].shape == outs[1].shape == (2, 6, 4, 5, 5)
    err = rel_err(outs[1], outs[0])
    assert err <= TOL
    record("op ToDense/RemoveGrid/SparseIdentity", err)
