"""Checkpoints: module state dicts in both weight layouts and optimizer state round-trip
through torch.save / torch.load(weights_only=True); SparseConvTensor (with its map cache)
round-trips through pickle, deepcopy and torch.save; resuming from a checkpoint gives
bitwise the step that not stopping gives."""
import copy
import io
import pickle
import warnings

import pytest
import torch
from torch import nn

import mx_sparse
import mx_sparse.compat.spconv2.pytorch as spconv
from helpers import random_features, random_voxels
from mx_sparse.nn import packed_map
from mx_sparse.models import SparseUNet

SHAPE = [21, 24, 24]


def scene(seed, batch_size=2):
    idx = random_voxels(SHAPE, batch_size, density=0.05, seed=seed)
    return random_features(idx.shape[0], 4, torch.float32, seed=seed), idx


def net(surface):
    """subm, strided, subm, inverse with BatchNorm/ReLU, from ``surface``'s layers: mx_sparse
    (weights [*k, Cin, Cout], RSCK) or the spconv 2.x surface ([Cout, *k, Cin], KRSC)."""
    return surface.SparseSequential(
        surface.SubMConv3d(4, 16, 3, indice_key="s1"), nn.BatchNorm1d(16), nn.ReLU(),
        surface.SparseConv3d(16, 32, 3, stride=2, padding=1, indice_key="d1"), nn.BatchNorm1d(32), nn.ReLU(),
        surface.SubMConv3d(32, 32, (3, 1, 3), indice_key="s2"), nn.BatchNorm1d(32), nn.ReLU(),
        surface.SparseInverseConv3d(32, 16, 3, indice_key="d1"))


NETS = {"RSCK": lambda: net(mx_sparse), "KRSC": lambda: net(spconv)}


def saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def run(net, seed, tensor_class=mx_sparse.SparseConvTensor):
    f, idx = scene(seed)
    return net(tensor_class(f, idx, SHAPE, 2)).features


@pytest.mark.parametrize("layout", ["RSCK", "KRSC"])
def test_state_dict_round_trip_weights_only(layout):
    torch.manual_seed(0)
    net = NETS[layout]().train()
    run(net, 1)   # BatchNorm running statistics move away from their initial values
    net.eval()
    loaded = NETS[layout]()
    loaded.load_state_dict(saved(net.state_dict()))
    loaded.eval()
    assert loaded[0].weight.shape == net[0].weight.shape
    assert (loaded[0].weight.shape[0] == 16) == (layout == "KRSC")
    for k, v in net.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    assert torch.equal(run(loaded, 2), run(net, 2))


@pytest.mark.parametrize("src,dst", [("RSCK", "KRSC"), ("KRSC", "RSCK")])
def test_checkpoint_loads_into_the_other_layout(src, dst):
    """The layout recorded in the state dict's metadata survives torch.save/weights_only load,
    so a checkpoint of either surface loads into the other and computes the same."""
    torch.manual_seed(0)
    net = NETS[src]().eval()
    other = NETS[dst]().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # the recorded layout is not ambiguous: no warning
        other.load_state_dict(saved(net.state_dict()))
    out, expected = run(other, 3), run(net, 3)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5 * expected.abs().max().item())


def train_steps(net, opt, sched, seeds):
    for seed in seeds:
        loss = run(net, seed).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def make_training(layout):
    torch.manual_seed(0)
    net = NETS[layout]().train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return net, opt, sched


@pytest.mark.parametrize("layout", ["RSCK", "KRSC"])
def test_resume_gives_the_step_not_stopping_gives(layout):
    net, opt, sched = make_training(layout)
    train_steps(net, opt, sched, [10, 11, 12])
    checkpoint = saved({"model": net.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict()})
    train_steps(net, opt, sched, [13, 14])                 # not stopping

    resumed, ropt, rsched = make_training(layout)          # a new process would start here
    resumed.load_state_dict(checkpoint["model"])
    ropt.load_state_dict(checkpoint["optimizer"])
    rsched.load_state_dict(checkpoint["scheduler"])
    assert len(ropt.state) == len(list(net.parameters()))  # Adam's moments came back
    train_steps(resumed, ropt, rsched, [13, 14])
    for k, v in net.state_dict().items():
        assert torch.equal(resumed.state_dict()[k], v), k
    for a, b in zip(opt.state.values(), ropt.state.values()):
        assert all(torch.equal(a[s], b[s]) for s in ("exp_avg", "exp_avg_sq", "step"))
    assert rsched.get_last_lr() == sched.get_last_lr()


def whole_module_round_trip(net):
    """torch.save of a module object (not a state dict) needs weights_only=False: its classes
    are code, which torch only unpickles from a trusted file."""
    buf = io.BytesIO()
    torch.save(net, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def test_whole_module_save_load():
    torch.manual_seed(0)
    net = SparseUNet(4).eval()
    loaded = whole_module_round_trip(net)
    f, idx = scene(4)
    x = lambda: mx_sparse.SparseConvTensor(f, idx, SHAPE, 2)  # noqa: E731
    assert torch.equal(loaded(x()).features, net(x()).features)


COPIES = {
    "pickle": lambda x: pickle.loads(pickle.dumps(x)),
    "deepcopy": copy.deepcopy,
    "torch.save weights_only": saved,
}


@pytest.mark.parametrize("how", list(COPIES))
@pytest.mark.parametrize("grad", [True, False], ids=["training", "no_grad"])
def test_sparse_conv_tensor_round_trip_with_map_cache(how, grad):
    """After a forward pass the tensor's indice_dict holds the maps (in training some held
    packed); the copy has the same fields, reuses its copied maps (none rebuilt), and gives
    the same outputs and gradients."""
    torch.manual_seed(0)
    net = SparseUNet(4)
    f, idx = scene(5)
    x = mx_sparse.SparseConvTensor(f.clone().requires_grad_(grad), idx, SHAPE, 2)
    with torch.set_grad_enabled(grad):
        net(x)
    cache = dict(x.indice_dict)
    assert len(cache) == 7 and (not grad or any(not d._nbr.is_dense for d in cache.values()))

    y = COPIES[how](x)
    assert type(y) is type(x) and y.spatial_shape == x.spatial_shape and y.batch_size == x.batch_size
    assert torch.equal(y.indices, x.indices) and torch.equal(y.features, x.features)
    assert y.features.requires_grad == grad
    assert list(y.indice_dict) == list(cache)
    for key, data in cache.items():
        copied = y.indice_dict[key]
        assert copied is not data and torch.equal(copied.nbr, data.nbr) and copied.describe() == data.describe()
        assert packed_map.packed_form(copied.nbr) is not None   # held again: autograd saves it packed
    copied_maps = {k: id(v) for k, v in y.indice_dict.items()}

    with torch.set_grad_enabled(grad):
        out_x, out_y = net(x), net(y)
    assert torch.equal(out_x.features, out_y.features)
    assert {k: id(v) for k, v in y.indice_dict.items()} == copied_maps   # reused, not rebuilt
    if grad:
        out_x.features.square().sum().backward()
        out_y.features.square().sum().backward()
        assert torch.equal(x.features.grad, y.features.grad)


def test_spconv_surface_tensor_round_trips_weights_only():
    f, idx = scene(6)
    x = spconv.SparseConvTensor(f, idx, SHAPE, 2, force_algo=spconv.ConvAlgo.Native)
    y = saved(x)
    assert type(y) is spconv.SparseConvTensor and y.force_algo is spconv.ConvAlgo.Native
    assert torch.equal(y.features, x.features) and torch.equal(y.indices, x.indices)
