"""MXS_NPU_ON_CPU=1 wiring (mx_sparse/_accelerator/registration.py), tested with a STAND-IN emulator
(standin_npu_emulator.py: the fallback primitives in place of mx_sparse.runtime.ascend's AscendC kernels):
in a subprocess with the switch set before import, every mx_sparse op on CPU tensors must be the
orchestration, its five primitives the emulator's, and the suite's dense-reference tests must pass
through them. The real emulator's primitives replace the stand-in when mx_sparse.runtime.ascend exists."""
import os
import re
import subprocess
import sys

import pytest
import torch

from mx_sparse._accelerator import registration

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

pytestmark = pytest.mark.skipif(registration.cuda_on_cpu_requested() or registration.npu_on_cpu_requested(),
                                reason="runs its own MXS_NPU_ON_CPU=1 subprocess")

WIRING = r"""
import standin_npu_emulator as standin
import torch, mx_sparse
from mx_sparse._accelerator import registration
for op in list(registration.ORCHESTRATION) + list(registration.PRIMITIVE_NAMES):
    cpu = [l for l in torch._C._dispatch_dump("mx_sparse::" + op).splitlines() if l.startswith("CPU:")]
    where = ("kernels/orchestration/batch_norm_operators.cpp" if op in registration.NPU_NATIVE_OPS
             else "mx_sparse/_accelerator/registration.py")   # the NPU's C++ BatchNorm, else Python
    assert cpu and where in cpu[0], (op, cpu)
idx = torch.load(IDX)
subm = torch.ops.mx_sparse.build_subm_map(idx, [6, 7, 8], 2, [3, 3, 3], [1, 1, 1])
out, nbr, out_shape = torch.ops.mx_sparse.build_conv_map(idx, [6, 7, 8], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1],
                                                         [1, 1, 1])
f = torch.randn(idx.shape[0], 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
w = torch.randn(27, 2, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
y = torch.ops.mx_sparse.gather_mm(f, w, nbr, None, 2)
dw = torch.ops.mx_sparse.gather_mm_backprop_filter(f, torch.ones_like(y), nbr, None, 2)
torch.save({"subm": subm, "out": out, "nbr": nbr, "out_shape": out_shape, "y": y, "dw": dw,
            "calls": dict(standin.CALLS)}, RESULT)
"""


def test_npu_on_cpu_registers_the_orchestration_and_the_emulator_primitives(tmp_path):
    g = torch.Generator().manual_seed(3)
    cells = torch.randperm(2 * 6 * 7 * 8, generator=g)[:150]
    idx = torch.stack([cells // 336, cells // 56 % 6, cells // 8 % 7, cells % 8], 1).int()
    torch.save(idx, tmp_path / "idx.pt")
    script = f"IDX, RESULT = {str(tmp_path / 'idx.pt')!r}, {str(tmp_path / 'result.pt')!r}\n" + WIRING
    env = dict(os.environ, MXS_NPU_ON_CPU="1", PYTHONPATH=os.pathsep.join([HERE, os.path.join(ROOT, "tests")]))
    env.pop("MXS_CUDA_ON_CPU", None)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = torch.load(tmp_path / "result.pt")
    ops = torch.ops.mx_sparse                                   # the C++ CPU backend, in this process
    assert torch.equal(got["subm"], ops.build_subm_map(idx, [6, 7, 8], 2, [3, 3, 3], [1, 1, 1]))
    out, nbr, out_shape = ops.build_conv_map(idx, [6, 7, 8], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    assert torch.equal(got["out"], out) and torch.equal(got["nbr"], nbr)
    assert got["out_shape"] == out_shape == [3, 4, 4]   # (s + 2 - 2 - 1) // 2 + 1 per axis
    f = torch.randn(idx.shape[0], 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    w = torch.randn(27, 2, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    y = ops.gather_mm(f, w, nbr, None, 2)
    torch.testing.assert_close(got["y"], y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got["dw"], ops.gather_mm_backprop_filter(f, torch.ones_like(y), nbr, None, 2),
                               rtol=1e-12, atol=1e-12)
    # two subm/conv lookups, one of each strided-map primitive, one gather call per group
    assert got["calls"] == {"_sorted_key_lookup": 2, "_conv_out_keys": 1, "_unique_sorted_keys": 1,
                            "_gather_mm_one_group": 2, "_gather_mm_backprop_filter_one_group": 2}


def test_dense_reference_tests_through_the_orchestration_with_standin_primitives():
    env = dict(os.environ, MXS_NPU_ON_CPU="1", PYTHONPATH=HERE)
    env.pop("MXS_CUDA_ON_CPU", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "standin_npu_emulator",
           "-k", "not gradcheck", "tests/test_conv_dense_reference.py"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = re.search(r"(\d+) passed", proc.stdout)
    assert summary and int(summary.group(1)) >= 30 and " skipped" not in proc.stdout.splitlines()[-1], tail


def test_both_switches_are_refused():
    with pytest.raises(RuntimeError, match="set one"):
        registration.plan(cuda_on_cpu=True, npu_on_cpu=True, npu_binding=False, npu_primitives={})


def test_an_emulator_without_every_primitive_is_refused():
    from mx_sparse._accelerator import fallback
    partial = {k: v for k, v in fallback.PRIMITIVES.items() if k != "_conv_out_keys"}
    with pytest.raises(RuntimeError, match="_conv_out_keys"):
        registration.plan(cuda_on_cpu=False, npu_on_cpu=True, npu_binding=False, npu_primitives=partial)


def test_plan_per_key():
    table = registration.plan(cuda_on_cpu=False, npu_on_cpu=False, npu_binding=True)
    assert set(table) == {"CompositeExplicitAutograd", "CUDA", "PrivateUse1"}
    # primitives: the C++ binding; the BatchNorm ops: C++ too (registered apart, npu_native_keys)
    assert set(table["PrivateUse1"]) == set(registration.ORCHESTRATION) - set(registration.NPU_NATIVE_OPS)
    assert registration.npu_native_keys(npu_on_cpu=False, npu_binding=True) == ["PrivateUse1"]
    assert registration.npu_native_keys(npu_on_cpu=True, npu_binding=False) == ["CPU"]
    assert registration.npu_native_keys(npu_on_cpu=False, npu_binding=False) == []
    # all Triton, and the optional primitives, which no Python table but CUDA's has (no fallback:
    # autograd makes the transposed weight, the builders unpack the unique keys and turn positions
    # into rows, where a device has no kernel for them; the NPU binding registers its AscendC
    # _gather_mm_transposed itself, in C++, with the five)
    optional = set(registration.OPTIONAL_PRIMITIVE_NAMES)
    assert optional == {"_gather_mm_transposed", "_conv_output_rows", "_sorted_key_lookup_rows"}
    assert set(table["CUDA"]) == set(registration.ORCHESTRATION) | set(registration.PRIMITIVE_NAMES) | optional
    assert all(not optional & set(table[key]) for key in ("CompositeExplicitAutograd", "PrivateUse1"))
    assert "PrivateUse1" not in registration.plan(cuda_on_cpu=False, npu_on_cpu=False, npu_binding=False)


def test_npu_on_cpu_takes_the_optional_primitive_where_the_emulator_supplies_it():
    """MXS_NPU_ON_CPU=1: the CPU key gets the emulator's _gather_mm_transposed (AscendC GatherMm reading
    the weight transposed) when it supplies one, as the NPU binding does for PrivateUse1; an emulator
    without it (the stand-in's five primitives) leaves it unregistered, so autograd copies the weight."""
    from mx_sparse._accelerator import fallback

    def transposed(features, weight, nbr, reverse_offsets):
        raise AssertionError("not called by plan")

    five = dict(fallback.PRIMITIVES)
    table = registration.plan(cuda_on_cpu=False, npu_on_cpu=True, npu_binding=False,
                              npu_primitives={**five, "_gather_mm_transposed": transposed})
    assert table["CPU"]["_gather_mm_transposed"] is transposed
    assert set(table["CPU"]) == (set(registration.ORCHESTRATION) - set(registration.NPU_NATIVE_OPS)) | set(
        registration.PRIMITIVE_NAMES) | {"_gather_mm_transposed", "voxelize_hard", "voxelize_dynamic"}
    assert "_gather_mm_transposed" not in registration.plan(cuda_on_cpu=False, npu_on_cpu=True, npu_binding=False,
                                                            npu_primitives=five)["CPU"]


def test_map_packing_is_the_orchestrations_choice_per_device(monkeypatch):
    """CUDA and the NPU hold maps dense (packing costs host reads and torch operators there, and
    saves MBs next to GBs: registration.PACKS_MAPS), the CPU kernels pack; CPU tensors served by an
    orchestration take that device's choice."""
    from mx_sparse.nn import packed_map
    assert not registration.packs_maps("cuda")
    assert not registration.packs_maps("npu") and not registration.packs_maps("privateuseone")
    monkeypatch.setattr(registration, "_cpu_served_as", [])
    assert registration.packs_maps("cpu")
    monkeypatch.setattr(registration, "_cpu_served_as", ["CUDA"])
    assert not registration.packs_maps("cpu")
    packed_map._has_packing_kernels.cache_clear()
    try:
        assert not packed_map.HeldMap(torch.full((4, 27), -1, dtype=torch.int32))._packable
    finally:
        packed_map._has_packing_kernels.cache_clear()
    monkeypatch.setattr(registration, "_cpu_served_as", ["PrivateUse1"])
    assert not registration.packs_maps("cpu")
