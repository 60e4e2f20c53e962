"""Verification item 3 of the CUDA backend: the whole CUDA path runnable on CPU tensors. In
subprocesses with MXS_CUDA_ON_CPU=1 (and TRITON_INTERPRET=1) every mx_sparse op on CPU tensors
is the CUDA backend's implementation; there the suite's dense-reference and property tests
run once more, with the fused BatchNorm+ReLU, SparseSequential (packed maps) and edge-case
tests, plus cuda_path_checks.py (dispatch really replaced, gradcheck and gradgradcheck, a
network training step against the C++ CPU backend).

The files run as several child sessions (one test each here, the larger files cut into shards
by tests/shard_items.py), so that progress shows while they run: as one session they were a
single test of about 10 minutes with no output. test_every_session_together then checks what
the sessions did together (tests passed, Triton kernels launched).

Left out of that run: test_gradcheck_float64 (thousands of interpreted launches; the checks
file runs gradcheck/gradgradcheck on a smaller input instead)."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

from cuda_cases import cpu_is_cuda_path, network_step

pytestmark = cpu_is_cuda_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (file, shards): each child session a few minutes at most on a loaded 2-core machine
SESSIONS = [("tests/test_conv_dense_reference.py", 2), ("tests/test_conv_property.py", 1),
            ("tests/test_batch_norm_relu.py", 1), ("tests/test_sequential.py tests/test_edge_cases.py", 1),
            ("tests/cuda/cuda_path_checks.py", 1)]
CASES = [(f, i, n) for f, n in SESSIONS for i in range(n)]
LEFT_OUT = "test_gradcheck_float64"
DONE = {}   # (file, shard) -> (tests passed, kernels launched), for test_every_session_together


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("cuda_on_cpu") / "network_step.pt"
    torch.save(network_step(), path)      # the C++ CPU backend, in this process
    return path


@pytest.mark.parametrize("path,shard,shards", CASES, ids=[f"{os.path.basename(f.split()[0])}-{i + 1}of{n}" for f, i, n in CASES])
def test_dense_reference_and_property_tests_through_the_cuda_path(path, shard, shards, reference, tmp_path):
    report = tmp_path / "launches.json"
    env = dict(os.environ, MXS_CUDA_ON_CPU="1", TRITON_INTERPRET="1", MXS_CUDA_REFERENCE=str(reference),
               MXS_CUDA_LAUNCH_REPORT=str(report), MXS_TEST_SHARD=f"{shard}/{shards}",
               PYTHONPATH=os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "shard_items",
           "-k", f"not {LEFT_OUT}", *path.split()]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = re.search(r"(\d+) passed", proc.stdout)
    assert summary and " skipped" not in proc.stdout.splitlines()[-1], tail
    DONE[(path, shard)] = (int(summary.group(1)),
                           {kernel for kernel, _, _, count in json.loads(report.read_text()) if count})


def test_every_session_together():
    missing = [f"{f} {i + 1}/{n}" for f, i, n in CASES if (f, i) not in DONE]
    if missing:
        pytest.skip(f"needs every session of the test above in this run; not run or failed: {missing}")
    assert sum(passed for passed, _ in DONE.values()) >= 200
    launched = set().union(*(kernels for _, kernels in DONE.values()))
    assert {"gather_mm", "gather_mm_backprop_filter"} <= launched
    assert {"bn_moments", "bn_normalize_relu", "bn_scale_shift_relu", "bn_backward_sums", "bn_backward_dx"} <= launched


def test_importance_and_open3d_surface_through_the_cuda_path():
    """Normalisation / importance (tests/test_importance.py) and the Open3D surface
    (tests/test_open3d_surface.py; its open3d-oracle tests skip where open3d-cpu is absent) with
    every mx_sparse op on CPU tensors being the CUDA backend's."""
    env = dict(os.environ, MXS_CUDA_ON_CPU="1", TRITON_INTERPRET="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_importance.py",
           "tests/test_open3d_surface.py"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = re.search(r"(\d+) passed", proc.stdout)
    assert summary and int(summary.group(1)) >= 60, tail
