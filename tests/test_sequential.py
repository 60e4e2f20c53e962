"""SparseSequential, fused() (conv + BatchNorm1d folding) and ToDense."""
from collections import OrderedDict

import torch
from torch import nn

import mx_sparse
from helpers import random_features, random_voxels


def make_input(seed=0):
    idx = random_voxels([6, 6, 6], 2, density=0.3, seed=seed)
    return mx_sparse.SparseConvTensor(random_features(idx.shape[0], 4, torch.float32), idx, [6, 6, 6], 2)


def trained_stats_net():
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(4, 8, 3, indice_key="s1"), nn.BatchNorm1d(8), nn.ReLU(),
        mx_sparse.SparseSequential(mx_sparse.SparseConv3d(8, 8, 3, stride=2, padding=1, bias=False),
                                   nn.BatchNorm1d(8)),
        mx_sparse.SubMConv3d(8, 4, 3), nn.BatchNorm1d(4, affine=False))
    net.train()
    for s in range(3):  # give BatchNorm non-trivial running statistics
        net(make_input(s))
    return net.eval()


def test_sequential_applies_dense_modules_to_features(monkeypatch):
    net = trained_stats_net()
    x = make_input(7)
    monkeypatch.setattr(mx_sparse.SparseSequential, "fuse_bn_relu", False)   # exact: torch's modules
    y = net(x)
    manual = net[0](x)
    manual = manual.replace_feature(net[2](net[1](manual.features)))
    manual = net[3](manual)
    manual = net[4](manual)
    manual = manual.replace_feature(net[5](manual.features))
    torch.testing.assert_close(y.features, manual.features, rtol=0, atol=0)


def test_fused_matches_unfused_in_eval():
    net = trained_stats_net()
    fused = net.fused()
    kinds = [type(m).__name__ for m in fused.modules()]
    assert "BatchNorm1d" not in kinds
    x = make_input(9)
    torch.testing.assert_close(fused(x).features, net(x).features, rtol=1e-5, atol=1e-5)


def test_ordered_dict_names_to_dense_and_empty_input():
    net = mx_sparse.SparseSequential(OrderedDict(conv=mx_sparse.SubMConv3d(4, 2, 3), bn=nn.BatchNorm1d(2)),
                                     dense=mx_sparse.ToDense())
    assert list(dict(net.named_children())) == ["conv", "bn", "dense"]
    x = make_input()
    out = net(x)
    assert out.shape == (2, 2, 6, 6, 6)
    empty = mx_sparse.SparseConvTensor(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.int32), [6, 6, 6], 2)
    assert net(empty).abs().sum() == 0  # BatchNorm is skipped on zero voxels, in training mode too


def test_empty_input_still_runs_channel_changing_modules():
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(4, 8, 3), nn.BatchNorm1d(8), nn.Linear(8, 16),
                                     mx_sparse.SubMConv3d(16, 2, 3))
    empty = mx_sparse.SparseConvTensor(torch.zeros(0, 4), torch.zeros(0, 4, dtype=torch.int32), [6, 6, 6], 1)
    assert net.train()(empty).features.shape == (0, 2)


def test_inference_builds_no_transposed_maps_and_training_does():
    from mx_sparse import functional as F
    idx = random_voxels([8, 9, 10], 2, density=0.2, seed=11)
    feats = torch.randn(idx.shape[0], 3)
    net = mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(3, 4, 3, indice_key="s1"),
        mx_sparse.SparseConv3d(4, 5, 3, stride=2, padding=1, indice_key="d1"),
        mx_sparse.SparseInverseConv3d(5, 4, 3, indice_key="d1"))
    x = mx_sparse.SparseConvTensor(feats, idx, [8, 9, 10], 2)
    with torch.no_grad():
        y = net(x)
    # only the inverse conv needed a transpose (its forward map)
    assert not y.indice_dict["s1"].has_transpose
    d1 = y.indice_dict["d1"]
    assert d1.has_transpose and torch.equal(d1.nbr_t, F.transpose_map(d1.nbr, d1.in_indices.shape[0]))
    # the same outputs with autograd; the inverse conv caches d1's transpose (its forward map),
    # the symmetric submanifold map needs none (input gradient on nbr with reversed weights)
    x2 = mx_sparse.SparseConvTensor(feats.clone().requires_grad_(), idx, [8, 9, 10], 2)
    y2 = net(x2)
    torch.testing.assert_close(y2.features, y.features, rtol=0, atol=0)
    assert not y2.indice_dict["s1"].has_transpose
    d1 = y2.indice_dict["d1"]
    assert d1.has_transpose and torch.equal(d1.nbr_t, F.transpose_map(d1.nbr, d1.in_indices.shape[0]))
    y2.features.sum().backward()
    assert not y2.indice_dict["s1"].has_transpose
    assert x2.features.grad is not None


def test_training_keeps_no_transposed_map():
    """Without an inverse conv, a strided layer's transpose is built inside backward and dropped:
    nothing in the indice_dict holds one, and the input gradient matches the explicit transpose."""
    from mx_sparse import functional as F
    idx = random_voxels([8, 9, 10], 2, density=0.2, seed=12)
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(3, 4, 3, indice_key="s1"),
                                     mx_sparse.SparseConv3d(4, 5, 3, stride=2, padding=1, indice_key="d1")).double()
    feats = torch.randn(idx.shape[0], 3, dtype=torch.float64, requires_grad=True)
    y = net(mx_sparse.SparseConvTensor(feats, idx, [8, 9, 10], 2))
    dy = torch.randn_like(y.features)
    y.features.backward(dy)
    assert not any(d.has_transpose for d in y.indice_dict.values())
    d1, s1 = y.indice_dict["d1"], y.indice_dict["s1"]
    h = net[0](mx_sparse.SparseConvTensor(feats.detach(), idx, [8, 9, 10], 2)).features.requires_grad_()
    w = net[1].weight.detach().reshape(27, 4, 5)
    dh = F.gather_mm(dy, w.transpose(1, 2).contiguous(), F.transpose_map(d1.nbr, h.shape[0]), d1.nbr, 1)
    w0 = net[0].weight.detach().reshape(27, 3, 4)
    dx = F.gather_mm(dh, w0.transpose(1, 2).contiguous(), F.transpose_map(s1.nbr, idx.shape[0]), s1.nbr, 1)
    torch.testing.assert_close(feats.grad, dx, rtol=1e-12, atol=1e-12)


def test_training_holds_unused_maps_packed_with_the_same_gradients(monkeypatch):
    """In grad mode a layer that moves on to another map releases the others (held packed), and
    autograd saves maps packed and unpacks them in backward; outputs and gradients are bitwise
    those of dense maps throughout. Inference releases nothing. Where the backend of CPU tensors
    holds maps dense (the CUDA path under MXS_CUDA_ON_CPU=1: the orchestration does not pack on
    CUDA), nothing is packed."""
    from mx_sparse.nn.indice_data import IndiceData
    from mx_sparse.nn.packed_map import PackedMap, _has_packing_kernels
    packs = _has_packing_kernels("cpu")
    idx = random_voxels([10, 11, 12], 2, density=0.25, seed=5)
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(3, 4, 3, indice_key="s1"), mx_sparse.SubMConv3d(4, 4, 3, indice_key="s1"),
        mx_sparse.SparseConv3d(4, 6, 3, stride=2, padding=1, indice_key="d1"),
        mx_sparse.SubMConv3d(6, 6, 3, indice_key="s2"), mx_sparse.SparseInverseConv3d(6, 4, 3, indice_key="d1"),
        mx_sparse.SubMConv3d(4, 2, 3, indice_key="s1")).double()
    feats = torch.randn(idx.shape[0], 3, dtype=torch.float64)

    def step():
        x = mx_sparse.SparseConvTensor(feats.clone().requires_grad_(), idx, [10, 11, 12], 2)
        y = net(x)
        dense = {k: d._nbr.is_dense for k, d in y.indice_dict.items()}
        y.features.square().sum().backward()
        return y.features.detach(), x.features.grad, [p.grad.clone() for p in net.parameters()], dense

    unpacked = []
    monkeypatch.setattr(PackedMap, "unpack", lambda self, f=PackedMap.unpack: unpacked.append(1) or f(self))
    y, dx, dws, dense = step()
    if packs:
        assert dense == {"s1": True, "d1": False, "s2": False}   # the last layer's map only
        assert len(unpacked) >= 6                                  # every conv's backward read a packed map
    else:
        assert all(dense.values()) and not unpacked
    net.zero_grad()
    monkeypatch.setattr(IndiceData, "release", lambda self: None)
    monkeypatch.setattr(mx_sparse.nn.saved_tensors, "packed_form", lambda t: None)
    y_ref, dx_ref, dws_ref, dense_ref = step()
    assert all(dense_ref.values())
    assert torch.equal(y, y_ref) and torch.equal(dx, dx_ref)
    assert all(torch.equal(a, b) for a, b in zip(dws, dws_ref))
    monkeypatch.undo()
    with torch.no_grad():
        out = net(mx_sparse.SparseConvTensor(feats, idx, [10, 11, 12], 2))
    assert all(d._nbr.is_dense for d in out.indice_dict.values())


def test_maps_and_fused_outputs_save_and_load_as_plain_tensors(tmp_path):
    """What mx_sparse tracks about a map or a fused BatchNorm+ReLU output lives outside the
    tensor, so both save and load (torch.load's default weights_only=True) as plain tensors."""
    idx = random_voxels([8, 9, 10], 2, density=0.25, seed=6)
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(3, 4, 3, indice_key="s1"), nn.BatchNorm1d(4), nn.ReLU(),
                                     mx_sparse.SparseConv3d(4, 4, 3, stride=2, padding=1, indice_key="d1"))
    x = mx_sparse.SparseConvTensor(torch.randn(idx.shape[0], 3, requires_grad=True), idx, [8, 9, 10], 2)
    y = net[:3](x)
    from mx_sparse.nn.batch_norm_relu import recipe_of
    assert recipe_of(y.features) is not None          # the fused step ran
    out = net[3](y)
    for name, t in (("features", y.features), ("s1", out.indice_dict["s1"].nbr), ("d1", out.indice_dict["d1"].nbr)):
        torch.save(t, tmp_path / f"{name}.pt")
        assert torch.equal(torch.load(tmp_path / f"{name}.pt"), t.detach())


def test_indice_data_interface_survives_packing():
    """IndiceData (also spconv.pytorch.core.IndiceData of the spconv surface): keyword
    construction, the map read back unchanged after release(), assignment of a new map
    (which drops a cached transpose)."""
    from mx_sparse import functional as F
    from mx_sparse.nn.indice_data import IndiceData
    idx = random_voxels([6, 7, 8], 2, density=0.3, seed=9)
    out_idx, nbr = F.build_conv_map(idx, [6, 7, 8], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    d = IndiceData(kind="conv", in_indices=idx, out_indices=out_idx, nbr=nbr.clone(), in_spatial_shape=[6, 7, 8],
                   out_spatial_shape=[3, 4, 4], kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1),
                   dilation=(1, 1, 1))
    nbr_t = d.nbr_t.clone()
    d.release()
    from mx_sparse.nn.packed_map import _has_packing_kernels    # not where CPU tensors run the CUDA path
    assert d._nbr.is_dense != _has_packing_kernels("cpu")
    assert torch.equal(d.nbr, nbr) and torch.equal(d.nbr_t, nbr_t)
    d.nbr = torch.full_like(nbr, -1)
    assert not d.has_transpose and (d.nbr == -1).all()


def test_fused_keeps_the_modules_it_does_not_fold():
    """As in mx_driving: only conv+BatchNorm pairs are replaced; other modules are the same
    objects, so gradients through the fused net reach their parameters."""
    conv, relu, tail = mx_sparse.SubMConv3d(4, 4, 3), nn.ReLU(), mx_sparse.SubMConv3d(4, 2, 3)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(4, 4, 3), nn.BatchNorm1d(4), conv, relu, tail)
    fused = net.fused()
    assert len(fused) == 4 and fused[1] is conv and fused[2] is relu and fused[3] is tail
    assert fused[0] is not net[0]
    fused(make_input(3)).features.sum().backward()
    assert tail.weight.grad is not None and net[0].weight.grad is None


def test_any_mode_but_mmcv_initialises_like_spconv():
    torch.manual_seed(5)
    a = mx_sparse.SubMConv3d(4, 6, 3, mode="spconv")
    b = mx_sparse.SubMConv3d(4, 6, 3, mode="mmcv")
    b.mode = None
    torch.manual_seed(5)
    b.reset_parameters()
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
