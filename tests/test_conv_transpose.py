"""SparseConvTranspose{1,2,3,4}d / SparseConvolution(transposed=True) and the ONNX/oneDNN padding
(pads_begin/pads_end, auto_pad) of the strided and transposed layers, against torch's dense
conv_transpose / conv on the densified tensor (tests/dense_reference.py): output voxels, features,
and both gradients; float64 to 1e-12, float32 to 1e-5 relative to the largest value. The 4D
reference is a sum of conv_transpose3d over the first axis's kernel positions.

Under MXS_CUDA_ON_CPU=1 every op here runs the CUDA backend's code (test_conv_transpose_cuda_path
runs the SMALL cases that way in a subprocess)."""
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as tF

import mx_sparse
from mx_sparse import SparseConvTensor

from dense_reference import CONV, densify, sample, torch_weight, torch_weight_transposed
from helpers import random_voxels

CONV_T = {1: tF.conv_transpose1d, 2: tF.conv_transpose2d, 3: tF.conv_transpose3d}
TOL = {torch.float64: 1e-12, torch.float32: 1e-5}
CLASSES = {1: mx_sparse.SparseConvTranspose1d, 2: mx_sparse.SparseConvTranspose2d,
           3: mx_sparse.SparseConvTranspose3d, 4: mx_sparse.SparseConvTranspose4d}


def conv_transpose_nd(x, w, stride, dilation, groups):
    """Dense transposed conv, no padding; 4D as conv_transpose3d per first-axis kernel position."""
    nd = x.dim() - 2
    if nd <= 3:
        return CONV_T[nd](x, w, None, stride, 0, 0, groups, dilation)
    k0, s0, d0 = w.shape[2], stride[0], dilation[0]
    parts = [CONV_T[3](x.select(2, i), w.select(2, kp), None, stride[1:], 0, 0, groups, dilation[1:])
             for i in range(x.shape[2]) for kp in range(k0)]
    full0 = (x.shape[2] - 1) * s0 + d0 * (k0 - 1) + 1
    out = x.new_zeros(x.shape[0], parts[0].shape[1], full0, *parts[0].shape[2:])
    for j, p in enumerate(parts):
        i, kp = divmod(j, k0)
        out = out.index_add(2, torch.tensor([i * s0 + kp * d0]), p.unsqueeze(2))
    return out


def crop(full, pb, pe, output_padding):
    """Output o of the padded transposed conv is full[o + pb]; output_padding beyond pads_end adds
    cells no input reaches (zeros)."""
    for d, (b, e, op) in enumerate(zip(pb, pe, output_padding)):
        axis = 2 + d
        extra = max(0, op - e)
        if extra:
            full = torch.cat([full, full.new_zeros(*full.shape[:axis], extra, *full.shape[axis + 1:])], axis)
        size = full.shape[axis] - extra - b - e + op
        full = full.narrow(axis, b, size)
    return full


def transposed_reference(features, indices, shape, batch, weight, bias, stride, pb, pe, dilation, op, groups):
    nd = len(shape)
    x = densify(features, indices, shape, batch)
    y = crop(conv_transpose_nd(x, torch_weight_transposed(weight, groups), stride, dilation, groups), pb, pe, op)
    occ = densify(torch.ones(indices.shape[0], 1, dtype=torch.float64), indices, shape, batch)
    ones = torch.ones(1, 1, *weight.shape[:nd], dtype=torch.float64)
    hit = crop(conv_transpose_nd(occ, ones, stride, dilation, 1), pb, pe, op)[:, 0] > 0
    out_idx = hit.nonzero().int()
    if bias is not None:
        y = y + bias.view(1, -1, *[1] * nd)
    return sample(y, out_idx), out_idx, list(y.shape[2:])


def conv_reference(features, indices, shape, batch, weight, bias, stride, pb, pe, dilation, groups):
    nd = len(shape)
    pads = []
    for d in reversed(range(nd)):
        pads += [pb[d], pe[d]]
    x = tF.pad(densify(features, indices, shape, batch), pads)
    y = CONV[nd](x, torch_weight(weight, groups), bias, stride, 0, dilation, groups)
    occ = tF.pad(densify(torch.ones(indices.shape[0], 1, dtype=torch.float64), indices, shape, batch), pads)
    hit = CONV[nd](occ, torch.ones(1, 1, *weight.shape[:nd], dtype=torch.float64), None, stride, 0, dilation)[:, 0] > 0
    out_idx = hit.nonzero().int()
    return sample(y, out_idx), out_idx, list(y.shape[2:])


def rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max().clamp(min=1e-30)).item() if want.numel() else 0.0


def check_layer(layer, shape, batch, dtype, reference, seed=0, density=0.4):
    """Forward and both gradients of ``layer`` against ``reference(features, indices, weight, bias)``;
    returns the worst relative error."""
    torch.manual_seed(seed)
    layer = layer.to(dtype)
    idx = random_voxels(shape, batch, density=density, seed=seed)
    feats = torch.randn(idx.shape[0], layer.in_channels, dtype=dtype, requires_grad=True)
    out = layer(SparseConvTensor(feats, idx, shape, batch))
    f64 = feats.detach().double().requires_grad_()
    w64 = layer.weight.detach().double().requires_grad_()
    b64 = layer.bias.detach().double() if layer.bias is not None else None
    want, want_idx, want_shape = reference(f64, idx, w64, b64)
    assert list(out.spatial_shape) == want_shape
    assert torch.equal(out.indices, want_idx)          # canonical (sorted) order, as nonzero() lists them
    g = torch.randn(want.shape, dtype=torch.float64)
    (out.features * g.to(dtype)).sum().backward()
    (want * g).sum().backward()
    errs = [rel_err(out.features.double(), want.detach()), rel_err(feats.grad.double(), f64.grad),
            rel_err(layer.weight.grad.double(), w64.grad)]
    assert max(errs) <= TOL[dtype], errs
    return max(errs)


# (ndim-shape, kernel, stride, pads_begin, pads_end, dilation, output_padding, groups, cin, cout)
TRANSPOSED = {
    "1d_s2_op1": ([9], [3], [2], [1], [0], [1], [1], 1, 3, 4),
    "1d_s3_k4_pads": ([7], [4], [3], [2], [1], [1], [2], 1, 2, 3),
    "2d_s2_asym_dil": ([6, 5], [3, 2], [2, 1], [1, 0], [0, 1], [1, 2], [1, 1], 1, 3, 2),
    "2d_s3_groups": ([5, 6], [3, 3], [3, 2], [0, 2], [1, 0], [1, 1], [2, 1], 2, 4, 6),
    "3d_s1_k3": ([5, 4, 6], [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 0], 1, 3, 4),
    "3d_s2_asym_op": ([4, 5, 3], [3, 2, 3], [2, 2, 3], [1, 0, 2], [0, 1, 1], [1, 1, 1], [1, 0, 2], 1, 2, 3),
    "3d_s2_dil2_groups": ([4, 4, 5], [3, 3, 2], [2, 1, 2], [2, 0, 1], [0, 2, 0], [2, 2, 1], [1, 1, 0], 3, 3, 6),
    "4d_s2_asym": ([3, 4, 3, 4], [2, 3, 2, 3], [2, 1, 3, 2], [0, 1, 1, 0], [1, 0, 0, 1], [1, 1, 1, 2],
                   [1, 0, 2, 1], 1, 2, 3),
}
SMALL = ["1d_s2_op1", "2d_s3_groups", "3d_s2_asym_op"]   # also run through the CUDA path (interpreted)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", list(TRANSPOSED))
def test_transposed_equals_dense_conv_transpose(name, dtype):
    shape, k, s, pb, pe, d, op, groups, cin, cout = TRANSPOSED[name]
    nd = len(shape)
    layer = mx_sparse.SparseConvolution(nd, cin, cout, k, s, 0, d, groups, True, output_padding=op,
                                        transposed=True, pads_begin=pb, pads_end=pe)
    ref = lambda f, i, w, b: transposed_reference(f, i, shape, 2, w, b, s, pb, pe, d, op, groups)  # noqa: E731
    check_layer(layer, shape, 2, dtype, ref, seed=sum(map(ord, name)))


@pytest.mark.parametrize("nd", [1, 2, 3, 4])
def test_named_classes_symmetric_padding(nd):
    shape = [6, 5, 4, 3][:nd]
    layer = CLASSES[nd](2, 3, 3, 2, 1, output_padding=1)
    assert layer.transposed and layer.weight.shape == (*[3] * nd, 2, 3)
    p, one = [1] * nd, [1] * nd
    ref = lambda f, i, w, b: transposed_reference(f, i, shape, 2, w, b, [2] * nd, p, p, one, one, 1)  # noqa: E731
    check_layer(layer, shape, 2, torch.float64, ref, seed=nd)


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower", "valid"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_transposed_auto_pad(nd, auto_pad):
    shape, k, s, d, op = [7, 5, 4][:nd], [4, 3, 3][:nd], [2, 2, 1][:nd], [1, 1, 2][:nd], [1, 0, 0][:nd]
    layer = CLASSES[nd](2, 3, k, s, dilation=d, output_padding=op, auto_pad=auto_pad)
    # ONNX ConvTranspose: output = input * stride; total = (k-1)*d + 1 + output_padding - stride
    total = [(kk - 1) * dd + 1 + o - ss for kk, dd, o, ss in zip(k, d, op, s)]
    if auto_pad == "valid":
        pb = pe = [0] * nd
    else:
        small, big = [t // 2 for t in total], [t - t // 2 for t in total]
        pb, pe = (small, big) if auto_pad == "same_upper" else (big, small)
        assert layer.pads_for(shape) == (tuple(pb), tuple(pe))
    ref = lambda f, i, w, b: transposed_reference(f, i, shape, 2, w, b, s, pb, pe, d, op, 1)  # noqa: E731
    check_layer(layer, shape, 2, torch.float64, ref, seed=7 * nd)
    if auto_pad != "valid":
        assert layer(SparseConvTensor(torch.zeros(1, 2, dtype=torch.float64), torch.zeros(1, 1 + nd).int(),
                                      shape, 1)).spatial_shape == [x * st for x, st in zip(shape, s)]


CONV_CASES = {
    "1d_asym": ([11], [3], [2], [0], [2], [1], 1),
    "2d_asym_dil": ([7, 8], [3, 2], [2, 3], [2, 0], [0, 1], [1, 2], 1),
    "3d_asym_groups": ([5, 6, 5], [3, 3, 3], [2, 1, 2], [1, 0, 2], [2, 1, 0], [1, 1, 1], 2),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", list(CONV_CASES))
def test_strided_asymmetric_pads_equal_dense_conv(name, dtype):
    shape, k, s, pb, pe, d, groups = CONV_CASES[name]
    layer = mx_sparse.SparseConvolution(len(shape), 4, 6, k, s, 0, d, groups, pads_begin=pb, pads_end=pe)
    ref = lambda f, i, w, b: conv_reference(f, i, shape, 2, w, b, s, pb, pe, d, groups)  # noqa: E731
    check_layer(layer, shape, 2, dtype, ref, seed=len(name))


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower", "valid"])
def test_strided_auto_pad_equals_dense_conv(auto_pad):
    shape, k, s, d = [7, 8, 5], [3, 4, 2], [2, 3, 1], [1, 1, 2]
    layer = mx_sparse.SparseConv3d(2, 3, k, s, dilation=d, auto_pad=auto_pad)
    if auto_pad == "valid":
        pb = pe = [0, 0, 0]
    else:   # ONNX Conv: output ceil(in / stride)
        total = [max(0, (-(-n // st) - 1) * st + (kk - 1) * dd + 1 - n) for n, st, kk, dd in zip(shape, s, k, d)]
        small, big = [t // 2 for t in total], [t - t // 2 for t in total]
        pb, pe = (small, big) if auto_pad == "same_upper" else (big, small)
    ref = lambda f, i, w, b: conv_reference(f, i, shape, 2, w, b, s, pb, pe, d, 1)  # noqa: E731
    check_layer(layer, shape, 2, torch.float64, ref, seed=3)
    if auto_pad != "valid":
        x = SparseConvTensor(torch.zeros(1, 2), torch.zeros(1, 4).int(), shape, 1)
        assert layer.float()(x).spatial_shape == [-(-n // st) for n, st in zip(shape, s)]


def test_indice_key_reuse_and_inverse_of_a_transposed_conv():
    idx = random_voxels([5, 4, 6], 2, density=0.3, seed=4)
    x = SparseConvTensor(torch.randn(idx.shape[0], 2, dtype=torch.float64), idx, [5, 4, 6], 2)
    up = mx_sparse.SparseConvTranspose3d(2, 3, 3, 2, 1, indice_key="up", output_padding=1).double()
    again = mx_sparse.SparseConvTranspose3d(2, 4, 3, 2, 1, indice_key="up", output_padding=1).double()
    y = up(x)
    z = again(x)
    assert torch.equal(y.indices, z.indices) and y.find_indice_pair("up") is z.find_indice_pair("up")
    back = mx_sparse.SparseInverseConv3d(3, 2, 3, indice_key="up").double()(y)
    assert torch.equal(back.indices, idx) and back.spatial_shape == [5, 4, 6]
    other = mx_sparse.SparseConvTranspose3d(2, 3, 3, 2, 0, indice_key="up").double()
    with pytest.raises(ValueError, match="indice_key 'up': cached transposed conv map .* does not match"):
        other(x)
    strided = mx_sparse.SparseConv3d(2, 3, 3, 2, 1, indice_key="up").double()
    with pytest.raises(ValueError, match="indice_key 'up'"):
        strided(x)


def value_error(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


def test_bad_arguments_name_the_argument():
    T3 = mx_sparse.SparseConvTranspose3d
    assert value_error(lambda: T3(2, 3, 3, 2, output_padding=2)).startswith(
        "output_padding: expected every value smaller than the stride or the dilation")
    assert value_error(lambda: T3(2, 3, 3, 1, output_padding=[0, 0, 1])).startswith("output_padding:")
    assert value_error(lambda: T3(2, 3, 3, 2, auto_pad="same")).startswith(
        "auto_pad: expected one of 'none', 'same_upper', 'same_lower', 'valid', got 'same'")
    assert value_error(lambda: T3(2, 3, 3, 2, pads_begin=[1, 1], pads_end=[1, 1, 1])).startswith(
        "pads_begin: expected an int or 3 values")
    assert value_error(lambda: T3(2, 3, 3, 2, pads_begin=[1, 1, 1])).startswith(
        "pads_end: expected pads_begin and pads_end together")
    assert value_error(lambda: T3(2, 3, 3, 2, 1, pads_begin=0, pads_end=1)).startswith(
        "padding, pads_begin, pads_end:")
    assert value_error(lambda: T3(2, 3, 3, 2, 1, auto_pad="same_upper")).startswith("auto_pad: 'same_upper'")
    assert value_error(lambda: mx_sparse.SubMConv3d(2, 3, 3, auto_pad="valid")).startswith("auto_pad, pads_begin")
    assert value_error(lambda: mx_sparse.SparseConvolution(3, 2, 3, transposed=True, subm=True)).startswith(
        "transposed:")
    # same_* needing negative pads (stride beyond the kernel's extent)
    layer = T3(2, 3, 1, 3, auto_pad="same_upper")
    x = SparseConvTensor(torch.zeros(1, 2), torch.zeros(1, 4).int(), [4, 4, 4], 1)
    assert value_error(lambda: layer(x)).startswith("auto_pad: 'same_upper' needs a padding of -2 on axis 0")
    # pads that leave no output
    layer = T3(2, 3, 3, 1, pads_begin=[3, 0, 0], pads_end=[3, 0, 0])
    assert value_error(lambda: layer(x)).startswith("pads_begin, pads_end: the transposed convolution output is empty")


@pytest.mark.skipif(os.environ.get("MXS_CUDA_ON_CPU", "0") not in ("", "0"), reason="this is the subprocess's run")
def test_conv_transpose_cuda_path():
    """The SMALL cases, the padding cases and the error messages with MXS_CUDA_ON_CPU=1: the
    accelerator orchestration and the Triton gathers (interpreted) serve every op."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    select = " or ".join(SMALL + ["1d_asym", "bad_arguments", "inverse_of_a", "strided_auto_pad"])
    env = dict(os.environ, MXS_CUDA_ON_CPU="1", TRITON_INTERPRET="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", select,
           "tests/test_conv_transpose.py", "tests/test_conv_transpose_map.py"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
