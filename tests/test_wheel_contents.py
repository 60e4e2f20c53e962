"""What the wheel ships: the packages setup.py hands to setuptools (captured by running setup.py
with setuptools.setup replaced, so the test follows setup.py's own rule) hold the library and
not the main job's demo detector (examples/: CenterPoint head, training loop, AP, BEV IoU,
cluster baseline). The full `pip wheel` + `unzip -l` check is tests/test_wheel.py (slow)."""
import os
import runpy
import sys

import setuptools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO_MODULES = ("centerpoint", "average_precision", "bev_iou", "cluster_baseline", "train_second",
                "bev_picture", "checkpoint")


def wheel_python_files():
    """Paths (relative to the root) of every .py file of the packages setup.py declares."""
    captured = {}
    old_setup, old_argv, old_cwd = setuptools.setup, sys.argv, os.getcwd()
    setuptools.setup = lambda **kw: captured.update(kw)
    sys.argv = ["setup.py", "--name"]
    try:
        os.chdir(ROOT)
        runpy.run_path(os.path.join(ROOT, "setup.py"), run_name="__main__")
    finally:
        setuptools.setup, sys.argv = old_setup, old_argv
        os.chdir(old_cwd)
    assert "package_dir" not in captured          # file path = import path
    files = []
    for package in captured["packages"]:
        folder = os.path.join(ROOT, *package.split("."))
        files += [os.path.relpath(os.path.join(folder, f), ROOT) for f in os.listdir(folder) if f.endswith(".py")]
    return captured["packages"], files


def test_wheel_holds_the_library_not_the_demo():
    packages, files = wheel_python_files()
    assert "mx_sparse" in packages and "mx_sparse.models" in packages and "mx_sparse._cuda" in packages
    assert not [p for p in packages if not p.startswith("mx_sparse")], packages
    demo = [f for f in files if os.path.splitext(os.path.basename(f))[0] in DEMO_MODULES or "detection" in f]
    assert not demo, demo
    # What stays, on purpose: the reference backbones and the scene generator (documented APIs).
    assert os.path.join("mx_sparse", "models", "backbones.py") in files
    assert os.path.join("mx_sparse", "synthetic", "lidar_scene.py") in files
    # The demo exists beside the package, where `bash run.sh train` runs it.
    for name in ("centerpoint", "average_precision", "bev_iou", "cluster_baseline", "checkpoint", "bev_picture"):
        assert os.path.isfile(os.path.join(ROOT, "examples", "detection", name + ".py")), name
