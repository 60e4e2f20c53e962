"""Slow: builds the wheel (`pip wheel --no-build-isolation --no-deps .`, which compiles the C++
extension again: minutes on two cores), installs it (not editable) into a fresh venv with
only torch and numpy, and runs the README example and `python -m mx_sparse` there, from a
directory outside the repository. Runs when MXS_SLOW_TESTS=1 (the default suite skips it:
CI time); `MXS_SLOW_TESTS=1 .venv/bin/python -m pytest tests/test_wheel.py -s` prints the
wheel's name and size."""
import glob
import os
import re
import subprocess
import sys

import pytest
import torch

import mx_sparse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(os.environ.get("MXS_SLOW_TESTS") != "1",
                                reason="slow (builds the extension again); set MXS_SLOW_TESTS=1 to run")


def readme_example() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)


def run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, **kw)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def test_wheel_installs_into_a_fresh_venv_and_runs(tmp_path):
    wheels = tmp_path / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(wheels), ROOT],
        env={**os.environ, "MAX_JOBS": os.environ.get("MAX_JOBS", "2")})
    (wheel,) = glob.glob(str(wheels / "mx_sparse-*.whl"))
    assert os.path.basename(wheel).startswith(f"mx_sparse-{mx_sparse.__version__}-")
    print(f"\nwheel: {os.path.basename(wheel)}, {os.path.getsize(wheel) / 2**20:.2f} MiB")
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    demo = [n for n in names if n.startswith("examples/") or "/detection/" in n or "centerpoint" in n]
    assert not demo, demo           # the main job's demo detector stays beside the package

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    run([py, "-m", "pip", "install", "-q", f"torch=={torch.__version__.split('+')[0]}", "numpy"])
    run([py, "-m", "pip", "install", "-q", "--no-deps", wheel])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run([py, "-c", "import mx_sparse, os; print(os.path.dirname(mx_sparse.__file__)); "
                           "print(mx_sparse.__version__)"], cwd=elsewhere).split()
    assert where[0].startswith(str(venv)) and where[1] == mx_sparse.__version__
    (elsewhere / "readme_example.py").write_text(readme_example())
    run([py, "readme_example.py"], cwd=elsewhere)
    config = run([py, "-m", "mx_sparse"], cwd=elsewhere)
    assert config.startswith(f"mx_sparse {mx_sparse.__version__}") and "CPU   all " in config
    print(config)
