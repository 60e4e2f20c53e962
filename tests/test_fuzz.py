"""No crash on any input: property-based fuzz of every torch.ops.mx_sparse op and the public
layers (fuzz_ops.py, fuzz_layers.py, contracts in fuzz_specs.py), in a subprocess with a time
limit, so that a segfault, abort or hang fails these tests instead of killing pytest.

MXS_FUZZ_EXAMPLES sets the examples per op (and for the layers); the default run takes
about a minute on two cores. The same fuzz runs once more through the CUDA backend's code
(MXS_CUDA_ON_CPU=1) and through the NPU backend's (MXS_NPU_ON_CPU=1). ``-m slow`` adds longer runs.
"""
import os
import signal
import subprocess
import sys

import pytest
import torch

import fuzz_specs
import mx_sparse  # noqa: F401  (registers the ops)

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = int(os.environ.get("MXS_FUZZ_EXAMPLES", "400"))
CUDA_EXAMPLES = int(os.environ.get("MXS_FUZZ_EXAMPLES", "200"))   # interpreted kernels: slower per call
NPU_EXAMPLES = int(os.environ.get("MXS_FUZZ_EXAMPLES", "100"))    # emulated AscendC kernels: slower still


def registered_ops():
    """The public ops (the _-prefixed accelerator primitives are internal: fuzz_ops.op_names)."""
    return sorted(n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("mx_sparse::") and not n.startswith("mx_sparse::_"))


def test_every_op_has_a_fuzz_spec():
    """An op added to the schema must come with its contract (one entry in fuzz_specs.SPECS)."""
    ops = registered_ops()
    assert len(ops) >= 10
    missing = [op for op in ops if fuzz_specs.spec_for(op) is None]
    assert not missing, f"torch.ops.mx_sparse ops without an entry in tests/fuzz_specs.py SPECS: {missing}"
    stale = sorted(set(fuzz_specs.SPECS) - set(ops))
    assert not stale, f"fuzz specs of ops that are not registered: {stale}"


def run_isolated(cmd, progress, timeout, env=None):
    """(passed, report): the command in its own process (``env``: extra environment variables);
    a signal or a timeout is a failure that names the last input written to ``progress``."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=os.path.dirname(HERE),
                           env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired as e:
        return False, f"no result within {timeout} s (hang?); last input: {last_line(progress)}\n{e.stdout or ''}"
    if p.returncode < 0:
        return False, (f"killed by {signal.Signals(-p.returncode).name}; the input: {last_line(progress)}\n"
                       f"{p.stderr[-3000:]}")
    return p.returncode == 0, p.stdout[-6000:] + p.stderr[-6000:]


def last_line(path):
    try:
        with open(path) as f:
            lines = f.read().splitlines()
        return lines[-1][:2000] if lines else "(none)"
    except OSError:
        return "(no progress file)"


def fuzz(tmp_path, examples, timeout, env=None):
    progress = str(tmp_path / "progress.txt")
    ok, report = run_isolated([sys.executable, os.path.join(HERE, "fuzz_ops.py"), "--examples", str(examples),
                               "--progress", progress], progress, timeout, env)
    assert ok, report
    assert f"total: {(len(registered_ops()) + 1) * examples} examples" in report, report
    print(report)


def test_ops_and_layers_never_crash(tmp_path):
    fuzz(tmp_path, EXAMPLES, timeout=900)


@pytest.mark.slow
def test_ops_and_layers_never_crash_long(tmp_path):
    fuzz(tmp_path, 3000, timeout=3600)


def test_cuda_path_meets_the_same_contracts(tmp_path):
    """The CUDA backend's implementations, registered for CPU tensors by MXS_CUDA_ON_CPU=1
    (Triton kernels interpreted, torch-operator maps and BatchNorm), and the layers on them, held
    to the same contracts as the CPU kernels (voxelization: its C++ torch-operator version)."""
    pytest.importorskip("triton", reason="the CUDA backend's kernels need triton (bash run.sh test installs it)")
    fuzz(tmp_path, CUDA_EXAMPLES, timeout=900, env={"MXS_CUDA_ON_CPU": "1"})


def test_npu_path_meets_the_same_contracts(tmp_path):
    """The NPU backend's implementations, registered for CPU tensors by MXS_NPU_ON_CPU=1 (the
    accelerator orchestration, the five AscendC kernels in the emulator with strict A2 rules,
    voxelization's C++ torch-operator version), and the layers on them, held to the same contracts.
    What the NPU kernels do not support (float64, kernel volumes over 125, ...) is a rejection
    naming the argument; a violated emulator rule ends the subprocess, which fails this test."""
    from mx_sparse.runtime import ascend
    if not ascend.emulator_available():
        pytest.skip("the AscendC emulator needs the kernel sources and a C++ compiler")
    fuzz(tmp_path, NPU_EXAMPLES, timeout=1500, env={"MXS_NPU_ON_CPU": "1"})


@pytest.mark.slow
def test_cuda_path_meets_the_same_contracts_long(tmp_path):
    pytest.importorskip("triton", reason="the CUDA backend's kernels need triton (bash run.sh test installs it)")
    fuzz(tmp_path, 2000, timeout=3600, env={"MXS_CUDA_ON_CPU": "1"})


def test_a_crash_in_the_subprocess_fails_the_test_not_pytest(tmp_path):
    progress = tmp_path / "progress.txt"
    progress.write_text("gather_mm(features=...)\n")
    ok, report = run_isolated([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
                              str(progress), timeout=60)
    assert not ok and "SIGSEGV" in report and "gather_mm(features=...)" in report
    ok, report = run_isolated([sys.executable, "-c", "import time; time.sleep(30)"], str(progress), timeout=1)
    assert not ok and "hang" in report
