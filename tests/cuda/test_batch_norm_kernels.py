"""The CUDA backend's fused BatchNorm+ReLU Triton kernels (mx_sparse/_cuda/batch_norm_kernels.py),
run on CPU tensors in Triton's interpreter: against the C++ CPU kernels within 1e-6 relative
(float64 1e-12; values stored in bfloat16 within one rounding), against a float64 reference
(statistics, outputs and gradients), bit for bit from run to run and at any buffer alignment;
float32, float64, bfloat16 and (autocast) float16 / bfloat16 features with float32 parameters;
several row blocks and channel programs; empty inputs; NaN and Inf; float32 data whose squares
overflow float32; the number of launches per call."""
import pytest
import torch

from bn_cases import (CPU, DTYPES, TOLERANCE, TRITON_BN, channel, clone_args, compare_with_cpu, features,
                      float64_reference, forward_case, relative_error, run_all, same_bits)
from cuda_cases import cpu_is_cuda_path
from mx_sparse._cuda import batch_norm_relu as triton_kernels
from mx_sparse._cuda import launch

pytestmark = cpu_is_cuda_path


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch_stats", [True, False], ids=["batch", "running"])
def test_forward_recompute_backward_match_cpu(dtype, batch_stats):
    """1100 rows of 36 channels: several row blocks (the last one partial), one channel program."""
    compare_with_cpu(TRITON_BN, forward_case(1100, 36, dtype, batch_stats, True, True, seed=1), TOLERANCE[dtype])


def test_several_channel_programs_and_one_row():
    compare_with_cpu(TRITON_BN, forward_case(300, 70, torch.float32, True, True, True, seed=2),
                     TOLERANCE[torch.float32])
    compare_with_cpu(TRITON_BN, forward_case(1, 5, torch.float64, True, True, True, seed=4), TOLERANCE[torch.float64])


@pytest.mark.parametrize("affine, running", [(False, True), (True, False), (False, False)])
def test_absent_parameters_and_running_statistics(affine, running):
    compare_with_cpu(TRITON_BN, forward_case(200, 19, torch.float32, True, affine, running, seed=2),
                     TOLERANCE[torch.float32])


def test_running_statistics_of_other_dtypes():
    """float64 running statistics and bfloat16 weights for float32 features, as the CPU takes them."""
    args = forward_case(100, 7, torch.float32, True, True, True, seed=3)
    args[3], args[4] = args[3].double(), args[4].double()
    args[1] = args[1].bfloat16()
    compare_with_cpu(TRITON_BN, args, TOLERANCE[torch.float32])


def test_strided_running_statistics_are_updated_in_place():
    """Running statistics that are views (every other element): the kernel writes a contiguous copy,
    copied back into the view; the elements between are left alone."""
    args = forward_case(100, 7, torch.float32, True, True, True, seed=13)
    ref = clone_args(args)
    storages = []
    for i in (3, 4):
        storage = torch.full((14,), 5.0)
        storage[::2] = args[i]
        args[i] = storage[::2]
        storages.append(storage)
    TRITON_BN["batch_norm_relu_forward"](*args)
    CPU["batch_norm_relu_forward"](*ref)
    for storage, i in zip(storages, (3, 4)):
        assert relative_error(storage[::2], ref[i], "running statistic") <= 1e-6
        assert torch.equal(storage[1::2], torch.full((7,), 5.0))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_inputs(dtype):
    """No rows (running statistics: y, dx empty; dgamma, dbeta 0) and no channels."""
    compare_with_cpu(TRITON_BN, forward_case(0, 6, dtype, False, True, True, seed=5), TOLERANCE[dtype])
    compare_with_cpu(TRITON_BN, forward_case(30, 0, dtype, True, True, True, seed=5), TOLERANCE[dtype])
    with pytest.raises(ValueError, match="input: expected at least one row"):
        TRITON_BN["batch_norm_relu_forward"](*forward_case(0, 6, dtype, True, True, True, seed=5))


@pytest.mark.parametrize("batch_stats", [True, False], ids=["batch", "running"])
def test_nan_and_inf_propagate_as_on_the_cpu(batch_stats):
    args = forward_case(300, 6, torch.float32, batch_stats, True, True, seed=6)
    x = args[0]
    x[3, 2] = float("nan")
    x[250, 4] = float("inf")
    x[10, 5] = -float("inf")
    compare_with_cpu(TRITON_BN, args, TOLERANCE[torch.float32])


@pytest.mark.parametrize("batch_stats", [True, False], ids=["batch", "running"])
def test_infinite_weight_gives_the_cpus_infinities_in_dx(batch_stats):
    """gamma = +-inf in two channels: dx = gamma * invstd * (g - ...) is +-inf where the bracket is not
    zero, as on the CPU (an expanded a * g - a * (...) would give inf - inf = NaN there)."""
    x = features(6, 3, torch.float32, seed=21)
    dy = features(6, 3, torch.float32, seed=22)
    mean, var = x.double().mean(0), x.double().var(0, unbiased=False)
    invstd = (var + 1e-5).rsqrt()
    weight = torch.tensor([float("inf"), 1.5, -float("inf")])
    scale, shift = torch.ones(3), torch.full((3,), 5.0)      # every row passes the ReLU
    args = (dy, x, mean, invstd, weight, scale, shift, batch_stats)
    ours = TRITON_BN["batch_norm_relu_backward"](*args)
    want = CPU["batch_norm_relu_backward"](*args)
    for got, ref, name in zip(ours, want, ("dx", "dgamma", "dbeta")):
        assert torch.equal(got.isnan(), ref.isnan()) and torch.equal(got.isposinf(), ref.isposinf()) and \
            torch.equal(got.isneginf(), ref.isneginf()), f"{name}: NaN/Inf differ from the CPU's\n{got}\n{ref}"
        finite = ref.isfinite()
        assert torch.allclose(got[finite].double(), ref[finite].double(), rtol=1e-6, atol=0), name
    assert ours[0][:, 0].isinf().all() and ours[0][:, 2].isinf().all()


def test_float32_data_whose_squares_overflow():
    """|x| ~ 1e20 and ~3e38: float32 squares overflow; the float64 statistics stay finite (the CPU
    takes such a channel again in float64)."""
    args = forward_case(300, 5, torch.float32, True, True, True, seed=7)
    args[0][:, 1] *= 1e20
    args[0][:, 3] *= 3e38 / args[0][:, 3].abs().max()
    errors = compare_with_cpu(TRITON_BN, args, TOLERANCE[torch.float32])
    assert errors["invstd"] <= 1e-6


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("batch_stats", [True, False], ids=["batch", "running"])
def test_against_float64_reference(dtype, batch_stats):
    """Statistics, y and the gradients against torch's batch_norm + relu in float64 (autograd):
    float64 statistics of float32 data are as exact as their final rounding."""
    args = forward_case(1500, 20, dtype, batch_stats, True, True, seed=21)
    out = run_all(TRITON_BN, args)
    dy = features(1500, 20, dtype, 9)
    y, mean, var, dx, dgamma, dbeta = float64_reference(args, dy)
    if batch_stats:
        assert relative_error(out["mean"], mean, "mean") <= 1e-14
        assert relative_error(out["invstd"], 1 / torch.sqrt(var + 1e-5), "invstd") <= 1e-14
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    for name, want in (("y", y), ("dx", dx), ("dgamma", dgamma), ("dbeta", dbeta)):
        assert relative_error(out[name], want, name, check_dtype=False) <= tol, name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_autocast_dtypes_with_float32_parameters(dtype):
    """Autocast's activations (float16 / bfloat16) with float32 weight, bias and running statistics:
    statistics in float64 (exact for these inputs, to 1e-14), scale and shift float32, y and dx in the
    features' dtype within its rounding, dgamma and dbeta in float32 to 1e-6 of the float64 reference;
    the running statistics float32. bfloat16 also against the CPU kernels (which take no float16)."""
    args = forward_case(1100, 24, dtype, True, True, True, seed=31, channel_dtype=torch.float32)
    out = run_all(TRITON_BN, args)
    assert out["y"].dtype == dtype and out["dx"].dtype == dtype
    assert out["scale"].dtype == torch.float32 and out["dgamma"].dtype == torch.float32
    assert out["running_mean"].dtype == torch.float32
    dy = features(1100, 24, dtype, 9)
    y, mean, var, dx, dgamma, dbeta = float64_reference(args, dy)
    assert relative_error(out["mean"], mean, "mean") <= 1e-14
    assert relative_error(out["invstd"], 1 / torch.sqrt(var + 1e-5), "invstd") <= 1e-14
    rounding = 2.0 ** -10 if dtype == torch.float16 else 2.0 ** -7
    assert relative_error(out["y"], y, "y", check_dtype=False) <= rounding
    assert relative_error(out["dx"], dx, "dx", check_dtype=False) <= 2 * rounding
    for name, want in (("dgamma", dgamma), ("dbeta", dbeta)):
        assert relative_error(out[name], want, name, check_dtype=False) <= 1e-6, name
    if dtype == torch.bfloat16:
        compare_with_cpu(TRITON_BN, args, TOLERANCE[torch.float32])


def test_bitwise_from_run_to_run_and_at_any_alignment():
    """The same input twice, and once from a buffer that starts 4 bytes further on: the same bits."""
    args = forward_case(2000, 24, torch.float32, True, True, True, seed=41)
    first, again = run_all(TRITON_BN, args), run_all(TRITON_BN, args)
    shifted = clone_args(args)
    buffer = torch.empty(args[0].numel() + 1)
    shifted[0] = buffer[1:].view(args[0].shape)
    shifted[0].copy_(args[0])
    moved = run_all(TRITON_BN, shifted)
    for name in first:
        same_bits(again[name], first[name], name)
        same_bits(moved[name], first[name], name)


def test_block_layout_depends_on_the_shape_only():
    """The rows' blocks (and so the order of every sum) come from n and c alone, at most MAX_BLOCKS."""
    for n, c in ((1, 1), (600, 36), (150000, 16), (2**31 - 1, 128)):
        width, tile_r, block_rows, nblocks, grid = triton_kernels.layout(n, c)
        assert width * tile_r == triton_kernels.TILE_ELEMENTS and block_rows % tile_r == 0
        assert nblocks <= triton_kernels.MAX_BLOCKS and (nblocks - 1) * block_rows < max(n, 1) <= nblocks * block_rows
        assert grid == (nblocks, -(-c // width))
    with pytest.raises(ValueError, match="input: 2147483648 rows exceed"):
        triton_kernels.layout(2**31, 4)


def test_launches_per_call():
    """Batch statistics 2 launches (moments, normalize+ReLU), running statistics 1, the recompute 1,
    the backward 2 (sums, dx)."""
    def count(fn, *args):
        before = sum(n for (k, _, _), n in launch.launches.items() if k.startswith("bn_"))
        out = fn(*args)
        return sum(n for (k, _, _), n in launch.launches.items() if k.startswith("bn_")) - before, out

    args = forward_case(100, 8, torch.float32, True, True, True, seed=9)
    n_fwd, (y, mean, invstd, scale, shift) = count(TRITON_BN["batch_norm_relu_forward"], *args)
    n_eval, _ = count(TRITON_BN["batch_norm_relu_forward"], *clone_args(args[:5]), False, 0.1, 1e-5)
    n_apply, _ = count(TRITON_BN["scale_shift_relu"], args[0], scale, shift)
    n_bwd, _ = count(TRITON_BN["batch_norm_relu_backward"], y, args[0], mean, invstd, args[1], scale, shift, True)
    assert (n_fwd, n_eval, n_apply, n_bwd) == (2, 1, 1, 2)


def test_prepared_launches_are_kept_per_shape_dtype_and_flags():
    """The launch arguments prepared once per (call, rows, channels, dtype, flags) and kept
    (batch_norm_relu._prepared): one shape run with every flag combination and momentum in turn, in
    one process, each call against the CPU kernels -- a call never takes another's arguments."""
    kept_before = set(triton_kernels._prepared)
    for dtype in (torch.float32, torch.float64):
        for batch_stats in (True, False):
            for affine, running in ((True, True), (False, True), (True, False), (False, False)):
                if not (batch_stats or running):
                    continue        # running statistics needed to normalise with them
                for momentum in (0.1, 0.5):
                    args = forward_case(150, 11, dtype, batch_stats, affine, running, seed=17)
                    args[6] = momentum
                    compare_with_cpu(TRITON_BN, args, TOLERANCE[dtype])
    kept = [key for key in set(triton_kernels._prepared) - kept_before if key[1:3] == (150, 11)]
    # per dtype: forward 4 present/absent patterns with batch statistics, 2 with running ones; the
    # recompute 1; backward 2 x (weight or none) (the momentum is an argument, not part of a key)
    assert sorted(k[0] for k in kept) == [0] * 12 + [1] * 2 + [2] * 8


def test_arguments_in_other_dtypes_are_converted_as_the_cpu_converts_them():
    """The backward's mean and invstd in float32, scale and shift in float64, grad in bfloat16."""
    x = features(200, 6, torch.float32, 10)
    mean, invstd = channel(6, torch.float32, -1, 1, 11), channel(6, torch.float32, 0.5, 2, 12)
    scale, shift = channel(6, torch.float64, 0.5, 2, 13), channel(6, torch.float64, -1, 1, 14)
    dy = features(200, 6, torch.bfloat16, 15)
    got = TRITON_BN["batch_norm_relu_backward"](dy, x, mean, invstd, None, scale, shift, True)
    want = CPU["batch_norm_relu_backward"](dy, x, mean, invstd, None, scale, shift, True)
    for name, a, b in zip(("dx", "dgamma", "dbeta"), got, want):
        assert relative_error(a, b, name) <= 1e-6, name
    assert relative_error(TRITON_BN["scale_shift_relu"](x, scale, shift), CPU["scale_shift_relu"](x, scale, shift),
                          "y") <= 1e-6


def test_registration_picks_the_triton_kernels_for_cuda_and_operators_for_the_npu():
    """CUDA tensors get the Triton kernels; NPU tensors (and any other device, and CPU tensors
    without a switch reaching the orchestration) the torch operators; the switches add the CPU."""
    from mx_sparse._accelerator import batch_norm_operators
    from mx_sparse._accelerator import batch_norm_relu as orchestration
    from mx_sparse._accelerator import registration
    assert registration.batch_norm_kernels(False) == {"cuda": triton_kernels}
    assert registration.batch_norm_kernels(True)["cpu"] is triton_kernels
    assert registration.batch_norm_kernels(False, True)["cpu"] is batch_norm_operators
    assert orchestration.kernels_for(torch.device("cuda")) is triton_kernels
    for device in ("cpu", "meta", "privateuseone"):   # the NPU: PrivateUse1, "npu" once torch_npu names it
        assert orchestration.kernels_for(torch.device(device)) is batch_norm_operators
