"""Host tiling functions (plain C++) across shapes: N up to 5 million, channels 1-1024,
K in {1, 27, 125}, fp32/fp16/bf16, platforms 1/2, 3/6, 20/40, 24/48 AIC/AIV."""
import subprocess

import ascend_ops as ao


def test_tiling_functions():
    out = ao.OUT_DIR / "tiling_test"
    ao.OUT_DIR.mkdir(parents=True, exist_ok=True)
    cmd = ["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-I", str(ao.ASC), "-I", str(ao.EMULATOR / "include"),
           *ao.OP_INCLUDE_FLAGS,
           str(ao.HERE / "harness" / "tiling_test.cpp"), *[str(s) for s in ao.TILING_SOURCES], "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "checks OK" in proc.stdout
