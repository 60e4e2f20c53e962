"""mx_sparse on `npu` tensors against its CPU backend (the reference of the project): maps bit-equal,
fp32 results within 1e-5 relative, fp16/bf16 against a float64 CPU computation. Skipped without an NPU."""
import pytest
import torch

import mx_sparse
import mx_sparse.functional as F

DEV = "npu"


def _scene(n=3000, shape=(24, 96, 96), batch=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    cells = batch * shape[0] * shape[1] * shape[2]
    keys = torch.randperm(cells, generator=g)[:n].sort().values
    x = keys % shape[2]
    y = (keys // shape[2]) % shape[1]
    z = (keys // (shape[2] * shape[1])) % shape[0]
    b = keys // (shape[2] * shape[1] * shape[0])
    return torch.stack([b, z, y, x], 1).int(), list(shape), batch


def _rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-12)).item()


def test_subm_map_bit_equal():
    ind, shape, bs = _scene()
    cpu = F.build_subm_map(ind, shape, bs, [3, 3, 3], [1, 1, 1])
    npu = F.build_subm_map(ind.to(DEV), shape, bs, [3, 3, 3], [1, 1, 1]).cpu()
    assert torch.equal(cpu, npu)


@pytest.mark.parametrize("stride,padding", [((2, 2, 2), (1, 1, 1)), ((2, 1, 1), (0, 0, 0))])
def test_conv_map_bit_equal(stride, padding):
    ind, shape, bs = _scene()
    oc, nc = F.build_conv_map(ind, shape, bs, [3, 3, 3], list(stride), list(padding), [1, 1, 1])
    on, nn = F.build_conv_map(ind.to(DEV), shape, bs, [3, 3, 3], list(stride), list(padding), [1, 1, 1])
    assert torch.equal(oc, on.cpu()) and torch.equal(nc, nn.cpu())


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)])
def test_gather_mm_and_gradients(dtype, tol):
    ind, shape, bs = _scene()
    nbr = F.build_subm_map(ind, shape, bs, [3, 3, 3], [1, 1, 1])
    g = torch.Generator().manual_seed(1)
    f = torch.randn(ind.shape[0], 16, generator=g)
    w = torch.randn(27, 16, 32, generator=g) * 0.1
    gr = torch.randn(ind.shape[0], 32, generator=g)
    ref = F.gather_mm(f.double(), w.double(), nbr, None, symmetric=True)            # CPU, float64
    ref_dw = F.gather_mm_backprop_filter(f.double(), gr.double(), nbr, None, symmetric=True)
    out = F.gather_mm(f.to(DEV, dtype), w.to(DEV, dtype), nbr.to(DEV), None, symmetric=True).cpu()
    dw = F.gather_mm_backprop_filter(f.to(DEV, dtype), gr.to(DEV, dtype), nbr.to(DEV), None, symmetric=True).cpu()
    assert out.dtype == dtype and _rel(out, ref) <= tol and _rel(dw, ref_dw) <= tol


def test_layer_forward_backward_matches_cpu():
    ind, shape, bs = _scene()
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(8, 16, 3, indice_key="s1"),
                                     mx_sparse.SparseConv3d(16, 32, 3, stride=2, padding=1))
    feats = torch.randn(ind.shape[0], 8)
    outs, grads = [], []
    for dev in ("cpu", DEV):
        net.to(dev).zero_grad()
        f = feats.to(dev).requires_grad_()
        y = net(mx_sparse.SparseConvTensor(f, ind.to(dev), shape, bs))
        y.features.square().sum().backward()
        outs.append(y.features.detach().cpu())
        grads.append((f.grad.cpu(), net[0].weight.grad.cpu()))
    assert _rel(outs[1], outs[0]) <= 1e-5
    assert _rel(grads[1][0], grads[0][0]) <= 1e-5 and _rel(grads[1][1], grads[0][1]) <= 1e-5


def test_input_gradient_reads_the_weight_in_place():
    """On the NPU a backward that records no graph takes each convolution's input gradient as one
    _gather_mm_transposed call (AscendC GatherMm reading the layer's weight transposed, offsets reversed
    for the submanifold map): no transposed copy of a weight (kernels/schema/autograd.cpp); with
    create_graph, gather_mm on the copy. Both within 1e-5 of the CPU backend."""
    from helpers import RecordedCalls, input_gradient_calls
    ind, shape, bs = _scene()
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(8, 16, 3, bias=False, indice_key="s1"),
                                     mx_sparse.SparseConv3d(16, 32, 3, stride=2, padding=1, bias=False))
    feats = torch.randn(ind.shape[0], 8)
    f = feats.clone().requires_grad_()
    reference = torch.autograd.grad(net(mx_sparse.SparseConvTensor(f, ind, shape, bs)).features.square().sum(), f)[0]
    net.to(DEV)
    for create_graph in (False, True):
        f = feats.to(DEV).requires_grad_()
        loss = net(mx_sparse.SparseConvTensor(f, ind.to(DEV), shape, bs)).features.square().sum()
        with RecordedCalls() as calls:
            grad = torch.autograd.grad(loss, f, create_graph=create_graph)[0].detach().cpu()
        assert input_gradient_calls(calls.seen) == ((0, 2) if create_graph else (2, 0)), calls.seen
        assert _rel(grad, reference) <= 1e-5
