"""The host path of the CUDA launches after its trimming (issue 32): launch.run's guard of the
operands (asked through C iterators; on in the test suite, MXS_CUDA_GUARD_LAUNCHES=1 from
tests/conftest.py, off in use) still rejects an unaligned or non-contiguous operand and skips fake
ones; launch.aligned_all returns aligned operands as they are and copies the others; the
weight gradient's launch arguments, prepared once per map and shape, give the CPU backend's values
and the same bits on every later call, also on another map of the same shape and after an
in-place write to the map."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from cuda_cases import CUDA, assert_close_to, cpu_is_cuda_path, operands, references, triton_on_cpu  # noqa: F401
from mx_sparse._cuda import gather_mm, launch

pytestmark = [cpu_is_cuda_path, pytest.mark.usefixtures("triton_on_cpu")]


class _Kernel:
    """Records the launches that get past launch.run's checks."""
    def __init__(self):
        self.launched = 0

    def __getitem__(self, grid):
        def start(*args, **kwargs):
            self.launched += 1
        return start


def _unaligned():
    return torch.zeros(33)[1:]          # 4 bytes past an aligned start


def test_run_rejects_an_unaligned_or_non_contiguous_operand():
    kernel = _Kernel()
    launch.run(kernel, "probe", "fp32", "t", (1,), (torch.zeros(8), torch.zeros(4, 4)))
    assert kernel.launched == 1
    for bad in (_unaligned(), torch.zeros(4, 4).t()):
        with pytest.raises(AssertionError, match="probe: unaligned operand"):
            launch.run(kernel, "probe", "fp32", "t", (1,), (torch.zeros(8), bad))
    launch.run(kernel, "probe", "fp32", "t", (0,), (_unaligned(),))     # an empty grid: nothing to guard
    assert kernel.launched == 1


def test_the_guard_is_on_in_the_suite_and_off_without_the_switch(monkeypatch):
    """The suite checks every launch (conftest sets the switch); without it (use) run asks no
    operand: its callers made them contiguous and aligned (aligned / aligned_all, fresh tensors)."""
    assert launch.guarding()
    kernel = _Kernel()
    monkeypatch.setattr(launch, "_guarding", [False])
    launch.run(kernel, "probe", "fp32", "t", (1,), (torch.zeros(8), _unaligned()))
    assert kernel.launched == 1
    monkeypatch.setattr(launch, "_guarding", [])
    monkeypatch.setenv(launch.GUARD_ENV, "0")
    assert not launch.guarding()
    monkeypatch.setattr(launch, "_guarding", [])
    monkeypatch.setenv(launch.GUARD_ENV, "1")
    with pytest.raises(AssertionError, match="probe: unaligned operand"):
        launch.run(kernel, "probe", "fp32", "t", (1,), (torch.zeros(8), _unaligned()))


def test_run_records_but_does_not_launch_fake_operands():
    kernel = _Kernel()
    before = launch.launches[("probe_fake", "fp32", "t")]
    with FakeTensorMode():
        launch.run(kernel, "probe_fake", "fp32", "t", (1,), (torch.zeros(8), torch.zeros(4, 4).t()))
    assert kernel.launched == 0 and launch.launches[("probe_fake", "fp32", "t")] == before + 1


def test_aligned_all_keeps_aligned_operands_and_copies_the_others():
    a, b = torch.arange(8.0), torch.arange(16.0).view(4, 4)
    assert all(x is y for x, y in zip(launch.aligned_all(a, b), (a, b)))
    u, t = _unaligned(), torch.arange(16.0).view(4, 4).t()
    out = launch.aligned_all(a, u, t)
    assert out[0] is a and out[1] is not u and out[2] is not t
    for got, was in zip(out[1:], (u, t)):
        assert got.is_contiguous() and got.data_ptr() % launch.ALIGNMENT == 0 and torch.equal(got, was)


def test_filter_gradient_from_prepared_arguments():
    features, weight, grad, nbr = operands(150, 120, 27, 16, 24, 1, torch.float32, seed=3, density=0.4)
    expected = references(features, weight, grad, nbr, 1)[2]
    first = CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, 1)
    assert_close_to(first, expected, torch.float32, "filter gradient")
    entry = gather_mm._launches.get(nbr)
    assert entry is not None and any(isinstance(v, gather_mm._FilterLaunch) for v in entry[1].values())
    assert torch.equal(CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, 1), first)   # cached args
    assert torch.equal(CUDA["gather_mm_backprop_filter"](features, grad, nbr.clone(), None, 1), first)   # fresh
    # an in-place write to the map: new arguments (its plan and tile lists), the new map's values
    nbr[nbr[:, 13] >= 0, 13] = -1
    changed = CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, 1)
    assert_close_to(changed, references(features, weight, grad, nbr, 1)[2], torch.float32, "filter gradient")
    assert not torch.equal(changed, first)


def test_shape_cache_makes_once_per_key_and_empties_when_full():
    """launch.ShapeCache (gather_mm's and _conv_out_keys' per-shape launch arguments): a value is made
    once per key and shared; the cache never holds more than its limit, emptied when a new key
    finds it full (then remade on demand)."""
    made = []
    cache = launch.ShapeCache(2)

    def make(key):
        return lambda: made.append(key) or [key]

    a = cache.get("a", make("a"))
    assert cache.get("a", make("a")) is a and made == ["a"]
    cache.get("b", make("b"))
    assert len(cache) == 2
    cache.get("c", make("c"))       # full: emptied, then "c" kept
    assert len(cache) == 1 and made == ["a", "b", "c"]
    assert cache.get("a", make("a")) is not a and made == ["a", "b", "c", "a"] and len(cache) == 2


def test_gather_launches_share_the_part_their_shapes_decide():
    """gather_mm's launch arguments: the part the shapes decide (tile, grid, constexprs: _Shaped) is
    made once and shared by a fresh map of the same shape, each map keeping its own plan; both maps
    give the CPU backend's values, and another shape gets its own part."""
    features, weight, grad, nbr = operands(150, 120, 27, 16, 24, 1, torch.float32, seed=5, density=0.4)
    other = operands(150, 120, 27, 16, 24, 1, torch.float32, seed=6, density=0.2)[3]
    for m in (nbr, other):
        assert_close_to(CUDA["gather_mm"](features, weight, m, None, 1), references(features, weight, grad, m, 1)[0],
                        torch.float32, "gather_mm")
    first, second = (next(v for v in gather_mm._launches.get(m)[1].values() if isinstance(v, gather_mm._Launch))
                     for m in (nbr, other))
    assert first.shaped is second.shaped and first.plan[0] is not second.plan[0]
    narrower = weight[:, :, :16].contiguous()
    assert_close_to(CUDA["gather_mm"](features, narrower, nbr, None, 1),
                    references(features, narrower, grad[:, :16], nbr, 1)[0], torch.float32, "gather_mm")
    third = next(v for k, v in gather_mm._launches.get(nbr)[1].items() if isinstance(v, gather_mm._Launch) and k[2] == 16)
    assert third.shaped is not first.shaped and third.shaped.scalars[4] == 16


def test_filter_launches_share_the_part_their_shapes_decide():
    """gather_mm_backprop_filter's launch arguments likewise: _FilterShaped made once per shape and
    shared by a fresh map, each map keeping its own plan order and tile lists; both maps give the
    CPU backend's values."""
    features, weight, grad, nbr = operands(150, 120, 27, 16, 24, 1, torch.float32, seed=7, density=0.4)
    other = operands(150, 120, 27, 16, 24, 1, torch.float32, seed=8, density=0.2)[3]
    for m in (nbr, other):
        assert_close_to(CUDA["gather_mm_backprop_filter"](features, grad, m, None, 1),
                        references(features, weight, grad, m, 1)[2], torch.float32, "filter gradient")
    first, second = (next(v for v in gather_mm._launches.get(m)[1].values() if isinstance(v, gather_mm._FilterLaunch))
                     for m in (nbr, other))
    assert first.shaped is second.shaped and first.order is not second.order and first.lists is not second.lists
