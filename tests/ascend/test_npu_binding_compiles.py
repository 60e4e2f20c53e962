"""The PrivateUse1 binding (kernels/ascend/binding/mx_sparse_npu.cpp) is type-checked on every run
against the real torch 2.14 + torch-npu 2.14.0 headers (compile only, no link: there is no CANN
runtime and no NPU here). Headers come from the PyPI wheels, unpacked without installing."""
import subprocess
import sys
import sysconfig

import pytest

import ascend_ops as ao

BINDING = ao.ASC / "binding"


@pytest.fixture(scope="module")
def npu_headers():
    proc = subprocess.run(["bash", str(BINDING / "fetch_npu_headers.sh"), sys.executable], capture_output=True,
                          text=True, timeout=900)
    if proc.returncode != 0:
        pytest.skip(f"could not fetch the torch / torch-npu wheels: {proc.stderr[-500:]}")
    return proc.stdout.strip().splitlines()[-1]


def test_npu_binding_compiles(npu_headers):
    h = npu_headers
    cmd = ["g++", "-std=c++20", "-fsyntax-only", "-Wall", "-DCURRENT_VERSION=13",  # op-plugin's V2R14 (torch 2.14)
           "-I", sysconfig.get_paths()["include"], "-I", f"{h}/torch/include",
           "-I", f"{h}/torch/include/torch/csrc/api/include", "-I", f"{h}/torch_npu/include",
           "-I", f"{h}/torch_npu/include/third_party/op-plugin", "-I", f"{h}/torch_npu/include/third_party/acl/inc",
           *ao.OP_INCLUDE_FLAGS,   # the kernels' limit and tiling headers include each other by file name
           str(BINDING / "mx_sparse_npu.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
