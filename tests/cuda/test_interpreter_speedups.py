"""tests/interpreter_speedups.py (the suite's speed-up of Triton's interpreter) changes nothing
but time: the fused BatchNorm+ReLU kernels (which call helpers per tile) and the gathers give the
same bits with and without the helper-call re-patching. And the map plan kernels reduce with
triton.language's own combiners, which the interpreter runs with NumPy (any other combiner runs
element by element in Python: two thirds of an interpreted convolution's time)."""
import os

import pytest
import torch

import interpreter_speedups
from bn_cases import TRITON_BN, forward_case, run_all
from cuda_cases import operands, run_cuda_path
from mx_sparse._cuda import launch


pytestmark = [
    pytest.mark.skipif(not launch.interpreting(), reason="compiled kernels: no interpreter to patch"),
    pytest.mark.skipif(os.environ.get("MXS_TEST_PLAIN_INTERPRETER") == "1",
                       reason="MXS_TEST_PLAIN_INTERPRETER=1: the speed-ups are off, nothing to compare"),
]


def test_the_plan_combiners_are_the_interpreters_builtin_ones_and_the_speedup_is_on():
    import triton.language as tl
    from mx_sparse._cuda import plan_kernels
    assert plan_kernels._add is tl.standard._sum_combine
    assert plan_kernels._max is tl.standard._elementwise_max
    assert interpreter_speedups.applied(), "tests/conftest.py applies it wherever TRITON_INTERPRET is on"


def test_batch_norm_kernels_same_bits_with_the_interpreters_own_helper_calls():
    """Forward, recompute and backward of the fused BatchNorm+ReLU kernels (several row blocks)."""
    args = forward_case(300, 19, torch.float32, True, True, True, seed=3)
    fast = run_all(TRITON_BN, args)
    with interpreter_speedups.plain_helper_calls():
        plain = run_all(TRITON_BN, args)
    assert fast.keys() == plain.keys()
    for key in fast:
        assert torch.equal(fast[key], plain[key]), key


def test_gathers_same_bits_with_the_interpreters_own_helper_calls():
    """The gathers (output, input gradient, filter gradient; cuda_cases.run_cuda_path), whose
    map plans the plan kernels build, float32 and float16."""
    for dtype in (torch.float32, torch.float16):
        args = operands(90, 70, 27, 8, 16, 1, dtype, seed=4, density=0.3)
        before = sum(launch.launches.values())
        fast = run_cuda_path(*args, 1)
        assert sum(launch.launches.values()) > before, "Triton kernels ran"
        with interpreter_speedups.plain_helper_calls():
            plain = run_cuda_path(*[a.clone() for a in args], 1)
        for a, b in zip(fast, plain):
            assert torch.equal(a, b), dtype
