"""bench/gpu_profile.py (the GPU benchmark) without a GPU: its arguments, the parts it plans, the
part runner (each part a subprocess with a hard timeout; a part that crashes or hangs keeps
its records and does not lose the others'), the JSON records, the kernel table's arithmetic,
and the clear exit (status 2, one line, nothing written) where torch sees no CUDA GPU."""
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from bench import gpu_profile, gpu_profile_parts, kernel_table, part_runner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_defaults_and_the_planned_parts():
    args = gpu_profile.parse_args([])
    assert args.modes == list(gpu_profile.MODES) and args.steps == 20 and args.budget is None
    names = [p.name for p in gpu_profile.plan(args)]
    assert names[0] == "env" and names[-len(gpu_profile.SPCONV_TRITON_MODES):] == [
        f"spconv-triton-{m}" for m in gpu_profile.SPCONV_TRITON_MODES]          # spconv-Triton last
    assert [n for n in names if n.startswith("step-")] == [f"step-{m}" for m in gpu_profile.MODES]
    assert {"kernels", "gemm", "graph", "clocks"} <= set(names)
    # every part a subprocess of this module, with its own timeout
    for part in gpu_profile.plan(args):
        assert part.argv[:3] == [sys.executable, "-m", "bench.gpu_profile"] and "--run-part" in part.argv
    assert set(gpu_profile_parts.PARTS) == set(gpu_profile.PARTS)


def test_spconv_tf32_switch_and_timeouts():
    args = gpu_profile.parse_args(["--parts", "spconv,spconv-triton", "--spconv-timeout", "33",
                                   "--spconv-triton-timeout", "44", "--spconv-modes", "fp32-ieee,fp32-tf32"])
    parts = {p.name: p for p in gpu_profile.plan(args)}
    assert parts["spconv-fp32-tf32"].env == {**gpu_profile.COMPILED, "SPCONV_ALLOW_TF32": "1"}
    assert parts["spconv-fp32-ieee"].env == {**gpu_profile.COMPILED, "SPCONV_ALLOW_TF32": "0"}
    assert all(p.env["TRITON_INTERPRET"] == "0" for p in parts.values())
    assert parts["spconv-fp32-tf32"].timeout == 33 and parts["spconv-triton-amp-fp16"].timeout == 44


@pytest.mark.parametrize("argv,message", [
    (["--modes", "fp32-ieee,fp8"], "--modes: unknown mode 'fp8'"),
    (["--parts", "step,warp"], "--parts: unknown mode 'warp'"),
    (["--steps", "0"], "--steps: expected at least 1, got 0"),
    (["--warmup", "0"], "--warmup: expected at least 1"),
    (["--budget", "-3"], "expected a positive number of seconds, got -3"),
    (["--scene", "waymo"], "invalid choice: 'waymo'"),
])
def test_bad_arguments_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        gpu_profile.parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_help_and_list_parts_need_no_gpu():
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_profile", "--help"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "--out" in proc.stdout and "spconv-triton" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_profile", "--list-parts", "--parts", "env,graph"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["env", "(timeout", "30", "s)", "graph", "(timeout",
                                                            "120", "s)"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is visible: the benchmark would run")
def test_exits_2_with_one_line_without_a_gpu(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_profile", "--out", str(out)], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, timeout=120)
    assert proc.returncode == gpu_profile.NO_GPU
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_profile: no CUDA GPU visible to torch"), proc.stderr
    assert proc.stdout == "" and not out.exists()


def _fake(code):
    """A part that runs ``code`` with emit() at hand."""
    prelude = f"import sys, time, os; sys.path.insert(0, {ROOT!r}); from bench.part_runner import emit; "
    return [sys.executable, "-c", prelude + code]


def test_parts_run_in_order_and_a_crash_or_a_hang_loses_nothing(tmp_path):
    parts = [
        part_runner.Part("first", _fake("emit({'record': 'x', 'value': 1}); emit({'record': 'x', 'value': 2})"), 60),
        part_runner.Part("crashes", _fake("emit({'record': 'x', 'value': 3}); raise RuntimeError('boom')"), 60),
        # a hang whose child process would outlive a plain kill: the whole group goes
        part_runner.Part("hangs", _fake("emit({'record': 'x', 'value': 4}); import subprocess; "
                                        "subprocess.Popen(['sleep', '300']); time.sleep(300)"), 3),
        part_runner.Part("last", _fake("emit({'record': 'x', 'value': os.environ['PART_FLAG']})"), 60,
                         {"PART_FLAG": "set"}),
    ]
    started = time.perf_counter()
    closing = part_runner.run_parts(parts, str(tmp_path))
    assert time.perf_counter() - started < 60
    assert [(c["part"], c["status"]) for c in closing] == [("first", "ok"), ("crashes", "failed"),
                                                           ("hangs", "timeout"), ("last", "ok")]
    assert closing[1]["rc"] == 1 and "RuntimeError: boom" in closing[1]["tail"]
    assert closing[2]["rc"] is None and closing[2]["timeout_s"] == 3
    records = part_runner.read_records(str(tmp_path / part_runner.RESULTS))
    # every record as measured, in order, each part's closing record after its own lines
    assert [(r["record"], r.get("value", r.get("part"))) for r in records] == [
        ("x", 1), ("x", 2), ("part", "first"), ("x", 3), ("part", "crashes"), ("x", 4), ("part", "hangs"),
        ("x", "set"), ("part", "last")]
    assert (tmp_path / "crashes.log").read_text().count("boom") >= 1


def test_a_spent_budget_skips_the_remaining_parts(tmp_path):
    parts = [part_runner.Part("slow", _fake("time.sleep(30)"), 60),
             part_runner.Part("never", _fake("emit({'record': 'x'})"), 60)]
    closing = part_runner.run_parts(parts, str(tmp_path), budget=part_runner.MIN_PART_SECONDS + 2)
    assert [(c["part"], c["status"]) for c in closing] == [("slow", "timeout"), ("never", "skipped")]
    assert closing[0]["timeout_s"] <= part_runner.MIN_PART_SECONDS + 2
    assert not [r for r in part_runner.read_records(str(tmp_path / part_runner.RESULTS)) if r["record"] == "x"]


def test_a_line_cut_by_a_kill_is_skipped(tmp_path):
    path = tmp_path / "r.jsonl"
    part_runner.emit({"record": "a", "n": 1}, str(path))
    with open(path, "a") as f:
        f.write('{"record": "b", "n"')
    assert part_runner.read_records(str(path)) == [{"record": "a", "n": 1}]
    assert json.loads(path.read_text().splitlines()[0]) == {"record": "a", "n": 1}


def test_kernel_table_by_name_and_category():
    kernels = [("gather_mm_kernel", 0, 10), ("gather_mm_kernel", 20, 26), ("filter_splits_kernel", 5, 15),
               ("scale_shift_relu_kernel", 30, 31), ("void cub::DeviceRadixSortOnesweepKernel", 40, 44),
               ("Memcpy DtoH (Device -> Pageable)", 50, 52), ("elementwise_kernel", 60, 61)]
    t = kernel_table.table(kernels)
    assert t["kernels"][0] == {"kernel": "gather_mm_kernel", "category": "GEMM", "count": 2, "total_us": 16}
    assert t["categories_us"] == {"GEMM": 26, "BatchNorm": 1, "maps+sort": 4, "copies": 2, "other": 1}
    assert t["kernel_sum_us"] == 34 and t["launches"] == 7
    assert t["gpu_busy_us"] == 15 + 6 + 1 + 4 + 2 + 1          # [0, 15) overlaps counted once
    assert kernel_table.host_waits(["cudaStreamSynchronize", "Memcpy DtoH (Device -> Pageable)",
                                    "cudaLaunchKernel", "cudaDeviceSynchronize"]) == {
        "device_to_host_copies": 1, "synchronizations": 2}


def test_every_triton_kernel_of_the_package_has_its_category():
    """Each Triton kernel mx_sparse defines (read from the sources: no triton import) is counted
    where it belongs: a renamed kernel would otherwise fall into "other" in a GPU profile."""
    import ast
    from pathlib import Path
    cuda = Path(kernel_table.__file__).resolve().parents[1] / "mx_sparse" / "_cuda"
    expected = {"gather_kernels.py": "GEMM", "batch_norm_kernels.py": "BatchNorm", "map_kernels.py": "maps+sort",
                "plan_kernels.py": "maps+sort"}
    seen = 0
    for module, category in expected.items():
        tree = ast.parse((cuda / module).read_text())
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef) and fn.name.endswith("_kernel") and fn.decorator_list:
                assert kernel_table.category(fn.name) == category, (module, fn.name)
                seen += 1
    assert seen >= 13


def test_summary_lines():
    records = [{"record": "step", "library": "mx_sparse", "mode": "fp32-ieee", "maps": "cached", "gpu_ms": 10.0,
                "wall_ms": 12.0, "host_ms": 9.0, "first_step_s": 3.0},
               {"record": "part", "part": "graph", "status": "timeout", "rc": None}]
    text = gpu_profile.summary(records)
    assert "mx_sparse fp32-ieee" in text and "gpu 10.00 ms" in text and "part graph: timeout" in text
