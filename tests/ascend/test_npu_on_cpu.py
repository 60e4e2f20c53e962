"""The NPU code path, executed here. In a subprocess with MXS_NPU_ON_CPU=1 (set before `import
mx_sparse`) every mx_sparse op on CPU tensors is the accelerator orchestration that ships for NPU
tensors (mx_sparse/_accelerator: checks, key packing, sorts, un-permutation, per-group loop, maps
held dense as on the NPU, fused BatchNorm+ReLU), and its five device primitives are the AscendC kernels of
kernels/ascend, launched in-process by the emulator with the strict Atlas A2 rules
(mx_sparse.runtime.ascend). Compared with the C++ CPU backend, computed in this process: maps and output
voxels bit-equal, float32 within 1e-5 relative; every one of the five kernels must have been
launched. float64 has no NPU path, so the dense-reference grid runs in float32 there
(tests/test_conv_dense_reference.py's DTYPE)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mx_sparse.runtime import ascend
from mx_sparse._accelerator import registration

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "cuda"))   # cuda_cases.network_step: the small network both paths run
sys.path.insert(0, str(ROOT / "tests"))   # helpers: the call recorder (also in the subprocesses)
from helpers import input_gradient_calls  # noqa: E402
KERNELS = ("SubmMap", "ConvOutKeys", "UniqueSortedKeys", "GatherMm", "GatherMmBackpropFilter")

pytestmark = [
    pytest.mark.skipif(registration.cuda_on_cpu_requested() or registration.npu_on_cpu_requested(),
                       reason="runs its own MXS_NPU_ON_CPU=1 subprocess"),
    pytest.mark.skipif(not ascend.emulator_available(), reason="needs the AscendC sources and a C++ compiler"),
]


def npu_env():
    env = dict(os.environ, MXS_NPU_ON_CPU="1", PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT / "tests" / "cuda")]))
    env.pop("MXS_CUDA_ON_CPU", None)
    return env


def backbone_step(indices, shape):
    """One training step of VoxelBackBone8x (12 sparse convs, fused BatchNorm+ReLU; maps packed on the CPU
    backend, dense on the NPU path):
    the output voxels, features, loss and every parameter's gradient."""
    import mx_sparse
    from mx_sparse.models import VoxelBackBone8x
    torch.manual_seed(0)
    net = VoxelBackBone8x(4).train()
    features = torch.randn(indices.shape[0], 4)
    y = net(mx_sparse.SparseConvTensor(features, indices, shape, 1))
    y = y["out"] if isinstance(y, dict) else y
    loss = (y.features ** 2).mean()
    loss.backward()
    result = {"indices": y.indices, "features": y.features.detach(), "loss": loss.detach()}
    result.update({"grad." + n: p.grad for n, p in net.named_parameters()})
    return result


STEP = r"""
import json, sys, torch
import mx_sparse
from mx_sparse.runtime import ascend
from mx_sparse._accelerator import registration
from cuda_cases import network_step
sys.path.insert(0, TESTS_ASCEND)
from test_npu_on_cpu import backbone_step
for op in list(registration.ORCHESTRATION) + list(registration.PRIMITIVE_NAMES):
    cpu = [l for l in torch._C._dispatch_dump("mx_sparse::" + op).splitlines() if l.startswith("CPU:")]
    where = "batch_norm_operators.cpp" if op in registration.NPU_NATIVE_OPS else "registration.py"   # NPU's C++ BN
    assert cpu and where in cpu[0], (op, cpu)
crop = torch.load(CROP)
torch.save({"network": network_step(), "backbone": backbone_step(*crop)}, RESULT)
json.dump(ascend.emulator_stats(), open(STATS, "w"))
"""


def assert_matches(result, reference):
    assert result.keys() == reference.keys()
    for key, ref in reference.items():
        if ref is None:
            assert result[key] is None, key
        elif ref.is_floating_point():
            torch.testing.assert_close(result[key], ref, rtol=1e-5, atol=1e-5 * max(1.0, ref.abs().max().item()),
                                       msg=lambda m: f"{key}: {m}")
        else:
            assert torch.equal(result[key], ref), key


def test_training_steps_through_the_npu_path_match_the_cpu_backend(tmp_path, scenes):
    from cuda_cases import network_step   # noqa: E402
    indices, shape, _ = scenes["kitti_crop"]   # a 41 x 80 x 80 window of a generated KITTI scene (conftest.py)
    crop = (indices, shape)
    torch.save(crop, tmp_path / "crop.pt")
    reference = {"network": network_step(), "backbone": backbone_step(*crop)}   # C++ CPU backend, this process
    script = (f"TESTS_ASCEND, CROP, RESULT, STATS = {str(Path(__file__).parent)!r}, {str(tmp_path / 'crop.pt')!r}, "
              f"{str(tmp_path / 'result.pt')!r}, {str(tmp_path / 'stats.json')!r}\n" + STEP)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=npu_env(), capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = torch.load(tmp_path / "result.pt")
    assert_matches(got["network"], reference["network"])
    assert_matches(got["backbone"], reference["backbone"])
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert set(stats) == set(KERNELS) and all(stats[k] > 0 for k in KERNELS), stats


def input_gradient_net():
    """A submanifold conv (its map symmetric: the input gradient reads it with the offsets reversed) and
    a strided one (the transposed map), no bias, as tests/cuda/cuda_path_checks.py's in-place check."""
    import mx_sparse
    torch.manual_seed(0)
    return mx_sparse.SparseSequential(mx_sparse.SubMConv3d(4, 16, 3, bias=False, indice_key="a"),
                                      mx_sparse.SparseConv3d(16, 8, 3, stride=2, padding=1, bias=False))


def input_gradients(indices, shape, features, create_graphs, calls_mode=None):
    """d(sum of squares of the net's output) / d(features), once per create_graph flag, each with the
    aten and mx_sparse operators its backward ran (calls_mode: a TorchDispatchMode factory, or none)."""
    import mx_sparse
    net = input_gradient_net()
    out = []
    for create_graph in create_graphs:
        f = features.clone().requires_grad_()
        loss = net(mx_sparse.SparseConvTensor(f, indices, shape, 1)).features.square().sum()
        if calls_mode is None:
            out.append((torch.autograd.grad(loss, f, create_graph=create_graph)[0].detach(), None))
            continue
        with calls_mode() as calls:
            grad = torch.autograd.grad(loss, f, create_graph=create_graph)[0].detach()
        out.append((grad, calls.seen))
    return out


INPUT_GRADIENT = r"""
import sys, torch
sys.path.insert(0, TESTS_ASCEND)
from test_npu_on_cpu import input_gradients
from helpers import RecordedCalls
cpu = [l for l in torch._C._dispatch_dump("mx_sparse::_gather_mm_transposed").splitlines() if l.startswith("CPU:")]
assert cpu and "registration.py" in cpu[0], cpu   # the emulator's AscendC GatherMm reading W transposed

indices, shape, features = torch.load(INPUTS)
torch.save(input_gradients(indices, shape, features, (False, True), RecordedCalls), RESULT)
"""


def test_input_gradients_read_the_weights_in_place_on_the_npu_path(tmp_path, scenes):
    """A backward that records no graph takes each convolution's input gradient as one
    _gather_mm_transposed call on the layer's own weight (AscendC GatherMm with the weight read
    transposed, offsets reversed for the submanifold map): no transposed copy of a weight (no
    index_select or clone of a 3-D tensor) (kernels/schema/autograd.cpp). With create_graph, gather_mm
    on the copy, one per layer. Both equal the C++ CPU backend's input gradient within 1e-5."""
    indices, shape, _ = scenes["kitti_crop"]
    features = torch.randn(indices.shape[0], 4, generator=torch.Generator().manual_seed(1))
    torch.save((indices, shape, features), tmp_path / "inputs.pt")
    script = (f"TESTS_ASCEND, INPUTS, RESULT = {str(Path(__file__).parent)!r}, {str(tmp_path / 'inputs.pt')!r}, "
              f"{str(tmp_path / 'result.pt')!r}\n" + INPUT_GRADIENT)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=npu_env(), capture_output=True, text=True,
                          timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (reference, _), = input_gradients(indices, shape, features, (False,))   # C++ CPU backend, this process
    for (grad, seen), create_graph in zip(torch.load(tmp_path / "result.pt"), (False, True)):
        assert input_gradient_calls(seen) == ((0, 2) if create_graph else (2, 0)), seen
        torch.testing.assert_close(grad, reference, rtol=1e-5, atol=1e-5 * reference.abs().max().item())


def test_dense_reference_grid_through_the_npu_path():
    """tests/test_conv_dense_reference.py (float32 under the switch) with the orchestration and the
    emulated AscendC kernels; left out: float64 gradcheck and the float64 hand-computed 4-D case
    (no float64 on the NPU), the reduced-precision test (its reference is mx_sparse in float64;
    tests/ascend/test_gather_mm.py checks float16/bfloat16 per kernel against float64)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
           "-k", "not gradcheck and not reduced_precision and not 4d_subm", "tests/test_conv_dense_reference.py"]
    proc = subprocess.run(cmd, cwd=ROOT, env=npu_env(), capture_output=True, text=True, timeout=3000)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = re.search(r"(\d+) passed", proc.stdout)
    assert summary and int(summary.group(1)) >= 100 and " skipped" not in proc.stdout.splitlines()[-1], tail


def test_importance_and_open3d_surface_through_the_npu_path():
    """tests/test_importance.py and tests/test_open3d_surface.py (float32 there; the open3d-oracle
    tests skip where open3d-cpu is absent) with the orchestration and the emulated AscendC kernels."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_importance.py",
           "tests/test_open3d_surface.py"]
    proc = subprocess.run(cmd, cwd=ROOT, env=npu_env(), capture_output=True, text=True, timeout=1800)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = re.search(r"(\d+) passed", proc.stdout)
    assert summary and int(summary.group(1)) >= 60, tail
