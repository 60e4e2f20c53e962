"""Launching the Triton kernels: importing triton (a clear error where it is missing), the
per-dtype constants, and one record per launched configuration.

Tensors on CUDA run the compiled kernels. Tensors on the CPU run the same kernels under
Triton's interpreter, which needs ``TRITON_INTERPRET=1`` before triton is imported
(``MXS_CUDA_ON_CPU=1`` sets it, see mx_sparse/_accelerator/registration.py; the test suite's conftest too).
Fake tensors (FakeTensorMode, tracing) carry no data: a launch on them is checked and
recorded, not run.
"""
import collections
import contextlib
import itertools

import torch
from torch._subclasses.fake_tensor import FakeTensor   # imported once here, not per call

TRITON_HINT = ("pip install triton (the version your torch build depends on; torch 2.14 uses triton==3.8.0)")

# (kernel name, operand type, tile name) -> number of launches, in this process.
launches = collections.Counter()

# Executed-step counting (tests, bench): inside ``counting_steps()`` the gather kernels are
# launched with COUNT=True and add the multiply-adds of every tl.dot they run to a counter
# tensor, read back after the launch (a host read: never outside this context).
_counting = False
executed_macs = collections.Counter()


@contextlib.contextmanager
def counting_steps():
    """Counts the gather kernels' executed multiply-adds into ``executed_macs`` (by kernel name)."""
    global _counting
    _counting = True
    executed_macs.clear()
    try:
        yield executed_macs
    finally:
        _counting = False


# Per device, the counter operand of launches that do not count (never written: one is enough).
_idle_counters = {}


def step_counter(like: torch.Tensor) -> torch.Tensor:
    """The kernels' counter operand: one int64 on ``like``'s device (written only while counting)."""
    if _counting:
        return like.new_zeros((1,), dtype=torch.int64)
    if isinstance(like, FakeTensor):
        return like.new_empty((1,), dtype=torch.int64)
    counter = _idle_counters.get(like.device)
    if counter is None:
        counter = _idle_counters[like.device] = like.new_empty((1,), dtype=torch.int64)
    return counter


_COUNT_OFF, _COUNT_ON = {"COUNT": False}, {"COUNT": True}


def count_constant() -> dict:
    return _COUNT_ON if _counting else _COUNT_OFF


def record_steps(name: str, counter: torch.Tensor) -> None:
    if _counting and not is_fake(counter):
        executed_macs[name] += int(counter.item())


# The Triton kernel modules, imported on first use (importing triton takes seconds) and kept.
_modules = {}


def _module(name: str):
    found = _modules.get(name)
    if found is None:
        import importlib
        if "gather_kernels" not in _modules:
            try:
                _modules["gather_kernels"] = importlib.import_module(".gather_kernels", __package__)
            except ImportError as e:
                raise RuntimeError(f"mx_sparse: the CUDA backend's compute kernels are written in Triton, which is "
                                   f"not installed ({e}); {TRITON_HINT}") from e
        found = _modules[name] = importlib.import_module("." + name, __package__)
    return found


def kernels():
    """The Triton kernel module (gather_kernels.py), imported on first use."""
    return _module("gather_kernels")


def plan_kernels():
    """The Triton kernels of the map plans (plan_kernels.py), imported on first use (the same
    clear error as ``kernels`` where triton is missing)."""
    return _module("plan_kernels")


def map_kernels():
    """The Triton kernels of the map primitives (map_kernels.py), imported on first use."""
    return _module("map_kernels")


def batch_norm_kernels():
    """The Triton kernels of the fused BatchNorm+ReLU (batch_norm_kernels.py), imported on first use."""
    return _module("batch_norm_kernels")


_interpreting = []


def interpreting() -> bool:
    """True when triton runs kernels in its interpreter (TRITON_INTERPRET=1 at import; fixed from
    then on, so asked once)."""
    if not _interpreting:
        from triton.runtime.interpreter import InterpretedFunction
        _interpreting.append(isinstance(kernels().gather_mm_kernel, InterpretedFunction))
    return _interpreting[0]


OPERAND_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64"}


def operand_type(dtype: torch.dtype) -> str:
    return OPERAND_TYPES[dtype]


def _tf32_switches():
    """The getters of torch's two spellings of the TF32 switch: torch.backends.cuda.matmul's
    attributes go through a Python __getattr__ (~2 us each, twice per launch), so the C getters
    behind them are called directly where this torch has them."""
    allow = getattr(torch._C, "_get_cublas_allow_tf32", None)
    precision = getattr(torch._C, "_get_fp32_precision_getter", None)
    if allow is None or precision is None:
        matmul = torch.backends.cuda.matmul
        return lambda: matmul.allow_tf32, lambda: getattr(matmul, "fp32_precision", None)
    return allow, lambda: precision("cuda", "matmul")


_allow_tf32, _fp32_precision = _tf32_switches()


def tf32_allowed() -> bool:
    """torch's switch for TF32 in float32 matmuls (either spelling of it)."""
    return bool(_allow_tf32()) or _fp32_precision() == "tf32"


class ShapeCache:
    """Values a launch takes that the problem's shape alone decides, made once per shape key and
    shared by every launch of that shape (a network repeats a few); emptied when full (a stream
    of new shapes) rather than grown without bound."""
    __slots__ = ("_found", "limit")

    def __init__(self, limit: int):
        self._found, self.limit = {}, limit

    def get(self, key, make):
        """The value kept for ``key``, ``make()`` the first time (and after an emptying)."""
        found = self._found.get(key)
        if found is None:
            if len(self._found) >= self.limit:
                self._found.clear()
            found = self._found[key] = make()
        return found

    def __len__(self) -> int:
        return len(self._found)


_dot_constants = {}


def dot_constants(dtype: torch.dtype) -> dict:
    """PRECISION, WIDEN and ACC of a kernel for operands of ``dtype`` (one dict per dtype and TF32
    switch, made once)."""
    tf32 = dtype == torch.float32 and tf32_allowed()
    found = _dot_constants.get((dtype, tf32))
    if found is None:
        kernels()      # where triton is missing: the error that says what to install (not an ImportError here)
        import triton.language as tl
        found = _dot_constants[(dtype, tf32)] = {
            "PRECISION": "tf32" if tf32 else "ieee", "WIDEN": dtype == torch.bfloat16 and interpreting(),
            "ACC": tl.float64 if dtype == torch.float64 else tl.float32}
    return found


def is_fake(t: torch.Tensor) -> bool:
    return isinstance(t, FakeTensor)


# Triton compiles a kernel separately for pointers that are and are not 16-byte aligned; the
# launcher passes aligned ones only, so the variant compiled and checked by cubins.py is the
# one that runs.
ALIGNMENT = 16


def aligned(t: torch.Tensor) -> torch.Tensor:
    """``t`` contiguous and 16-byte aligned (a copy for the rare view that starts elsewhere)."""
    if not t.is_contiguous():       # (asked first: contiguous() is a dispatcher call even when it is)
        t = t.contiguous()
    if isinstance(t, FakeTensor) or t.data_ptr() % ALIGNMENT == 0:
        return t
    return t.clone()


_MISALIGNMENT = ALIGNMENT - 1
_fake_types = itertools.repeat(FakeTensor)


def _any_fake(tensors) -> bool:
    return any(map(isinstance, tensors, _fake_types))


def _all_aligned(tensors) -> bool:
    """Every tensor (none fake) contiguous and 16-byte aligned, asked through C iterators (map over
    the methods) instead of a Python loop: ~20 bytecodes a tensor fewer."""
    return all(map(torch.Tensor.is_contiguous, tensors)) and not any(
        map(_MISALIGNMENT.__and__, map(torch.Tensor.data_ptr, tensors)))


def aligned_all(*tensors) -> tuple:
    """``aligned`` of each tensor, asked of all of them at once (the usual case: each one already is)."""
    if not _any_fake(tensors) and _all_aligned(tensors):
        return tensors
    return tuple(map(aligned, tensors))


# Whether run guards its operands (below): off in use, on where MXS_CUDA_GUARD_LAUNCHES=1 when
# first asked, which the test suite sets (tests/conftest.py), so every launch a test makes is checked.
GUARD_ENV = "MXS_CUDA_GUARD_LAUNCHES"
_guarding = []


def guarding() -> bool:
    if not _guarding:
        from .. import _C   # the one switch parser (kernels/cpu/env_switch.h)
        _guarding.append(bool(_C.env_switch(GUARD_ENV, False)))
    return _guarding[0]


def run(kernel, name: str, dtype_name: str, tile_name: str, grid, tensors, *args, **constexprs):
    """Launches ``kernel[grid](*tensors, *args, **constexprs)``: on CUDA compiled, on the CPU
    interpreted (TRITON_INTERPRET=1 required), on fake tensors not at all. Every tensor is
    contiguous and 16-byte aligned, as the compiled variant assumes: the callers make them so,
    their inputs through ``aligned`` / ``aligned_all`` (such a tensor or an aligned copy) and
    the rest fresh allocations (torch's allocators align to 64 bytes on the CPU, 512 on CUDA) or
    kept ones made so. The guard that asks each tensor again (~2.5 us a launch, ~5% of a CUDA
    training step's host time, issue 32) runs under MXS_CUDA_GUARD_LAUNCHES=1: the test suite."""
    launches[(name, dtype_name, tile_name)] += 1
    # a launch's operands are fake together or not at all (under FakeTensorMode its inputs and every
    # tensor allocated for it are fake): the first tells, with no pass over the others
    if isinstance(tensors[0], FakeTensor):
        return          # no data: checked and recorded, not run
    if 0 in grid:
        return
    # the ops checked the devices before; this guards the launcher's promise to the compiled variant
    if (_guarding[0] if _guarding else guarding()) and (not all(map(torch.Tensor.is_contiguous, tensors)) or any(
            map(_MISALIGNMENT.__and__, map(torch.Tensor.data_ptr, tensors)))):      # (inline: _all_aligned)
        raise AssertionError(f"{name}: unaligned operand")
    if tensors[0].is_cpu and not interpreting():     # (is_cpu: no device object made per launch)
        raise RuntimeError("mx_sparse: CPU tensors run the CUDA backend's Triton kernels only under Triton's "
                           "interpreter; set TRITON_INTERPRET=1 (or MXS_CUDA_ON_CPU=1) before importing triton")
    kernel[grid](*tensors, *args, **constexprs)
