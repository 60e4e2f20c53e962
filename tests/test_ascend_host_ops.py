"""bench/ascend_host_ops.count_host_ops: operators called from Python are counted, operators nested
inside another operator or inside a paused kernel launch are not; .item() and the named read
functions are host reads (hand-counted cases). And bench.ascend_cost --step from a fresh shell,
counting the host side through the NPU path itself."""
import os
import pathlib
import sys
import types

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.ascend_host_ops import count_host_ops  # noqa: E402
from mx_sparse.runtime import ascend# noqa: E402


def test_counts_python_level_operators_and_reads():
    x = torch.arange(16.0)

    def step():
        y = (x * 2).sum()                              # mul, sum
        y.item()                                       # item (-> _local_scalar_dense: a host read)
        torch.nn.functional.linear(x[None], torch.ones(3, 16))   # unsqueeze (view), ones, linear (addmm nested)
    r = count_host_ops(step)
    assert r["by_op"] == {"aten::mul": 1, "aten::sum": 1, "aten::item": 1, "aten::ones": 1, "aten::linear": 1}
    assert r["torch_ops"] == 5 and r["view_ops"] == 1 and r["host_reads"] == 1


def test_paused_launches_and_read_functions(monkeypatch):
    mod = types.ModuleType("mxs_fake_backend")

    def launch(t):          # a "kernel": its operators are the device's work, not the host's
        return (t + 1).mul_(3).sum()

    def read(t, why):
        return t.tolist()
    mod.launch, mod.read = launch, read
    monkeypatch.setitem(sys.modules, "mxs_fake_backend", mod)
    x = torch.ones(4)

    def step():
        for _ in range(3):
            mod.launch(x)
        mod.read(x.clone(), "sizes")                   # clone: 1 operator; the read itself: 1 host read
    r = count_host_ops(step, pause_in=[("mxs_fake_backend", "launch")], reads_in=[("mxs_fake_backend", "read")])
    assert r["kernel_launches"] == 3 and r["torch_ops"] == 1 and r["by_op"] == {"aten::clone": 1}
    assert r["host_reads"] == 1 and r["reads"] == {"mxs_fake_backend.read": 1}
    assert mod.launch is launch                        # patches undone


def _tiny_step_counters():
    """A step of one layer with hand-built launch records (ours: one gather_mm launch; mx_driving's
    algorithm: one launch and one torch-op record), in bench/ascend_step.collect's JSON form."""
    core = dict(core=0, gm_to_ub_bytes=10 ** 6, ub_to_gm_bytes=10 ** 6, ub_to_ub_bytes=0, dma_calls=2000,
                vector_instr=100, vector_elems=0, cube_flops=10 ** 8, matmul_calls=4, scalar_gm_get=0,
                scalar_gm_set=0, scalar_ub_get=0, scalar_ub_set=0, atomic_bytes=0, sync_all=0, scalar_blocks=1000,
                vector_gather_instr=0, matmul_gm_bytes=0)

    def rec(dma_calls):
        c = dict(core, dma_calls=dma_calls)
        return dict(kernel="gather_mm", block_dim=1, mode="AIV_ONLY", soc="Ascend910B2", total=dict(c), cores=[c])
    ours = [dict(layer="conv_input", phase="forward", records=[rec(2000)], torch=None)]
    mx = [dict(layer="conv_input", phase="forward", records=[rec(50000)],
               torch=dict(kernel="torch", torch_ops=3, bytes=10 ** 6))]
    layer = dict(name="conv_input", kind="subm", cin=4, cout=16, n_in=100, n_out=100, K=27, pairs=700)
    return {"tree": ".", "runs": [{"preset": "kitti", "soc": "Ascend910B2", "ours": {"float16": ours},
                                   "mx_driving": {"float16": mx}, "layers": [layer]}]}


@pytest.mark.skipif(not ascend.emulator_available(), reason="needs the AscendC sources and a C++ compiler")
def test_step_model_counts_the_npu_path_from_a_fresh_shell(tmp_path):
    """``python -m bench.ascend_cost --step`` in a shell with no switch set (no TRITON_INTERPRET, no
    MXS_*_ON_CPU): it counts the host side through the NPU path itself (a subprocess with
    MXS_NPU_ON_CPU=1, the AscendC kernels launched in the emulator; small scene) and prints the
    modelled step as ranges over the per-DMA and per-operator costs, which are recomputed here from
    the counts it printed. Tabulates a hand-built step (--tabulate) instead of emulating KITTI."""
    import json
    import re
    import subprocess

    from bench import ascend_step
    step_json = tmp_path / "step.json"
    step_json.write_text(json.dumps(_tiny_step_counters()))
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "MXS_NPU_ON_CPU", "MXS_CUDA_ON_CPU")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "bench.ascend_cost", "--step", "--tabulate", "--step-json",
                           str(step_json), "--host-voxels", "60"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    counted = re.search(r"through the npu-on-cpu path.*?\*\*(\d+) torch operators\*\* \(\+\d+ view/metadata ops, "
                        r"not charged\), \*\*(\d+) host reads\*\*, (\d+) kernel launches", out)
    assert counted, out[-3000:]
    ops, reads, launches = map(int, counted.groups())
    # the NPU path: maps are held dense (no pack_map / unpack_map reads), every kernel an emulator launch
    assert 0 < ops and reads <= 8 and launches > 0, (ops, reads, launches)
    result = _tiny_step_counters()
    rng = ascend_step.step_range(result["runs"][0], "float16", {"torch_ops": ops, "host_reads": reads})
    fast, slow, worst, best = ascend_step.range_summary(rng)
    assert f"| {fast * 1e3:.1f}-{slow * 1e3:.1f} | **{worst:.2f}-{best:.2f}x** |" in out, out[-3000:]
    assert {r["torch_op_s"] for r in rng} == {5e-6, 30e-6} and {r["dma_cycles"] for r in rng} == {25, 50, 100}
