"""The package says what it is: mx_sparse.__version__ (single-sourced in mx_sparse/runtime/version.py,
read by setup.py, with a CHANGELOG.md section), show_config() / python -m mx_sparse."""
import os
import re
import subprocess
import sys

import mx_sparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_version_is_single_sourced():
    assert re.fullmatch(r"\d+\.\d+\.\d+", mx_sparse.__version__)
    out = subprocess.run([sys.executable, "setup.py", "--version"], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == mx_sparse.__version__
    with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
        sections = re.findall(r"^## (\d+\.\d+\.\d+)", f.read(), re.M)
    assert sections and sections[0] == mx_sparse.__version__, sections


def test_python_m_mx_sparse_reports_this_build(monkeypatch):
    env = {**os.environ, "MXS_CPU_POOL_KEEP_MB": "64"}
    out = subprocess.run([sys.executable, "-m", "mx_sparse"], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    c = mx_sparse.runtime.config.config()
    import torch
    assert text.startswith(f"mx_sparse {mx_sparse.__version__}") and f"torch {torch.__version__}" in text
    cpu = next(line for line in text.splitlines() if line.strip().startswith("CPU"))
    assert f"all {len(c['ops'])} ops" in cpu and re.search(r"float32 (AVX-512|portable)", cpu)
    assert c["kernels"]["CPU"] == c["ops"] and {"voxelize_hard", "voxelize_dynamic", "gather_mm"} <= set(c["ops"])
    cuda = next(line for line in text.splitlines() if line.strip().startswith("CUDA"))
    assert ("triton not installed" in cuda) == (c["triton"] is None)
    assert ("gather_mm" in cuda or "all " in cuda) == mx_sparse._core.op_registration.has_kernel("cuda")
    npu = next(line for line in text.splitlines() if line.strip().startswith("NPU"))
    assert ("torch_npu not installed" in npu) == (c["torch_npu"] is None)
    assert "MXS_CPU_POOL_KEEP_MB=64" in text and "MXS_CPU_PORTABLE=(unset)" in text
    portable = subprocess.run([sys.executable, "-m", "mx_sparse"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "MXS_CPU_PORTABLE": "1"}).stdout
    assert "float32 portable" in portable and "MXS_CPU_PORTABLE=1" in portable
