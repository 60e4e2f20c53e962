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
    assert args.scene == ["kitti_b1"] and args.dtype == "fp32" and args.steps == 20 and args.wheel_dirs == []
    assert gpu_check.parse_args(["--scene", "nusc_b1", "--scene", "kitti_b4"]).scene == ["nusc_b1", "kitti_b4"]


def test_wheel_directories_from_the_environment(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    monkeypatch.setenv("MXS_GPU_CHECK_WHEELS", f"{a}:{b}")
    args = gpu_check.parse_args(["--install", "spconv-cu120"])
    assert args.wheel_dirs == [str(a), str(b)] and args.install == ["spconv-cu120"]


@pytest.mark.parametrize("argv,message", [
    (["--steps", "0"], "--steps: expected at least 1, got 0"),
    (["--warmup", "-1"], "--warmup: expected 0 or more, got -1"),
    (["--wheels", "/no/such/dir"], "--wheels: not a directory: /no/such/dir"),
    (["--install", "spconv-cu120"], "--install needs --wheels"),
    (["--scene", "waymo"], "invalid choice: 'waymo'"),
    (["--dtype", "fp64"], "invalid choice: 'fp64'"),
])
def test_bad_arguments_are_named(argv, message, capsys, monkeypatch):
    monkeypatch.delenv("MXS_GPU_CHECK_WHEELS", raising=False)
    with pytest.raises(SystemExit) as e:
        gpu_check.parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is visible: the check would run")
def test_fails_clearly_without_a_gpu(tmp_path):
    env = dict(os.environ, MXS_GPU_CHECK_WHEELS="")
    out = tmp_path / "record.json"
    proc = subprocess.run(["bash", os.path.join(ROOT, "tools", "gpu_check.sh"), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == gpu_check.NO_GPU
    assert "no CUDA GPU visible to torch" in proc.stderr and "Nothing was run" in proc.stderr
    assert not out.exists()
