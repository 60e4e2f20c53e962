"""Verification item 3 of the CUDA backend: the whole CUDA path runnable on CPU tensors. In a
subprocess with MXS_CUDA_ON_CPU=1 (and TRITON_INTERPRET=1) every mx_sparse op on CPU tensors
is the CUDA backend's implementation; there the suite's dense-reference and property tests
run once more, with the fused BatchNorm+ReLU, SparseSequential (packed maps) and edge-case
tests, plus cuda_path_checks.py (dispatch really replaced, gradcheck and gradgradcheck, a
network training step against the C++ CPU backend).

Left out of that run: test_gradcheck_float64 (thousands of interpreted launches; the checks
file runs gradcheck/gradgradcheck on a smaller input instead)."""
import json
import os
import re
import subprocess
import sys

import torch

from cuda_cases import cpu_is_cuda_path, network_step

pytestmark = cpu_is_cuda_path

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ["tests/test_conv_dense_reference.py", "tests/test_conv_property.py", "tests/test_batch_norm_relu.py",
         "tests/test_sequential.py", "tests/test_edge_cases.py", "tests/cuda/cuda_path_checks.py"]
LEFT_OUT = "test_gradcheck_float64"


def test_dense_reference_and_property_tests_through_the_cuda_path(tmp_path):
    reference = tmp_path / "network_step.pt"
    torch.save(network_step(), reference)      # the C++ CPU backend, in this process
    report = tmp_path / "launches.json"
    env = dict(os.environ, MXS_CUDA_ON_CPU="1", TRITON_INTERPRET="1", MXS_CUDA_REFERENCE=str(reference),
               MXS_CUDA_LAUNCH_REPORT=str(report))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", f"not {LEFT_OUT}", *FILES]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    tail = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = re.search(r"(\d+) passed", proc.stdout)
    assert summary and int(summary.group(1)) >= 200 and " skipped" not in proc.stdout.splitlines()[-1], tail
    launched = {kernel for kernel, _, _, count in json.loads(report.read_text()) if count}
    assert {"gather_mm", "gather_mm_backprop_filter", "sum_splits"} <= launched
    assert {"bn_row_sums", "bn_mean", "bn_squared_deviations", "bn_coefficients", "bn_scale_shift_relu",
            "bn_backward_sums", "bn_backward_coefficients", "bn_backward_dx"} <= launched


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
