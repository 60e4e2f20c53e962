"""Triton 3.6 beside the pinned 3.8 (the GPU machines lent to this project carry 3.6): where a
triton 3.6 install is given, every shipped kernel configuration compiles with it for sm_80 and
sm_90 without a problem (tools/cuda_compile_check/cubins.py), and its interpreter runs the
kernels against the CPU backend (gather_mm and both gradients on a first layer and an aligned
layer, the map builders' sorted-key lookup and a submanifold map).

Where to find it: MXS_TRITON36_SITE, a folder holding triton 3.6 alone, e.g.
``pip install --no-deps --target /tmp/t36site triton==3.6.0`` (it is put first on PYTHONPATH
of the subprocesses, before the environment's own triton; torch stays the environment's).
Skipped, saying so, where it is not set or holds no triton 3.6."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_cases import environment_without_interpreter

ROOT = Path(__file__).resolve().parents[2]
SITE = os.environ.get("MXS_TRITON36_SITE", "")


def _triton_version(site):
    if not site:
        return None
    found = list(Path(site).glob("triton-*.dist-info"))
    return found[0].name[len("triton-"):-len(".dist-info")] if found else None


VERSION = _triton_version(SITE)
pytestmark = pytest.mark.skipif(
    VERSION is None or not VERSION.startswith("3.6"),
    reason="no triton 3.6 given: set MXS_TRITON36_SITE to a folder made by "
           "`pip install --no-deps --target DIR triton==3.6.0`" if not SITE else
           f"MXS_TRITON36_SITE={SITE} holds triton {VERSION}, not 3.6")


def _env(interpret):
    env = environment_without_interpreter()
    env["PYTHONPATH"] = os.pathsep.join([SITE, str(ROOT)])
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return env


def test_every_configuration_compiles_with_triton_36():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "cuda_compile_check" / "cubins.py"), "--json"],
                          capture_output=True, text=True, env=_env(False), cwd=ROOT, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = json.loads(proc.stdout)
    assert {r["arch"] for r in records} == {"sm_80", "sm_90"}
    assert any(r["wgmma"] for r in records if r["arch"] == "sm_90")


_INTERPRETED = r'''
import torch, triton
assert triton.__version__.startswith("3.6"), triton.__version__
from cuda_cases import CPU, CUDA, assert_close_to, operands, references, run_cuda_path
for shape in ((70, 90, 27, 3, 5, 1), (45, 50, 8, 16, 64, 1)):
    for dtype in (torch.float32, torch.float16):
        features, weight, grad, nbr = operands(*shape, dtype, seed=1)
        for what, actual, ref in zip(("gather_mm", "input gradient", "filter gradient"),
                                     run_cuda_path(features, weight, grad, nbr, 1),
                                     references(features, weight, grad, nbr, 1)):
            assert_close_to(actual, ref, dtype, what)
ind = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 2], [0, 2, 1, 1], [0, 3, 3, 3]], dtype=torch.int32)
got = CUDA["build_subm_map"](ind, [5, 5, 5], 1, [3, 3, 3], [1, 1, 1])
assert torch.equal(got, CPU.build_subm_map(ind, [5, 5, 5], 1, [3, 3, 3], [1, 1, 1]))
print("ok", triton.__version__)
'''


def test_kernels_interpret_with_triton_36():
    env = _env(True)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT / "tests" / "cuda")])
    proc = subprocess.run([sys.executable, "-c", _INTERPRETED], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=1800)
    assert proc.returncode == 0 and proc.stdout.startswith("ok 3.6"), proc.stdout[-2000:] + proc.stderr[-4000:]
