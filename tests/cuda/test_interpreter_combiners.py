"""tests/interpreter_combiners.py (the suite's NumPy path for the map plan's integer reductions
under Triton's interpreter) changes nothing but time: the plan kernels' combiners are the ones it
recognises, and plans built through the interpreter's own element-by-element path, through the
NumPy path and by the torch reference are identical."""
import pytest
import torch

import interpreter_combiners
from mx_sparse._cuda import launch, map_plan


pytestmark = pytest.mark.skipif(not launch.interpreting(), reason="compiled kernels: no interpreter to patch")


def test_the_plan_combiners_are_recognised_and_the_patch_is_on():
    from mx_sparse._cuda import plan_kernels
    assert interpreter_combiners.combiner_kind(plan_kernels._add) == "add"
    assert interpreter_combiners.combiner_kind(plan_kernels._max) == "max"
    assert interpreter_combiners.combiner_kind(lambda a, b: a + b) is None
    assert interpreter_combiners.applied(), "tests/conftest.py applies it wherever TRITON_INTERPRET is on"


@pytest.mark.parametrize("m,kvol,block_m,density", [(5, 3, 2, 0.6), (20, 150, 16, 0.3)])
def test_plans_equal_with_the_interpreters_own_combiners(m, kvol, block_m, density):
    """int32 keys (3 offsets) and int64 keys with the offsets in two chunks of 128 (150 offsets)."""
    g = torch.Generator().manual_seed(m + kvol)
    nbr = torch.where(torch.rand(m, kvol, generator=g) < density, torch.randint(0, 50, (m, kvol), generator=g),
                      -1).int()
    fast = map_plan._build(nbr, block_m)
    with interpreter_combiners.generic_combiners():
        generic = map_plan._build(nbr, block_m)
    want = map_plan.reference_build(nbr, block_m)
    for name in ("order", "counts", "offsets", "present"):
        a, b, c = getattr(fast, name), getattr(generic, name), getattr(want, name)
        assert a.dtype == b.dtype == c.dtype == torch.int32, name
        assert torch.equal(a, b) and torch.equal(a, c), name
