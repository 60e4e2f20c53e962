"""Test-suite speed-ups of Triton's interpreter (TRITON_INTERPRET=1), which runs the CUDA
backend's kernels on CPU tensors (tests/cuda, tests/cuda/test_cuda_on_cpu.py's MXS_CUDA_ON_CPU=1
sessions, the CUDA-path runs of test_fuzz.py and test_conv_map_at.py). Neither changes a kernel or
a result; both change only how the interpreter spends its time:

1. The map plan's integer reductions (mx_sparse/_cuda/plan_kernels.py). The plan kernels reduce
   and scan with their own combiners ``_add`` / ``_max`` (tl.reduce, tl.associative_scan; see
   there why not tl.sum / tl.max). The interpreter knows only its builtin combiners and runs any
   other one element by element in Python: one interpreted ``a + b`` per element of a
   [rows x offsets] block, about two thirds of the time of an interpreted convolution. Here the
   interpreter treats those two as the builtin ones (NumPy's sum, max, cumsum over the block).
   Bit for bit the same: integer addition with wrap-around and integer max are associative and
   commutative, so the order the elements are combined in does not matter, and the block keeps
   its integer dtype.
2. Helper calls inside a kernel. The interpreter re-patches triton.language at every call of a
   @triton.jit helper (InterpretedFunction.__call__: a scan of the language modules' members),
   though the kernel's launch has patched the same modules until it returns; here a helper call
   inside a launch skips that when its modules are among the launch's (about a fifth of the time
   of the fused BatchNorm+ReLU kernels, which call helpers per tile).

The compiled kernels (sm_80/sm_90, tests/cuda/test_cubins.py) are untouched.
tests/cuda/test_interpreter_speedups.py checks that the plans built with and without (1) are
identical (and equal the torch reference), that results with and without (2) are identical, and
that the plan kernels' combiners are the ones recognised here (a renamed combiner fails that test
instead of silently making the suite slow again).

Applied by tests/conftest.py (after it sets TRITON_INTERPRET=1) and by fuzz_ops.py (the CUDA-path
fuzz subprocess); only where TRITON_INTERPRET is on. ``MXS_TEST_PLAIN_INTERPRETER=1`` turns both
off (the interpreter's own paths).
"""
import contextlib
import os

import numpy as np

_PLAN_MODULE = "mx_sparse._cuda.plan_kernels"


def combiner_kind(combine_fn):
    """'add' / 'max' for the plan kernels' integer combiners, else None (left to the interpreter)."""
    fn = getattr(combine_fn, "fn", None)
    if getattr(fn, "__module__", None) != _PLAN_MODULE:
        return None
    return {"_add": "add", "_max": "max"}.get(fn.__name__)


def _integer(tensor) -> bool:
    return np.issubdtype(tensor.handle.data.dtype, np.integer)


def fast_combiners() -> bool:
    """(1): patches triton's interpreter (ReduceOps / ScanOps); True where it did."""
    if not _interpreting():
        return False    # compiled kernels (a GPU run): nothing to patch
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    reduce_ops, scan_ops = getattr(interpreter, "ReduceOps", None), getattr(interpreter, "ScanOps", None)
    if reduce_ops is None or scan_ops is None or getattr(reduce_ops, "plan_combiners_fast", False):
        return False
    generic_reduce, generic_scan = reduce_ops.apply_impl, scan_ops.apply_impl

    def reduce_impl(self, input):
        kind = combiner_kind(self.combine_fn)
        if kind is None or len(input) != 1 or not _integer(input[0]):
            return generic_reduce(self, input)
        if kind == "add":
            return self.sum(input[0])
        return self.min_max(input[0], val_reduce_op=np.max)

    def scan_impl(self, input):
        if combiner_kind(self.combine_fn) != "add" or len(input) != 1 or not _integer(input[0]):
            return generic_scan(self, input)
        data = input[0].handle.data
        if self.reverse:
            data = np.flip(data, axis=self.axis)
        out = np.cumsum(data, axis=self.axis).astype(data.dtype)
        if self.reverse:
            out = np.flip(out, axis=self.axis)
        return [self.to_tensor(np.ascontiguousarray(out), input[0].dtype)]

    reduce_ops.apply_impl, scan_ops.apply_impl = reduce_impl, scan_impl
    reduce_ops.plan_combiners_fast = True
    _GENERIC.update(reduce=generic_reduce, scan=generic_scan, fast_reduce=reduce_impl, fast_scan=scan_impl)
    return True


_GENERIC = {}   # the interpreter's own apply_impl methods, once fast_combiners() has replaced them


def applied() -> bool:
    return bool(_GENERIC) and bool(_PLAIN_CALLS)


@contextlib.contextmanager
def generic_combiners():
    """Within: the interpreter's own element-by-element path again (for the test that compares)."""
    from triton.runtime import interpreter
    interpreter.ReduceOps.apply_impl, interpreter.ScanOps.apply_impl = _GENERIC["reduce"], _GENERIC["scan"]
    try:
        yield
    finally:
        interpreter.ReduceOps.apply_impl = _GENERIC["fast_reduce"]
        interpreter.ScanOps.apply_impl = _GENERIC["fast_scan"]


def _langs(fn):
    """The triton.language modules a jit function's globals hold (what the interpreter patches)."""
    import triton.language as tl
    return frozenset(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)


def skip_nested_patching() -> bool:
    """(2): patches triton's interpreter (GridExecutor / InterpretedFunction calls); True where it did."""
    if not _interpreting():
        return False
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    grid_executor = getattr(interpreter, "GridExecutor", None)
    function = getattr(interpreter, "InterpretedFunction", None)
    if grid_executor is None or function is None or not hasattr(function, "rewrite"):
        return False    # another triton's interpreter: left as it is
    grid_call, device_call = grid_executor.__call__, function.__call__
    if getattr(grid_call, "records_langs", False):
        return False
    active = []

    def launch(self, *args, **kwargs):
        active.append(_langs(self.fn))
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            active.pop()

    def call(self, *args, **kwargs):
        if not active or not _langs(self.fn) <= active[-1]:
            return device_call(self, *args, **kwargs)
        fn = self.rewrite()
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise interpreter.InterpreterError(repr(e)) from e

    launch.records_langs = True
    interpreter.GridExecutor.__call__, interpreter.InterpretedFunction.__call__ = launch, call
    _PLAIN_CALLS.update(launch=grid_call, call=device_call, fast_launch=launch, fast_call=call)
    return True


_PLAIN_CALLS = {}   # the interpreter's own __call__ methods, once skip_nested_patching() has replaced them


@contextlib.contextmanager
def plain_helper_calls():
    """Within: helper calls re-patch triton.language again (for the test that compares)."""
    from triton.runtime import interpreter
    interpreter.GridExecutor.__call__ = _PLAIN_CALLS["launch"]
    interpreter.InterpretedFunction.__call__ = _PLAIN_CALLS["call"]
    try:
        yield
    finally:
        interpreter.GridExecutor.__call__ = _PLAIN_CALLS["fast_launch"]
        interpreter.InterpretedFunction.__call__ = _PLAIN_CALLS["fast_call"]


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def apply() -> bool:
    """Both speed-ups; True where they were applied (TRITON_INTERPRET on, not turned off)."""
    if not _interpreting() or os.environ.get("MXS_TEST_PLAIN_INTERPRETER") == "1":
        return False
    return fast_combiners() & skip_nested_patching()
