"""Crash fuzz of every ``torch.ops.mx_sparse`` op and the public layers (run by
test_fuzz.py in a subprocess, so that a segfault or abort fails that test instead of
killing pytest).

Each example draws valid arguments from the op's spec (fuzz_specs.py), then damages 0 to
2 of them by their schema type: tensors get another dtype or rank, a row or column more or
less, a non-contiguous layout, zero rows, NaN/Inf, negative, -1, out-of-range or huge
entries; ints and int lists get negative, zero, 2^31, 2^62, 2^63 - 1 values or the wrong
length; floats NaN/Inf. The call must then either return what the spec's reference says
(within the rounding of the output dtype) or, where the reference says the input is
invalid, raise a Python exception whose message names one of the arguments it points to.
A valid input that raises, an invalid one that returns, or a wrong value fails the run.

    python tests/fuzz_ops.py [--examples N] [--progress FILE] [--only OP[,OP]] [--layers-only]

Before each call the example is written to the progress file, so a crash leaves the input
that caused it. Exit status 0: every example passed; 1: a failure (printed); a negative
status: the process was killed by a signal (a crash).
"""
import argparse
import faulthandler
import math
import re
import sys
import os
import traceback

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz_specs  # noqa: E402
from fuzz_specs import Bounded, Invalid, Mutates  # noqa: E402

import mx_sparse  # noqa: E402  (with MXS_CUDA_ON_CPU=1: sets TRITON_INTERPRET=1)
import interpreter_speedups  # noqa: E402

OPS = torch.ops.mx_sparse
TOLERANCE = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
ALL_DTYPES = [torch.int32, torch.int64, torch.int16, torch.uint8, torch.bool, torch.float32, torch.float64,
              torch.float16, torch.bfloat16]
HUGE_INTS = [-1, 0, -5, 2 ** 31 - 1, 2 ** 31, 2 ** 62, 2 ** 63 - 1, -2 ** 63]


def op_names():
    """Every public op registered under mx_sparse::, as the dispatcher lists them. The _-prefixed
    accelerator primitives (kernels/schema/schema.cpp) are internal and check nothing the
    orchestration has checked: they are fuzzed through the ops that call them (MXS_CUDA_ON_CPU=1)."""
    return sorted(n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("mx_sparse::") and not n.startswith("mx_sparse::_"))


def schema_types(name):
    schema = getattr(OPS, name).default._schema
    return {a.name: str(a.type) for a in schema.arguments}


# ---------------------------------------------------------------- damage by schema type

def damage_tensor(data, t):
    kind = data.draw(st.sampled_from(["dtype", "rank_up", "rank_down", "rows", "cols", "noncontig", "empty",
                                      "nonfinite", "values"]), label="damage")
    if kind == "dtype":
        dtype = data.draw(st.sampled_from([d for d in ALL_DTYPES if d != t.dtype]))
        return t != 0 if dtype == torch.bool else t.to(dtype)
    if kind == "rank_up":
        return t.unsqueeze(data.draw(st.integers(0, t.dim())))
    if kind == "rank_down":
        return t.reshape(-1) if t.dim() > 1 else t.reshape(()) if t.numel() == 1 else t.reshape(-1)[:0].reshape(0, 0, 0)
    if kind in ("rows", "cols") and t.dim() >= (1 if kind == "rows" else 2):
        dim = 0 if kind == "rows" else 1
        if data.draw(st.booleans()) and t.shape[dim] > 0:
            return t.narrow(dim, 0, t.shape[dim] - 1)
        shape = list(t.shape)
        shape[dim] = 1
        extra = t.narrow(dim, 0, 1) if t.shape[dim] > 0 else torch.zeros(shape, dtype=t.dtype)
        return torch.cat([t, extra], dim)
    if kind == "noncontig":   # same values, strides of a view
        if t.dim() >= 2:
            return t.transpose(0, 1).contiguous().transpose(0, 1)
        if t.dim() == 1:
            return torch.stack([t, t], 1)[:, 0]
        return t
    if kind == "empty" and t.dim() >= 1:
        return t[:0]
    if t.numel() == 0:
        return t
    flat = t.clone().reshape(-1)
    pos = data.draw(st.integers(0, flat.numel() - 1))
    if kind == "nonfinite" and t.is_floating_point():
        flat[pos] = data.draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
    elif t.is_floating_point():
        flat[pos] = data.draw(st.sampled_from([1e30, -1e30, -3.0, 0.0]))
    elif t.dtype != torch.bool:
        info = torch.iinfo(t.dtype)
        rows = t.shape[0] if t.dim() else 1
        # 2^32: an int64 value that wraps to 0 if narrowed to int32 unchecked
        bad = data.draw(st.sampled_from([-1, -2, info.min, info.max, rows, rows + 7, 2 ** 32]))
        flat[pos] = max(info.min, min(info.max, bad))
    return flat.reshape(t.shape)


def damage(data, type_name, value, huge_ints=HUGE_INTS):
    if type_name == "Optional[Tensor]":
        if value is None:
            return torch.zeros(data.draw(st.integers(0, 3)), 2, dtype=torch.int32)
        return None if data.draw(st.booleans()) else damage_tensor(data, value)
    if type_name == "Tensor":
        return damage_tensor(data, value)
    if type_name == "int":
        return data.draw(st.sampled_from(huge_ints + [value + 1, -value]))
    if type_name == "List[int]":
        kind = data.draw(st.sampled_from(["drop", "add", "value", "empty"]))
        value = list(value)
        if kind == "drop" and value:
            return value[:-1]
        if kind == "add":
            return value + [data.draw(st.sampled_from([1, 3]))]
        if kind == "value" and value:
            value[data.draw(st.integers(0, len(value) - 1))] = data.draw(st.sampled_from(HUGE_INTS))
            return value
        return []
    if type_name == "float":
        return data.draw(st.sampled_from([float("nan"), float("inf"), float("-inf"), -1.0, 1e300, 0.0]))
    if type_name == "bool":
        return not value
    if type_name == "List[float]":
        value = list(value)
        if value:
            value[data.draw(st.integers(0, len(value) - 1))] = data.draw(st.sampled_from(
                [float("nan"), float("inf"), -1.0, 0.0, 1e300]))
        return value
    return value


# ---------------------------------------------------------------- checking one call

def describe(args):
    def one(v):
        if isinstance(v, torch.Tensor):
            text = f"Tensor{list(v.shape)} {str(v.dtype).replace('torch.', '')} stride={v.stride()}"
            if v.numel() <= 40:
                text += f" {v.tolist()}"
            return text
        return repr(v)
    return ", ".join(f"{k}={one(v)}" for k, v in args.items())


def names_one_of(message, names):
    return any(re.search(rf"\b{re.escape(n)}\b", message) for n in names)


def copy_args(args):
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}


def close(actual, expected, where):
    """``expected``: Bounded (float result with error scale), or an exact tensor."""
    bound, precision = None, None
    if isinstance(expected, list):    # int[] results (an output shape): exact
        assert list(actual) == expected, f"{where}: {list(actual)}, expected {expected}"
        return
    if isinstance(expected, Bounded):
        if expected.alternative is not None and isinstance(actual, torch.Tensor) and actual.shape == expected.value.shape:
            # where the expected value is not finite but the alternative is, a finite result is held to the alternative
            use = ~torch.isfinite(expected.value) & torch.isfinite(expected.alternative) & torch.isfinite(actual)
            expected = Bounded(torch.where(use, expected.alternative, expected.value), expected.bound,
                               expected.precision)
        expected, bound, precision = expected.value, expected.bound, expected.precision
    assert isinstance(actual, torch.Tensor), f"{where}: expected a tensor, got {type(actual).__name__}"
    assert actual.shape == expected.shape, f"{where}: shape {list(actual.shape)}, expected {list(expected.shape)}"
    assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype}, expected {expected.dtype}"
    if not expected.is_floating_point():
        assert torch.equal(actual, expected), f"{where}: values differ\n{actual}\nexpected\n{expected}"
        return
    a, e = actual.double(), expected.double()
    fin = torch.isfinite(e)
    same_nonfinite = (torch.isnan(a) & torch.isnan(e)) | (a == e)
    assert bool(same_nonfinite[~fin].all()), f"{where}: NaN/Inf differ\n{actual}\nexpected\n{expected}"
    if bound is None:
        bound = e.abs()
    bound = bound.double().broadcast_to(e.shape)
    scale = torch.where(torch.isfinite(bound), bound, e.abs())   # an Inf term: relative to the value
    rtol = max(TOLERANCE[actual.dtype], TOLERANCE.get(precision, 0))
    tol = rtol * (scale + 1e-30) + 1e-300
    err = (a - e).abs()
    ok = ~fin | (err <= tol)
    # an output that overflowed to Inf where the exact value is finite but beyond the dtype's range
    limit = torch.finfo(actual.dtype).max
    ok |= fin & torch.isinf(a) & (e.abs() >= limit * (1 - rtol))
    assert bool(ok.all()), (f"{where}: values differ beyond rounding (max err {err[fin].max().item():.3g})\n"
                            f"{actual}\nexpected\n{expected}")


def compare(result, expected, where):
    if isinstance(expected, tuple):
        assert isinstance(result, (tuple, list)) and len(result) == len(expected), f"{where}: {len(expected)} outputs"
        for i, (r, e) in enumerate(zip(result, expected)):
            if isinstance(e, torch.Tensor) and e.is_floating_point() and not isinstance(e, Bounded):
                e = Bounded(e.to(r.dtype) if isinstance(r, torch.Tensor) else e, e.abs())
            close(r, e, f"{where} output {i}")
    else:
        close(result, expected, where)


def check_call(fn, reference, args, arg_names, where, damaged=()):
    """Runs ``reference`` on copies and ``fn`` on the arguments themselves (their layouts are
    part of the test); applies the rules of the module docstring. With two damaged arguments
    the op may report either one first: an error naming any damaged argument counts."""
    try:
        expected, invalid = reference(**copy_args(args)), None
    except Invalid as e:
        expected, invalid = None, e
    before = copy_args(args)
    try:
        result, error = fn(**args), None
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError, MemoryError, OverflowError) as e:
        result, error = None, e
    if invalid is not None:
        assert error is not None, f"{where}: accepted an input that breaks the contract ({invalid.names})"
        blame = set(invalid.names) | (set(damaged) if len(set(damaged)) > 1 else set())
        assert names_one_of(str(error), blame), (
            f"{where}: error does not name {sorted(blame)}: {type(error).__name__}: {error}")
        return "rejected"
    assert error is None, f"{where}: rejected a valid input: {type(error).__name__}: {error}"
    written = {}
    if isinstance(expected, Mutates):
        expected, written = expected.result, expected.written
    compare(result, expected, where)
    for name in arg_names:
        if name in written:
            want = written[name] if isinstance(written[name], Bounded) else Bounded(written[name], written[name].abs())
            close(args[name], want, f"{where} (written {name})")
        elif isinstance(before[name], torch.Tensor):
            assert torch.equal(before[name], args[name]) or (
                before[name].is_floating_point() and torch.equal(before[name].isnan(), args[name].isnan())), \
                f"{where}: modified argument {name}"
    return "returned"


# ---------------------------------------------------------------- op fuzz

class Progress:
    def __init__(self, path):
        self.file = open(path, "w", buffering=1) if path else None
        self.counts = {}

    def note(self, what, args):
        if self.file:
            self.file.write(f"{what}({describe(args)})\n")

    def count(self, what, outcome):
        self.counts.setdefault(what, {"returned": 0, "rejected": 0})[outcome] += 1


def fuzz_op(name, examples, progress):
    spec = fuzz_specs.spec_for(name)
    types = schema_types(name)
    fn = getattr(OPS, name).default

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(st.data())
    def run(data):
        args = spec.valid(data)
        damaged = []
        for _ in range(data.draw(st.integers(0, 2), label="damages")):
            arg = data.draw(st.sampled_from(sorted(args)), label="argument")
            args[arg] = damage(data, types[arg], args[arg], spec.int_damage or HUGE_INTS)
            damaged.append(arg)
        progress.note(name, args)
        progress.count(name, check_call(fn, spec.reference, args, list(types), name, damaged))

    run()


ADDRESS_SPACE = 16 << 30


def limit_address_space():
    """A huge allocation must fail as an exception here, never reach the OOM killer (the
    machine is shared): the process's address space is capped at 16 GiB (Linux)."""
    try:
        import resource
    except ImportError:
        return
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=200, help="examples per op and per layer test")
    parser.add_argument("--progress", default=None)
    parser.add_argument("--only", default=None)
    parser.add_argument("--layers-only", action="store_true")
    args = parser.parse_args()
    faulthandler.enable()
    interpreter_speedups.apply()   # the CUDA path's interpreted kernels: same results, less time
    limit_address_space()
    torch.set_num_threads(1)
    progress = Progress(args.progress)
    names = args.only.split(",") if args.only else op_names()
    missing = [n for n in names if fuzz_specs.spec_for(n) is None]
    if missing:
        print(f"ops without a fuzz spec: {missing}")
        return 1
    try:
        if not args.layers_only:
            for name in names:
                fuzz_op(name, args.examples, progress)
        if not args.only:
            import fuzz_layers
            fuzz_layers.fuzz(args.examples, progress)
    except Exception:  # noqa: BLE001  (hypothesis re-raises the shrunk failing example)
        traceback.print_exc()
        return 1
    total = 0
    for what, c in sorted(progress.counts.items()):
        print(f"{what}: {c['returned'] + c['rejected']} examples ({c['returned']} returned, {c['rejected']} rejected)")
        total += c["returned"] + c["rejected"]
    print(f"total: {total} examples, every one returned the reference result or was rejected naming an argument")
    return 0


if __name__ == "__main__":
    sys.exit(main())
