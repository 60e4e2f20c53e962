"""The fused BatchNorm+ReLU from torch operators (mx_sparse/_accelerator/batch_norm_operators.py:
the NPU's implementation, and that of every device without kernels of its own), on CPU tensors:
against the C++ CPU kernels within 1e-6 relative (float64 1e-12; values stored in bfloat16 within
one rounding), against a float64 reference, under autocast's dtypes (float16 / bfloat16 features,
float32 parameters), bit for bit from run to run, and the number of torch operators per call."""
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))
from bn_cases import (CPU, DTYPES, OPERATORS_BN, OPERATORS_TOLERANCE, compare_with_cpu, features,  # noqa: E402
                      float64_reference, forward_case, relative_error, run_all, same_bits)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch_stats", [True, False], ids=["batch", "running"])
def test_forward_recompute_backward_match_cpu(dtype, batch_stats):
    compare_with_cpu(OPERATORS_BN, forward_case(1100, 36, dtype, batch_stats, True, True, seed=1),
                     OPERATORS_TOLERANCE[dtype])


@pytest.mark.parametrize("affine, running", [(False, True), (True, False), (False, False)])
def test_absent_parameters_and_running_statistics(affine, running):
    compare_with_cpu(OPERATORS_BN, forward_case(200, 19, torch.float32, True, affine, running, seed=2),
                     OPERATORS_TOLERANCE[torch.float32])


def test_nan_inf_and_empty_inputs():
    args = forward_case(300, 6, torch.float32, True, True, True, seed=6)
    args[0][3, 2], args[0][250, 4] = float("nan"), float("inf")
    compare_with_cpu(OPERATORS_BN, args, OPERATORS_TOLERANCE[torch.float32])
    compare_with_cpu(OPERATORS_BN, forward_case(0, 6, torch.float32, False, True, True, seed=5), 1e-5)
    compare_with_cpu(OPERATORS_BN, forward_case(30, 0, torch.float32, True, True, True, seed=5), 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_against_float64_reference(dtype):
    """float32, and autocast's float16 / bfloat16 features with float32 parameters: statistics to
    1e-6, y and dx within the features' rounding, dgamma and dbeta (float32) to 1e-5."""
    channels = torch.float32
    args = forward_case(1500, 20, dtype, True, True, True, seed=21, channel_dtype=channels)
    out = run_all(OPERATORS_BN, args)
    assert out["y"].dtype == dtype and out["dx"].dtype == dtype and out["dgamma"].dtype == torch.float32
    y, mean, var, dx, dgamma, dbeta = float64_reference(args, features(1500, 20, dtype, 9))
    assert relative_error(out["mean"], mean, "mean") <= 1e-6
    assert relative_error(out["invstd"], 1 / torch.sqrt(var + 1e-5), "invstd") <= 1e-6
    rounding = {torch.float32: 1e-6, torch.float16: 2.0 ** -10, torch.bfloat16: 2.0 ** -7}[dtype]
    assert relative_error(out["y"], y, "y", check_dtype=False) <= rounding
    assert relative_error(out["dx"], dx, "dx", check_dtype=False) <= 4 * rounding
    for name, want in (("dgamma", dgamma), ("dbeta", dbeta)):
        assert relative_error(out[name], want, name, check_dtype=False) <= 1e-5, name


def test_bitwise_from_run_to_run():
    args = forward_case(2000, 24, torch.float32, True, True, True, seed=41)
    first, again = run_all(OPERATORS_BN, args), run_all(OPERATORS_BN, args)
    for name in first:
        same_bits(again[name], first[name], name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_relu_gate_at_the_boundary_is_the_cpu_kernels(dtype):
    """The backward's ReLU gate decides x * scale + shift > 0 as the CPU kernels do, where one
    rounding more or less flips it: shift = -round(x * scale), so the exact pre-activation is the
    product's rounding error (either sign, per element), 0 where the product is exact, and NaN
    where the shift is; as a one-row batch's channels do (x == mean). Gradient 1 on every
    element: dbeta counts the elements passed, and dx, dgamma follow."""
    held = torch.float32 if dtype == torch.float32 else torch.float64
    g = torch.Generator().manual_seed(17)
    x = (torch.rand(64, 6, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    x[:8] = 2.0                                          # exact products: pre-activation 0, not passed
    scale = (torch.rand(6, generator=g, dtype=torch.float64) + 0.5).to(held)
    shift = -(x[9] * scale)                              # rounded: pre of row 9 is the rounding error
    shift[5] = float("nan")
    mean, invstd = x.double().mean(0), torch.rand(6, generator=g, dtype=torch.float64) + 0.5
    weight = torch.rand(6, generator=g, dtype=torch.float64).to(held) + 0.5
    args = (torch.ones_like(x), x, mean, invstd, weight, scale, shift, True)
    ours = OPERATORS_BN["batch_norm_relu_backward"](*args)
    cpu = CPU["batch_norm_relu_backward"](*args)
    assert 0 < ours[2][:5].sum() < 64 * 5 and ours[2][5] == 0   # both outcomes occur; NaN never passes
    for name, a, b in zip(("dx", "dgamma", "dbeta"), ours, cpu):
        assert torch.equal(a.isnan(), b.isnan()), name
    assert torch.equal(ours[2], cpu[2]), (ours[2], cpu[2])   # the same elements passed, channel by channel


class _CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:   # views (select, as_strided) launch nothing
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_few_torch_operators_per_call():
    """float32 features with float32 parameters (the layer outside autocast): forward at most 7
    operators, the recompute 2, the backward at most 4; no host read (no .item(), no nonzero).
    Counted on a second call: the first makes the small constant (the ReLU gate's zero)
    that every later call of the same shape reuses."""
    args = forward_case(100, 8, torch.float32, True, True, True, seed=9)
    run_all(OPERATORS_BN, args)
    counts = {}
    for name, call in (("forward", lambda: OPERATORS_BN["batch_norm_relu_forward"](*args)),):
        with _CountOps() as mode:
            y, mean, invstd, scale, shift = call()
        counts[name] = mode.ops
    with _CountOps() as mode:
        OPERATORS_BN["scale_shift_relu"](args[0], scale, shift)
    counts["recompute"] = mode.ops
    with _CountOps() as mode:
        OPERATORS_BN["batch_norm_relu_backward"](y, args[0], mean, invstd, args[1], scale, shift, True)
    counts["backward"] = mode.ops
    lengths = {name: len(ops) for name, ops in counts.items()}
    assert lengths["forward"] <= 7 and lengths["recompute"] <= 2 and lengths["backward"] <= 4, (lengths, counts)
    assert not any("item" in op or "nonzero" in op for ops in counts.values() for op in ops), counts


# ---------------------------------------------------------------- the NPU path's C++ common case

def _native_bn():
    """The C++ kernels the NPU path registers (kernels/orchestration/batch_norm_operators.cpp: the
    common case over the same operators, the argument checks, the general route in Python)."""
    from mx_sparse import _C
    native = _C.batch_norm_operators
    return {"batch_norm_relu_forward": native.forward, "scale_shift_relu": native.scale_shift_relu,
            "batch_norm_relu_backward": native.backward}


def _with(args, **changes):
    names = ("x", "weight", "bias", "running_mean", "running_var", "batch_stats", "momentum", "eps")
    return [changes.get(name, a) for name, a in zip(names, args)]


# (n, c, per-channel dtype, batch_stats, changes): cases outside the common one, which the C++
# kernels hand to batch_norm_operators.py's general route (the common case: the tests above)
GENERAL_ROUTE_CASES = {
    "one row with running": (1, 8, None, True, {}),
    "momentum 1.5": (200, 8, None, True, {"momentum": 1.5}),
    "float64 parameters": (200, 8, torch.float64, True, {}),
    "running statistics": (200, 8, None, False, {}),
}


@pytest.mark.parametrize("case", list(GENERAL_ROUTE_CASES))
def test_general_route_matches_the_cpu_kernels(case):
    """The cases the C++ kernels hand to the Python general route (through the NPU path's kernels
    themselves): every output within the torch operators' tolerance of the CPU kernels."""
    n, c, channels, batch_stats, changes = GENERAL_ROUTE_CASES[case]
    args = _with(forward_case(n, c, torch.float32, batch_stats, True, True, seed=31, channel_dtype=channels),
                 **changes)
    compare_with_cpu(_native_bn(), args, OPERATORS_TOLERANCE[torch.float32])


def test_native_backward_without_the_forwards_tensors_is_the_same():
    """As test_backward_without_the_forwards_tensors_is_the_same, for the C++ twins table: copies
    take the casts (same bits), a shift changed in place is read as it is now."""
    native = _native_bn()
    args = forward_case(500, 12, torch.float32, True, True, True, seed=13)
    x, weight = args[0], args[1]
    y, mean, invstd, scale, shift = native["batch_norm_relu_forward"](*args)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(3))
    backward = native["batch_norm_relu_backward"]
    with _CountOps() as reuse:
        reused = backward(dy, x, mean, invstd, weight, scale, shift, True)
    copies = mean.clone(), invstd.clone(), shift.clone()
    with _CountOps() as casts:
        cast = backward(dy, x, copies[0], copies[1], weight, scale, copies[2], True)
    assert len(casts.ops) == len(reuse.ops) + 3, (reuse.ops, casts.ops)   # the twins were found
    for name, a, b in zip(("dx", "dgamma", "dbeta"), reused, cast):
        same_bits(a, b, name)
    shift.add_(0.25)
    changed = backward(dy, x, mean, invstd, weight, scale, shift, True)
    want = OPERATORS_BN["batch_norm_relu_backward"](dy, x, mean.clone(), invstd.clone(), weight, scale,
                                                    shift.clone(), True)
    for name, a, b in zip(("dx", "dgamma", "dbeta"), changed, want):
        same_bits(a, b, name)
    assert not torch.equal(changed[0], reused[0])


@pytest.mark.parametrize("op, args, message", [
    ("batch_norm_relu_forward", lambda: [torch.zeros(4, 3, dtype=torch.int32), None, None, None, None, True, 0.1,
                                         1e-5], "input: expected float32"),
    ("batch_norm_relu_forward", lambda: [torch.zeros(4, 3), torch.ones(2), None, None, None, True, 0.1, 1e-5],
     r"weight: expected \[3\] \(one per channel of input\)"),
    ("scale_shift_relu", lambda: [torch.zeros(4), torch.ones(4), torch.ones(4)], "input: expected a \\[N, C\\]"),
    ("batch_norm_relu_backward", lambda: [torch.zeros(5, 3), torch.zeros(4, 3), torch.zeros(3), torch.ones(3), None,
                                          torch.ones(3), torch.zeros(3), True], "grad: expected the shape of input"),
])
def test_native_kernels_refuse_bad_arguments_as_the_contract(op, args, message):
    """The contract's checks (kernels/contract/batch_norm_relu_args.h) with the Python
    orchestration's messages and exception type."""
    from mx_sparse._accelerator import batch_norm_relu as orchestration
    with pytest.raises(ValueError, match=message) as python:
        getattr(orchestration, op)(*args())
    with pytest.raises(ValueError, match=message) as native:
        _native_bn()[op](*args())
    assert str(native.value) == str(python.value)


def test_under_inference_mode():
    """Inference tensors have no version counter: forward and backward under torch.inference_mode
    skip the twins (the casts) and give the same bits as outside it."""
    ops = _native_bn()
    args = forward_case(120, 8, torch.float32, True, True, True, seed=5)
    want = run_all(ops, args)
    with torch.inference_mode():
        got = run_all(ops, args)
    for name in want:
        same_bits(got[name], want[name], name)
