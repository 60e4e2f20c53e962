"""Verification item 5 of the CUDA backend: the same comparisons on REAL CUDA tensors, for a
machine with a GPU (``pytest -m cuda``; torch's CUDA build and triton installed). Skipped
where torch sees no GPU, which includes every machine this project's CI runs on: these tests
have not been run."""
import pytest
import torch

import mx_sparse
from cuda_cases import (CPU, CUDA, assert_close_to, network_step, operands, references, run_cuda_path,
                        voxels)

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")]

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
SHAPES = [(700, 900, 27, 3, 5, 1), (700, 600, 1, 16, 32, 1), (450, 500, 8, 16, 32, 1), (330, 400, 125, 3, 5, 1),
          (400, 400, 8, 55, 77, 1), (2000, 3000, 27, 128, 256, 1), (700, 800, 27, 8, 12, 2),
          (700, 800, 27, 16, 16, 16), (0, 0, 27, 4, 6, 1)]


def test_best_device_is_cuda():
    assert mx_sparse.best_device().type == "cuda"


def test_maps_bitwise_equal_on_a_lidar_scene():
    from mx_sparse import synthetic
    ind = synthetic.make_batch("kitti", batch_size=2, seed=3)["indices"]
    shape = [41, 1600, 1408]
    gpu = ind.cuda()
    subm = CPU.build_subm_map(gpu, shape, 2, [3, 3, 3], [1, 1, 1])
    assert subm.is_cuda and torch.equal(subm.cpu(), CPU.build_subm_map(ind, shape, 2, [3, 3, 3], [1, 1, 1]))
    args = (shape, 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    (out_g, nbr_g, shape_g), (out_c, nbr_c, shape_c) = CPU.build_conv_map(gpu, *args), CPU.build_conv_map(ind, *args)
    assert torch.equal(out_g.cpu(), out_c) and torch.equal(nbr_g.cpu(), nbr_c) and shape_g == shape_c
    assert torch.equal(CPU.transpose_map(nbr_g, ind.shape[0]).cpu(), CPU.transpose_map(nbr_c, ind.shape[0]))
    for a, b in zip(CPU.pack_map(nbr_g), CPU.pack_map(nbr_c)):
        assert torch.equal(a.cpu(), b)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n_in,kvol,cin,cout,groups", SHAPES)
def test_gather_mm_and_gradients_match_cpu_backend(m, n_in, kvol, cin, cout, groups, dtype):
    features, weight, grad, nbr = operands(m, n_in, kvol, cin, cout, groups, dtype, seed=m + kvol)
    expected = references(features, weight, grad, nbr, groups)
    gpu = [t.cuda() for t in (features, weight, grad, nbr)]
    for what, actual, ref in zip(("gather_mm", "input gradient", "filter gradient"), run_cuda_path(*gpu, groups),
                                 expected):
        assert actual.is_cuda
        assert_close_to(actual, ref, dtype, what)


@pytest.mark.parametrize("m", [700, 3000], ids=["in-map-order", "sorted"])
def test_plans_equal_the_torch_version(m):
    """The plan kernels (a small map's, in its row order; a larger one's, sorted by row bitmask)
    against map_plan.reference_build on the same CUDA tensor, bit for bit."""
    from mx_sparse._cuda import map_plan
    nbr = operands(m, m, 27, 4, 4, 1, torch.float32, seed=m, density=0.3)[3].cuda()
    assert map_plan.sorts(m, 32) == (m == 3000)
    got, want = map_plan._build(nbr, 32), map_plan.reference_build(nbr, 32)
    for name in ("order", "counts", "offsets", "present"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.is_cuda and a.dtype == b.dtype == torch.int32 and torch.equal(a, b), name


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bitwise_reproducible_run_to_run(dtype):
    features, weight, grad, nbr = (t.cuda() for t in operands(3000, 4000, 27, 32, 64, 1, dtype, seed=1))
    first = run_cuda_path(features, weight, grad, nbr, 1)
    for _ in range(3):
        for a, b in zip(run_cuda_path(features, weight, grad, nbr, 1), first):
            assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n,c,batch_stats", [(70000, 64, True), (3000, 19, False), (1, 5, True)])
def test_batch_norm_relu_kernels_match_cpu_kernels(n, c, batch_stats, dtype):
    """The fused BatchNorm+ReLU's Triton kernels (forward, running blend, recompute, backward)
    against the C++ CPU kernels within bn_cases.TOLERANCE, and bit for bit from run to run."""
    from bn_cases import TOLERANCE, TRITON_BN, compare_with_cpu, forward_case, run_all, same_bits
    args = forward_case(n, c, dtype, batch_stats, True, True, seed=n, device="cuda")
    args[0][n // 2, 0] = float("nan")
    compare_with_cpu(TRITON_BN, args, TOLERANCE[dtype])
    first, again = run_all(TRITON_BN, args), run_all(TRITON_BN, args)
    for name in first:
        same_bits(again[name], first[name], name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_batch_norm_relu_under_autocast_dtypes(dtype):
    """float16 / bfloat16 features with float32 parameters against the float64 reference."""
    from bn_cases import TRITON_BN, features, float64_reference, forward_case, relative_error, run_all
    args = forward_case(70000, 64, dtype, True, True, True, seed=3, channel_dtype=torch.float32, device="cuda")
    out = run_all(TRITON_BN, args)
    y, mean, var, dx, dgamma, dbeta = float64_reference([a.cpu() if isinstance(a, torch.Tensor) else a
                                                         for a in args], features(70000, 64, dtype, 9))
    assert relative_error(out["mean"], mean, "mean") <= 1e-12
    rounding = 2.0 ** -10 if dtype == torch.float16 else 2.0 ** -7
    assert relative_error(out["y"], y, "y", check_dtype=False) <= rounding
    assert relative_error(out["dgamma"], dgamma, "dgamma", check_dtype=False) <= 1e-5


def test_network_step_matches_cpu_and_repeats_bitwise():
    cpu = network_step()
    gpu = network_step(device="cuda")
    assert torch.equal(gpu["indices"], cpu["indices"])
    for key, ref in cpu.items():
        if ref.is_floating_point():
            torch.testing.assert_close(gpu[key], ref, rtol=1e-4, atol=1e-5 * max(1.0, ref.abs().max().item()))
    again = network_step(device="cuda")    # fused BatchNorm+ReLU too: fixed-order Triton reductions
    for key in gpu:
        assert torch.equal(again[key], gpu[key]), key


def test_mixed_devices_name_the_argument():
    idx = voxels([5, 5, 5], 1, density=0.3, seed=0)
    with pytest.raises(ValueError, match="features: expected a tensor on cpu, the device of indices"):
        mx_sparse.SparseConvTensor(torch.ones(idx.shape[0], 4, device="cuda"), idx, [5, 5, 5], 1)
    x = mx_sparse.SparseConvTensor(torch.ones(idx.shape[0], 4, device="cuda"), idx.cuda(), [5, 5, 5], 1)
    with pytest.raises(ValueError, match="weight: expected a tensor on cuda:0 like features, got one on cpu"):
        mx_sparse.SubMConv3d(4, 8, 3)(x)
