"""A test-suite speed-up of Triton's interpreter (TRITON_INTERPRET=1), which runs the CUDA
backend's kernels on CPU tensors (tests/cuda, tests/cuda/test_cuda_on_cpu.py's MXS_CUDA_ON_CPU=1
sessions, the CUDA-path runs of test_fuzz.py and test_conv_map_at.py). It changes no kernel and no
result, only how the interpreter spends its time:

Helper calls inside a kernel. The interpreter re-patches triton.language at every call of a
@triton.jit helper (InterpretedFunction.__call__: a scan of the language modules' members), though
the kernel's launch has patched the same modules until it returns; here a helper call inside a
launch skips that when its modules are among the launch's (about a fifth of the time of the fused
BatchNorm+ReLU kernels, which call helpers per tile).

(The other large interpreter cost, the map plan's integer reductions run element by element in
Python, is fixed at the source: mx_sparse/_cuda/plan_kernels.py reduces with triton.language's own
combiners, which the interpreter runs with NumPy; tests/cuda/test_interpreter_speedups.py checks
they stay those.)

The compiled kernels (sm_80/sm_90, tests/cuda/test_cubins.py) are untouched.
tests/cuda/test_interpreter_speedups.py checks that results with and without it are identical.

Applied by tests/conftest.py (after it sets TRITON_INTERPRET=1) and by fuzz_ops.py (the CUDA-path
fuzz subprocess); only where TRITON_INTERPRET is on. ``MXS_TEST_PLAIN_INTERPRETER=1`` turns it
off (the interpreter's own paths).
"""
import contextlib
import os

def _langs(fn):
    """The triton.language modules a jit function's globals hold (what the interpreter patches)."""
    import triton.language as tl
    return frozenset(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)


def skip_nested_patching() -> bool:
    """Patches triton's interpreter (GridExecutor / InterpretedFunction calls); True where it did."""
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
    """The speed-up; True where it was applied (TRITON_INTERPRET on, not turned off)."""
    if not _interpreting() or os.environ.get("MXS_TEST_PLAIN_INTERPRETER") == "1":
        return False
    return skip_nested_patching()


def applied() -> bool:
    return bool(_PLAIN_CALLS)
