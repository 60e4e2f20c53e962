"""The AscendC sources against Huawei's real AscendC headers (kernels/ascend/real_api/real_api_check.py).

Needs an asc-devkit snapshot: MXS_ASC_DEVKIT = a checkout (include/kernel_operator.h) or a bare git
clone of it (e.g. `fetch github:mirror-cann/asc-devkit`, a mirror of CANN's asc-devkit).
CI has no network, so without it these tests are skipped.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "kernels" / "ascend" / "real_api" / "real_api_check.py"
DEVKIT = os.environ.get("MXS_ASC_DEVKIT")

pytestmark = pytest.mark.skipif(
    not DEVKIT, reason="MXS_ASC_DEVKIT is not set: the real-AscendC-API check needs an asc-devkit checkout "
                       "(CI has no network to fetch one)")


def run_check(*args):
    return subprocess.run([sys.executable, str(TOOL), "--devkit", DEVKIT, *args], capture_output=True, text=True,
                          timeout=1800)


def test_sources_type_check_against_the_real_api():
    """Every kernel, tiling and glue source, the API probes and the TCubeTiling layout."""
    r = run_check("-j", "2")
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "real_api_check: all checks passed" in r.stdout
    assert r.stdout.count("ok    kernel ") == len(list((REPO / "kernels" / "ascend").glob("*/op_kernel/*.cpp")))
    assert "layout TCubeTiling" in r.stdout


def test_check_rejects_a_kernel_the_real_api_rejects(tmp_path):
    """A kernel that the emulator alone would accept before this check existed (a GlobalTensor
    ReinterpretCast, an int scalar for a float tensor) fails the check and is named."""
    bad = tmp_path / "bad_kernel.cpp"
    bad.write_text('#include "kernel_operator.h"\nusing namespace AscendC;\n'
                   'extern "C" __global__ __aicore__ void bad(GM_ADDR g) {\n'
                   '    TPipe pipe; TBuf<TPosition::VECCALC> b; pipe.InitBuffer(b, 1024);\n'
                   '    LocalTensor<float> f = b.Get<float>();\n'
                   '    Adds(f, f, 1, 64);\n'
                   '}\n')
    r = run_check("--only", "layout", "--kernel", str(bad))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL  kernel" in r.stdout and "bad_kernel.cpp" in r.stdout and "Adds" in r.stdout
