"""bfloat16 compute primitives (AMX tiles on CPUs that have them, the float32 kernels
otherwise) against float64 sums of the same rounded operands, over channel counts
that hit every tile edge case: odd and tiny inputs, one and several 32-channel input
chunks, output columns that are not a multiple of 16, groups, and more pairs per
offset than one weight-gradient chunk holds."""
import os

import pytest
import torch

import mx_sparse  # noqa: F401  (loads the ops)
from mx_sparse import _C

from pair_reference import filter_reference, gather_mm_reference, random_map


def cpu_has_amx_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return "amx_bf16" in f.read()
    except OSError:
        return False


def bf16(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def assert_bf16_close(actual, expected):
    assert actual.dtype == torch.bfloat16
    scale = max(1.0, expected.abs().max().item())
    torch.testing.assert_close(actual.double(), expected, rtol=1e-2, atol=1e-2 * scale)


SHAPES = [  # (cin, cout, groups)
    (3, 5, 1), (4, 16, 1), (16, 16, 1), (32, 32, 1), (55, 77, 1), (64, 64, 1), (70, 33, 1), (128, 64, 1),
    (16, 128, 1), (8, 12, 2), (64, 64, 4),
]


@pytest.mark.parametrize("cin,cout,groups", SHAPES)
def test_gather_mm_bf16_against_float64(cin, cout, groups):
    n_in, m, kvol = 300, 257, 27
    x, w = bf16((n_in, cin), 1), bf16((kvol, cin // groups, cout), 2)
    nbr = random_map(m, n_in, kvol, 0.3, 3)
    out = torch.ops.mx_sparse.gather_mm(x, w, nbr, nbr, groups)
    assert_bf16_close(out, gather_mm_reference(x, w, nbr, groups))


@pytest.mark.parametrize("cin,cout,groups", SHAPES)
def test_backprop_filter_bf16_against_float64(cin, cout, groups):
    # 2500 rows x density 0.9 ~ 2250 pairs per offset: more than one 2048-pair chunk
    n_in, m, kvol = 400, 2500, 3
    x, grad = bf16((n_in, cin), 4), bf16((m, cout), 5)
    nbr = random_map(m, n_in, kvol, 0.9, 6)
    dw = torch.ops.mx_sparse.gather_mm_backprop_filter(x, grad, nbr, nbr, groups)
    assert dw.shape == (kvol, cin // groups, cout)
    assert_bf16_close(dw, filter_reference(x, grad, nbr, groups))


def test_bf16_empty_map_gives_zeros():
    x, w = bf16((10, 16), 1), bf16((27, 16, 32), 2)
    nbr = torch.full((7, 27), -1, dtype=torch.int32)
    assert torch.equal(torch.ops.mx_sparse.gather_mm(x, w, nbr, nbr, 1), torch.zeros(7, 32, dtype=torch.bfloat16))
    dw = torch.ops.mx_sparse.gather_mm_backprop_filter(x, bf16((7, 32), 3), nbr, nbr, 1)
    assert torch.equal(dw, torch.zeros(27, 16, 32, dtype=torch.bfloat16))


@pytest.mark.parametrize("op", ["gather_mm", "gather_mm_backprop_filter"])
def test_bf16_bitwise_identical_across_thread_counts(op):
    n_in, m, kvol, c = 3000, 3000, 27, 64
    x = bf16((n_in, c), 7)
    nbr = random_map(m, n_in, kvol, 0.3, 8)
    second = bf16((kvol, c, c), 9) if op == "gather_mm" else bf16((m, c), 9)
    fn = getattr(torch.ops.mx_sparse, op)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = fn(x, second, nbr, nbr, 1)
        torch.set_num_threads(2)
        two = fn(x, second, nbr, nbr, 1)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)


@pytest.mark.skipif(not cpu_has_amx_bf16() or os.environ.get("MXS_DISABLE_AMX", "0") not in ("", "0"),
                    reason="the CPU has no AMX-BF16, or MXS_DISABLE_AMX is set")
def test_bf16_runs_on_amx_where_the_cpu_has_it():
    # the tests above then exercise the AMX kernels, not the float32 fallback
    assert _C.cpu_gemm_kernels()["bfloat16"] == "amx"
