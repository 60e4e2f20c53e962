"""The README's main job runs (a few steps) and reports its throughput line."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_train_second_smoke():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_second.py"), "--steps", "3",
                          "--scenes", "1"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    m = re.match(r"done: 3 steps on cpu, final loss ([0-9.]+), ([0-9.]+) steps/s, ([0-9,]+) voxels/s", line)
    assert m, line
    assert float(m.group(2)) > 0 and int(m.group(3).replace(",", "")) > 0
