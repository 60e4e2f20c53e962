"""Max and average pooling through the schema ops (sparse_max_pool, sparse_avg_pool and their
backward ops), against a dense reference: torch's max_pool3d / avg_pool3d on the densified
tensor (inactive voxels -inf for max; a sum and an active-voxel count for average), forward and
gradients, in float64. The layers of the spconv and mmcv surfaces run on these ops, without a
[M, K, C] window tensor (checked by recording every tensor the ops produce); the tensor-operator
implementation of the accelerator orchestration (mx_sparse/_accelerator/sparse_pool.py) gives the CPU kernels' results."""
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from mx_sparse import functional as MF
from mx_sparse._accelerator import sparse_pool as torch_ops_pool
from mx_sparse._core.op_registration import ops

from dense_reference import densify, sample
from helpers import random_features, random_voxels

SHAPE, BATCH = [7, 8, 9], 2
GEOMETRIES = [((2, 2, 2), (2, 2, 2), (0, 0, 0)), ((3, 3, 3), (2, 2, 2), (1, 1, 1)), ((3, 2, 3), (1, 2, 1), (1, 0, 1))]


def strided_map(idx, kernel, stride, padding):
    return MF.build_conv_map(idx, SHAPE, BATCH, kernel, stride, padding, (1, 1, 1))


def dense_pool(f, idx, out_idx, kernel, stride, padding, mode):
    """Reference: dense pooling over the active voxels only, sampled at the output voxels."""
    d = densify(f, idx, SHAPE, BATCH)
    active = densify(torch.ones(f.shape[0], 1, dtype=f.dtype), idx, SHAPE, BATCH)
    if mode == "max":
        d = torch.where(active > 0, d, torch.full_like(d, float("-inf")))
        return sample(F.max_pool3d(d, kernel, stride, padding), out_idx)
    # padding=0 on the sum: pad by hand so padded cells count as inactive
    pad = [p for q in reversed(padding) for p in (q, q)]
    s = F.avg_pool3d(F.pad(d, pad), kernel, stride, divisor_override=1)
    n = F.avg_pool3d(F.pad(active, pad), kernel, stride, divisor_override=1)
    return sample(s / n, out_idx)


def run_op(mode, f, nbr):
    return ops.sparse_max_pool(f, nbr)[0] if mode == "max" else ops.sparse_avg_pool(f, nbr)


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("kernel,stride,padding", GEOMETRIES)
def test_pool_op_matches_dense_reference_with_gradients(mode, kernel, stride, padding):
    idx = random_voxels(SHAPE, BATCH, density=0.35, seed=4)
    f = random_features(idx.shape[0], 5).requires_grad_()
    out_idx, nbr = strided_map(idx, kernel, stride, padding)
    ref_f = f.detach().clone().requires_grad_()
    y, ref = run_op(mode, f, nbr), dense_pool(ref_f, idx, out_idx, kernel, stride, padding, mode)
    assert torch.allclose(y, ref, rtol=1e-12, atol=1e-12)
    g = random_features(y.shape[0], 5, seed=7)
    y.backward(g)
    ref.backward(g)
    assert torch.allclose(f.grad, ref_f.grad, rtol=1e-12, atol=1e-12)


def test_pool_gradcheck_float64():
    idx = random_voxels([4, 5, 5], 1, density=0.5, seed=2)
    f = random_features(idx.shape[0], 3).requires_grad_()
    _, nbr = MF.build_conv_map(idx, [4, 5, 5], 1, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1))
    assert torch.autograd.gradcheck(lambda t: ops.sparse_avg_pool(t, nbr), (f,))
    assert torch.autograd.gradcheck(lambda t: ops.sparse_max_pool(t, nbr)[0], (f,))


def test_max_pool_ties_nan_and_empty_rows_by_hand():
    f = torch.tensor([[1.0, 5.0], [3.0, float("nan")], [3.0, 2.0]])
    nbr = torch.tensor([[0, 1, 2], [2, -1, 0], [-1, -1, -1]], dtype=torch.int32)
    out, argmax = ops.sparse_max_pool(f, nbr)
    assert argmax.dtype == torch.int8
    assert out[0, 0] == 3 and argmax[0, 0] == 1            # tie 3 == 3: the lower offset
    assert out[0, 1].isnan() and argmax[0, 1] == 1          # a NaN wins, as in torch's max pooling
    assert out[1].tolist() == [3.0, 5.0] and argmax[1].tolist() == [0, 2]
    assert out[2].tolist() == [0.0, 0.0] and argmax[2].tolist() == [-1, -1]
    dx = ops.sparse_max_pool_backward(torch.ones(3, 2), argmax, nbr, 3)
    assert dx.tolist() == [[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]
    avg = ops.sparse_avg_pool(f[:, :1], nbr)
    assert torch.equal(avg[:, 0], torch.tensor([7.0 / 3, 2.0, 0.0]))


def test_bad_maps_rejected_with_the_argument_named():
    f = torch.randn(3, 2)
    with pytest.raises(ValueError, match="nbr: expected entries in"):
        ops.sparse_max_pool(f, torch.tensor([[0, 3]], dtype=torch.int32))
    with pytest.raises(ValueError, match="nbr: expected an int32"):
        ops.sparse_avg_pool(f, torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="features: expected a floating-point"):
        ops.sparse_max_pool(torch.ones(3, 2, dtype=torch.int32), torch.tensor([[0]], dtype=torch.int32))


def _message(fn, *args):
    with pytest.raises(ValueError) as info:
        fn(*args)
    return str(info.value).split("\n")[0]


def test_bad_arguments_give_the_same_message_on_the_cpu_kernels_and_the_accelerator_code():
    """One set of checks (kernels/contract/pool_args.h): the CPU kernels and the torch-operator version
    (through mx_sparse._core.contract) reject the same input with the same message."""
    f, nbr, g = torch.randn(3, 2), torch.tensor([[0, 1], [2, -1]], dtype=torch.int32), torch.randn(2, 2)
    argmax = torch.zeros(2, 2, dtype=torch.int8)
    forward = [(f[0], nbr), (f.int(), nbr), (f, nbr.long()), (f, nbr[0])]
    max_backward = [(g[0], argmax, nbr, 3), (g, argmax[:1], nbr, 3), (g[:1], argmax[:1], nbr, 3),
                    (g, argmax.short(), nbr, 3), (g, argmax, nbr, -1), (g, argmax, nbr, 2**31 - 1)]
    avg_backward = [(g.int(), nbr, 3), (g[:1], nbr, 3), (g, nbr, -1), (g, nbr.long(), 3)]
    cases = [(name, args) for name in ("sparse_max_pool", "sparse_avg_pool") for args in forward]
    cases += [("sparse_max_pool_backward", args) for args in max_backward]
    cases += [("sparse_avg_pool_backward", args) for args in avg_backward]
    for name, args in cases:
        cpu = _message(getattr(ops, name), *args)
        assert cpu == _message(getattr(torch_ops_pool, name), *args), (name, cpu)
        assert cpu.split(":")[0] in ("features", "grad", "nbr", "argmax", "num_rows"), cpu


def test_backward_bitwise_across_thread_counts():
    idx = random_voxels([12, 12, 12], 2, density=0.4, seed=9)
    f = torch.randn(idx.shape[0], 40, dtype=torch.float32)
    _, nbr = MF.build_conv_map(idx, [12, 12, 12], 2, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1))
    out, argmax = ops.sparse_max_pool(f, nbr)
    g = torch.randn_like(out)
    results = []
    for threads in (1, 2):
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            results.append((ops.sparse_max_pool_backward(g, argmax, nbr, f.shape[0]),
                            ops.sparse_avg_pool_backward(g, nbr, f.shape[0])))
        finally:
            torch.set_num_threads(previous)
    assert all(torch.equal(a, b) for a, b in zip(*results))


@pytest.mark.parametrize("kernel,stride,padding", GEOMETRIES)
def test_tensor_operator_implementation_matches_cpu_kernels(kernel, stride, padding):
    idx = random_voxels(SHAPE, BATCH, density=0.35, seed=4)
    f = random_features(idx.shape[0], 5, dtype=torch.float32)
    _, nbr = strided_map(idx, kernel, stride, padding)
    out, argmax = ops.sparse_max_pool(f, nbr)
    t_out, t_argmax = torch_ops_pool.sparse_max_pool(f, nbr)
    assert torch.equal(out, t_out) and torch.equal(argmax, t_argmax) and t_argmax.dtype == argmax.dtype
    g = torch.randn_like(out)
    assert torch.equal(ops.sparse_max_pool_backward(g, argmax, nbr, f.shape[0]),
                       torch_ops_pool.sparse_max_pool_backward(g, argmax, nbr, f.shape[0]))
    assert torch.allclose(ops.sparse_avg_pool(f, nbr), torch_ops_pool.sparse_avg_pool(f, nbr), atol=1e-6)
    assert torch.allclose(ops.sparse_avg_pool_backward(g, nbr, f.shape[0]),
                          torch_ops_pool.sparse_avg_pool_backward(g, nbr, f.shape[0]), atol=1e-6)


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an op returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("surface_name", ["spconv", "mmcv"])
def test_pool_layers_use_the_op_without_a_window_tensor(surface_name):
    """SparseMaxPool3d on the spconv and mmcv surfaces (and SparseAvgPool3d on spconv's): the dense
    reference's values and gradients, and no tensor of M x K x C elements (the window gather the
    layers made before; issue 28: +8.6 GiB peak on 200k voxels x 64 channels)."""
    from mx_sparse import ops as mmcv_ops
    from mx_sparse.compat.spconv2 import pytorch as spconv
    surface = {"spconv": spconv, "mmcv": mmcv_ops}[surface_name]
    layers = [(surface.SparseMaxPool3d(3, 2, 1), "max")]
    if surface is spconv:
        layers.append((spconv.SparseAvgPool3d(3, 2, 1), "avg"))
    idx = random_voxels(SHAPE, BATCH, density=0.35, seed=6)
    for layer, mode in layers:
        f = random_features(idx.shape[0], 8).requires_grad_()
        x = surface.SparseConvTensor(f, idx, SHAPE, BATCH)
        with LargestTensor() as probe:
            y = layer(x)
            y.features.backward(torch.ones_like(y.features))
        m, k, c = y.features.shape[0], 27, 8
        assert probe.largest < m * k * c / 2, (probe.largest, m * k * c)
        ref_f = f.detach().clone().requires_grad_()
        ref = dense_pool(ref_f, idx, y.indices, (3, 3, 3), (2, 2, 2), (1, 1, 1), mode)
        ref.backward(torch.ones_like(ref))
        assert torch.allclose(y.features, ref, atol=1e-12) and torch.allclose(f.grad, ref_f.grad, atol=1e-12)


def test_submanifold_pool_layer_keeps_voxels():
    from mx_sparse.compat.spconv2 import pytorch as spconv
    from mx_sparse.compat.spconv2.pytorch.pool import SparseMaxPool
    idx = random_voxels(SHAPE, BATCH, density=0.35, seed=3)
    f = random_features(idx.shape[0], 4)
    x = spconv.SparseConvTensor(f, idx, SHAPE, BATCH)
    y = SparseMaxPool(3, 3, 1, 1, subm=True)(x)
    assert torch.equal(y.indices, idx)
    ref = dense_pool(f, idx, idx, (3, 3, 3), (1, 1, 1), (1, 1, 1), "max")
    assert torch.allclose(y.features, ref)
