"""Issue 35 item 4: every invalid environment value is refused at import, all of them in one
ValueError, and reported by ``python -m mx_sparse`` as lines (no traceback); the report survives a
closed or unwritable stdout. Each case in a fresh interpreter (the variables are read at import)."""
import os
import subprocess
import sys

import pytest

SWITCH_RULE = "expected 1, true, on, yes or 0, false, off, no (or unset), got"


def run(args, shell=False, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("MXS_") and k != "TRITON_INTERPRET"}
    full.update(env)
    return subprocess.run(args, shell=shell, capture_output=True, text=True, env=full, timeout=300)


def import_mx_sparse(**env):
    return run([sys.executable, "-c", "import mx_sparse"], **env)


def report(**env):
    return run([sys.executable, "-m", "mx_sparse"], **env)


@pytest.mark.parametrize("name,value,message", [
    ("MXS_CPU_POOL_KEEP_MB", "abc", "MXS_CPU_POOL_KEEP_MB: expected a non-negative integer (MiB), got 'abc'"),
    ("MXS_CPU_POOL_KEEP_MB", "-5", "MXS_CPU_POOL_KEEP_MB: expected a non-negative integer (MiB), got '-5'"),
    ("MXS_CPU_POOL_KEEP_MB", "12MB", "MXS_CPU_POOL_KEEP_MB: expected a non-negative integer (MiB), got '12MB'"),
    ("MXS_CPU_POOL", "maybe", f"MXS_CPU_POOL: {SWITCH_RULE} 'maybe'"),
    ("MXS_NPU_ON_CPU", "2", f"MXS_NPU_ON_CPU: {SWITCH_RULE} '2'"),
])
def test_an_invalid_value_fails_the_import_and_is_the_report(name, value, message):
    out = import_mx_sparse(**{name: value})
    assert out.returncode != 0 and f"ValueError: {message}\n" in out.stderr, out.stderr[-2000:]
    rep = report(**{name: value})
    assert rep.returncode == 2 and rep.stdout == ""
    assert rep.stderr == f"python -m mx_sparse: {message}\n"     # one line, no traceback


def test_every_invalid_value_is_listed_at_once():
    env = dict(MXS_CPU_POOL_KEEP_MB="abc", MXS_DISABLE_AMX="2", MXS_CUDA_ON_CPU="yes", MXS_NPU_ON_CPU="on")
    out = import_mx_sparse(**env)
    assert "ValueError: invalid mx_sparse environment:\n" in out.stderr, out.stderr[-2000:]
    for line in (f"  MXS_DISABLE_AMX: {SWITCH_RULE} '2'",
                 "  MXS_CPU_POOL_KEEP_MB: expected a non-negative integer (MiB), got 'abc'",
                 "  MXS_CUDA_ON_CPU, MXS_NPU_ON_CPU: both ask to serve CPU tensors; set one of them"):
        assert line in out.stderr.splitlines(), (line, out.stderr[-2000:])
    rep = report(**env)
    assert rep.returncode == 2 and "Traceback" not in rep.stderr and len(rep.stderr.splitlines()) == 4


def test_valid_values_import_and_report_every_value_valid():
    rep = report(MXS_CPU_POOL_KEEP_MB="64", MXS_CPU_POOL="off", MXS_CUDA_ON_CPU="0", TRITON_INTERPRET="0")
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert "environment: every value valid" in rep.stdout.splitlines()
    probe = run([sys.executable, "-c", "import mx_sparse; print(mx_sparse._C.cpu_pool_stats()['keep_limit_bytes'])"],
                MXS_CPU_POOL_KEEP_MB="64")
    assert probe.stdout.strip() == str(64 << 20)


def test_a_value_changed_after_import_shows_in_the_report():
    code = ("import os, mx_sparse; os.environ['MXS_DISABLE_AMX'] = 'perhaps'; mx_sparse.show_config()")
    out = run([sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr[-2000:]
    assert "environment: 1 invalid value(s)" in out.stdout.splitlines()
    assert f"  MXS_DISABLE_AMX: {SWITCH_RULE} 'perhaps'" in out.stdout.splitlines()


def test_cuda_on_cpu_with_the_interpreter_off_is_one_line():
    rep = report(MXS_CUDA_ON_CPU="1", TRITON_INTERPRET="off")
    assert rep.returncode == 2 and rep.stderr == (
        "python -m mx_sparse: MXS_CUDA_ON_CPU=1 runs the Triton kernels in Triton's interpreter, which "
        "TRITON_INTERPRET='off' turns off: set TRITON_INTERPRET=1 (or unset it)\n")


def test_report_with_stdout_closed_is_a_quiet_exit():
    out = run(f"'{sys.executable}' -m mx_sparse >&-", shell=True)
    assert out.returncode == 0 and out.stderr == "", out.stderr[-2000:]


def test_report_into_a_broken_pipe_is_a_quiet_exit():
    out = run(f"'{sys.executable}' -m mx_sparse | true", shell=True)
    assert "Traceback" not in out.stderr and "Error" not in out.stderr, out.stderr[-2000:]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_report_into_a_full_device_is_one_line():
    out = run(f"'{sys.executable}' -m mx_sparse > /dev/full", shell=True)
    assert out.returncode == 1
    assert out.stderr == "python -m mx_sparse: cannot write the report to stdout: No space left on device\n"
