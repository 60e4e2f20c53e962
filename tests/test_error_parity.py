"""One error per bad input on every path (issue 35): the bad calls of tests/error_parity_cases.py
(each op's argument checks, map values, index values, dtypes, devices) sent to the C++ CPU kernels,
the CUDA path (MXS_CUDA_ON_CPU=1: its orchestration and Triton kernels, interpreted) and the NPU
path (MXS_NPU_ON_CPU=1: its orchestration and the AscendC kernels in the emulator), each in its own
interpreter, must raise the same exception type with the same message. The NPU's own refusals
(float64, coordinates >= 2^24) are the named exceptions: there the CPU and CUDA paths compute and
the NPU path raises. The table is printed (pytest -s).

On a CUDA device itself (not exercised here: no GPU) a map entry outside [-1, rows) in gather_mm or
pooling is a device-side assertion instead (no host synchronisation), as torch's indexing reports
a bad index; on an NPU (not exercised here either) the gathers and pooling read such a map on the
host and raise the CPU kernels' ValueErrors."""
import json
import os
import subprocess
import sys

import pytest

from error_parity_cases import CASES, NPU_OWN_REFUSALS

RUNNER = os.path.join(os.path.dirname(__file__), "error_parity_cases.py")
PATHS = {"cpu": {}, "cuda": {"MXS_CUDA_ON_CPU": "1"}, "npu": {"MXS_NPU_ON_CPU": "1"}}


@pytest.fixture(scope="module")
def outcomes():
    out = {}
    for path, env in PATHS.items():
        full = {k: v for k, v in os.environ.items() if not k.startswith("MXS_")}
        full.update(env)
        p = subprocess.run([sys.executable, RUNNER], capture_output=True, text=True, env=full, timeout=1200)
        assert p.returncode == 0, f"{path}: {p.stderr[-3000:]}"
        out[path] = json.loads(p.stdout)
    return out


def test_same_exception_and_message_on_every_path(outcomes):
    rows = [(name, *(outcomes[p][name] for p in PATHS)) for name in CASES]
    identical = [r for r in rows if r[0] not in NPU_OWN_REFUSALS and len(set(r[1:])) == 1]
    print(f"\n{len(CASES)} bad calls x {len(PATHS)} paths: {len(identical)} identical, "
          f"{len(NPU_OWN_REFUSALS)} named exceptions (the NPU's own refusals)")
    for name, cpu, cuda, npu in rows:
        mark = "named" if name in NPU_OWN_REFUSALS else ("same" if cpu == cuda == npu else "DIFFERENT")
        print(f"  [{mark}] {name}: {cpu.splitlines()[0]}")
    different = {r[0]: dict(zip(PATHS, r[1:])) for r in rows
                 if r[0] not in NPU_OWN_REFUSALS and len(set(r[1:])) != 1}
    assert different == {}


def test_every_bad_call_raises_a_value_error_naming_an_argument(outcomes):
    # a bad call is refused (not computed), with ValueError, the project's type for bad input
    for name in set(CASES) - NPU_OWN_REFUSALS:
        assert outcomes["cpu"][name].startswith("ValueError: "), (name, outcomes["cpu"][name])


def test_the_named_exceptions_are_the_npu_refusing(outcomes):
    for name in NPU_OWN_REFUSALS:
        assert outcomes["cpu"][name] == outcomes["cuda"][name] == "returned", name
        assert outcomes["npu"][name] != "returned", name
