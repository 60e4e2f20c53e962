"""Sparse convolutions against dense float64 torch convolutions (the independent
reference in dense_reference.py): output voxel sets, values, and the gradients of
features, weight and bias, over a grid of kernel/stride/padding/dilation/groups.

Through the NPU path on CPU (MXS_NPU_ON_CPU=1, tests/ascend/test_npu_on_cpu.py) the grid runs in
float32 (DTYPE): the AscendC kernels have no float64 path; the dense reference then runs in float32
too and the float32 tolerances apply."""
import itertools

import pytest
import torch

import mx_sparse
from mx_sparse._accelerator import registration
from dense_reference import conv_reference, inverse_reference, subm_reference
from helpers import random_features, random_voxels, rows_as_set

SHAPE3 = [6, 7, 8]
BATCH = 3  # sample 1 is empty
DTYPE = torch.float32 if registration.npu_on_cpu_requested() else torch.float64


def make_input(shape=SHAPE3, batch=BATCH, cin=4, dtype=DTYPE, seed=0):
    idx = random_voxels(shape, batch, density=0.25, empty_batches=(1,), seed=seed)
    feats = random_features(idx.shape[0], cin, dtype, seed + 1).requires_grad_()
    return mx_sparse.SparseConvTensor(feats, idx, shape, batch)


def grads(outputs, params, seed=5):
    g = torch.Generator().manual_seed(seed)
    upstream = torch.randn(outputs.shape, generator=g, dtype=torch.float64).to(outputs.dtype)
    return torch.autograd.grad(outputs, params, upstream, allow_unused=True)


def assert_close(a, b, dtype=DTYPE):
    tol = {torch.float64: (1e-10, 1e-10), torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-2),
           torch.bfloat16: (5e-2, 5e-2)}[dtype]
    torch.testing.assert_close(a.double(), b.double(), rtol=tol[0], atol=tol[1] * max(1.0, b.abs().max().item()))


KERNELS = [1, 2, 3, 5, (1, 3, 3), (3, 1, 1), (2, 3, 1)]
GROUPS = [(4, 6, 1), (4, 6, 2), (4, 4, 4)]  # (cin, cout, groups); last is depthwise


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("cin,cout,groups", GROUPS)
def test_subm_matches_dense(kernel, dilation, cin, cout, groups):
    x = make_input(cin=cin)
    conv = mx_sparse.SubMConv3d(cin, cout, kernel, dilation=dilation, groups=groups).to(DTYPE)
    y = conv(x)
    assert torch.equal(y.indices, x.indices)  # submanifold keeps the input order
    ref = subm_reference(x.features, x.indices, SHAPE3, BATCH, conv.weight, conv.bias, conv.dilation, groups)
    assert_close(y.features, ref)
    params = [x.features, conv.weight, conv.bias]
    for a, b in zip(grads(y.features, params), grads(ref, params)):
        assert_close(a, b)


STRIDED = [(k, s, p, d) for k, s, p, d in itertools.product(
    [1, 2, 3, (1, 3, 3), (3, 1, 1)], [1, 2, (2, 1, 1)], [0, 1, (0, 1, 1)], [1, 2])]


@pytest.mark.parametrize("kernel,stride,padding,dilation", STRIDED)
def test_strided_conv_matches_dense(kernel, stride, padding, dilation):
    x = make_input(cin=4)
    conv = mx_sparse.SparseConv3d(4, 6, kernel, stride=stride, padding=padding, dilation=dilation, groups=2).to(DTYPE)
    y = conv(x)
    ref, ref_idx, ref_shape = conv_reference(x.features, x.indices, SHAPE3, BATCH, conv.weight, conv.bias,
                                             conv.stride, conv.padding, conv.dilation, 2)
    assert y.spatial_shape == ref_shape
    assert torch.equal(y.indices, ref_idx)  # same set, and canonical (batch, *spatial) order
    assert_close(y.features, ref)
    params = [x.features, conv.weight, conv.bias]
    for a, b in zip(grads(y.features, params), grads(ref, params)):
        assert_close(a, b)


@pytest.mark.parametrize("kernel,stride,padding,dilation", [
    (3, 2, 1, 1), (2, 2, 0, 1), (3, (2, 1, 1), (0, 1, 1), 1), ((1, 3, 3), 2, 0, 1), (3, 1, 1, 2), (3, 2, 0, 1)])
@pytest.mark.parametrize("cin,cout,groups", [(6, 4, 1), (6, 4, 2)])
def test_inverse_conv_matches_dense(kernel, stride, padding, dilation, cin, cout, groups):
    x = make_input(cin=4)
    down = mx_sparse.SparseConv3d(4, cin, kernel, stride=stride, padding=padding, dilation=dilation,
                                  indice_key="down").to(DTYPE)
    up = mx_sparse.SparseInverseConv3d(cin, cout, kernel, groups=groups, indice_key="down").to(DTYPE)
    mid = down(x)
    mid_feats = mid.features.detach().requires_grad_()
    y = up(mid.replace_feature(mid_feats))
    assert torch.equal(y.indices, x.indices) and y.spatial_shape == SHAPE3
    ref = inverse_reference(mid_feats, mid.indices, mid.spatial_shape, BATCH, up.weight, up.bias, x.indices, SHAPE3,
                            down.stride, down.padding, down.dilation, groups)
    assert_close(y.features, ref)
    params = [mid_feats, up.weight, up.bias]
    for a, b in zip(grads(y.features, params), grads(ref, params)):
        assert_close(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("kind", ["subm", "conv"])
def test_reduced_precision_against_float64(dtype, kind):
    x64 = make_input(cin=8, seed=3)
    if kind == "subm":
        conv = mx_sparse.SubMConv3d(8, 16, 3).double()
    else:
        conv = mx_sparse.SparseConv3d(8, 16, 3, stride=2, padding=1).double()
    ref = conv(x64)
    xd = x64.features.detach().to(dtype).requires_grad_()
    conv_d = conv.to(dtype)
    y = conv_d(mx_sparse.SparseConvTensor(xd, x64.indices, SHAPE3, BATCH))
    assert y.features.dtype == dtype
    assert torch.equal(y.indices, ref.indices)
    # reference from the same rounded inputs, computed in float64
    conv64 = mx_sparse.SubMConv3d(8, 16, 3) if kind == "subm" else mx_sparse.SparseConv3d(8, 16, 3, stride=2, padding=1)
    conv64 = conv64.double()
    conv64.load_state_dict({k: v.double() for k, v in conv_d.state_dict().items()})
    x_round = xd.detach().double().requires_grad_()
    ref = conv64(mx_sparse.SparseConvTensor(x_round, x64.indices, SHAPE3, BATCH))
    assert_close(y.features, ref.features, dtype)
    gd = grads(y.features, [xd, conv_d.weight])
    g64 = grads(ref.features, [x_round, conv64.weight])
    for a, b in zip(gd, g64):
        assert a.dtype == dtype
        assert_close(a, b, dtype)


@pytest.mark.parametrize("ndim,shape", [(1, [23]), (2, [9, 11])])
def test_other_ranks_match_dense(ndim, shape):
    from dense_reference import conv_reference as conv_ref
    idx = random_voxels(shape, 2, density=0.3, seed=7)
    feats = random_features(idx.shape[0], 3, DTYPE).requires_grad_()
    x = mx_sparse.SparseConvTensor(feats, idx, shape, 2)
    subm = mx_sparse.SparseConvolution(ndim, 3, 5, 3, subm=True).to(DTYPE)
    ref = subm_reference(feats, idx, shape, 2, subm.weight, subm.bias, subm.dilation, 1)
    assert_close(subm(x).features, ref)
    conv = mx_sparse.SparseConvolution(ndim, 3, 5, 3, stride=2, padding=1).to(DTYPE)
    y = conv(x)
    ref, ref_idx, _ = conv_ref(feats, idx, shape, 2, conv.weight, conv.bias, conv.stride, conv.padding,
                               conv.dilation, 1)
    assert torch.equal(y.indices, ref_idx)
    assert_close(y.features, ref)


def test_4d_subm_matches_hand_computed_sum():
    """No dense 4D conv in torch: check each output against the definition directly."""
    shape = [4, 3, 4, 3]
    idx = random_voxels(shape, 1, density=0.4, seed=11)
    feats = random_features(idx.shape[0], 2)
    conv = mx_sparse.SubMConv4d(2, 3, 3).double()
    y = conv(mx_sparse.SparseConvTensor(feats, idx, shape, 1)).features
    lookup = {tuple(r): i for i, r in enumerate(idx.tolist())}
    w = conv.weight.detach()
    expected = torch.zeros_like(y)
    for i, row in enumerate(idx.tolist()):
        expected[i] = conv.bias.detach()
        for off in itertools.product(range(3), repeat=4):
            j = lookup.get((row[0], *[c + o - 1 for c, o in zip(row[1:], off)]))
            if j is not None:
                expected[i] += feats[j] @ w[off]
    torch.testing.assert_close(y, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["subm", "conv", "inverse"])
def test_gradcheck_float64(kind):
    """First and second derivatives w.r.t. features, weight and bias by finite differences."""
    shape = [4, 5, 4]
    idx = random_voxels(shape, 2, density=0.35, seed=2)
    feats = random_features(idx.shape[0], 4).requires_grad_()
    down = mx_sparse.SparseConv3d(4, 4, 3, stride=2, padding=1, indice_key="k").double()
    layer = {"subm": lambda: mx_sparse.SubMConv3d(4, 4, 3, groups=2),
             "conv": lambda: mx_sparse.SparseConv3d(4, 4, 3, stride=2, padding=1, groups=2),
             "inverse": lambda: mx_sparse.SparseInverseConv3d(4, 2, 3, indice_key="k")}[kind]().double()

    def run(f, w, b):
        x = mx_sparse.SparseConvTensor(f, idx, shape, 2)
        if kind == "inverse":
            x = down(x)
        return torch.func.functional_call(layer, {"weight": w, "bias": b}, (x,)).features

    args = (feats, layer.weight.detach().clone().requires_grad_(), layer.bias.detach().clone().requires_grad_())
    assert torch.autograd.gradcheck(run, args)
    assert torch.autograd.gradgradcheck(run, args)
