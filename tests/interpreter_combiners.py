"""Test-suite speed-up of Triton's interpreter (TRITON_INTERPRET=1) for the map plan's integer
reductions (mx_sparse/_cuda/plan_kernels.py).

The plan kernels reduce and scan with their own combiners ``_add`` / ``_max`` (tl.reduce,
tl.associative_scan; see there why not tl.sum / tl.max). The interpreter knows only its builtin
combiners (tl.sum's, tl.max's, ...) and runs any other one element by element in Python: one
interpreted ``a + b`` per element of a [rows x offsets] block, about two thirds of the time of a
convolution on the CUDA path on CPU tensors (tests/cuda/test_cuda_on_cpu.py, the CUDA-path runs of
test_fuzz.py and test_conv_map_at.py).

``apply`` makes the interpreter treat those two combiners as the builtin ones (NumPy's sum, max,
cumsum over the block). Results are the same bit for bit: integer addition with wrap-around and
integer max are associative and commutative, so the order the elements are combined in does not
change them, and the block keeps its integer dtype. The kernels' code runs unchanged (only the
interpreter's evaluation of the two one-line combiners differs); the compiled kernels (sm_80/sm_90,
tests/cuda/test_cubins.py) are untouched. tests/cuda/test_interpreter_combiners.py checks both
claims: the plans built with and without this are identical (and equal the torch reference), and
the plan kernels' combiners are the ones recognised here (a renamed combiner fails that test
instead of silently making the suite slow again).

Applied by tests/conftest.py (after it sets TRITON_INTERPRET=1) and by fuzz_ops.py (the CUDA-path
fuzz subprocess); only where TRITON_INTERPRET is on. ``MXS_TEST_GENERIC_COMBINERS=1`` turns it off
(the interpreter's own element-by-element path).
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


def apply() -> bool:
    """Patches triton's interpreter (ReduceOps / ScanOps); True where it did."""
    interpreting = os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")
    if not interpreting or os.environ.get("MXS_TEST_GENERIC_COMBINERS") == "1":
        return False    # compiled kernels (a GPU run), or the interpreter's own path asked for
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


_GENERIC = {}   # the interpreter's own apply_impl methods, once apply() has replaced them


def applied() -> bool:
    return bool(_GENERIC)


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
