"""The operator layer: maps against brute-force Python definitions, the transpose,
fake (meta) kernels under FakeTensor, and torch.compile tracing."""
import itertools

import pytest
import torch

import mx_sparse
from mx_sparse import functional as F
from helpers import random_voxels


def brute_force_conv_map(idx, shape, k, s, p, d):
    rows = [tuple(r) for r in idx.tolist()]
    out = {}
    for i, (b, *c) in enumerate(rows):
        for kk, kp in enumerate(itertools.product(*[range(x) for x in k])):
            num = [ci + pi - ki * di for ci, pi, ki, di in zip(c, p, kp, d)]
            if any(n < 0 or n % si for n, si in zip(num, s)):
                continue
            o = tuple(n // si for n, si in zip(num, s))
            out_shape = [(x + 2 * pi - di * (ki - 1) - 1) // si + 1 for x, ki, si, pi, di in zip(shape, k, s, p, d)]
            if all(oi < e for oi, e in zip(o, out_shape)):
                out.setdefault((b, *o), {})[kk] = i
    keys = sorted(out)
    nbr = torch.full((len(keys), len(list(itertools.product(*[range(x) for x in k])))), -1, dtype=torch.int32)
    for m, key in enumerate(keys):
        for kk, i in out[key].items():
            nbr[m, kk] = i
    return torch.tensor(keys, dtype=torch.int32).reshape(-1, 1 + len(shape)), nbr


@pytest.mark.parametrize("k,s,p,d", [((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1)),
                                     ((2, 3, 1), (1, 2, 3), (0, 1, 0), (2, 1, 1))])
def test_conv_map_and_transpose_match_definition(k, s, p, d):
    shape = [5, 6, 7]
    idx = random_voxels(shape, 2, density=0.2, seed=3)
    out_idx, nbr = F.build_conv_map(idx, shape, 2, k, s, p, d)
    ref_idx, ref_nbr = brute_force_conv_map(idx, shape, k, s, p, d)
    assert torch.equal(out_idx, ref_idx) and torch.equal(nbr, ref_nbr)
    t = F.transpose_map(nbr, idx.shape[0])
    for m, kk in (nbr >= 0).nonzero().tolist():
        assert t[nbr[m, kk], kk] == m
    assert (t >= 0).sum() == (nbr >= 0).sum()


@pytest.mark.parametrize("k,s,p,d", [((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1)),
                                     ((2, 3, 1), (1, 2, 3), (0, 1, 0), (2, 1, 1))])
def test_conv_map_of_a_sparse_huge_grid_matches_definition(k, s, p, d):
    """The CPU builder lists outputs through a bitmap of the output grid while it has at
    most 1024 cells per input voxel (the test above), and by sorting the contributions
    beyond that: here ~10^5 cells per voxel."""
    shape = [5, 6, 2 ** 20]
    idx = random_voxels([5, 6, 7], 2, density=0.2, seed=4)
    idx[:, 3] *= 2 ** 17  # spread along the huge axis
    out_idx, nbr = F.build_conv_map(idx, shape, 2, k, s, p, d)
    ref_idx, ref_nbr = brute_force_conv_map(idx, shape, k, s, p, d)
    assert torch.equal(out_idx, ref_idx) and torch.equal(nbr, ref_nbr)


def test_subm_map_matches_definition():
    shape = [4, 5, 6]
    idx = random_voxels(shape, 1, density=0.3, seed=5)
    nbr = F.build_subm_map(idx, shape, 1, [3, 2, 1], [1, 2, 1])
    lookup = {tuple(r): i for i, r in enumerate(idx.tolist())}
    for i, (b, *c) in enumerate(idx.tolist()):
        for kk, kp in enumerate(itertools.product(range(3), range(2), range(1))):
            # centre k//2: offsets (kp - k//2) * dilation
            q = (b, c[0] + kp[0] - 1, c[1] + (kp[1] - 1) * 2, c[2] + kp[2])
            assert nbr[i, kk] == lookup.get(q, -1)


def test_fake_kernels_trace_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    idx = random_voxels([4, 4, 4], 1, density=0.3)
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        fidx = mode.from_tensor(idx)
        nbr = F.build_subm_map(fidx, [4, 4, 4], 1, [3, 3, 3], [1, 1, 1])
        assert tuple(nbr.shape) == (idx.shape[0], 27)
        out_idx, cmap = F.build_conv_map(fidx, [4, 4, 4], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
        assert cmap.shape[1] == 27 and out_idx.shape[1] == 4
        # the output grid depends on the arguments only: the fake kernels give it as plain ints
        assert F.build_conv_map_and_shape(fidx, [4, 4, 4], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])[2] == \
            [2, 2, 2]   # (4 + 1 + 1 - 2 - 1) // 2 + 1
        assert F.build_conv_transpose_map_and_shape(fidx, [4, 4, 4], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [0, 0, 0],
                                                    [1, 1, 1], [1, 1, 1])[2] == [9, 9, 9]   # 3*2 - 1 - 0 + 2 + 1 + 1
        feats = torch.empty(idx.shape[0], 5)
        w = torch.empty(27, 5, 7)
        y = F.gather_mm(feats, w, nbr, F.transpose_map(nbr, idx.shape[0]), 1)
        assert tuple(y.shape) == (idx.shape[0], 7)
        dw = F.gather_mm_backprop_filter(feats, y, nbr, nbr, 1)
        assert tuple(dw.shape) == (27, 5, 7)
        ops = mx_sparse._core.op_registration.ops
        z, mean, invstd, scale, shift = ops.batch_norm_relu_forward(y, None, None, None, None, True, 0.1, 1e-5)
        assert z.shape == y.shape and mean.dtype == torch.float64 and scale.shape == (7,)
        z = ops.scale_shift_relu(y, scale, shift)
        dz, dg, db = ops.batch_norm_relu_backward(z, y, mean, invstd, None, scale, shift, True)
        assert z.shape == dz.shape == y.shape and dg.shape == db.shape == (7,)
        mask, values, starts = ops.pack_map(cmap)
        assert mask.shape[1] == 2 and mask.dtype == torch.int16 and starts.dtype == torch.int64
        assert ops.unpack_map(mask, values, starts, 27).shape == cmap.shape


def test_torch_compile_of_gather_mm_matches_eager():
    idx = random_voxels([5, 5, 5], 1, density=0.3)
    nbr = F.build_subm_map(idx, [5, 5, 5], 1, [3, 3, 3], [1, 1, 1])
    nbr_t = F.transpose_map(nbr, idx.shape[0])
    feats = torch.randn(idx.shape[0], 4)
    w = torch.randn(27, 4, 6)

    def layer(f, w):
        return torch.relu(F.gather_mm(f, w, nbr, nbr_t, 1)) * 2

    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(feats, w), layer(feats, w))


def test_ops_are_registered_with_schema():
    for name in ["build_subm_map", "build_conv_map", "transpose_map", "pack_map", "unpack_map", "gather_mm",
                 "gather_mm_backprop_filter"]:
        assert hasattr(torch.ops.mx_sparse, name)
    assert mx_sparse._core.op_registration.has_kernel("cpu")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("mx_sparse::gather_mm", "Autograd") or \
        torch._C._dispatch_has_kernel_for_dispatch_key("mx_sparse::gather_mm", "AutogradCPU")


def test_conv_map_with_many_more_outputs_than_inputs():
    """Isolated voxels: a stride-1 3x3x3 conv gives 27 outputs per input (the output
    table must grow past its initial size guess)."""
    idx = torch.tensor([[b, 4 * i + 1, 4 * j + 1, 4 * k + 1] for b in range(2) for i in range(4) for j in range(4)
                        for k in range(4)], dtype=torch.int32)
    out_idx, nbr = F.build_conv_map(idx, [16, 16, 16], 2, [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1])
    ref_idx, ref_nbr = brute_force_conv_map(idx, [16, 16, 16], (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1))
    assert out_idx.shape[0] == 27 * idx.shape[0]
    assert torch.equal(out_idx, ref_idx) and torch.equal(nbr, ref_nbr)


def test_subm_transpose_of_odd_kernel_is_the_column_flip():
    """Why odd submanifold maps may go without nbr_t (None), checked against transpose_map."""
    idx = random_voxels([5, 6, 7], 2, density=0.3, seed=8)
    for kernel, dilation in (([3, 3, 3], [1, 1, 1]), ([1, 3, 5], [2, 1, 1])):
        nbr = F.build_subm_map(idx, [5, 6, 7], 2, kernel, dilation)
        assert torch.equal(nbr.flip(1), F.transpose_map(nbr, idx.shape[0]))


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("kind", ["subm", "strided"])
def test_gradients_without_transpose_match_explicit_transpose(groups, kind):
    """nbr_t=None (derived in backward: reversed weights for a symmetric map, transpose_map
    otherwise) against the explicit transpose, first and second order, for gather_mm and for
    gather_mm_backprop_filter (whose own backward calls gather_mm)."""
    idx = random_voxels([5, 5, 5], 1, density=0.35, seed=4)
    if kind == "subm":
        nbr, symmetric = F.build_subm_map(idx, [5, 5, 5], 1, [3, 3, 3], [1, 1, 1]), True
    else:
        nbr, symmetric = F.build_conv_map(idx, [5, 5, 5], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])[1], False
    nbr_t = F.transpose_map(nbr, idx.shape[0])
    g = torch.Generator().manual_seed(1)
    x = torch.randn(idx.shape[0], 4, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(27, 4 // groups, 6, generator=g, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(nbr.shape[0], 6, generator=g, dtype=torch.float64, requires_grad=True)
    for op, a, b in ((F.gather_mm, x, w), (F.gather_mm_backprop_filter, x, dy)):
        grads = []
        for t in (nbr_t, None):
            out = op(a, b, nbr, t, groups, symmetric)
            first = torch.autograd.grad(out.square().sum(), (a, b), create_graph=True)
            second = torch.autograd.grad(sum(f.square().sum() for f in first), (a, b))
            grads.append([*first, *second])
        for with_t, without in zip(*grads):
            torch.testing.assert_close(without, with_t, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: F.gather_mm(a, b, nbr, None, groups, symmetric), (x, w))
    assert torch.autograd.gradgradcheck(lambda a, b: F.gather_mm(a, b, nbr, None, groups, symmetric), (x, w))


def packed_map_by_definition(nbr):
    """pack_map's format from its schema comment, in numpy."""
    import numpy as np
    a = nbr.numpy()
    m, kvol = a.shape
    words = (kvol + 15) // 16
    present = np.zeros((m, words * 16), dtype=bool)
    present[:, :kvol] = a >= 0
    bits = (present.reshape(m, words, 16) * (1 << np.arange(16))).sum(-1).astype(np.uint16).view(np.int16)
    per_row = present.sum(1)
    starts = np.concatenate([[0], np.cumsum(per_row)])[np.r_[0:m:1024, m]]
    return torch.from_numpy(bits), torch.from_numpy(a[a >= 0]), torch.from_numpy(starts.astype(np.int64))


@pytest.mark.parametrize("m,kvol", [(0, 27), (1, 1), (1023, 27), (1025, 16), (3000, 40), (2100, 125)])
def test_pack_map_matches_definition_and_unpacks_to_the_map(m, kvol):
    g = torch.Generator().manual_seed(m + kvol)
    nbr = torch.randint(0, 50_000, (m, kvol), generator=g, dtype=torch.int32)
    nbr[torch.rand(m, kvol, generator=g) < 0.75] = -1
    nbr[: m // 7] = -1                        # whole blocks of empty rows too
    ops = mx_sparse._core.op_registration.ops
    mask, values, starts = ops.pack_map(nbr)
    ref = packed_map_by_definition(nbr)
    assert torch.equal(mask, ref[0]) and torch.equal(values, ref[1]) and torch.equal(starts, ref[2])
    assert torch.equal(ops.unpack_map(mask, values, starts, kvol), nbr)


def test_pack_and_unpack_map_reject_what_they_cannot_represent():
    ops = mx_sparse._core.op_registration.ops
    nbr = torch.tensor([[0, -1, 3], [-1, -2, 1]], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"nbr: entries must be input rows \(>= 0\) or -1.*got -2 at \[1, 1\]"):
        ops.pack_map(nbr)
    with pytest.raises(ValueError, match="nbr: expected an int32"):
        ops.pack_map(nbr.long())
    mask, values, starts = ops.pack_map(nbr.clamp(min=-1))
    with pytest.raises(ValueError, match="block_starts: expected to run from 0 to 2"):
        ops.unpack_map(mask, values[:2], starts, 3)
    with pytest.raises(ValueError, match="do not match their block_starts share"):
        ops.unpack_map(mask ^ 4, values, starts, 3)
    with pytest.raises(ValueError, match=r"mask: expected int16 \[M, 1\] for kvol=3"):
        ops.unpack_map(mask.int(), values, starts, 3)


def test_opcheck_passes_for_the_map_and_gather_ops():
    """torch.library.opcheck (schema, autograd registration, FakeTensor, AOT dispatch), as
    docs/en/ops.md states."""
    opcheck = getattr(torch.library, "opcheck", None)
    if opcheck is None:
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    ops = mx_sparse._core.op_registration.ops
    idx = random_voxels([6, 6, 6], 1, density=0.3, seed=1)
    nbr = F.build_subm_map(idx, [6, 6, 6], 1, [3, 3, 3], [1, 1, 1])
    feats = torch.randn(idx.shape[0], 4, requires_grad=True)
    weight = torch.randn(27, 4, 5, requires_grad=True)
    for op, args in ((ops.pack_map, (nbr,)), (ops.unpack_map, (*ops.pack_map(nbr), 27)),
                     (ops.transpose_map, (nbr, idx.shape[0])), (ops.gather_mm, (feats, weight, nbr, None, 1, True)),
                     (ops.gather_mm_backprop_filter, (feats.detach(), torch.randn(idx.shape[0], 5), nbr, None, 1, True))):
        result = opcheck(op, args)
        assert all(v == "SUCCESS" for v in result.values()), (op, result)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_opcheck_passes_for_the_batch_norm_relu_ops(dtype):
    """opcheck on the fused BatchNorm+ReLU ops: the fake kernels give the real dtypes
    (float32 scale and shift for bfloat16 features)."""
    opcheck = getattr(torch.library, "opcheck", None)
    if opcheck is None:
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    ops = mx_sparse._core.op_registration.ops
    x = torch.randn(50, 6).to(dtype)
    w, b = torch.rand(6).to(dtype) + 0.5, torch.randn(6).to(dtype)
    rm, rv = torch.zeros(6, dtype=dtype), torch.ones(6, dtype=dtype)
    y, mean, invstd, scale, shift = ops.batch_norm_relu_forward(x, w, b, rm.clone(), rv.clone(), True, 0.1, 1e-5)
    assert scale.dtype == shift.dtype == torch.float32 and y.dtype == dtype
    for op, args in ((ops.batch_norm_relu_forward, (x, w, b, rm, rv, True, 0.1, 1e-5)),
                     (ops.scale_shift_relu, (x, scale, shift)),
                     (ops.batch_norm_relu_backward, (torch.randn(50, 6).to(dtype), x, mean, invstd, w, scale, shift,
                                                     True))):
        result = opcheck(op, args)
        assert all(v == "SUCCESS" for v in result.values()), (op, result)
