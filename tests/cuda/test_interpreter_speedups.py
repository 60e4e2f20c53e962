"""tests/interpreter_speedups.py (the suite's speed-ups of Triton's interpreter) changes nothing
but time: the plan kernels' combiners are the ones it recognises; plans built through the
interpreter's own element-by-element reductions, through NumPy and by the torch reference are
identical; the fused BatchNorm+ReLU kernels (which call helpers per tile) and the gathers give
the same bits with and without the helper-call re-patching."""
import os

import pytest
import torch

import interpreter_speedups
from bn_cases import TRITON_BN, forward_case, run_all
from cuda_cases import operands, run_cuda_path
from mx_sparse._cuda import launch, map_plan


pytestmark = [
    pytest.mark.skipif(not launch.interpreting(), reason="compiled kernels: no interpreter to patch"),
    pytest.mark.skipif(os.environ.get("MXS_TEST_PLAIN_INTERPRETER") == "1",
                       reason="MXS_TEST_PLAIN_INTERPRETER=1: the speed-ups are off, nothing to compare"),
]


def test_the_plan_combiners_are_recognised_and_the_speedups_are_on():
    from mx_sparse._cuda import plan_kernels
    assert interpreter_speedups.combiner_kind(plan_kernels._add) == "add"
    assert interpreter_speedups.combiner_kind(plan_kernels._max) == "max"
    assert interpreter_speedups.combiner_kind(lambda a, b: a + b) is None
    assert interpreter_speedups.applied(), "tests/conftest.py applies them wherever TRITON_INTERPRET is on"


@pytest.mark.parametrize("m,kvol,block_m,density", [(5, 3, 2, 0.6), (20, 150, 16, 0.3)])
def test_plans_equal_with_the_interpreters_own_combiners(m, kvol, block_m, density):
    """int32 keys (3 offsets) and int64 keys with the offsets in two chunks of 128 (150 offsets)."""
    g = torch.Generator().manual_seed(m + kvol)
    nbr = torch.where(torch.rand(m, kvol, generator=g) < density, torch.randint(0, 50, (m, kvol), generator=g),
                      -1).int()
    fast = map_plan._build(nbr, block_m)
    with interpreter_speedups.generic_combiners():
        generic = map_plan._build(nbr, block_m)
    want = map_plan.reference_build(nbr, block_m)
    for name in ("order", "counts", "offsets", "present"):
        a, b, c = getattr(fast, name), getattr(generic, name), getattr(want, name)
        assert a.dtype == b.dtype == c.dtype == torch.int32, name
        assert torch.equal(a, b) and torch.equal(a, c), name


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
