"""The layers evaluated at given output voxels (``layer(x, out_indices=...)``, mx_sparse/
nn/given_outputs.py): strided layers 1-3D and transposed layers 1-4D against torch's dense conv /
conv_transpose on the densified tensor sampled at the given outputs (forward, input and filter
gradients; float64 to 1e-12, float32 to 1e-5 relative to the largest value), the output grid
the layer derives, indice_key reuse that never mixes outputs, and the errors."""
import pytest
import torch
import torch.nn.functional as tF

import mx_sparse
from mx_sparse import SparseConvTensor
from mx_sparse.nn import given_outputs
from mx_sparse._accelerator import registration

from dense_reference import CONV, densify, sample, torch_weight, torch_weight_transposed
from helpers import random_voxels
from test_conv_transpose import conv_transpose_nd, crop

TOL = {torch.float64: 1e-12, torch.float32: 1e-5}
ON_ACCELERATOR_PATH = registration.cuda_on_cpu_requested() or registration.npu_on_cpu_requested()
# the NPU path's gathers (MXS_NPU_ON_CPU=1, AscendC kernels) have no float64
DTYPES = [torch.float32] if registration.npu_on_cpu_requested() else [torch.float64, torch.float32]
WORK = DTYPES[0]


def dense_output(layer, features, indices, shape, batch, weight, bias):
    """The layer's dense counterpart on its whole output grid: [B, Cout, *out_grid]."""
    nd = len(shape)
    begin, end = layer.pads_for(shape)
    x = densify(features, indices, shape, batch)
    if layer.transposed:
        w = torch_weight_transposed(weight, layer.groups)
        y = crop(conv_transpose_nd(x, w, layer.stride, layer.dilation, layer.groups), begin, end, layer.output_padding)
    else:
        pads = []
        for d in reversed(range(nd)):
            pads += [begin[d], end[d]]
        y = CONV[nd](tF.pad(x, pads), torch_weight(weight, layer.groups), None, layer.stride, 0, layer.dilation,
                     layer.groups)
    return y if bias is None else y + bias.view(1, -1, *[1] * nd)


def rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max().clamp(min=1e-30)).item() if want.numel() else 0.0


def check_at(layer, shape, dtype, out_density=0.4, seed=0, batch=2):
    """The layer at random outputs of its grid (most not reached by the derived map) vs dense."""
    torch.manual_seed(seed)
    layer = layer.to(dtype)
    idx = random_voxels(shape, batch, density=0.35, seed=seed)
    feats = torch.randn(idx.shape[0], layer.in_channels, dtype=dtype, requires_grad=True)
    x = SparseConvTensor(feats, idx, shape, batch)
    grid = given_outputs.output_grid(layer, x)
    out_idx = random_voxels(grid, batch, density=out_density, seed=seed + 1)
    y = layer(x, out_indices=out_idx)
    assert torch.equal(y.indices, out_idx) and y.spatial_shape == grid and y.batch_size == batch
    f64 = feats.detach().double().requires_grad_()
    w64 = layer.weight.detach().double().requires_grad_()
    b64 = None if layer.bias is None else layer.bias.detach().double()
    want = sample(dense_output(layer, f64, idx, shape, batch, w64, b64), out_idx)
    assert list(want.shape[1:]) == [layer.out_channels]
    g = torch.randn(want.shape, dtype=torch.float64)
    (y.features * g.to(dtype)).sum().backward()
    (want * g).sum().backward()
    errs = [rel_err(y.features.double(), want.detach()), rel_err(feats.grad.double(), f64.grad),
            rel_err(layer.weight.grad.double(), w64.grad)]
    assert max(errs) <= TOL[dtype], errs
    return max(errs)


# (class, shape, args, kwargs)
LAYERS = {
    "conv1d_k2_even": (mx_sparse.SparseConv1d, [11], (2, 3, 2, 1), {}),
    "conv2d_s2_asym": (mx_sparse.SparseConv2d, [7, 8], (3, 4, 3, 2), dict(pads_begin=[1, 0], pads_end=[0, 2])),
    "conv3d_s2_p1_groups": (mx_sparse.SparseConv3d, [6, 5, 6], (4, 6, 3, 2, 1), dict(groups=2)),
    "conv3d_k4_same_upper": (mx_sparse.SparseConv3d, [5, 6, 4], (2, 3, 4, 1), dict(auto_pad="same_upper")),
    "transpose1d_s3_op": (mx_sparse.SparseConvTranspose1d, [6], (2, 3, 4, 3, 1), dict(output_padding=2)),
    "transpose2d_s2_asym_dil": (mx_sparse.SparseConvTranspose2d, [5, 4], (3, 2, [3, 2], 2),
                                dict(pads_begin=[1, 0], pads_end=[0, 1], dilation=[1, 2], output_padding=1)),
    "transpose3d_k2_s2": (mx_sparse.SparseConvTranspose3d, [4, 3, 4], (3, 4, 2, 2), {}),
    "transpose4d_asym": (mx_sparse.SparseConvTranspose4d, [3, 3, 4, 3], (2, 3, [2, 3, 2, 2], [2, 1, 2, 1]),
                         dict(pads_begin=[0, 1, 1, 0], pads_end=[1, 0, 0, 1], output_padding=[1, 0, 1, 0])),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_at_given_outputs_equals_dense(name, dtype):
    cls, shape, args, kwargs = LAYERS[name]
    check_at(cls(*args, **kwargs), shape, dtype, seed=sum(map(ord, name)))


@pytest.mark.parametrize("transposed", [False, True])
def test_at_the_derived_outputs_equals_the_plain_layer(transposed):
    """Evaluated at the voxels the layer derives, the result is the plain layer's (bit for bit on the CPU
    kernels; the Triton gathers sum each row in an order that depends on its tile of rows)."""
    cls = mx_sparse.SparseConvTranspose3d if transposed else mx_sparse.SparseConv3d
    layer = cls(3, 4, 3, 2, 1).to(WORK)
    idx = random_voxels([5, 6, 4], 2, density=0.3, seed=3)
    x = SparseConvTensor(torch.randn(idx.shape[0], 3, dtype=WORK), idx, [5, 6, 4], 2)
    y = layer(x)
    perm = torch.randperm(y.indices.shape[0], generator=torch.Generator().manual_seed(1))
    z = layer(x, out_indices=y.indices[perm])
    same = torch.equal if not ON_ACCELERATOR_PATH else lambda a, b: torch.allclose(a, b, rtol=TOL[WORK], atol=TOL[WORK] * b.abs().max().item())
    assert same(z.features, y.features[perm]) and z.spatial_shape == y.spatial_shape
    w = layer(x, out_indices=y)        # a SparseConvTensor on the output grid: its voxels
    assert same(w.features, y.features)


def test_indice_key_never_mixes_outputs():
    idx = random_voxels([6, 6, 6], 2, density=0.3, seed=5)
    x = SparseConvTensor(torch.randn(idx.shape[0], 2, dtype=WORK), idx, [6, 6, 6], 2)
    a = mx_sparse.SparseConv3d(2, 3, 3, 2, 1, indice_key="down").to(WORK)
    b = mx_sparse.SparseConv3d(2, 4, 3, 2, 1, indice_key="down").to(WORK)
    grid = [3, 3, 3]                                  # (6 + 2 - 2 - 1) // 2 + 1
    outs = random_voxels(grid, 2, density=0.5, seed=6)
    ya = a(x, out_indices=outs)
    yb = b(x, out_indices=outs)                       # same voxels: the cached map is reused
    assert ya.find_indice_pair("down") is yb.find_indice_pair("down")
    others = random_voxels(grid, 2, density=0.5, seed=7)
    with pytest.raises(ValueError, match="indice_key 'down': the cached map was evaluated at other out_indices"):
        b(x, out_indices=others)
    with pytest.raises(ValueError, match="indice_key 'down': holds a map evaluated at given out_indices"):
        b(x)
    # the inverse conv with the key returns from the given outputs to the input voxels
    back = mx_sparse.SparseInverseConv3d(3, 2, 3, indice_key="down").to(WORK)(ya)
    assert torch.equal(back.indices, idx)
    # a derived map is not reused for given outputs either
    c = mx_sparse.SparseConv3d(2, 3, 3, 2, 1, indice_key="derived").to(WORK)
    y = c(x)
    with pytest.raises(ValueError, match="indice_key 'derived': holds a map of the output voxels a layer derives"):
        c(x, out_indices=y.indices)
    # the given outputs changed in place after the map was built from them
    outs[0, 1] = (outs[0, 1] + 1) % 3
    with pytest.raises(ValueError, match="indice_key 'down': the indices were modified in place"):
        b(x, out_indices=outs)


def value_error(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


def test_bad_out_indices_name_the_argument():
    idx = torch.tensor([[0, 1, 1, 1], [1, 2, 0, 3]], dtype=torch.int32)
    x = SparseConvTensor(torch.randn(2, 2), idx, [4, 4, 4], 2)
    conv = mx_sparse.SparseConv3d(2, 3, 3, 2, 1)                   # output grid [2, 2, 2]
    assert value_error(lambda: conv(x, out_indices=torch.tensor([[0, 2, 0, 0]], dtype=torch.int32))).startswith(
        "out_indices: row 0 is (batch, *coords) = (0, 2, 0, 0), expected 0 <= batch < batch_size (2) and "
        "0 <= coord < out_spatial_shape [2, 2, 2]")
    assert value_error(lambda: conv(x, out_indices=torch.tensor([[0, 1, 0, 0]] * 2, dtype=torch.int32))).startswith(
        "out_indices: duplicate voxel (0, 1, 0, 0) at row 1")
    assert value_error(lambda: conv(x, out_indices=torch.zeros(1, 4, dtype=torch.int64))).startswith(
        "out_indices: expected dtype int32")
    assert value_error(lambda: conv(x, out_indices=torch.zeros(1, 3, dtype=torch.int32))).startswith(
        "out_indices: expected shape [N, 4]")
    assert value_error(lambda: conv(x, out_indices=x)).startswith(
        "out_indices: a SparseConvTensor with spatial_shape [4, 4, 4], expected this layer's output grid [2, 2, 2]")
    with pytest.raises(TypeError, match="out_indices: expected a SparseConvTensor or an int32 tensor"):
        conv(x, out_indices=[[0, 0, 0, 0]])
    subm = mx_sparse.SubMConv3d(2, 3, 3)
    assert value_error(lambda: subm(x, out_indices=idx)).startswith(
        "out_indices: a submanifold convolution's output voxels are fixed")
