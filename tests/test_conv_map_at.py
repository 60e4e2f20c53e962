"""build_conv_map_at: the map of a strided or transposed convolution evaluated at GIVEN output
voxels. The C++ CPU kernel and the accelerator orchestration (mx_sparse/_accelerator, the code CUDA
and NPU tensors run; here on CPU tensors with the torch-operator primitives) against a
brute-force reference written from the definition (bit for bit), and forward plus both
gradients of gather_mm over the map against torch's dense conv / conv_transpose on the
densified tensor sampled at the given outputs (tests/dense_reference.py); bad input raises a
ValueError naming the argument."""
import itertools
import math

import pytest
import torch
import torch.nn.functional as tF

import mx_sparse  # noqa: F401  (registers the ops)
from mx_sparse import functional as F
from mx_sparse._accelerator import registration

from dense_reference import CONV, densify, sample, torch_weight, torch_weight_transposed
from helpers import random_voxels

CPU = torch.ops.mx_sparse
ACC = registration.ORCHESTRATION
ON_ACCELERATOR_PATH = registration.cuda_on_cpu_requested() or registration.npu_on_cpu_requested()
CONV_T = {1: tF.conv_transpose1d, 2: tF.conv_transpose2d, 3: tF.conv_transpose3d}
TOL = {torch.float64: 1e-12, torch.float32: 1e-5}
# the NPU path's gathers (MXS_NPU_ON_CPU=1, AscendC kernels) have no float64
DTYPES = [torch.float32] if registration.npu_on_cpu_requested() else [torch.float64, torch.float32]
WORK = DTYPES[0]


def default_out_shape(shape, kernel, stride, pb, dilation, transposed):
    """The output grid the op derives without out_spatial_shape (every output whose window meets the grid)."""
    if transposed:
        return [(s - 1) * st - b + d * (k - 1) + 1 for s, k, st, b, d in zip(shape, kernel, stride, pb, dilation)]
    return [(s - 1 + b) // st + 1 for s, st, b in zip(shape, stride, pb)]


def reference_map_at(indices, out_indices, kernel, stride, pb, dilation, transposed):
    """By loops over (output, offset): strided, the input at o*s - pb + kp*d; transposed, the
    input i with i*s - pb + kp*d == o."""
    where = {tuple(r): row for row, r in enumerate(indices.tolist())}
    offsets = list(itertools.product(*[range(k) for k in kernel]))
    nbr = torch.full((out_indices.shape[0], len(offsets)), -1, dtype=torch.int32)
    for m, (b, *o) in enumerate(out_indices.tolist()):
        for k, kp in enumerate(offsets):
            if transposed:
                num = [oi + p - kk * d for oi, p, kk, d in zip(o, pb, kp, dilation)]
                if any(v % st for v, st in zip(num, stride)):
                    continue
                i = [v // st for v, st in zip(num, stride)]
            else:
                i = [oi * st - p + kk * d for oi, st, p, kk, d in zip(o, stride, pb, kp, dilation)]
            nbr[m, k] = where.get((b, *i), -1)
    return nbr


def random_outputs(out_shape, batch, density, seed):
    """Unique output voxels of the grid in shuffled order (so nothing relies on sorted outputs)."""
    return random_voxels(out_shape, batch, density=density, seed=seed)


# (shape, kernel, stride, pads_begin, dilation): 1-4D, even kernels, strides 1-3, pads beyond the
# kernel's reach, dilation
CASES = {
    "1d_k2_even": ([9], [2], [1], [0], [1]),
    "1d_k4_s3": ([10], [4], [3], [2], [1]),
    "2d_k3_s2_dil": ([6, 7], [3, 2], [2, 1], [1, 0], [1, 2]),
    "2d_k4_even_centred": ([6, 5], [4, 4], [1, 1], [1, 1], [1, 1]),
    "3d_k3_s1": ([5, 4, 6], [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1]),
    "3d_k2_s2": ([6, 5, 4], [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1]),
    "3d_pads_beyond_reach": ([4, 5, 4], [3, 2, 3], [2, 3, 1], [3, 0, 4], [1, 2, 1]),
    "4d_mixed": ([3, 4, 3, 4], [2, 3, 2, 3], [2, 1, 3, 2], [0, 1, 1, 0], [1, 1, 1, 2]),
}


def case_inputs(name, transposed, batch=2):
    shape, k, s, pb, d = CASES[name]
    seed = sum(map(ord, name)) + transposed
    idx = random_voxels(shape, batch, density=0.35, seed=seed)
    out_shape = default_out_shape(shape, k, s, pb, d, transposed)
    out = random_outputs(out_shape, batch, density=0.5, seed=seed + 1)
    return idx, out, shape, k, s, pb, d, out_shape


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_cpu_map_equals_reference(name, transposed):
    idx, out, shape, k, s, pb, d, out_shape = case_inputs(name, transposed)
    nbr = CPU.build_conv_map_at(idx, out, shape, 2, k, s, pb, d, transposed)
    assert nbr.dtype == torch.int32 and nbr.shape == (out.shape[0], math.prod(k))
    assert torch.equal(nbr, reference_map_at(idx, out, k, s, pb, d, transposed))
    # a larger output grid, named: outputs beyond the window's reach read nothing
    bigger = [o + 3 for o in out_shape]
    far = random_outputs(bigger, 2, density=0.3, seed=5)
    nbr = CPU.build_conv_map_at(idx, far, shape, 2, k, s, pb, d, transposed, bigger)
    assert torch.equal(nbr, reference_map_at(idx, far, k, s, pb, d, transposed))


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_orchestration_map_equals_cpu(name, transposed):
    """The accelerator orchestration (here with the torch-operator primitives) gives the CPU map bit for bit."""
    idx, out, shape, k, s, pb, d, out_shape = case_inputs(name, transposed)
    acc = ACC["build_conv_map_at"]
    assert torch.equal(acc(idx, out, shape, 2, k, s, pb, d, transposed), CPU.build_conv_map_at(idx, out, shape, 2, k, s,
                                                                                                  pb, d, transposed))
    bigger = [o + 3 for o in out_shape]
    far = random_outputs(bigger, 2, density=0.3, seed=5)
    assert torch.equal(acc(idx, far, shape, 2, k, s, pb, d, transposed, bigger),
                       CPU.build_conv_map_at(idx, far, shape, 2, k, s, pb, d, transposed, bigger))
    for i, o in [(idx[:0], out), (idx, out[:0]), (idx[:0], out[:0])]:   # nothing to look up
        assert torch.equal(acc(i, o, shape, 2, k, s, pb, d, transposed), CPU.build_conv_map_at(i, o, shape, 2, k, s,
                                                                                                pb, d, transposed))


@pytest.mark.parametrize("transposed", [False, True])
def test_outputs_of_the_derived_maps_give_the_derived_maps(transposed):
    """Evaluated at build_conv_map's / build_conv_transpose_map's own outputs, the map is theirs."""
    shape, k, s, pb, pe, d = [7, 6, 5], [3, 2, 3], [2, 1, 2], [1, 0, 2], [1, 0, 2], [1, 2, 1]
    idx = random_voxels(shape, 2, density=0.3, seed=11)
    if transposed:
        out, want = F.build_conv_transpose_map(idx, shape, 2, k, s, pb, pe, d, [0, 0, 0])
        out_shape = F.conv_transpose_output_shape(shape, 2, k, s, pb, pe, d, [0, 0, 0])
    else:
        out, want = F.build_conv_map(idx, shape, 2, k, s, pb, d, pe)
        out_shape = F.conv_output_shape(shape, 2, k, s, pb, pe, d)
    got = F.build_conv_map_at(idx, out, shape, 2, k, s, pb, d, transposed, out_spatial_shape=out_shape)
    assert torch.equal(got, want)
    perm = torch.randperm(out.shape[0], generator=torch.Generator().manual_seed(0))
    assert torch.equal(F.build_conv_map_at(idx, out[perm], shape, 2, k, s, pb, d, transposed, out_shape), want[perm])


def test_hand_computed():
    idx = torch.tensor([[0, 0], [0, 2], [0, 3], [1, 1]], dtype=torch.int32)
    # strided, even kernel: o reads o + kp. (0, 1): cell 1 absent, cell 2 row 1; (1, 0): cell 0 absent in
    # batch 1, cell 1 row 3; (0, 3): cell 3 row 2, cell 4 outside the grid
    out = torch.tensor([[0, 1], [1, 0], [0, 3]], dtype=torch.int32)
    assert F.build_conv_map_at(idx, out, [4], 2, [2], [1], [0], [1]).tolist() == [[-1, 1], [-1, 3], [2, -1]]
    # stride 2, pads_begin 1, kernel 3: o = 1 reads 2*1 - 1 + kp = 1, 2, 3
    assert F.build_conv_map_at(idx, out[:1], [4], 2, [3], [2], [1], [1]).tolist() == [[-1, 1, 2]]
    # transposed, stride 2, pads_begin 1, kernel 3: o = 3 has i*2 - 1 + kp = 3: kp = 0 -> i = 2
    # (row 1), kp = 2 -> i = 1 (absent in batch 0); o = 4: kp = 1 -> i = 2 (row 1); batch 1, o = 1:
    # kp = 0 -> i = 1 (row 3), kp = 2 -> i = 0 (absent in batch 1)
    out = torch.tensor([[0, 3], [0, 4], [1, 1]], dtype=torch.int32)
    got = F.build_conv_map_at(idx, out, [4], 2, [3], [2], [1], [1], transposed=True)
    assert got.tolist() == [[1, -1, -1], [-1, 1, -1], [3, -1, -1]]
    # no outputs: an empty map of K columns
    assert F.build_conv_map_at(idx, out[:0], [4], 2, [3], [2], [1], [1]).shape == (0, 3)


def dense_at(features, indices, shape, batch, weight, stride, pb, dilation, groups, transposed, out_indices,
             out_shape):
    """torch's dense conv / conv_transpose of the densified input, sampled at out_indices on the
    grid out_shape (cells beyond the dense result: no input reaches them, zero)."""
    nd = len(shape)
    k = weight.shape[:nd]
    x = densify(features, indices, shape, batch)
    if transposed:
        y = CONV_T[nd](x, torch_weight_transposed(weight, groups), None, stride, 0, 0, groups, dilation)
        for a, b in enumerate(pb):      # output o of the transposed rule is cell o + pads_begin of the unpadded one
            y = y.narrow(2 + a, min(b, y.shape[2 + a]), max(0, y.shape[2 + a] - b))
    else:
        pads = []
        for a in reversed(range(nd)):   # pads_begin below, the kernel's whole reach above
            pads += [pb[a], (k[a] - 1) * dilation[a]]
        y = CONV[nd](tF.pad(x, pads), torch_weight(weight, groups), None, stride, 0, dilation, groups)
    grow = []
    for a in reversed(range(nd)):
        grow += [0, max(0, out_shape[a] - y.shape[2 + a])]
    return sample(tF.pad(y, grow), out_indices)


def rel_err(got, want):
    return ((got - want).abs().max() / want.abs().max().clamp(min=1e-30)).item() if want.numel() else 0.0


def check_against_dense(idx, out, shape, k, s, pb, d, out_shape, transposed, dtype, groups=1, cin=3, cout=4, seed=0):
    """Forward, input and filter gradients of gather_mm over the map vs the dense reference;
    returns the worst relative error."""
    torch.manual_seed(seed)
    nbr = F.build_conv_map_at(idx, out, shape, 2, k, s, pb, d, transposed, out_spatial_shape=out_shape)
    feats = torch.randn(idx.shape[0], cin, dtype=dtype, requires_grad=True)
    weight = torch.randn(math.prod(k), cin // groups, cout, dtype=dtype, requires_grad=True)
    got = F.gather_mm(feats, weight, nbr, None, groups)
    f64 = feats.detach().double().requires_grad_()
    w64 = weight.detach().double().requires_grad_()
    want = dense_at(f64, idx, shape, 2, w64.reshape(*k, cin // groups, cout), s, pb, d, groups, transposed, out,
                    out_shape)
    g = torch.randn(want.shape, dtype=torch.float64)
    (got * g.to(dtype)).sum().backward()
    (want * g).sum().backward()
    errs = [rel_err(got.double(), want.detach()), rel_err(feats.grad.double(), f64.grad),
            rel_err(weight.grad.double(), w64.grad)]
    assert max(errs) <= TOL[dtype], errs
    return max(errs)


DENSE = [n for n in CASES if not n.startswith("4d")]   # torch has no dense 4D conv


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("name", DENSE)
def test_equals_dense_conv_sampled_at_the_outputs(name, transposed, dtype):
    idx, out, shape, k, s, pb, d, out_shape = case_inputs(name, transposed)
    check_against_dense(idx, out, shape, k, s, pb, d, out_shape, transposed, dtype, seed=len(name))


@pytest.mark.parametrize("transposed", [False, True])
def test_equals_dense_with_groups_and_far_outputs(transposed):
    """groups = 2, and a named output grid larger than the reach (far outputs are zero rows)."""
    idx, _, shape, k, s, pb, d, out_shape = case_inputs("3d_k3_s1", transposed)
    bigger = [o + 2 for o in out_shape]
    out = random_outputs(bigger, 2, density=0.4, seed=9)
    check_against_dense(idx, out, shape, k, s, pb, d, bigger, transposed, WORK, groups=2, cin=4, cout=6)


def value_error(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


BUILDERS = {"cpu": CPU.build_conv_map_at}
if "build_conv_map_at" in ACC:
    BUILDERS["orchestration"] = ACC["build_conv_map_at"]


@pytest.mark.parametrize("backend", list(BUILDERS))
def test_bad_out_indices_name_the_argument(backend):
    build = BUILDERS[backend]
    idx = torch.tensor([[0, 1, 1], [1, 2, 0]], dtype=torch.int32)
    args = ([4, 3], 2, [3, 3], [2, 1], [1, 1], [1, 1])   # default grid: [(4-1+1)//2+1, (3-1+1)//1+1] = [3, 4]
    ok = torch.tensor([[0, 2, 3], [1, 0, 0]], dtype=torch.int32)
    assert build(idx, ok, *args).shape == (2, 9)
    for bad, expected in [
            ([[0, 3, 0]], "out_indices: row 0 is (batch, *coords) = (0, 3, 0), expected 0 <= batch < batch_size (2) "
                          "and 0 <= coord < the derived output grid [3, 4] on every axis"),
            ([[0, 0, 0], [0, 1, -1]], "out_indices: row 1 is (batch, *coords) = (0, 1, -1)"),
            ([[2, 0, 0]], "out_indices: row 0 is (batch, *coords) = (2, 0, 0), expected 0 <= batch < batch_size (2)"),
            ([[0, 1, 1], [1, 1, 1], [0, 1, 1]], "out_indices: duplicate voxel (0, 1, 1) at row 2")]:
        assert value_error(lambda: build(idx, torch.tensor(bad, dtype=torch.int32), *args)).startswith(expected)
    assert value_error(lambda: build(idx, ok.long(), *args)).startswith("out_indices: expected dtype int32, got Long")
    assert value_error(lambda: build(idx, ok[:, :2], *args)).startswith(
        "out_indices: expected shape [N, 3] (batch + 2 spatial coordinates)")
    # named grid: checked against it, and itself checked
    assert value_error(lambda: build(idx, ok, *args, False, [2, 9])).startswith(
        "out_indices: row 0 is (batch, *coords) = (0, 2, 3), expected 0 <= batch < batch_size (2) and "
        "0 <= coord < out_spatial_shape [2, 9]")
    assert value_error(lambda: build(idx, ok, *args, False, [3, 0])).startswith("out_spatial_shape: expected every "
                                                                                  "value in [1, 2^31 - 1]")
    assert value_error(lambda: build(idx, ok, *args, False, [3])).startswith("out_spatial_shape: expected 2 values")
    assert value_error(lambda: build(idx, ok, [4, 3], 2 ** 40, [3, 3], [2, 1], [1, 1], [1, 1], False,
                                     [2 ** 31 - 1, 2 ** 31 - 1])).startswith("out_spatial_shape: batch_size")
    # the input side keeps build_conv_map's checks and messages
    assert value_error(lambda: build(idx.flip(0)[:1].repeat(2, 1), ok, *args)).startswith("indices: duplicate voxel")
    assert value_error(lambda: build(idx, ok, [4, 3], 2, [3, 3], [2, 1], [-1, 1], [1, 1])).startswith("pads_begin:")
    # transposed: pads_begin beyond every reachable output leaves the derived grid empty
    assert value_error(lambda: build(idx, ok[:0], [4, 3], 2, [3, 3], [1, 1], [9, 1], [1, 1], True)).startswith(
        "pads_begin: no output of the transposed convolution reaches the grid on axis 0")


def test_fake_kernel_has_one_row_per_given_output():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        idx = torch.empty(5, 4, dtype=torch.int32)
        out = torch.empty(7, 4, dtype=torch.int32)
        nbr = CPU.build_conv_map_at(idx, out, [4, 4, 4], 1, [2, 3, 2], [1, 1, 1], [0, 1, 0], [1, 1, 1], True)
        assert nbr.shape == (7, 12) and nbr.dtype == torch.int32


ACCELERATOR_PATHS = {"cuda": {"MXS_CUDA_ON_CPU": "1", "TRITON_INTERPRET": "1"}, "npu": {"MXS_NPU_ON_CPU": "1"}}


@pytest.mark.skipif(ON_ACCELERATOR_PATH, reason="this is the subprocess's run")
@pytest.mark.parametrize("path", list(ACCELERATOR_PATHS))
def test_through_the_accelerator_paths(path):
    """This file, the layers at given outputs and the depthwise tests once more with every op on CPU
    tensors running the CUDA backend's code (Triton interpreted) or the NPU backend's (AscendC
    emulator; float32 only, its gathers have no float64): maps, values and errors as on CPU."""
    import os
    import subprocess
    import sys
    if path == "npu":
        from mx_sparse.runtime import ascend
        if not ascend.emulator_available():
            pytest.skip("no AscendC emulator in this build")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("MXS_CUDA_ON_CPU", "MXS_NPU_ON_CPU")}
    env.update(ACCELERATOR_PATHS[path])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_conv_map_at.py",
           "tests/test_conv_given_outputs.py", "tests/test_depthwise.py"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
