"""torch.autocast: the ops carry a registered autocast policy (kernels/schema/autocast.cpp), so
layers cast nothing themselves. Under autocast the sparse convolutions give what
torch.nn.Conv3d gives (bfloat16 or float16 on CPU, float16 on CUDA), and gradients reach
float32 master weights in float32."""
import pytest
import torch
from torch import nn

import mx_sparse
from dense_reference import subm_reference
from helpers import random_features, random_voxels
from mx_sparse.models import VoxelBackBone8x

OPS = torch.ops.mx_sparse
COMPUTE_OPS = ["gather_mm", "gather_mm_backprop_filter"]


@pytest.mark.parametrize("key", ["AutocastCPU", "AutocastCUDA", "AutocastPrivateUse1"])
@pytest.mark.parametrize("op", COMPUTE_OPS)
def test_policy_is_registered_on_the_op(op, key):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"mx_sparse::{op}", key)


def conv3d_autocast_dtype(device_type, dtype):
    with torch.autocast(device_type, dtype):
        return nn.Conv3d(4, 4, 3).to(device_type)(torch.randn(1, 4, 4, 4, 4, device=device_type)).dtype


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_op_casts_under_autocast_and_not_outside(dtype):
    """The op itself (no Python layer) casts float32 operands to the autocast dtype; float64
    operands are left alone, as torch's autocast does."""
    x, w = torch.randn(5, 4), torch.randn(2, 4, 3)
    nbr = torch.tensor([[0, 1], [2, -1], [-1, 4]], dtype=torch.int32)
    with torch.autocast("cpu", dtype):
        out = OPS.gather_mm(x, w, nbr, None, 1)
        dw = OPS.gather_mm_backprop_filter(x, torch.randn(3, 3), nbr, None, 1)
        wide = OPS.gather_mm(x.double(), w.double(), nbr, None, 1)
    assert out.dtype == dw.dtype == dtype == conv3d_autocast_dtype("cpu", dtype)
    assert wide.dtype == torch.float64
    assert torch.equal(out, OPS.gather_mm(x.to(dtype), w.to(dtype), nbr, None, 1))
    assert OPS.gather_mm(x, w, nbr, None, 1).dtype == torch.float32   # no autocast, no cast


@pytest.mark.parametrize("kind", ["subm", "strided", "inverse"])
def test_layers_give_conv3d_dtype_and_float32_master_gradients(kind):
    shape = [6, 7, 8]
    idx = random_voxels(shape, 2, density=0.3, seed=1)
    x = random_features(idx.shape[0], 4, torch.float32).requires_grad_()
    torch.manual_seed(0)
    down = mx_sparse.SparseConv3d(4, 8, 3, stride=2, padding=1, indice_key="d")
    layer = {"subm": mx_sparse.SubMConv3d(4, 8, 3, indice_key="s"), "strided": down,
             "inverse": mx_sparse.SparseInverseConv3d(8, 4, 3, indice_key="d")}[kind]
    with torch.autocast("cpu", torch.bfloat16):
        t = mx_sparse.SparseConvTensor(x, idx, shape, 2)
        y = layer(down(t) if kind == "inverse" else t)
    assert y.features.dtype == conv3d_autocast_dtype("cpu", torch.bfloat16) == torch.bfloat16
    y.features.float().square().sum().backward()
    assert layer.weight.dtype == layer.weight.grad.dtype == torch.float32
    assert layer.bias.grad.dtype == x.grad.dtype == torch.float32
    assert layer.weight.grad.abs().sum() > 0 and x.grad.abs().sum() > 0


def test_subm_autocast_against_dense_float64_reference():
    """bfloat16 operands, float32 accumulation: within bfloat16 rounding of the float64 result."""
    shape = [6, 7, 8]
    idx = random_voxels(shape, 2, density=0.3, seed=2)
    x = random_features(idx.shape[0], 4, torch.float32)
    torch.manual_seed(0)
    layer = mx_sparse.SubMConv3d(4, 8, 3)
    with torch.autocast("cpu", torch.bfloat16):
        y = layer(mx_sparse.SparseConvTensor(x, idx, shape, 2)).features
    rounded = lambda t: t.to(torch.bfloat16).double()  # noqa: E731  (the operands autocast gives the op)
    ref = subm_reference(rounded(x), idx, shape, 2, rounded(layer.weight), rounded(layer.bias), (1, 1, 1), 1)
    scale = ref.abs().max().item()
    torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-2 * scale)


def test_backbone_trains_under_autocast():
    """VoxelBackBone8x under bfloat16 autocast: bfloat16 output, float32 gradients on every
    parameter, and the loss falls over a few SGD steps on a fixed scene."""
    shape = [41, 24, 24]
    idx = random_voxels(shape, 1, density=0.05, seed=3)
    x = random_features(idx.shape[0], 4, torch.float32)
    torch.manual_seed(0)
    model = VoxelBackBone8x(4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        with torch.autocast("cpu", torch.bfloat16):
            y = model(mx_sparse.SparseConvTensor(x, idx, shape, 1))
            loss = (y.features.float() - 1).square().mean()
        assert y.features.dtype == torch.bfloat16
        opt.zero_grad()
        loss.backward()
        assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine: the AutocastCUDA "
                    "policy is registered (test_policy_is_registered_on_the_op) but cannot run here")
def test_cuda_float16_autocast():
    shape = [6, 7, 8]
    idx = random_voxels(shape, 2, density=0.3, seed=1).cuda()
    x = random_features(idx.shape[0], 4, torch.float32).cuda()
    layer = mx_sparse.SubMConv3d(4, 8, 3).cuda()
    with torch.autocast("cuda", torch.float16):
        y = layer(mx_sparse.SparseConvTensor(x, idx, shape, 2))
    assert y.features.dtype == conv3d_autocast_dtype("cuda", torch.float16) == torch.float16
