"""Suite-wide set-up.

- MXS_CUDA_GUARD_LAUNCHES=1: every Triton launch a test makes (in this process and in the
  subprocesses it starts) checks that its operands are contiguous and 16-byte aligned, the
  promise the callers of mx_sparse/_cuda/launch.run keep (unchecked in use: issue 32).
- TRITON_INTERPRET=1 before anything imports triton: the CUDA backend's Triton kernels run on
  CPU tensors in Triton's interpreter in this process (tests/cuda). Compiling them for real
  GPUs happens in a subprocess without it (tests/cuda/test_cubins.py).
- The ``cuda`` marker: tests on real CUDA tensors, skipped without a GPU (``pytest -m cuda``).
- With MXS_CUDA_LAUNCH_REPORT=path, the session writes the Triton launches it made there
  (tests/cuda/test_cuda_on_cpu.py reads it from the MXS_CUDA_ON_CPU=1 subprocess).
- progress_heartbeat.py: a line on the terminal whenever no test has reported for 50 s.
- interpreter_speedups.py: Triton's interpreter skips re-patching triton.language at helper calls
  inside a kernel (results bit-identical; see there).
"""
import json
import os

import interpreter_speedups
import progress_heartbeat

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("MXS_CUDA_GUARD_LAUNCHES", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: runs on a real CUDA GPU (skipped where torch sees none)")
    progress_heartbeat.start(config)
    interpreter_speedups.apply()


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("MXS_CUDA_LAUNCH_REPORT")
    if path:
        from mx_sparse._cuda import launch
        with open(path, "w") as f:
            json.dump([[*key, count] for key, count in launch.launches.items()], f)
