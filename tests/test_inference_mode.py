"""Every shipped backbone and every surface runs under ``torch.inference_mode()``, ``torch.no_grad()``
and grad mode, in eval and train mode, with the same outputs (and the same running statistics
after a training-mode pass) as grad mode gives. The fused BatchNorm+ReLU path and the map caches
read tensor versions, which inference tensors do not have (issue 28: every BatchNorm+ReLU net
raised "Inference tensors do not track version counter" under inference_mode)."""
import contextlib
import copy

import pytest
import torch
from torch import nn

import mx_sparse
from mx_sparse.models import SparseUNet, VoxelBackBone8x, VoxelResBackBone8x

MODES = {"inference_mode": torch.inference_mode, "no_grad": torch.no_grad, "grad": contextlib.nullcontext}


def scene(seed=0, shape=(41, 32, 32), n=600, batch_size=2, channels=4):
    g = torch.Generator().manual_seed(seed)
    keys = torch.randperm(batch_size * shape[0] * shape[1] * shape[2], generator=g)[:n].sort().values
    cols = []
    for s in reversed(shape):
        cols.append(keys % s)
        keys = keys // s
    idx = torch.stack([keys] + cols[::-1], 1).int()
    return idx, torch.randn(n, channels, generator=g), list(shape), batch_size


def run(model, make_input, mode, train):
    model = copy.deepcopy(model).train(train)
    with MODES[mode]():
        out = model(make_input())
    feats = out.features if hasattr(out, "features") else out
    stats = [b.clone() for b in model.buffers()]
    return feats.clone(), stats


def core_input(surface=mx_sparse):
    idx, f, shape, bs = scene()
    return lambda: surface.SparseConvTensor(f.clone(), idx.clone(), shape, bs)


def check_all_modes(model, make_input):
    for train in (False, True):
        ref_out, ref_stats = run(model, make_input, "grad", train)
        for mode in ("inference_mode", "no_grad"):
            out, stats = run(model, make_input, mode, train)
            assert torch.equal(out, ref_out), (mode, train)
            for a, b in zip(stats, ref_stats):
                assert torch.equal(a, b), (mode, train)


@pytest.mark.parametrize("make", [VoxelBackBone8x, VoxelResBackBone8x, SparseUNet])
def test_core_backbones_every_mode(make):
    torch.manual_seed(0)
    check_all_modes(make(4), core_input())


def test_bn_relu_block_and_handwritten_block():
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(4, 8, 3, indice_key="a"), nn.BatchNorm1d(8), nn.ReLU())
    check_all_modes(net, core_input())
    x = torch.randn(50, 4)
    for train in (True, False):
        bn, relu = nn.BatchNorm1d(4).train(train), nn.ReLU()
        ours, theirs = copy.deepcopy(bn), copy.deepcopy(bn)
        with torch.inference_mode():
            y = mx_sparse.bn_relu(x, ours, relu)
        assert torch.allclose(y, relu(theirs(x)), atol=1e-6)
        assert torch.allclose(ours.running_mean, theirs.running_mean) and torch.equal(ours.num_batches_tracked,
                                                                                     theirs.num_batches_tracked)


def test_spconv_and_mmcv_surfaces_every_mode():
    from mx_sparse import ops as mmcv_ops
    from mx_sparse.compat.spconv2 import pytorch as spconv

    torch.manual_seed(0)
    for surface in (spconv, mmcv_ops):
        net = surface.SparseSequential(
            surface.SubMConv3d(4, 8, 3, indice_key="s1"), nn.BatchNorm1d(8), nn.ReLU(),
            surface.SparseConv3d(8, 16, 3, 2, 1, indice_key="d1"), nn.BatchNorm1d(16), nn.ReLU(),
            surface.SparseInverseConv3d(16, 8, 3, indice_key="d1"), nn.BatchNorm1d(8), nn.ReLU(),
            surface.SparseMaxPool3d(2, 2))
        check_all_modes(net, core_input(surface))
    import mx_sparse.spconv as mx_driving   # the mx_driving surface (the core layers under its names)
    net = mx_driving.SparseSequential(mx_driving.SubMConv3d(4, 8, 3, indice_key="s1"), nn.BatchNorm1d(8), nn.ReLU(),
                                      mx_driving.SparseConv3d(8, 8, 3, 2, 1, indice_key="d1"), nn.BatchNorm1d(8),
                                      nn.ReLU(), mx_driving.SparseInverseConv3d(8, 4, 3, indice_key="d1"))
    check_all_modes(net, core_input(mx_driving))


def test_inference_mode_output_then_grad_mode_like_torch():
    """Features made under inference_mode and then used in grad mode: torch refuses to save them
    for backward; the fused path says the same, not a version-counter error."""
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(4, 8, 3), nn.BatchNorm1d(8), nn.ReLU())
    with torch.inference_mode():
        x = core_input()()
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        net(x)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        nn.Sequential(nn.Linear(4, 8))(x.features)   # torch's own wording, for comparison
