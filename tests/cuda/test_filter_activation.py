"""The weight gradient of activated features (schema.cpp: gather_mm_backprop_filter's scale and
shift): dW of relu(x * scale + shift), the convolution-after-a-fused-BatchNorm+ReLU case, with
the activation applied as the Triton filter kernel loads x (gather_kernels.py ACTIVATION).
Under Triton's interpreter on CPU tensors: bit for bit the plain kernel on the recompute kernel's
output (the path it replaces: the same arithmetic, rounded the same way), repeatable run to run;
against the C++ CPU backend's op (which recomputes, then runs its plain kernel) within the
CUDA tests' tolerances of a float64 reference; the orchestration's per-group slices of scale and
shift; and the same bad input rejected with the same message on both paths."""
import pytest
import torch

from bn_cases import TRITON_BN, channel
from cuda_cases import CPU, CUDA, TRITON_PRIMITIVES, assert_close_to, cpu_is_cuda_path, operands

pytestmark = cpu_is_cuda_path
filter_one_group = TRITON_PRIMITIVES["_gather_mm_backprop_filter_one_group"]


def _activation(c, dtype, seed):
    """scale and shift [c] as a fused BatchNorm holds them (float64 for float64 features, else
    float32), shift spread so that the ReLU cuts about half the values."""
    held = torch.float64 if dtype == torch.float64 else torch.float32
    return channel(c, held, 0.5, 1.5, seed), channel(c, held, -1.0, 1.0, seed + 1)


def _case(m, n_in, cin, cout, dtype, seed, groups=1):
    x, _, grad, nbr = operands(m, n_in, 27, cin, cout, groups, dtype, seed)
    return x, grad, nbr, *_activation(cin, dtype, seed + 7)


# (m, n_in, cin, cout): aligned filter tiles (Cin a multiple of the tile's 16 or 32 channels) and
# generic ones (Cin 4 or 36: a program's pairs span offsets; Cout 36: a masked channel block)
SHAPES = [(300, 260, 16, 16), (300, 260, 32, 64), (300, 260, 4, 16), (200, 180, 36, 36)]
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m, n_in, cin, cout", SHAPES, ids=["a16", "a32x64", "generic4", "generic36"])
def test_activation_on_load_equals_the_recompute_then_the_plain_kernel(m, n_in, cin, cout, dtype):
    x, grad, nbr, scale, shift = _case(m, n_in, cin, cout, dtype, seed=cin + cout)
    fused = filter_one_group(x, grad, nbr, scale, shift)
    y = TRITON_BN["scale_shift_relu"](x, scale, shift)
    assert (y == 0).any() and (y > 0).any()          # the ReLU cuts some values, not all
    plain = filter_one_group(y, grad, nbr)
    assert fused.dtype == dtype and torch.equal(fused, plain)
    assert torch.equal(filter_one_group(x, grad, nbr, scale, shift), fused)   # run to run


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("groups", [1, 2])
def test_orchestration_matches_the_cpu_backend(dtype, groups):
    """The op through the accelerator orchestration (per group: its channels' scale and shift)
    against the C++ CPU op with the same activation, both against float64."""
    x, grad, nbr, scale, shift = _case(400, 300, 32, 32, dtype, seed=3, groups=groups)
    ours = CUDA["gather_mm_backprop_filter"](x, grad, nbr, None, groups, False, scale, shift)
    cpu = CPU.gather_mm_backprop_filter(x, grad, nbr, None, groups, False, scale, shift)
    y = torch.relu(x.double() * scale.double() + shift.double()).to(dtype)   # as the recompute rounds it
    reference = CPU.gather_mm_backprop_filter(y.double(), grad.double(), nbr, None, groups)
    assert_close_to(ours, reference, dtype, "orchestration")
    assert_close_to(cpu, reference, dtype, "C++ CPU op")


def test_cpu_op_equals_its_plain_kernel_on_the_recompute():
    x, grad, nbr, scale, shift = _case(300, 260, 16, 24, torch.float32, seed=5)
    y = CPU.scale_shift_relu(x, scale, shift)
    assert torch.equal(CPU.gather_mm_backprop_filter(x, grad, nbr, None, 1, False, scale, shift),
                       CPU.gather_mm_backprop_filter(y, grad, nbr, None, 1))


def _error(op, *args):
    with pytest.raises(ValueError) as info:
        op(*args)
    return str(info.value).splitlines()[0]


def test_bad_activation_same_error_on_both_paths():
    x, grad, nbr, scale, shift = _case(50, 40, 8, 8, torch.float32, seed=9)
    weight = torch.zeros(27, 8, 8)
    for args, starts in [((x, grad, nbr, None, 1, False, scale, None), "features, scale, shift: expected all"),
                         ((x, grad, nbr, None, 1, False, scale, shift[:4]), "shift: expected [8]")]:
        message = _error(CUDA["gather_mm_backprop_filter"], *args)
        assert message == _error(CPU.gather_mm_backprop_filter, *args) and message.startswith(starts), message
    args = (x, weight, nbr, None, 1, False, x[:, :4], scale, shift)
    message = _error(CUDA["gather_mm"], *args)
    assert message == _error(CPU.gather_mm, *args) and message.startswith("source: expected"), message
