"""bench/gpu_check.py (the prepared GPU check, tools/gpu_check.sh): its argument handling, and a
clear failure (status 2, nothing run) where torch sees no CUDA GPU -- the case on this machine."""
import os
import subprocess
import sys

import pytest
import torch

from bench import gpu_check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_defaults(monkeypatch):
    monkeypatch.delenv("MXS_GPU_CHECK_WHEELS", raising=False)
    args = gpu_check.parse_args([])
    assert args.out == "gpu_check" and args.budget == 540 and args.wheel_dirs == [] and args.profile_args == []
    assert not args.skip_tests and args.tests_timeout == 200


def test_benchmark_options_pass_through_after_a_double_dash(monkeypatch):
    monkeypatch.delenv("MXS_GPU_CHECK_WHEELS", raising=False)
    args = gpu_check.parse_args(["--skip-tests", "--", "--modes", "fp32-ieee", "--steps", "5"])
    assert args.skip_tests and args.profile_args == ["--modes", "fp32-ieee", "--steps", "5"]


def test_tests_run_compiled_kernels():
    part = gpu_check.tests_part(100)
    assert part.argv[1:5] == ["-m", "pytest", "-m", "cuda"] and part.timeout == 100
    assert part.env["TRITON_INTERPRET"] == "0" and part.env["MXS_CUDA_ON_CPU"] == "0"


def test_wheel_directories_from_the_environment(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    monkeypatch.setenv("MXS_GPU_CHECK_WHEELS", f"{a}:{b}")
    args = gpu_check.parse_args(["--install", "spconv-cu120"])
    assert args.wheel_dirs == [str(a), str(b)] and args.install == ["spconv-cu120"]


@pytest.mark.parametrize("argv,message", [
    (["--budget", "0"], "--budget: expected a positive number of seconds, got 0"),
    (["--tests-timeout", "-5"], "--tests-timeout: expected a positive number of seconds, got -5"),
    (["--wheels", "/no/such/dir"], "--wheels: not a directory: /no/such/dir"),
    (["--install", "spconv-cu120"], "--install needs --wheels"),
    (["--", "--modes", "fp8"], "--modes: unknown mode 'fp8'"),
    (["--", "--steps", "0"], "--steps: expected at least 1, got 0"),
])
def test_bad_arguments_are_named(argv, message, capsys, monkeypatch):
    monkeypatch.delenv("MXS_GPU_CHECK_WHEELS", raising=False)
    with pytest.raises(SystemExit) as e:
        gpu_check.parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is visible: the check would run")
def test_fails_clearly_without_a_gpu(tmp_path):
    env = dict(os.environ, MXS_GPU_CHECK_WHEELS="", PYTHON=sys.executable)
    out = tmp_path / "out"
    proc = subprocess.run(["bash", os.path.join(ROOT, "tools", "gpu_check.sh"), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == gpu_check.NO_GPU
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_profile: no CUDA GPU visible to torch")
    assert lines[0].endswith("nothing was run.")
    assert not out.exists()
