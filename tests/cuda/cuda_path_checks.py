"""Checks that run in the MXS_CUDA_ON_CPU=1 subprocess of test_cuda_on_cpu.py (this file's
name keeps it out of the normal collection): there every mx_sparse op on CPU tensors is the
CUDA backend's implementation, its Triton kernels interpreted."""
import os

import pytest
import torch

import mx_sparse
from mx_sparse._accelerator import registration
from mx_sparse._cuda import launch

pytestmark = pytest.mark.skipif(not registration.cuda_on_cpu_requested(), reason="needs MXS_CUDA_ON_CPU=1")

OPS = list(registration.ORCHESTRATION) + ["_gather_mm_one_group", "_gather_mm_backprop_filter_one_group"]


def test_cpu_dispatch_entries_are_the_cuda_backend():
    for op in OPS:
        dump = torch._C._dispatch_dump(f"mx_sparse::{op}")
        cpu = [line for line in dump.splitlines() if line.startswith("CPU:")]
        assert cpu and "mx_sparse/_accelerator/registration.py" in cpu[0], f"{op}: {cpu}"


def test_cpu_calls_run_the_python_implementations():
    """Behaviour, not just the table: a call launches a Triton kernel. (Both backends raise the
    one contract's message, mx_sparse._core.contract, so the error no longer tells them apart.)"""
    nbr = torch.full((2, 27), -1, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"weight: expected dtype Float like features, got Double"):
        torch.ops.mx_sparse.gather_mm(torch.ones(1, 2), torch.ones(27, 2, 2, dtype=torch.float64), nbr, None, 1)
    before = sum(n for (k, _, _), n in launch.launches.items() if k == "gather_mm")
    torch.ops.mx_sparse.gather_mm(torch.ones(1, 2), torch.ones(27, 2, 2), nbr, None, 1)
    assert sum(n for (k, _, _), n in launch.launches.items() if k == "gather_mm") == before + 1
    assert launch.interpreting()


def test_cpu_batch_norm_runs_the_triton_kernels():
    """The fused BatchNorm+ReLU on CPU tensors launches its Triton kernels (and its results are
    checked by test_batch_norm_relu.py in this run, against torch's modules)."""
    def bn_launches():
        return sum(n for (k, _, _), n in launch.launches.items() if k.startswith("bn_"))

    before = bn_launches()
    x = torch.randn(40, 3)
    y, mean, invstd, scale, shift = torch.ops.mx_sparse.batch_norm_relu_forward(x, None, None, None, None, True,
                                                                              0.1, 1e-5)
    torch.ops.mx_sparse.batch_norm_relu_backward(torch.ones_like(x), x, mean, invstd, None, scale, shift, True)
    assert bn_launches() == before + 4     # forward: moments, normalize+ReLU; backward: sums, dx
    torch.testing.assert_close(y, torch.relu(torch.nn.functional.batch_norm(x, None, None, training=True)))


@pytest.mark.parametrize("kind", ["subm", "conv", "inverse"])
def test_gradcheck_through_the_cuda_path(kind):
    """First and second derivatives by finite differences (float64), on inputs small enough for
    the interpreter: the suite's own gradcheck test is left out of this run for time."""
    from helpers import random_features, random_voxels
    shape = [3, 4, 3]
    idx = random_voxels(shape, 1, density=0.4, seed=2)
    feats = random_features(idx.shape[0], 2).requires_grad_()
    down = mx_sparse.SparseConv3d(2, 2, 3, stride=2, padding=1, indice_key="k").double()
    layer = {"subm": lambda: mx_sparse.SubMConv3d(2, 2, 3, groups=2),
             "conv": lambda: mx_sparse.SparseConv3d(2, 2, 3, stride=2, padding=1),
             "inverse": lambda: mx_sparse.SparseInverseConv3d(2, 2, 3, indice_key="k")}[kind]().double()

    def run(f, w):
        x = mx_sparse.SparseConvTensor(f, idx, shape, 1)
        if kind == "inverse":
            x = down(x)
        return torch.func.functional_call(layer, {"weight": w, "bias": layer.bias}, (x,)).features

    args = (feats, layer.weight.detach().clone().requires_grad_())
    assert torch.autograd.gradcheck(run, args, fast_mode=True)
    assert torch.autograd.gradgradcheck(run, args, fast_mode=True)


def test_network_step_matches_cpu_backend():
    """A training step of a small network (fused BatchNorm+ReLU, dense maps, inverse conv)
    against the same step on the C++ CPU backend, computed by the parent test before this
    process started (MXS_CUDA_REFERENCE)."""
    path = os.environ.get("MXS_CUDA_REFERENCE")
    if not path:
        pytest.skip("MXS_CUDA_REFERENCE (the CPU backend's result) not given")
    from cuda_cases import network_step
    from mx_sparse.nn import batch_norm_relu, packed_map
    fused, packed = [], []
    original_fuse, original_pack = batch_norm_relu.batch_norm_relu, packed_map.PackedMap.of
    mx_sparse.nn.modules.batch_norm_relu = lambda x, bn: fused.append(1) or original_fuse(x, bn)
    packed_map.PackedMap.of = staticmethod(lambda nbr: packed.append(1) or original_pack(nbr))
    try:
        result = network_step()
    finally:
        mx_sparse.nn.modules.batch_norm_relu, packed_map.PackedMap.of = original_fuse, original_pack
    assert fused and not packed, "the CUDA path fused BatchNorm+ReLU and held the idle maps dense"
    reference = torch.load(path)
    assert result.keys() == reference.keys()
    assert torch.equal(result["indices"], reference["indices"])
    for key, ref in reference.items():
        if ref.is_floating_point():
            torch.testing.assert_close(result[key], ref, rtol=1e-4, atol=1e-5 * max(1.0, ref.abs().max().item()),
                                       msg=lambda m: f"{key}: {m}")
        else:
            assert torch.equal(result[key], ref), key


def _launch_counts():
    """{kernel name: launches} so far in this process (the session's report reads them all: a
    test takes differences, never clears)."""
    counts = {}
    for (kernel, _, _), n in launch.launches.items():
        counts[kernel] = counts.get(kernel, 0) + n
    return counts


def test_no_recompute_launch_in_a_training_step():
    """The weight gradient of a convolution whose input is a fused BatchNorm+ReLU output applies
    the activation as its kernel loads the BatchNorm's input (gather_kernels.py ACTIVATION):
    the training step of network_step (two convolutions after a fused BatchNorm+ReLU) launches
    no scale_shift_relu recompute; with the fusion off, none either (torch's modules keep y).
    Its gradients are test_network_step_matches_cpu_backend's."""
    from cuda_cases import network_step
    before = _launch_counts()
    network_step()
    after = _launch_counts()
    ran = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert ran.get("bn_normalize_relu", 0) == 2 and ran.get("gather_mm_backprop_filter", 0) == 4, ran
    assert "bn_scale_shift_relu" not in ran, ran


def test_activated_weight_gradient_in_double_backward():
    """create_graph through a convolution after a fused BatchNorm+ReLU: the weight gradient then
    recomputes the features with the op (the path before the activation came with the call), so
    first-order gradients taken with create_graph equal the plain backward's."""
    from helpers import random_features, random_voxels
    torch.manual_seed(0)
    idx = random_voxels([6, 6, 6], 1, density=0.3, seed=4)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(3, 8, 3, bias=False, indice_key="a"),
                                     torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                                     mx_sparse.SubMConv3d(8, 4, 3, bias=False, indice_key="a")).double()
    x = mx_sparse.SparseConvTensor(random_features(idx.shape[0], 3, torch.float64), idx, [6, 6, 6], 1)
    plain = torch.autograd.grad(net(x).features.square().sum(), net[3].weight)[0]
    before = _launch_counts().get("bn_scale_shift_relu", 0)
    graphed = torch.autograd.grad(net(x).features.square().sum(), net[3].weight, create_graph=True)[0]
    assert _launch_counts().get("bn_scale_shift_relu", 0) == before + 1
    torch.testing.assert_close(graphed, plain, rtol=0, atol=0)


def test_input_gradients_read_the_weights_in_place():
    """A backward that records no graph takes each convolution's input gradient as one
    _gather_mm_transposed call on the layer's own weight (the Triton gather reading it transposed,
    offsets reversed for a submanifold map): no transposed copy of the weight, no index_select
    (kernels/schema/autograd.cpp). With create_graph, gather_mm on the copy, which double backward
    differentiates; both give the same input gradient, bit for bit."""
    from helpers import RecordedCalls, random_features, random_voxels
    torch.manual_seed(0)
    idx = random_voxels([6, 6, 6], 1, density=0.3, seed=5)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(3, 8, 3, bias=False, indice_key="a"),
                                     mx_sparse.SparseConv3d(8, 4, 3, stride=2, padding=1, bias=False))

    grads = []
    for create_graph in (False, True):
        f = random_features(idx.shape[0], 3, torch.float32).requires_grad_()
        loss = net(mx_sparse.SparseConvTensor(f, idx, [6, 6, 6], 1)).features.square().sum()
        with RecordedCalls() as calls:
            grads.append(torch.autograd.grad(loss, f, create_graph=create_graph)[0])
        names = [name for name, _ in calls.seen]
        # (every index_select and clone counts here, whatever its dim)
        transposed = names.count("mx_sparse._gather_mm_transposed.default")
        copies = names.count("aten.index_select.default") + names.count("aten.clone.default")
        assert (transposed, copies) == ((0, 2) if create_graph else (2, 0)), names
    assert torch.equal(grads[0], grads[1].detach())
