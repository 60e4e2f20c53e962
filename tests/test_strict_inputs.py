"""Inputs that used to be taken silently (issue 28): a non-integral spatial_shape (truncated),
.dense() with a negative coordinate (written at the wrapped position), environment switches
compared with "0" by each reader ("off" and "false" meant on), the report of
``python -m mx_sparse`` (a newline in a value forged a line; a closed pipe gave a traceback),
MXS_CUDA_ON_CPU=1 with Triton's interpreter switched off, and strict torch.export."""
import os
import re
import subprocess
import sys

import pytest
import torch

import mx_sparse
from mx_sparse import _C


@pytest.mark.parametrize("shape", [[8.9, 8, 8], torch.tensor([8.5, 8.0, 8.0]), [8, "8", 8], [True, 8, 8]])
def test_non_integral_spatial_shape_is_refused(shape):
    idx = torch.zeros(1, 4, dtype=torch.int32)
    with pytest.raises(ValueError, match="spatial_shape"):
        mx_sparse.SparseConvTensor(torch.ones(1, 2), idx, shape, 1)


def test_integral_spatial_shapes_still_accepted():
    import numpy as np
    idx = torch.zeros(1, 4, dtype=torch.int32)
    for shape in ([8, 8, 8], (8.0, 8, 8), torch.tensor([8, 8, 8]), np.array([8, 8, 8])):
        assert mx_sparse.SparseConvTensor(torch.ones(1, 2), idx, shape, 1).spatial_shape == [8, 8, 8]


@pytest.mark.parametrize("row", [[0, -1, 0, 0], [0, 0, 0, -3], [-1, 0, 0, 0], [2, 0, 0, 0], [0, 4, 0, 0]])
def test_dense_refuses_rows_outside_the_grid(row):
    idx = torch.tensor([[0, 1, 1, 1], row], dtype=torch.int32)
    x = mx_sparse.SparseConvTensor(torch.ones(2, 3), idx, [4, 4, 4], 2)
    with pytest.raises(ValueError, match=r"indices: row 1 = \["):
        x.dense()


def test_dense_in_range_matches_hand_placed_values():
    idx = torch.tensor([[1, 3, 0, 2]], dtype=torch.int32)
    d = mx_sparse.SparseConvTensor(torch.tensor([[5.0, 6.0]]), idx, [4, 4, 4], 2).dense()
    assert d[1, :, 3, 0, 2].tolist() == [5.0, 6.0] and d.abs().sum() == 11.0


@pytest.mark.parametrize("value,expected", [
    (None, "default"), ("", "default"), ("1", True), ("true", True), ("ON", True), (" yes ", True), ("True", True),
    ("0", False), ("false", False), ("off", False), ("No", False)])
def test_one_switch_parser_accepts(value, expected):
    for default in (False, True):
        want = default if expected == "default" else expected
        assert _C.parse_switch("MXS_X", value, default) is want


@pytest.mark.parametrize("value", ["2", "-1", "1e3", "enable", "y", "0x1", "o n", "1\n"])
def test_one_switch_parser_refuses_with_name_and_allowed_values(value):
    with pytest.raises(ValueError, match=r"MXS_X: expected 1, true, on, yes or 0, false, off, no"):
        _C.parse_switch("MXS_X", value, False)


def run_python(code, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("MXS_")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300)


POOL_PROBE = ("import torch, mx_sparse; from mx_sparse import _C; x = torch.randn(100000, 8); "
              "torch.ops.mx_sparse.scale_shift_relu(x, torch.ones(8), torch.zeros(8)); "
              "print(_C.cpu_pool_stats()['reserved_bytes'] > 0)")


@pytest.mark.parametrize("value,pooled", [("off", "False"), ("false", "False"), ("0", "False"), ("on", "True"),
                                          (None, "True")])
def test_pool_switch_values_in_the_kernels(value, pooled):
    out = run_python(POOL_PROBE, **({} if value is None else {"MXS_CPU_POOL": value}))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == pooled


@pytest.mark.parametrize("name", ["MXS_CPU_POOL", "MXS_DISABLE_AMX", "MXS_CPU_PORTABLE", "MXS_CUDA_ON_CPU"])
def test_bad_switch_value_fails_the_import_naming_the_variable(name):
    out = run_python("import mx_sparse", **{name: "maybe"})
    assert out.returncode != 0
    # the kernels' switches are checked while the extension module initialises, where Python reports
    # the ValueError as an ImportError; MXS_CUDA_ON_CPU is read by Python after the import
    assert re.search(f"(ImportError|ValueError): {name}: expected 1, true, on, yes or 0, false, off, no "
                     r"\(or unset\), got 'maybe'", out.stderr), out.stderr[-2000:]


def test_portable_switch_off_values_keep_the_fast_kernels():
    isa = "import mx_sparse; from mx_sparse import _C; print(_C.cpu_gemm_kernels()['float32'])"
    fast = run_python(isa).stdout.strip()
    assert run_python(isa, MXS_CPU_PORTABLE="off").stdout.strip() == fast
    assert run_python(isa, MXS_CPU_PORTABLE="yes").stdout.strip() == "generic"


def test_report_escapes_values_and_shows_parsed_state():
    # set after the import: the value is invalid, and the import would refuse it (test_environment.py)
    out = run_python("import os, mx_sparse; os.environ['MXS_CPU_POOL_KEEP_MB'] = '64\\n  MXS_CPU_PORTABLE=1'; "
                     "mx_sparse.show_config()", MXS_CPU_POOL="off")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert not any(line.strip().startswith("MXS_CPU_PORTABLE=1") for line in lines)
    assert any(line.strip().startswith("MXS_CPU_POOL_KEEP_MB=64\\n  MXS_CPU_PORTABLE=1") for line in lines)
    assert any(line.strip().startswith("MXS_CPU_POOL=off [off]") for line in lines)
    assert any(line.strip().startswith("MXS_CPU_PORTABLE=(unset) [off]") for line in lines)


def test_report_survives_a_closed_pipe():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MXS_")}
    out = subprocess.run(f"'{sys.executable}' -m mx_sparse | head -1", shell=True, capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.stdout.startswith("mx_sparse ") and len(out.stdout.splitlines()) == 1
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, out.stderr


def test_cuda_on_cpu_with_interpreter_off_is_one_line_saying_what_to_set():
    out = run_python("import mx_sparse", MXS_CUDA_ON_CPU="1", TRITON_INTERPRET="0")
    assert out.returncode != 0
    assert ("ValueError: MXS_CUDA_ON_CPU=1 runs the Triton kernels in Triton's interpreter, which "
            "TRITON_INTERPRET='0' turns off: set TRITON_INTERPRET=1 (or unset it)\n") in out.stderr, out.stderr[-2000:]
    quiet = run_python("import warnings; warnings.simplefilter('always'); import mx_sparse", MXS_CUDA_ON_CPU="false")
    assert quiet.returncode == 0 and "MXS_CUDA_ON_CPU" not in quiet.stderr
    check = run_python("import mx_sparse, torch; print(mx_sparse._core.op_registration.has_kernel('cpu'))",
                       MXS_CUDA_ON_CPU="off")
    assert check.returncode == 0, check.stderr[-2000:]


@pytest.mark.parametrize("train", [False, True])
def test_strict_export_of_a_bn_net_with_a_dynamic_voxel_count(train):
    """issue 28: strict export failed in the BatchNorm row check (training mode, voxel count
    dynamic): "'function' object has no attribute 'is_quantized'" from the message callable."""
    from torch import nn
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(mx_sparse.SubMConv3d(3, 4, 3, indice_key="a"), nn.BatchNorm1d(4),
                                     nn.ReLU()).train(train)

    class Wrap(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, features, indices):
            return self.net(mx_sparse.SparseConvTensor(features, indices, [6, 6, 6], 1)).features

    idx = torch.tensor([[0, 1, 1, 1], [0, 1, 2, 1], [0, 3, 3, 3]], dtype=torch.int32)
    f = torch.randn(3, 3)
    n = torch.export.Dim("n", min=2)
    ep = torch.export.export(Wrap(), (f, idx), strict=True, dynamic_shapes={"features": {0: n}, "indices": {0: n}})
    if not train:   # (training mode would update the running statistics twice)
        assert torch.allclose(ep.module()(f, idx), Wrap()(f, idx), atol=1e-6)
