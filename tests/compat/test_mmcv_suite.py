"""mmcv's own ``tests/test_cnn/test_build_layers.py::test_build_conv_layer`` (it builds every
registered conv type, sparse ones included, from a config without ``indice_key``) run unmodified
with ``patch_mmcv()``. Needs an mmcv checkout in MXS_MMCV_SRC (its Python sources are imported
from there; no compiled mmcv ops are needed); skipped without it."""
import os
import subprocess
import sys

import pytest

SRC = os.environ.get("MXS_MMCV_SRC")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@pytest.mark.skipif(not SRC, reason="set MXS_MMCV_SRC to an mmcv checkout (git clone https://github.com/open-mmlab/mmcv DIR)")
def test_mmcv_build_conv_layer_passes_with_patch_mmcv():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "mmcv_suite"), ROOT, SRC]))
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "mmcv_plugin", "-p", "no:cacheprovider", "-q",
                          "tests/test_cnn/test_build_layers.py::test_build_conv_layer"],
                         cwd=SRC, env=env, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout[-4000:] + out.stderr[-2000:]
