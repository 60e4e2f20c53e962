"""BatchNorm statistics from the producing gather_mm's epilogue (mx_sparse/_cuda/gather_mm.py
tile_stats, gather_kernels.py STATS): a forward gather (weight requiring grad) writes per-tile
moments of its output, and the CUDA BatchNorm+ReLU forward on that same, unmodified tensor
combines them instead of launching its moments kernel. Run in Triton's interpreter on CPU
tensors, against a float64 reference (float64 outputs 1e-12 relative, float32 ones 1e-6,
bfloat16 within one rounding), the C++ CPU kernels' running statistics within 1e-6 and the moments
kernel's path, bit for bit from run to run, and falling back to the moments kernel where the
moments do not apply (no moments written, the output written to in place, taken once)."""
import pytest
import torch

from bn_cases import BFLOAT16_ROUNDING, CPU, TOLERANCE, TRITON_BN, channel, relative_error, same_bits
from cuda_cases import TRITON_PRIMITIVES, cpu_is_cuda_path, operands
from mx_sparse._cuda import launch

pytestmark = cpu_is_cuda_path
gather = TRITON_PRIMITIVES["_gather_mm_one_group"]


def _conv_output(m, cin, cout, dtype, seed, train=True):
    features, weight, _, nbr = operands(m, 300, 27, cin, cout, 1, dtype, seed)
    return gather(features, weight.requires_grad_(train), nbr)


def _bn_args(c, dtype, seed):
    return [channel(c, dtype, 0.5, 1.5, seed), channel(c, dtype, -0.5, 0.5, seed + 1),
            channel(c, dtype, -1, 1, seed + 2), channel(c, dtype, 0.5, 2, seed + 3)]


def _moments_launches():
    return sum(n for (k, _, _), n in launch.launches.items() if k == "bn_moments")


def _forward(x, params, ops=TRITON_BN):
    """{name: tensor} of the forward on x (running statistics blended into copies)."""
    w, b, rm, rv = (p.clone() for p in params)
    y, mean, invstd, scale, shift = ops["batch_norm_relu_forward"](x, w, b, rm, rv, True, 0.1, 1e-5)
    return dict(y=y, mean=mean, invstd=invstd, scale=scale, shift=shift, running_mean=rm, running_var=rv)


def _reference(x, params):
    """The forward in float64 from torch's mean and var of x as stored (the CPU kernels sum in
    float32: on these conv outputs they sit ~4e-6 from both CUDA paths, which agree to 1e-15)."""
    w, b, rm, rv = (p.double() for p in params)
    xd = x.detach().double()
    n = xd.shape[0]
    mean, var = xd.mean(0), xd.var(0, unbiased=False)
    invstd = 1 / torch.sqrt(var + 1e-5)
    scale = w * invstd
    shift = b - mean * scale
    return dict(y=torch.relu(xd * scale + shift), mean=mean, invstd=invstd, scale=scale, shift=shift,
                running_mean=0.9 * rm + 0.1 * mean, running_var=0.9 * rv + 0.1 * var * n / (n - 1))


def _assert_matches(ours, x, params, dtype):
    for name, want in _reference(x, params).items():
        got = ours[name]
        if got.dtype == torch.float64:
            bound = 1e-12
        else:       # rounded once to float32 or bfloat16 (y of bfloat16 features: to bfloat16)
            bound = BFLOAT16_ROUNDING if got.dtype == torch.bfloat16 else 1e-6
        error = relative_error(got, want, name, check_dtype=False)
        assert error <= bound, f"{name}: {error:.2e} > {bound:.0e}"


def _assert_matches_cpu(ours, x, params, dtype):
    """Within the float64 reference's bounds, and the CPU kernels' (where they are that close)."""
    _assert_matches(ours, x, params, dtype)
    cpu = _forward(x.detach().clone(), params, CPU)
    for name in ("mean", "running_mean", "running_var"):
        bound = BFLOAT16_ROUNDING if cpu[name].dtype == torch.bfloat16 else TOLERANCE[dtype]
        assert relative_error(ours[name], cpu[name], name) <= bound, name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("cin, cout", [(16, 32), (4, 36)], ids=["aligned", "generic"])
def test_statistics_from_the_gather_match_the_cpu_kernels(dtype, cin, cout):
    """1100 rows: 35 tiles of 32, the last partial; Cout 36: a masked channel block. The generic
    half-precision tiles write no moments (their BatchNorm launches the moments kernel)."""
    x = _conv_output(1100, cin, cout, dtype, seed=1)
    params = _bn_args(cout, dtype, seed=2)
    before = _moments_launches()
    ours = _forward(x, params)
    written = cin % 16 == 0 or dtype != torch.bfloat16
    assert _moments_launches() == before + (0 if written else 1)
    _assert_matches_cpu(ours, x, params, dtype)


def test_bitwise_from_run_to_run_and_close_to_the_moments_kernel():
    """Twice the same bits; against the moments kernel's path (tested against the CPU kernels in
    test_batch_norm_kernels.py) another order of float64 sums: 1e-12."""
    params = _bn_args(32, torch.float32, seed=4)
    first = _forward(_conv_output(700, 16, 32, torch.float32, seed=3), params)
    again = _forward(_conv_output(700, 16, 32, torch.float32, seed=3), params)
    for name in first:
        same_bits(again[name], first[name], name)
    # the same output through the moments kernel: another order of the float64 sums
    x = _conv_output(700, 16, 32, torch.float32, seed=3)
    before = _moments_launches()
    fallback = _forward(x.clone(), params)
    assert _moments_launches() == before + 1
    for name in first:
        bound = 1e-12 if first[name].dtype == torch.float64 else 1e-6
        assert relative_error(first[name], fallback[name], name) <= bound, name


@pytest.mark.parametrize("case", ["written in place", "no moments written", "taken once"])
def test_falls_back_to_the_moments_kernel(case):
    x = _conv_output(500, 16, 32, torch.float32, seed=5, train=case != "no moments written")
    params = _bn_args(32, torch.float32, seed=6)
    if case == "written in place":
        x.mul_(1.5)
    if case == "taken once":
        _forward(x, params)
    before = _moments_launches()
    ours = _forward(x, params)
    assert _moments_launches() == before + 1
    _assert_matches_cpu(ours, x, params, torch.float32)


def test_the_backward_gathers_write_no_moments():
    """A weight that needs no grad (the input gradient's, inference): STATS off, nothing kept."""
    from mx_sparse._cuda import gather_mm
    x = _conv_output(200, 16, 32, torch.float32, seed=7, train=False)
    assert gather_mm.tile_stats(x) is None
    y = _conv_output(200, 16, 32, torch.float32, seed=7)
    stats, rows = gather_mm.tile_stats(y)
    assert stats.shape == (-(-200 // rows), 2, 32) and stats.dtype == torch.float64
    # per tile of the plan's sorted rows: the float64 sum of the stored values of its rows
    assert torch.allclose(stats[:, 0].sum(0), y.double().sum(0), rtol=1e-12, atol=1e-9)


def test_a_non_contiguous_training_weight_still_writes_moments():
    """The weight's requires_grad is asked before the launcher's contiguous copy (which would not
    require grad inside autograd's forward)."""
    from mx_sparse._cuda import gather_mm
    features, weight, _, nbr = operands(200, 300, 27, 16, 32, 1, torch.float32, 8)
    strided = weight.transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()
    assert not strided.is_contiguous()
    with torch.no_grad():
        out = gather(features, strided, nbr)
    assert gather_mm.tile_stats(out) is not None
    assert torch.equal(out, gather(features, weight, nbr))
