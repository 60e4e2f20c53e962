"""Shared inputs and references of the CUDA-backend tests.

``CUDA`` holds the accelerator orchestration (mx_sparse/_accelerator), called directly, its two
gathers and its map builders on the Triton primitives of mx_sparse/_cuda whatever the device; ``CPU`` the
C++ CPU kernels through the dispatcher. Tensors live on ``DEVICE``: the CPU here (Triton's
interpreter runs the kernels), a GPU in the ``cuda``-marked tests.
"""
import os

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import mx_sparse  # noqa: F401  (registers the ops)
from mx_sparse._accelerator import conv_transpose_map as orchestration_transpose_builder
from mx_sparse._accelerator import gather_mm as orchestration_gather_mm
from mx_sparse._accelerator import neighbor_map as orchestration_builders
from mx_sparse._accelerator import registration
from mx_sparse._cuda import launch

CPU = torch.ops.mx_sparse
TRITON_PRIMITIVES = registration._cuda_primitives()


class _TritonPrimitives:
    """torch.ops.mx_sparse with the Triton primitives in place of the dispatcher's choice."""

    def __getattr__(self, name):
        return TRITON_PRIMITIVES.get(name) or getattr(torch.ops.mx_sparse, name)


class _TritonDispatch(TorchDispatchMode):
    """The Triton primitives for the calls that reach the dispatcher from C++ (the map builders'
    stages, kernels/orchestration): a module attribute cannot redirect those."""
    routed = {getattr(torch.ops.mx_sparse, name).default: fn for name, fn in TRITON_PRIMITIVES.items()}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.routed.get(func, func)(*args, **(kwargs or {}))


def _on_triton(module, op):
    """The orchestration's ``op`` (of ``module``) with the Triton primitives whatever the tensors'
    device: on CPU tensors the dispatcher would otherwise pick the C++ CPU kernels or the
    torch-operator fallbacks (the Triton primitives serve the CPU key only under MXS_CUDA_ON_CPU=1).
    A module calling its primitives from Python (``module.primitives``) gets them swapped; calls
    from C++ are routed by _TritonDispatch."""
    def call(*args, **kwargs):
        if args[0].device.type != "cpu":    # CUDA (real or fake) tensors: the dispatcher picks Triton itself
            return op(*args, **kwargs)
        if not hasattr(module, "primitives"):
            with _TritonDispatch():
                return op(*args, **kwargs)
        dispatched = module.primitives
        module.primitives = _TritonPrimitives()
        try:
            return op(*args, **kwargs)
        finally:
            module.primitives = dispatched
    return call


CUDA = dict(registration.ORCHESTRATION,
            gather_mm=_on_triton(orchestration_gather_mm, orchestration_gather_mm.gather_mm),
            gather_mm_backprop_filter=_on_triton(orchestration_gather_mm,
                                                 orchestration_gather_mm.gather_mm_backprop_filter),
            build_subm_map=_on_triton(orchestration_builders, orchestration_builders.build_subm_map),
            build_conv_map=_on_triton(orchestration_builders, orchestration_builders.build_conv_map),
            build_conv_transpose_map=_on_triton(orchestration_transpose_builder,
                                                orchestration_transpose_builder.build_conv_transpose_map))

cpu_is_cuda_path = pytest.mark.skipif(
    registration.cuda_on_cpu_requested(),
    reason="MXS_CUDA_ON_CPU=1: the CPU ops are the CUDA backend itself, there is nothing to compare it with")


@pytest.fixture
def triton_on_cpu():
    """The Triton primitives serve CPU tensors for the test (interpreted), as under
    MXS_CUDA_ON_CPU=1: whatever reaches them through the dispatcher (not only ``CUDA``'s two
    gathers, which pick them directly) then runs the Triton kernels instead of the
    torch-operator fallbacks."""
    import warnings
    lib = torch.library.Library("mx_sparse", "IMPL")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        for name, fn in TRITON_PRIMITIVES.items():
            lib.impl(name, fn, "CPU")
    yield
    lib._destroy()


def voxels(shape, batch, density, seed, empty_batches=()):
    """Unique (batch, *coords) rows in shuffled order."""
    from helpers import random_voxels
    return random_voxels(shape, batch, density=density, empty_batches=empty_batches, seed=seed)


def random_map(m, n_in, kvol, density, seed):
    """A neighbor map [m, kvol] whose present entries are random input rows (each (row, k)
    at most once per column, as a real map)."""
    g = torch.Generator().manual_seed(seed)
    nbr = torch.full((m, kvol), -1, dtype=torch.int32)
    for k in range(kvol):
        rows = torch.randperm(n_in, generator=g)[:m]
        keep = torch.rand(rows.shape[0], generator=g) < density
        nbr[:rows.shape[0], k] = torch.where(keep, rows, -1).int()
    return nbr


def operands(m, n_in, kvol, cin, cout, groups, dtype, seed, density=0.4):
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(n_in, cin, generator=g, dtype=torch.float64).to(dtype)
    weight = (torch.randn(kvol, cin // groups, cout, generator=g, dtype=torch.float64) / (kvol * cin) ** 0.5).to(dtype)
    grad = torch.randn(m, cout, generator=g, dtype=torch.float64).to(dtype)
    return features, weight, grad, random_map(m, n_in, kvol, density, seed)


def references(features, weight, grad, nbr, groups):
    """gather_mm, its input gradient and the filter gradient in float64 from the CPU backend
    (inputs as rounded to their dtype, so only the arithmetic differs)."""
    f, w, g = features.double().cpu(), weight.double().cpu(), grad.double().cpu()
    nbr = nbr.cpu()
    out = CPU.gather_mm(f, w, nbr, None, groups)
    nbr_t = CPU.transpose_map(nbr, f.shape[0])
    dx = CPU.gather_mm(g, transpose_grouped(w, groups), nbr_t, nbr, groups)
    dw = CPU.gather_mm_backprop_filter(f, g, nbr, None, groups)
    return out, dx, dw


def transpose_grouped(w, groups):
    """[K, Cin/G, Cout] -> [K, Cout/G, Cin] per group (what autograd passes for the input gradient)."""
    k, cin_g, cout = w.shape
    return w.view(k, cin_g, groups, cout // groups).permute(0, 3, 2, 1).reshape(k, cout // groups, groups * cin_g)


def run_cuda_path(features, weight, grad, nbr, groups):
    nbr_t = CUDA["transpose_map"](nbr, features.shape[0])
    out = CUDA["gather_mm"](features, weight, nbr, None, groups)
    dx = CUDA["gather_mm"](grad, transpose_grouped(weight, groups), nbr_t, nbr, groups)
    dw = CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, groups)
    return out, dx, dw


# Tolerance against the float64 reference: relative to the largest reference value (fp32 ~ the
# issue's 1e-5; half types a few units of their last place over sums of up to a few hundred terms).
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def assert_close_to(actual, reference, dtype, what):
    assert actual.dtype == dtype, f"{what}: dtype {actual.dtype}, expected {dtype}"
    assert actual.shape == reference.shape, f"{what}: shape {tuple(actual.shape)} vs {tuple(reference.shape)}"
    if reference.numel() == 0:
        return
    scale = max(reference.abs().max().item(), 1e-30)
    err = (actual.double().cpu() - reference).abs().max().item() / scale
    assert err <= TOLERANCE[dtype], f"{what}: max error {err:.2e} of the largest value, tolerance {TOLERANCE[dtype]:.0e}"


def launched(kernel):
    """{(dtype, tile name)} launched of ``kernel`` in this process so far."""
    return {(d, t) for (k, d, t) in launch.launches if k == kernel}


def environment_without_interpreter():
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env.pop(registration.CUDA_ON_CPU_ENV, None)
    return env


def network_step(seed=0, dtype=torch.float32, device="cpu"):
    """One training step of a small SECOND-like block (SubM, BatchNorm1d+ReLU, strided conv,
    BatchNorm1d+ReLU, SubM, inverse conv) on a generated scene: the output voxels and features,
    the loss, every parameter's gradient and BatchNorm's running statistics after the step."""
    import mx_sparse
    from torch import nn
    torch.manual_seed(seed)
    shape = [10, 14, 12]
    idx = voxels(shape, 2, density=0.2, seed=seed)
    features = torch.randn(idx.shape[0], 4, dtype=dtype)
    net = mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(4, 16, 3, indice_key="subm1"), nn.BatchNorm1d(16), nn.ReLU(),
        mx_sparse.SparseConv3d(16, 32, 3, stride=2, padding=1, indice_key="down1"), nn.BatchNorm1d(32), nn.ReLU(),
        mx_sparse.SubMConv3d(32, 32, 3, indice_key="subm2"),
        mx_sparse.SparseInverseConv3d(32, 8, 3, indice_key="down1")).to(dtype).train().to(device)
    y = net(mx_sparse.SparseConvTensor(features.to(device), idx.to(device), shape, 2))
    loss = (y.features.float() ** 2).mean()
    loss.backward()
    result = {"indices": y.indices, "features": y.features.detach(), "loss": loss.detach()}
    for name, p in net.named_parameters():
        result["grad." + name] = p.grad
    for name, b in net.named_buffers():
        result["buffer." + name] = b
    return {k: v.cpu() for k, v in result.items()}
