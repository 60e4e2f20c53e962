"""tests/npu/run_on_atlas.sh without an NPU: a clear "no NPU" message and exit 3, nothing built; its
argument handling. (On an Atlas A2 the script itself is the test.)"""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "npu" / "run_on_atlas.sh"


def _run(*args, **env):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHON": sys.executable, **env})


def test_without_npu_it_says_so_and_builds_nothing(tmp_path):
    r = _run()
    assert r.returncode == 3, r.stdout + r.stderr
    assert "run_on_atlas.sh: no NPU here -- torch_npu is not importable" in r.stdout
    assert "Nothing was built or run" in r.stdout and "=== build" not in r.stdout


def test_arguments():
    assert _run("--help").returncode == 0 and "--drivingsdk" in _run("--help").stdout
    r = _run("--frobnicate")
    assert r.returncode == 2 and "unknown argument --frobnicate" in r.stderr
