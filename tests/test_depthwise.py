"""Depthwise convolution with a channel multiplier: groups = in_channels, out_channels =
in_channels * multiplier, on the strided, submanifold and transposed layers 1-3D, against torch's
dense conv / conv_transpose with groups = in_channels on the densified tensor (forward, input and
filter gradients; float64 to 1e-12, float32 to 1e-5 relative), and TensorFlow's
DepthwiseConv2dNative / DepthwiseConv2dNativeBackpropInput / ...BackpropFilter written out as
loops (filter [kh, kw, in_channels, multiplier], output channel c * multiplier + q, "SAME"
padding) on a fully occupied 2D grid."""
import itertools

import pytest
import torch

import mx_sparse
from mx_sparse import SparseConvTensor

from dense_reference import subm_reference
from helpers import random_voxels
from mx_sparse._accelerator import registration
from test_conv_transpose import TOL, check_layer, conv_reference, transposed_reference

# the NPU path's gathers (MXS_NPU_ON_CPU=1, AscendC kernels) have no float64
DTYPES = [torch.float32] if registration.npu_on_cpu_requested() else [torch.float64, torch.float32]
WORK = DTYPES[0]

STRIDED = {1: mx_sparse.SparseConv1d, 2: mx_sparse.SparseConv2d, 3: mx_sparse.SparseConv3d}
SUBM = {1: mx_sparse.SubMConv1d, 2: mx_sparse.SubMConv2d, 3: mx_sparse.SubMConv3d}
TRANSPOSED = {1: mx_sparse.SparseConvTranspose1d, 2: mx_sparse.SparseConvTranspose2d,
              3: mx_sparse.SparseConvTranspose3d}
SHAPES = {1: [13], 2: [7, 6], 3: [5, 4, 5]}
CIN = 3


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("multiplier", [1, 2, 3])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_strided_depthwise_equals_dense(nd, multiplier, dtype):
    shape, k, s, p, d = SHAPES[nd], [3, 2, 3][:nd], [2, 1, 2][:nd], [1, 0, 1][:nd], [1, 2, 1][:nd]
    layer = STRIDED[nd](CIN, CIN * multiplier, k, s, p, d, groups=CIN)
    assert layer.weight.shape == (*k, 1, CIN * multiplier)
    ref = lambda f, i, w, b: conv_reference(f, i, shape, 2, w, b, s, p, p, d, CIN)  # noqa: E731
    check_layer(layer, shape, 2, dtype, ref, seed=10 * nd + multiplier)


@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_submanifold_depthwise_equals_dense(nd, multiplier):
    shape = SHAPES[nd]
    layer = SUBM[nd](CIN, CIN * multiplier, 3, groups=CIN).to(WORK)
    idx = random_voxels(shape, 2, density=0.4, seed=nd)
    feats = torch.randn(idx.shape[0], CIN, dtype=WORK, requires_grad=True)
    y = layer(SparseConvTensor(feats, idx, shape, 2))
    f64 = feats.detach().double().requires_grad_()
    w64 = layer.weight.detach().double().requires_grad_()
    want = subm_reference(f64, idx, shape, 2, w64, layer.bias.detach().double(), [1] * nd, CIN)
    g = torch.randn(want.shape, dtype=torch.float64)
    (y.features * g.to(WORK)).sum().backward()
    (want * g).sum().backward()
    for got, ref in [(y.features, want), (feats.grad, f64.grad), (layer.weight.grad, w64.grad)]:
        assert (got.double() - ref).abs().max() <= TOL[WORK] * ref.abs().max()


@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_transposed_depthwise_equals_dense(nd, multiplier):
    shape, k, s, pb, pe, op = SHAPES[nd], [3, 2, 3][:nd], [2, 2, 1][:nd], [1, 0, 1][:nd], [0, 1, 1][:nd], [1, 1, 0][:nd]
    layer = TRANSPOSED[nd](CIN, CIN * multiplier, k, s, groups=CIN, pads_begin=pb, pads_end=pe, output_padding=op)
    ref = lambda f, i, w, b: transposed_reference(f, i, shape, 2, w, b, s, pb, pe, [1] * nd, op, CIN)  # noqa: E731
    check_layer(layer, shape, 2, WORK, ref, seed=nd + multiplier)


def tf_same_pads(size, k, s):
    """TensorFlow "SAME": output ceil(size / s); the odd padding cell goes to the end."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2


def tf_depthwise(x, f, stride):
    """DepthwiseConv2dNative, NHWC, "SAME": out[b, y, x, c*m + q] = sum_ij in[b, y*s + i - pt,
    x*s + j - pl, c] * f[i, j, c, q]."""
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    (oh, pt), (ow, pl) = tf_same_pads(h, kh, stride), tf_same_pads(w, kw, stride)
    out = torch.zeros(n, oh, ow, c * m, dtype=x.dtype)
    for b, y, xx, i, j in itertools.product(range(n), range(oh), range(ow), range(kh), range(kw)):
        r, col = y * stride + i - pt, xx * stride + j - pl
        if 0 <= r < h and 0 <= col < w:
            out[b, y, xx] += (x[b, r, col].unsqueeze(1) * f[i, j]).reshape(-1)
    return out


def tf_depthwise_backprop(x, f, grad, stride):
    """DepthwiseConv2dNativeBackpropInput and ...BackpropFilter of tf_depthwise: the same loop
    with every product's two factors swapped for the gradient."""
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    (oh, pt), (ow, pl) = tf_same_pads(h, kh, stride), tf_same_pads(w, kw, stride)
    dx, df = torch.zeros_like(x), torch.zeros_like(f)
    for b, y, xx, i, j in itertools.product(range(n), range(oh), range(ow), range(kh), range(kw)):
        r, col = y * stride + i - pt, xx * stride + j - pl
        if 0 <= r < h and 0 <= col < w:
            g = grad[b, y, xx].reshape(c, m)
            dx[b, r, col] += (g * f[i, j]).sum(1)
            df[i, j] += x[b, r, col].unsqueeze(1) * g
    return dx, df


def test_tensorflow_depthwise_semantics_2d():
    """A fully occupied 2D grid: the sparse layer is TensorFlow's depthwise conv; its weight is
    TensorFlow's filter [kh, kw, C, m] reshaped to [kh, kw, 1, C*m]; features.grad is
    DepthwiseConv2dNativeBackpropInput, weight.grad ...BackpropFilter."""
    torch.manual_seed(0)
    n, h, w, c, m, kh, kw, stride = 2, 5, 6, 3, 2, 3, 2, 2
    x = torch.randn(n, h, w, c, dtype=torch.float64)
    f = torch.randn(kh, kw, c, m, dtype=torch.float64)
    layer = mx_sparse.SparseConv2d(c, c * m, [kh, kw], stride, groups=c, bias=False, auto_pad="same_upper").to(WORK)
    with torch.no_grad():
        layer.weight.copy_(f.reshape(kh, kw, 1, c * m))
    sp = SparseConvTensor.from_dense(x.to(WORK))   # every cell active: NHWC -> rows (b, y, x)
    sp.features.requires_grad_()
    y = layer(sp)
    want = tf_depthwise(x, f, stride)
    assert y.spatial_shape == list(want.shape[1:3])
    grad = torch.randn(want.shape, dtype=torch.float64)
    yi, xi = y.indices.long(), sp.indices.long()
    y.features.backward(grad[yi[:, 0], yi[:, 1], yi[:, 2]].to(WORK))
    dx, df = tf_depthwise_backprop(x, f, grad, stride)
    for got, ref in [(y.features, want[yi[:, 0], yi[:, 1], yi[:, 2]]), (sp.features.grad, dx[xi[:, 0], xi[:, 1], xi[:, 2]]),
                     (layer.weight.grad, df.reshape(kh, kw, 1, c * m))]:
        assert (got.double() - ref).abs().max() <= TOL[WORK] * ref.abs().max()


def test_out_channels_must_be_a_multiple_of_in_channels():
    with pytest.raises(ValueError, match=r"groups: expected a divisor of in_channels \(3\) and out_channels \(4\)"):
        mx_sparse.SparseConv2d(3, 4, 3, groups=3)
