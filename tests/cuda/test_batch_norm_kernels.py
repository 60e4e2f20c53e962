"""The CUDA backend's fused BatchNorm+ReLU Triton kernels (mx_sparse/_cuda/batch_norm_kernels.py),
run on CPU tensors in Triton's interpreter, against the C++ CPU kernels bit for bit: forward
(batch and running statistics, the running blend), the recompute and the backward, in float32,
float64 and bfloat16; several 512-row blocks and channel blocks; empty inputs; NaN and Inf; the
float64 redo of channels whose float32 sums overflow; and the number of launches per call.

Bit for bit against the CPU kernels' portable build; against their AVX-512 build (which contracts
multiply-adds, batch_norm_relu_rows.h) float32 and bfloat16 within tolerance (bn_cases.py), and
this file runs once more with MXS_CPU_PORTABLE=1."""
import os
import subprocess
import sys

import pytest
import torch

from bn_cases import (CPU, CPU_AVX512, DTYPES, TRITON_BN, channel, clone_args, compare_forward_and_backward, features,
                      forward_case, same_bits)
from cuda_cases import cpu_is_cuda_path
from mx_sparse._cuda import launch

pytestmark = cpu_is_cuda_path
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch_stats", [True, False], ids=["batch", "running"])
def test_forward_recompute_backward_same_bits_as_cpu(dtype, batch_stats):
    """600 rows (two 512-row blocks, the second partial), 36 channels (two programs of 32)."""
    compare_forward_and_backward(forward_case(600, 36, dtype, batch_stats, True, True, seed=1))


@pytest.mark.parametrize("affine, running", [(False, True), (True, False), (False, False)])
def test_absent_parameters_and_running_statistics(affine, running):
    compare_forward_and_backward(forward_case(200, 19, torch.float32, True, affine, running, seed=2))


def test_running_statistics_of_other_dtypes():
    """float64 running statistics and bfloat16 weights for float32 features: each rounded as the
    CPU rounds it (float64 blended exactly, bfloat16 weight widened)."""
    args = forward_case(100, 7, torch.float32, True, True, True, seed=3)
    args[3], args[4] = args[3].double(), args[4].double()
    args[1] = args[1].bfloat16()
    compare_forward_and_backward(args)


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
    for a, b in zip(TRITON_BN["batch_norm_relu_forward"](*args), CPU.batch_norm_relu_forward(*ref)):
        same_bits(a, b, "output", torch.float32)
    for storage, i in zip(storages, (3, 4)):
        same_bits(storage[::2], ref[i], "running statistic", torch.float32)
        assert torch.equal(storage[1::2], torch.full((7,), 5.0))


def test_single_row_and_momentum_none_like_values():
    args = forward_case(1, 5, torch.float64, True, True, True, seed=4)
    args[6] = 1.0 / 3.0      # momentum that float32 cannot hold: travels as float64 bits
    compare_forward_and_backward(args)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_inputs(dtype):
    """No rows (running statistics: y, dx empty; dgamma, dbeta 0) and no channels."""
    compare_forward_and_backward(forward_case(0, 6, dtype, False, True, True, seed=5))
    compare_forward_and_backward(forward_case(30, 0, dtype, True, True, True, seed=5))
    with pytest.raises(ValueError, match="input: expected at least one row"):
        TRITON_BN["batch_norm_relu_forward"](*forward_case(0, 6, dtype, True, True, True, seed=5))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch_stats", [True, False], ids=["batch", "running"])
def test_nan_and_inf_propagate_as_on_the_cpu(dtype, batch_stats):
    args = forward_case(300, 6, dtype, batch_stats, True, True, seed=6)
    x = args[0]
    x[3, 2] = float("nan")
    x[250, 4] = float("inf")
    x[10, 5] = -float("inf")
    compare_forward_and_backward(args)


def test_float32_overflow_is_taken_again_in_float64():
    """|x| ~ 1e20: the float32 squared deviations overflow, the channel is summed again in float64
    serially (its statistics then finite, as the CPU's)."""
    args = forward_case(300, 5, torch.float32, True, True, True, seed=7)
    args[0][:, 1] *= 1e20
    args[0][:, 3] *= 3e38 / args[0][:, 3].abs().max()   # the float32 row sum itself overflows
    compare_forward_and_backward(args)


def test_signed_zeros_are_kept():
    """A channel of -0.0: its sums stay -0.0 (a padded row adds -0.0, not +0.0)."""
    args = forward_case(520, 3, torch.float32, True, True, True, seed=8)
    args[0][:, 0] = -0.0
    compare_forward_and_backward(args)


def test_launches_per_call():
    """Batch statistics 5 launches (row sums, mean, squared deviations, coefficients, apply), running
    statistics 2, the recompute 1, the backward 3."""
    def count(fn, *args):
        before = sum(n for (k, _, _), n in launch.launches.items() if k.startswith("bn_"))
        out = fn(*args)
        return sum(n for (k, _, _), n in launch.launches.items() if k.startswith("bn_")) - before, out

    args = forward_case(100, 8, torch.float32, True, True, True, seed=9)
    n_fwd, (y, mean, invstd, scale, shift) = count(TRITON_BN["batch_norm_relu_forward"], *args)
    n_eval, _ = count(TRITON_BN["batch_norm_relu_forward"], *clone_args(args[:5]), False, 0.1, 1e-5)
    n_apply, _ = count(TRITON_BN["scale_shift_relu"], args[0], scale, shift)
    n_bwd, _ = count(TRITON_BN["batch_norm_relu_backward"], y, args[0], mean, invstd, args[1], scale, shift, True)
    assert (n_fwd, n_eval, n_apply, n_bwd) == (5, 2, 1, 3)


def test_arguments_in_other_dtypes_are_converted_as_the_cpu_converts_them():
    """The backward's mean and invstd in float32, scale and shift in float64: the CPU widens and
    narrows them; so does the launcher."""
    x = features(200, 6, torch.float32, 10)
    mean, invstd = channel(6, torch.float32, -1, 1, 11), channel(6, torch.float32, 0.5, 2, 12)
    scale, shift = channel(6, torch.float64, 0.5, 2, 13), channel(6, torch.float64, -1, 1, 14)
    dy = features(200, 6, torch.bfloat16, 15)
    got = TRITON_BN["batch_norm_relu_backward"](dy, x, mean, invstd, None, scale, shift, True)
    want = CPU.batch_norm_relu_backward(dy, x, mean, invstd, None, scale, shift, True)
    for name, a, b in zip(("dx", "dgamma", "dbeta"), got, want):
        same_bits(a, b, name, x.dtype)
    same_bits(TRITON_BN["scale_shift_relu"](x, scale, shift), CPU.scale_shift_relu(x, scale, shift), "y", x.dtype)


@pytest.mark.skipif(not CPU_AVX512, reason="the CPU kernels here are the portable build already")
def test_same_bits_as_the_portable_cpu_build():
    """This file once more against the CPU kernels' portable build (MXS_CPU_PORTABLE=1): every
    comparison bit for bit."""
    env = dict(os.environ, MXS_CPU_PORTABLE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
                           "-k", "not portable_cpu_build"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " skipped" not in proc.stdout.splitlines()[-1], proc.stdout[-2000:]


def test_registration_picks_the_triton_kernels_for_cuda_only():
    """CUDA tensors get the Triton kernels; CPU tensors (no switch) and any other device the torch
    operators; MXS_CUDA_ON_CPU=1 would add the CPU."""
    from mx_sparse._accelerator import batch_norm_relu as orchestration
    from mx_sparse._accelerator import registration
    from mx_sparse._cuda import batch_norm_relu as triton_kernels
    assert registration.batch_norm_kernels(False) == {"cuda": triton_kernels}
    assert registration.batch_norm_kernels(True) == {"cuda": triton_kernels, "cpu": triton_kernels}
    assert orchestration.kernels_for(torch.device("cuda")) is triton_kernels
    for device in ("cpu", "meta"):
        assert orchestration.kernels_for(torch.device(device)) is orchestration.TorchOperatorKernels
