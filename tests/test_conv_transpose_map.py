"""build_conv_transpose_map and the asymmetric pads of build_conv_map: the C++ CPU kernel and
the accelerator orchestration (mx_sparse/_accelerator, the code CUDA and NPU tensors run; here on
CPU tensors with the torch-operator primitives) against a brute-force reference written from
the definition, bit for bit, and the same ValueErrors for bad arguments."""
import itertools

import pytest
import torch

import mx_sparse  # noqa: F401  (registers the ops)
from mx_sparse import functional as F
from mx_sparse._accelerator import registration

from helpers import random_voxels

CPU = torch.ops.mx_sparse
ACC = registration.ORCHESTRATION
ON_ACCELERATOR_PATH = registration.cuda_on_cpu_requested() or registration.npu_on_cpu_requested()


def reference_transpose_map(indices, shape, kernel, stride, pb, pe, dilation, output_padding):
    """Every (input, offset) pair by loops: o = i*s - pb + kp*d inside the output grid."""
    out_shape = [(s - 1) * st - b - e + d * (k - 1) + 1 + op
                 for s, k, st, b, e, d, op in zip(shape, kernel, stride, pb, pe, dilation, output_padding)]
    offsets = list(itertools.product(*[range(k) for k in kernel]))
    pairs = {}
    for row, (b, *c) in enumerate(indices.tolist()):
        for k, kp in enumerate(offsets):
            o = tuple(ci * st - p + kk * d for ci, st, p, kk, d in zip(c, stride, pb, kp, dilation))
            if all(0 <= oi < s for oi, s in zip(o, out_shape)):
                pairs.setdefault((b, *o), {})[k] = row
    outs = sorted(pairs)
    nbr = torch.full((len(outs), len(offsets)), -1, dtype=torch.int32)
    for m, o in enumerate(outs):
        for k, row in pairs[o].items():
            nbr[m, k] = row
    return torch.tensor(outs, dtype=torch.int32).view(-1, 1 + len(shape)), nbr, out_shape


def reference_conv_map(indices, shape, kernel, stride, pb, pe, dilation):
    """Strided conv with asymmetric pads by loops: output o reads i = o*s - pb + kp*d."""
    out_shape = [(s + b + e - d * (k - 1) - 1) // st + 1
                 for s, k, st, b, e, d in zip(shape, kernel, stride, pb, pe, dilation)]
    offsets = list(itertools.product(*[range(k) for k in kernel]))
    pairs = {}
    for row, (b, *c) in enumerate(indices.tolist()):
        for k, kp in enumerate(offsets):
            num = [ci + p - kk * d for ci, p, kk, d in zip(c, pb, kp, dilation)]
            if all(v >= 0 and v % st == 0 and v // st < s for v, st, s in zip(num, stride, out_shape)):
                pairs.setdefault((b, *[v // st for v, st in zip(num, stride)]), {})[k] = row
    outs = sorted(pairs)
    nbr = torch.full((len(outs), len(offsets)), -1, dtype=torch.int32)
    for m, o in enumerate(outs):
        for k, row in pairs[o].items():
            nbr[m, k] = row
    return torch.tensor(outs, dtype=torch.int32).view(-1, 1 + len(shape)), nbr, out_shape


# (shape, kernel, stride, pads_begin, pads_end, dilation, output_padding)
TRANSPOSED = [
    ([17], [3], [2], [1], [1], [1], [1]),
    ([17], [4], [3], [0], [2], [1], [2]),
    ([9, 7], [3, 2], [2, 1], [1, 0], [0, 1], [1, 2], [1, 1]),
    ([6, 7], [1, 1], [3, 2], [0, 0], [0, 0], [1, 1], [2, 0]),
    ([5, 6, 4], [3, 3, 3], [2, 2, 2], [1, 0, 2], [2, 1, 0], [1, 1, 1], [0, 1, 1]),
    ([5, 6, 4], [2, 3, 2], [1, 3, 2], [0, 1, 0], [0, 0, 3], [2, 1, 1], [1, 2, 0]),
    ([4, 3, 5, 3], [3, 2, 3, 2], [2, 1, 1, 3], [1, 0, 0, 1], [0, 1, 2, 0], [1, 1, 2, 1], [1, 0, 1, 2]),
    ([5, 5], [3, 3], [1, 1], [4, 0], [0, 4], [2, 2], [0, 0]),      # pads beyond the kernel's reach
]
CONV = [
    ([17], [3], [2], [0], [2], [1]),
    ([9, 7], [3, 2], [2, 1], [2, 0], [0, 1], [1, 2]),
    ([5, 6, 4], [3, 3, 3], [2, 2, 2], [1, 0, 2], [2, 1, 0], [1, 1, 1]),
    ([4, 3, 5, 3], [3, 2, 3, 2], [2, 1, 1, 3], [1, 0, 0, 1], [0, 1, 2, 0], [1, 1, 2, 1]),
]


def case_voxels(shape, seed):
    return random_voxels(shape, 2, density=0.35, seed=seed)


@pytest.mark.parametrize("case", range(len(TRANSPOSED)))
def test_transpose_map_equals_reference_on_both_backends(case):
    shape, k, s, pb, pe, d, op = TRANSPOSED[case]
    idx = case_voxels(shape, case)
    want_out, want_nbr, out_shape = reference_transpose_map(idx, shape, k, s, pb, pe, d, op)
    assert F.conv_transpose_output_shape(shape, 2, k, s, pb, pe, d, op) == out_shape
    args = (idx, shape, 2, k, s, pb, pe, d, op)
    for build in (CPU.build_conv_transpose_map, ACC["build_conv_transpose_map"]):
        out, nbr, built_shape = build(*args)
        assert out.dtype == nbr.dtype == torch.int32
        assert torch.equal(out, want_out) and torch.equal(nbr, want_nbr) and list(built_shape) == out_shape


@pytest.mark.parametrize("case", range(len(CONV)))
def test_asymmetric_conv_map_equals_reference_on_both_backends(case):
    shape, k, s, pb, pe, d = CONV[case]
    idx = case_voxels(shape, 10 + case)
    want_out, want_nbr, out_shape = reference_conv_map(idx, shape, k, s, pb, pe, d)
    assert F.conv_output_shape(shape, 2, k, s, pb, pe, d) == out_shape
    for build in (CPU.build_conv_map, ACC["build_conv_map"]):
        out, nbr, built_shape = build(idx, shape, 2, k, s, pb, d, pe)
        assert torch.equal(out, want_out) and torch.equal(nbr, want_nbr) and list(built_shape) == out_shape
    # pads_end omitted or equal to padding: the symmetric map
    sym = CPU.build_conv_map(idx, shape, 2, k, s, pb, d)
    explicit = CPU.build_conv_map(idx, shape, 2, k, s, pb, d, pb)
    assert torch.equal(sym[0], explicit[0]) and torch.equal(sym[1], explicit[1]) and sym[2] == explicit[2]


def test_transpose_map_large_grid_takes_the_sort_path():
    # a grid far larger than the inputs: the CPU kernel sorts contributions instead of a bitmap
    shape = [1 << 20, 1 << 20]
    idx = torch.tensor([[0, 5, 7], [0, 1 << 19, 3], [1, 9, (1 << 20) - 1], [0, 6, 7]], dtype=torch.int32)
    args = ([3, 2], [2, 3], [1, 0], [0, 2], [1, 1], [1, 2])
    want_out, want_nbr, out_shape = reference_transpose_map(idx, shape, *args)
    for build in (CPU.build_conv_transpose_map, ACC["build_conv_transpose_map"]):
        out, nbr, built_shape = build(idx, shape, 2, *args)
        assert torch.equal(out, want_out) and torch.equal(nbr, want_nbr) and list(built_shape) == out_shape


def test_empty_input_gives_empty_map():
    idx = torch.zeros((0, 4), dtype=torch.int32)
    for build in (CPU.build_conv_transpose_map, ACC["build_conv_transpose_map"]):
        out, nbr, out_shape = build(idx, [4, 4, 4], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 0])
        # (s - 1)*2 - 1 - 1 + 2 + 1 per axis: the grid, even with no voxel on it
        assert out.shape == (0, 4) and nbr.shape == (0, 27) and list(out_shape) == [7, 7, 7]


def messages(*args):
    got = []
    for build in (CPU.build_conv_transpose_map, ACC["build_conv_transpose_map"]):
        with pytest.raises(ValueError) as info:
            build(*args)
        got.append(str(info.value))
    assert got[0] == got[1], got
    return got[0]


def test_bad_arguments_same_value_errors_on_both_backends():
    idx = torch.tensor([[0, 1, 2], [0, 3, 3]], dtype=torch.int32)
    good = dict(k=[3, 3], s=[2, 2], pb=[1, 1], pe=[1, 1], d=[1, 1], op=[1, 1])

    def call(**kw):
        a = {**good, **kw}
        return messages(kw.pop("idx", idx), [5, 5], 1, a["k"], a["s"], a["pb"], a["pe"], a["d"], a["op"])

    assert call(op=[2, 0]).startswith("output_padding: expected every value smaller than the stride or the dilation")
    assert "output_padding" in call(op=[0])
    assert call(pb=[1]).startswith("pads_begin: expected 2 values")
    assert call(pe=[0, -1]).startswith("pads_end: expected every value in [0, 2^31 - 1]")
    assert call(pb=[12, 0], pe=[0, 0]).startswith("pads_begin, pads_end: the transposed convolution output is empty")
    assert call(s=[1 << 31, 1]).startswith("stride: expected every value in [1, 2^31 - 1]")
    assert call(s=[1 << 30, 1]).startswith("spatial_shape, stride: the transposed convolution output has")
    dup = torch.tensor([[0, 1, 2], [0, 1, 2]], dtype=torch.int32)
    assert call(idx=dup).startswith("indices: duplicate voxel (0, 1, 2) at row 1")
    outside = torch.tensor([[0, 1, 2], [0, 5, 0]], dtype=torch.int32)
    assert call(idx=outside).startswith("indices: row 1 is (batch, *coords) = (0, 5, 0)")
    # every output key within int64
    msg = messages(idx, [5, 5], 1 << 40, [3, 3], [1 << 20, 1 << 20], [0, 0], [0, 0], [1, 1], [0, 0])
    assert msg.startswith("batch_size, stride: batch_size")


def test_asymmetric_conv_map_bad_pads_end():
    idx = torch.tensor([[0, 1, 2]], dtype=torch.int32)
    for build in (CPU.build_conv_map, ACC["build_conv_map"]):
        with pytest.raises(ValueError, match=r"^pads_end: expected 2 values"):
            build(idx, [5, 5], 1, [3, 3], [1, 1], [1, 1], [1, 1], [1])
        with pytest.raises(ValueError, match=r"^spatial_shape: the convolution output is empty on axis 1"):
            build(idx, [5, 5], 1, [3, 7], [1, 1], [0, 0], [1, 1], [0, 1])


def test_fake_kernel_gives_data_dependent_rows():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    idx = random_voxels([4, 4, 4], 1, density=0.3)
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        fidx = mode.from_tensor(idx)
        out, nbr = F.build_conv_transpose_map(fidx, [4, 4, 4], 1, [3, 2, 3], [2, 2, 2], [1, 0, 1], [0, 1, 1],
                                              [1, 1, 1], [1, 1, 0])
        out2, _ = F.build_conv_map(fidx, [4, 4, 4], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], [0, 2, 1])
        assert out.shape[1] == 4 and nbr.shape[1] == 18 and str(out.shape[0]) == str(nbr.shape[0])
        assert isinstance(out.shape[0], torch.SymInt) and isinstance(out2.shape[0], torch.SymInt)
        assert out.dtype == nbr.dtype == torch.int32


ON_EMULATOR = r"""
import sys, torch, mx_sparse
ops = torch.ops.mx_sparse
assert "registration.py" in torch._C._dispatch_dump("mx_sparse::_sorted_key_lookup").split("CPU:")[1].splitlines()[0]
args = torch.load(sys.argv[1])
torch.save([ops.build_conv_transpose_map(*a) for a in args["transposed"]] +
           [ops.build_conv_map(*a) for a in args["strided"]], sys.argv[2])
"""


@pytest.mark.skipif(ON_ACCELERATOR_PATH, reason="runs its own MXS_NPU_ON_CPU=1 subprocess")
def test_maps_through_the_ascend_emulator_equal_the_cpu_kernel(tmp_path):
    """MXS_NPU_ON_CPU=1: the orchestration on the AscendC emulator's primitives (SubmMap walks each
    run of the innermost window's key deltas in ascending order, so the transposed lookup must not
    hand it mirrored deltas) gives the CPU kernel's maps bit for bit."""
    import os
    import subprocess
    import sys
    from mx_sparse.runtime import ascend
    if not ascend.emulator_available():
        pytest.skip("no AscendC emulator in this build")
    idx = random_voxels([6, 7, 8], 2, 0.2, seed=3)
    args = {"transposed": [(idx, [6, 7, 8], 2, [3, 2, 3], [2, 1, 3], [1, 0, 4], [0, 2, 1], [1, 2, 1], [1, 0, 2]),
                           (idx, [6, 7, 8], 2, [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [0, 0, 0])],
            "strided": [(idx, [6, 7, 8], 2, [3, 3, 2], [2, 1, 2], [1, 0, 2], [1, 2, 1], [0, 3, 1])]}
    torch.save(args, tmp_path / "args.pt")
    env = dict(os.environ, MXS_NPU_ON_CPU="1")
    env.pop("MXS_CUDA_ON_CPU", None)
    proc = subprocess.run([sys.executable, "-c", ON_EMULATOR, str(tmp_path / "args.pt"), str(tmp_path / "maps.pt")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = torch.load(tmp_path / "maps.pt")
    want = [CPU.build_conv_transpose_map(*a) for a in args["transposed"]] + \
           [CPU.build_conv_map(*a) for a in args["strided"]]
    for (go, gn, gs), (wo, wn, ws) in zip(got, want):
        assert torch.equal(go, wo) and torch.equal(gn, wn) and gs == ws
