"""The five accelerator primitives of mx_sparse.runtime.ascend, and the optional _gather_mm_transposed
(GatherMm reading the layer's weight transposed): the AscendC kernel sources launched in-process
by the CPU emulator (strict A2 rules, the platform of ASCEND_SIM_SOC, default Ascend910B2), against
independent references: torch.searchsorted / torch.unique, a Python evaluation of the output-key rule,
the CPU backend's maps (torch.ops.mx_sparse.build_subm_map / build_conv_map) and dense float64
products for the gathers."""
import itertools

import pytest
import torch

from mx_sparse.runtime import ascend

pytestmark = pytest.mark.skipif(not ascend.emulator_available(), reason="needs the kernel sources and a C++ compiler")

INT64_MAX = 2**63 - 1
# as tests/ascend/test_gather_mm.py, here against float64: (rtol, atol relative to the largest |ref|)
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)}


@pytest.fixture(scope="module")
def prims():
    return ascend.emulator_primitives()


# ------------------------------------------------------------------------------------------------
# references


def window_deltas(kernel, dilation, padded, centered):
    """Key offset of every kernel position (row-major over kernel_size) on a row-major padded grid."""
    strides = [1] * len(padded)
    for d in range(len(padded) - 2, -1, -1):
        strides[d] = strides[d + 1] * padded[d + 1]
    out = []
    for kpos in itertools.product(*[range(k) for k in kernel]):
        out.append(sum((kp - (k // 2 if centered else 0)) * dl * s
                       for kp, k, dl, s in zip(kpos, kernel, dilation, strides)))
    return torch.tensor(out, dtype=torch.int64)


def lookup_reference(query, sorted_keys, deltas):
    target = query[:, None] + deltas[None, :]
    pos = torch.searchsorted(sorted_keys, target).clamp(max=max(sorted_keys.numel() - 1, 0))
    if sorted_keys.numel() == 0:
        return torch.full(target.shape, -1, dtype=torch.int32)
    hit = sorted_keys[pos] == target
    return torch.where(hit, pos, torch.full_like(pos, -1)).to(torch.int32)


def pack(coords, shape, shift, scale):
    """(b, x0, x1, ...) -> ((b * s0 + x0*scale0 + shift0) * s1 + ...) as int64."""
    key = coords[:, 0].to(torch.int64)
    for d, size in enumerate(shape):
        key = key * size + coords[:, 1 + d].to(torch.int64) * scale[d] + shift[d]
    return key


def out_extent(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def conv_out_keys_reference(ind, shape, batch, ks, st, pd, dl):
    """[J, N] output keys, slot-major, by brute force: along axis d the kernel positions kpos < k with
    i + p - kpos * d a multiple of s, ascending, are the axis' slots 0, 1, ...; J_d = the most any
    coordinate has; slot j = the row-major multi-index of the axis slots; the key of
    o = (i + p - kpos * d) / s where every axis' slot exists and o is inside the output grid."""
    out_shape = [out_extent(*a) for a in zip(shape, ks, st, pd, dl)]
    idx = ind.to(torch.int64)
    per_axis = []  # per axis: per row, the output coordinates of its lattice positions, ascending
    for d in range(len(shape)):
        per_axis.append([[(i + pd[d] - kp * dl[d]) // st[d] for kp in range(ks[d]) if (i + pd[d] - kp * dl[d]) % st[d] == 0]
                         for i in idx[:, 1 + d].tolist()])
    counts = [max(len(hits) for u in range(st[d])
                  for hits in [[kp for kp in range(ks[d]) if (u - kp * dl[d]) % st[d] == 0]])
              for d in range(len(shape))]
    rows = []
    for js in itertools.product(*[range(c) for c in counts]):
        keys = []
        for n, b in enumerate(idx[:, 0].tolist()):
            key = b
            for d, j in enumerate(js):
                hits = per_axis[d][n]
                if j >= len(hits) or not 0 <= hits[j] < out_shape[d]:
                    key = INT64_MAX
                    break
                key = key * out_shape[d] + hits[j]
            keys.append(key)
        rows.append(torch.tensor(keys, dtype=torch.int64))
    return torch.stack(rows), out_shape


def gathered(features, nbr, k):
    rows = features[nbr[:, k].clamp(min=0).long()]
    return torch.where((nbr[:, k] >= 0)[:, None], rows, torch.zeros_like(rows))


def gather_mm_reference(features, weight, nbr):
    f, w = features.double(), weight.double()
    out = torch.zeros(nbr.shape[0], w.shape[2], dtype=torch.float64)
    for k in range(nbr.shape[1]):
        out += gathered(f, nbr, k) @ w[k]
    return out


def backprop_filter_reference(features, grad, nbr):
    f, g = features.double(), grad.double()
    return torch.stack([gathered(f, nbr, k).T @ g for k in range(nbr.shape[1])])


def assert_close_to_fp64(got, ref, dtype):
    rtol, atol = TOL[dtype]
    scale = max(ref.abs().max().item(), 1.0)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), ref, rtol=rtol, atol=atol * scale)


def launches(name):
    return ascend.emulator_stats()[name]


# ------------------------------------------------------------------------------------------------
# _sorted_key_lookup (SubmMap)


@pytest.mark.parametrize("key_bound,big", [(1 << 20, False), (0, False), (0, True)],
                         ids=["low-word-compares", "bound-unknown", "keys-above-2^32"])
def test_sorted_key_lookup_equals_searchsorted(prims, key_bound, big):
    g = torch.Generator().manual_seed(11)
    base = (1 << 40) if big else 0
    keys = (torch.randperm(1 << 16, generator=g)[:3000].sort().values * 16 + base).to(torch.int64)
    query = keys[torch.randperm(3000, generator=g)[:1700]].sort().values
    query = torch.cat([query, torch.tensor([base + 5, base + 77])]).sort().values  # keys not present too
    deltas = window_deltas([3, 3, 3], [1, 1, 1], [7, 9, 16], centered=True)
    before = launches("SubmMap")
    got = prims["_sorted_key_lookup"](query, keys, deltas, 3, key_bound + 16 * 7 * 9 if key_bound else 0)
    assert launches("SubmMap") == before + 1
    assert got.dtype == torch.int32 and got.shape == (query.numel(), 27)
    assert torch.equal(got, lookup_reference(query, keys, deltas))
    assert (got >= 0).sum() > 1700  # the centre offset hits for every present query, others hit too


@pytest.mark.parametrize("scene", ["kitti_crop", "random_b2"])
@pytest.mark.parametrize("ks,dl", [([3, 3, 3], [1, 1, 1]), ([3, 1, 5], [2, 1, 3])], ids=["k3", "k315-dil"])
def test_subm_map_through_the_primitive_equals_the_cpu_builder(prims, scenes, scene, ks, dl):
    """pack on the padded grid -> stable sort -> lookup kernel -> un-permute == the CPU backend's map."""
    ind, shape, batch = scenes[scene]
    ind = ind[torch.randperm(ind.shape[0], generator=torch.Generator().manual_seed(2))].contiguous()
    shift = [(k // 2) * d for k, d in zip(ks, dl)]
    padded = [s + 2 * p for s, p in zip(shape, shift)]
    keys, perm = torch.sort(pack(ind, padded, shift, [1, 1, 1]), stable=True)
    deltas = window_deltas(ks, dl, padded, centered=True)
    bound = batch * padded[0] * padded[1] * padded[2]
    nbr_sorted = prims["_sorted_key_lookup"](keys, keys, deltas, ks[-1], bound)
    mapped = torch.where(nbr_sorted >= 0, perm.to(torch.int32)[nbr_sorted.clamp(min=0).long()], nbr_sorted)
    got = torch.empty_like(mapped)
    got[perm] = mapped
    assert torch.equal(got, torch.ops.mx_sparse.build_subm_map(ind, shape, batch, ks, dl))


def test_sorted_key_lookup_empty_and_tiny(prims):
    deltas = torch.tensor([-1, 0, 1], dtype=torch.int64)
    keys = torch.tensor([2, 3, 9], dtype=torch.int64)
    before = launches("SubmMap")
    empty = prims["_sorted_key_lookup"](keys[:0], keys, deltas, 3, 16)
    assert empty.shape == (0, 3) and empty.dtype == torch.int32
    assert launches("SubmMap") == before  # nothing to launch, as in the binding
    got = prims["_sorted_key_lookup"](keys, keys, deltas, 3, 16)
    assert got.tolist() == [[-1, 0, 1], [0, 1, -1], [-1, 2, -1]]
    assert launches("SubmMap") == before + 1
    none = prims["_sorted_key_lookup"](keys, keys[:0], deltas, 3, 16)  # no candidates: every lane misses
    assert none.tolist() == [[-1, -1, -1]] * 3


def test_sorted_key_lookup_limits(prims):
    keys = torch.arange(8, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"kernel_size: the Ascend map kernel supports kernel volumes up to 125"):
        prims["_sorted_key_lookup"](keys, keys, torch.arange(216), 6, 0)
    with pytest.raises(ValueError, match=r"group: expected a divisor of the 27 key offsets"):
        prims["_sorted_key_lookup"](keys, keys, torch.arange(27), 4, 0)
    with pytest.raises(ValueError, match=r"query_keys: expected dtype int64, got int32"):
        prims["_sorted_key_lookup"](keys.int(), keys, torch.arange(27), 3, 0)


# ------------------------------------------------------------------------------------------------
# _conv_out_keys (ConvOutKeys) and _unique_sorted_keys (UniqueSortedKeys)

# the last: gcd(stride, dilation) > 1 (k5 s4 d2, k3 s3 d3) next to k4 s2 d1
GEOMETRIES = [([3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]), ([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1]),
              ([3, 1, 3], [1, 2, 3], [1, 0, 2], [2, 1, 1]), ([5, 3, 4], [4, 3, 2], [2, 1, 1], [2, 3, 1])]


@pytest.mark.parametrize("scene", ["kitti_crop", "random_b2"])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=["k3s2p1", "k2s2", "mixed-dil", "gcd"])
def test_conv_out_keys_equals_the_rule(prims, scenes, scene, geo):
    ind, shape, batch = scenes[scene]
    ks, st, pd, dl = geo
    before = launches("ConvOutKeys")
    got = prims["_conv_out_keys"](ind, shape, batch, ks, st, pd, dl)
    assert launches("ConvOutKeys") == before + 1
    ref, _ = conv_out_keys_reference(ind, shape, batch, ks, st, pd, dl)
    assert got.dtype == torch.int64 and torch.equal(got, ref.flatten())


@pytest.mark.parametrize("scene", ["kitti_crop", "random_b2"])
def test_conv_map_through_the_primitives_equals_the_cpu_builder(prims, scenes, scene):
    """ConvOutKeys -> sort -> UniqueSortedKeys -> unpack -> lookup (the NPU pipeline) == the CPU map."""
    ind, shape, batch = scenes[scene]
    ind = ind[torch.randperm(ind.shape[0], generator=torch.Generator().manual_seed(3))].contiguous()
    ks, st, pd, dl = [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]
    ref_out, ref_nbr, ref_shape = torch.ops.mx_sparse.build_conv_map(ind, shape, batch, ks, st, pd, dl)
    cand = prims["_conv_out_keys"](ind, shape, batch, ks, st, pd, dl)
    ukeys, count = prims["_unique_sorted_keys"](torch.sort(cand).values)
    okeys = ukeys[: int(count)]
    out_shape = [out_extent(*a) for a in zip(shape, ks, st, pd, dl)]
    assert ref_shape == out_shape
    coords, rem = [], okeys.clone()
    for size in reversed(out_shape):
        coords.append(rem % size)
        rem = rem // size
    out = torch.stack([rem] + coords[::-1], 1).to(torch.int32)
    assert torch.equal(out, ref_out)
    # queries o * s on the input grid padded by p below and the kernel's reach above
    hi = [max(0, (o - 1) * s - p + (k - 1) * d - (n - 1)) for o, s, p, k, d, n in zip(out_shape, st, pd, ks, dl, shape)]
    padded = [n + p + h for n, p, h in zip(shape, pd, hi)]
    ckeys, perm = torch.sort(pack(ind, padded, pd, [1, 1, 1]), stable=True)
    qkeys = pack(out, padded, [0, 0, 0], st)
    nbr_sorted = prims["_sorted_key_lookup"](qkeys, ckeys, window_deltas(ks, dl, padded, centered=False), ks[-1],
                                             batch * padded[0] * padded[1] * padded[2])
    nbr = torch.where(nbr_sorted >= 0, perm.to(torch.int32)[nbr_sorted.clamp(min=0).long()], nbr_sorted)
    assert torch.equal(nbr, ref_nbr)


def test_conv_out_keys_empty_and_limits(prims):
    before = launches("ConvOutKeys")
    got = prims["_conv_out_keys"](torch.zeros(0, 4, dtype=torch.int32), [8, 8, 8], 1, [3, 3, 3], [2, 2, 2],
                                  [1, 1, 1], [1, 1, 1])
    assert got.shape == (0,) and got.dtype == torch.int64
    assert launches("ConvOutKeys") == before
    ind = torch.zeros(1, 4, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"kernel_size: the Ascend map kernels support kernel volumes up to 125"):
        prims["_conv_out_keys"](ind, [8, 8, 8], 1, [6, 6, 6], [1, 1, 1], [0, 0, 0], [1, 1, 1])
    with pytest.raises(ValueError, match=r"spatial_shape: the Ascend strided-conv map needs extent \+ padding < 2\^24"):
        prims["_conv_out_keys"](ind, [1 << 24, 8, 8], 1, [3, 3, 3], [2, 2, 2], [0, 0, 0], [1, 1, 1])
    with pytest.raises(ValueError, match=r"batch_size: the Ascend strided-conv map supports 1 <= batch_size <= 2\^24"):
        prims["_conv_out_keys"](ind, [8, 8, 8], (1 << 24) + 1, [3, 3, 3], [2, 2, 2], [0, 0, 0], [1, 1, 1])
    with pytest.raises(ValueError, match=r"indices: expected shape \[N, 4\]"):
        prims["_conv_out_keys"](ind[:, :3], [8, 8, 8], 1, [3, 3, 3], [2, 2, 2], [0, 0, 0], [1, 1, 1])


@pytest.mark.parametrize("n,distinct,sentinels", [(1, 1, 0), (64, 10, 3), (65, 65, 0), (5000, 700, 900),
                                                  (20000, 19000, 0), (100, 0, 100)])
def test_unique_sorted_keys_equals_torch_unique(prims, n, distinct, sentinels):
    g = torch.Generator().manual_seed(n)
    values = torch.unique(torch.randint(0, 1 << 40, (2 * distinct,), generator=g))
    values = values[torch.randperm(values.numel(), generator=g)[:distinct]]
    assert values.numel() == distinct
    picks = values[torch.randint(0, max(distinct, 1), (n - sentinels,), generator=g)] if distinct else values
    if distinct:  # every distinct value at least once
        picks[:distinct] = values
    keys = torch.cat([picks, torch.full((sentinels,), INT64_MAX)]).sort().values
    before = launches("UniqueSortedKeys")
    ukeys, count = prims["_unique_sorted_keys"](keys)
    assert launches("UniqueSortedKeys") == before + 1
    ref = torch.unique(keys[keys != INT64_MAX])
    assert count.dtype == torch.int32 and count.tolist() == [ref.numel()]
    assert ukeys.shape == keys.shape and torch.equal(ukeys[: ref.numel()], ref)


def test_unique_sorted_keys_empty(prims):
    before = launches("UniqueSortedKeys")
    ukeys, count = prims["_unique_sorted_keys"](torch.zeros(0, dtype=torch.int64))
    assert ukeys.shape == (0,) and count.tolist() == [0]
    assert launches("UniqueSortedKeys") == before


# ------------------------------------------------------------------------------------------------
# _gather_mm_one_group (GatherMm) and _gather_mm_backprop_filter_one_group (GatherMmBackpropFilter)


def _inputs(n_in, n_out, cin, cout, kvol, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(n_in, cin, generator=g).to(dtype)
    w = (torch.randn(kvol, cin, cout, generator=g) / (cin * kvol) ** 0.5).to(dtype)
    grad = torch.randn(n_out, cout, generator=g).to(dtype)
    return f, w, grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("cin,cout", [(16, 16), (13, 35)], ids=["16-16", "13-35"])
def test_gathers_equal_dense_float64(prims, scenes, dtype, cin, cout):
    ind, shape, batch = scenes["kitti_crop"]
    nbr = torch.ops.mx_sparse.build_subm_map(ind, shape, batch, [3, 3, 3], [1, 1, 1])
    n = nbr.shape[0]
    f, w, grad = _inputs(n, n, cin, cout, 27, dtype, seed=cin)
    before = (launches("GatherMm"), launches("GatherMmBackpropFilter"))
    out = prims["_gather_mm_one_group"](f, w, nbr)
    assert_close_to_fp64(out, gather_mm_reference(f, w, nbr), dtype)
    dw = prims["_gather_mm_backprop_filter_one_group"](f, grad, nbr)
    assert dw.shape == (27, cin, cout)
    assert_close_to_fp64(dw, backprop_filter_reference(f, grad, nbr), dtype)
    assert (launches("GatherMm"), launches("GatherMmBackpropFilter")) == (before[0] + 1, before[1] + 1)


def test_gathers_rectangular_strided_map(prims, scenes):
    """M != N (a strided conv's map), and non-contiguous operands (made contiguous by the wrapper)."""
    ind, shape, batch = scenes["random_b2"]
    _, nbr, _ = torch.ops.mx_sparse.build_conv_map(ind, shape, batch, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1])
    f, w, grad = _inputs(ind.shape[0], nbr.shape[0], 24, 8, 8, torch.float32, seed=5)
    f_strided = torch.stack([f, torch.zeros_like(f)], 2)[:, :, 0]
    assert not f_strided.is_contiguous() and torch.equal(f_strided, f)
    assert_close_to_fp64(prims["_gather_mm_one_group"](f_strided, w, nbr), gather_mm_reference(f, w, nbr),
                         torch.float32)
    assert_close_to_fp64(prims["_gather_mm_backprop_filter_one_group"](f_strided, grad, nbr),
                         backprop_filter_reference(f, grad, nbr), torch.float32)


def test_gathers_tiny_and_empty(prims):
    nbr = torch.tensor([[0, -1, 2], [-1, -1, -1], [1, 2, 0]], dtype=torch.int32)
    f, w, grad = _inputs(3, 3, 5, 3, 3, torch.float32, seed=1)
    assert_close_to_fp64(prims["_gather_mm_one_group"](f, w, nbr), gather_mm_reference(f, w, nbr), torch.float32)
    assert_close_to_fp64(prims["_gather_mm_backprop_filter_one_group"](f, grad, nbr),
                         backprop_filter_reference(f, grad, nbr), torch.float32)
    before = (launches("GatherMm"), launches("GatherMmBackpropFilter"))
    empty = torch.zeros(0, 3, dtype=torch.int32)
    out = prims["_gather_mm_one_group"](f, w, empty)
    assert out.shape == (0, 3) and out.dtype == torch.float32
    dw = prims["_gather_mm_backprop_filter_one_group"](f, grad[:0], empty)
    assert dw.shape == (3, 5, 3) and torch.count_nonzero(dw) == 0
    assert (launches("GatherMm"), launches("GatherMmBackpropFilter")) == before  # no launch, as in the binding
    no_rows = torch.full((3, 3), -1, dtype=torch.int32)  # no input rows at all: every entry is -1
    assert torch.count_nonzero(prims["_gather_mm_one_group"](f[:0], w, no_rows)) == 0
    assert torch.count_nonzero(prims["_gather_mm_backprop_filter_one_group"](f[:0], grad, no_rows)) == 0


def test_gathers_reject_what_the_kernels_do_not_support(prims):
    nbr = torch.zeros(2, 1, dtype=torch.int32)
    f, w, grad = _inputs(2, 2, 4, 4, 1, torch.float32, seed=2)
    with pytest.raises(ValueError, match=r"features: the Ascend kernels support float32, float16 and bfloat16, "
                                         r"got float64"):
        prims["_gather_mm_one_group"](f.double(), w.double(), nbr)
    with pytest.raises(ValueError, match=r"features: the Ascend kernels support float32, float16 and bfloat16, "
                                         r"got float64"):
        prims["_gather_mm_backprop_filter_one_group"](f.double(), grad.double(), nbr)
    with pytest.raises(ValueError, match=r"weight: expected dtype torch.float32 like features, got torch.float16"):
        prims["_gather_mm_one_group"](f, w.half(), nbr)
    with pytest.raises(ValueError, match=r"channels: the Ascend gather_mm supports Cin, Cout <= 65535 per group"):
        prims["_gather_mm_one_group"](f[:, :1], torch.zeros(1, 1, 65536), nbr)
    with pytest.raises(ValueError, match=r"channels: the Ascend kernel supports Cout <= 65535 per group"):
        prims["_gather_mm_backprop_filter_one_group"](f, torch.zeros(2, 65536), nbr)
    with pytest.raises(ValueError, match=r"nbr: entries must be -1 or a row of features in \[0, 2\), got 2"):
        prims["_gather_mm_one_group"](f, w, nbr + 2)
    with pytest.raises(ValueError, match=r"weight: expected \[K=1, Cin=4, Cout\]"):
        prims["_gather_mm_one_group"](f, w.transpose(1, 2)[:, :3], nbr)


# ------------------------------------------------------------------------------------------------
# _gather_mm_transposed (GatherMm reading the layer's weight transposed: weight_layout 1 / 2)


def gather_mm_transposed_reference(features, layer_weight, nbr, reverse):
    """sum_k features[nbr[m, k]] @ layer_weight[k']^T in float64, k' = K-1-k when reversed, else k."""
    f, w = features.double(), layer_weight.double()
    kvol = nbr.shape[1]
    out = torch.zeros(nbr.shape[0], w.shape[1], dtype=torch.float64)
    for k in range(kvol):
        out += gathered(f, nbr, k) @ w[kvol - 1 - k if reverse else k].T
    return out


def explicit_copy(layer_weight, reverse):
    """The weight autograd made before (kernels/schema/autograd.cpp): transposed, offsets reversed."""
    wt = layer_weight.transpose(1, 2)
    return (wt.flip(0) if reverse else wt).contiguous()


def _transposed_inputs(n_in, n_out, cin, cout, kvol, dtype, seed):
    """features [n_in, cin] (the output gradient), the layer's weight [kvol, cout, cin], a map with
    -1 entries (about one in eight) and one row without any neighbour."""
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(n_in, cin, generator=g).to(dtype)
    w = (torch.randn(kvol, cout, cin, generator=g) / (cin * kvol) ** 0.5).to(dtype)
    nbr = torch.randint(0, n_in, (n_out, kvol), generator=g, dtype=torch.int32)
    nbr[torch.rand(n_out, kvol, generator=g) < 0.125] = -1
    nbr[n_out // 2] = -1
    return f, w, nbr


@pytest.mark.parametrize("reverse", [False, True], ids=["in-order", "reversed"])
@pytest.mark.parametrize("cin,cout", [(16, 16), (3, 33), (33, 3)], ids=["16-16", "3-33", "33-3"])
@pytest.mark.parametrize("kvol", [1, 8, 27])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
def test_transposed_gather_mm_equals_float64_and_the_plain_kernel_on_the_copy(prims, dtype, kvol, cin, cout,
                                                                              reverse):
    """One GatherMm launch (the ISTRANS instantiation, strict emulator rules) against float64, and against
    the plain GatherMm on the explicit transposed (reversed) copy. K = 1: one Matmul, the same products
    in the same order, bit for bit. K > 1: one Matmul per offset where the plain kernel multiplies all K
    offsets in one, so the fp32 sums are associated differently: float32 within its tolerance; fp16 and
    bf16 add the offsets in fp32 too and round once, so the two differ by at most one rounding of T."""
    f, w, nbr = _transposed_inputs(300, 250, cin, cout, kvol, dtype, seed=kvol * 100 + cin)
    before = launches("GatherMm")
    got = prims["_gather_mm_transposed"](f, w, nbr, reverse)
    assert launches("GatherMm") == before + 1
    assert got.shape == (250, cout) and got.dtype == dtype
    ref = gather_mm_transposed_reference(f, w, nbr, reverse)
    assert_close_to_fp64(got, ref, dtype)
    assert torch.count_nonzero(got[125]) == 0   # the row without neighbours
    plain = prims["_gather_mm_one_group"](f, explicit_copy(w, reverse), nbr)
    if kvol == 1:
        assert torch.equal(got, plain)
    elif dtype == torch.float32:
        assert_close_to_fp64(got, plain.double(), dtype)
    else:
        eps = torch.finfo(dtype).eps
        torch.testing.assert_close(got.double(), plain.double(), rtol=eps, atol=eps * plain.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("n_out,cin,cout", [(1000, 1024, 8), (200, 2560, 4)], ids=["two-tiles", "two-k-groups"])
def test_transposed_gather_mm_wide_rows(prims, dtype, n_out, cin, cout):
    """Wide rows. K*Cin = 27*1024: 16-row tiles, so each AIV runs two tiles and the fp16/bf16 sums of a
    tile are cast while the next tile is gathered (the fp32 tile of sums reused). K*Cin = 27*2560 >
    65535: the slab splits into k-groups of 24 and 3 offsets, and each offset's A is a column block of
    its group's rows (row pitch 24*Cin or 3*Cin)."""
    f, w, nbr = _transposed_inputs(n_out + 200, n_out, cin, cout, 27, dtype, seed=cin)
    got = prims["_gather_mm_transposed"](f, w, nbr, True)
    assert_close_to_fp64(got, gather_mm_transposed_reference(f, w, nbr, True), dtype)
    plain = prims["_gather_mm_one_group"](f, explicit_copy(w, True), nbr)
    eps = torch.finfo(dtype).eps if dtype != torch.float32 else 1e-5
    torch.testing.assert_close(got.double(), plain.double(), rtol=eps, atol=eps * plain.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_transposed_gather_mm_is_the_input_gradient_on_a_submanifold_map(prims, scenes, dtype):
    """The use autograd makes of it: a submanifold map with the offsets reversed stands for its transpose,
    so the result is the input gradient sum_k grad[nbr_t[i, k]] @ W[k]^T (float64, from transpose_map),
    on a real map (sorted rows: the gather's windows as in training)."""
    ind, shape, batch = scenes["kitti_crop"]
    nbr = torch.ops.mx_sparse.build_subm_map(ind, shape, batch, [3, 3, 3], [1, 1, 1])
    nbr_t = torch.ops.mx_sparse.transpose_map(nbr, ind.shape[0])
    g = torch.Generator().manual_seed(12)
    grad = torch.randn(nbr.shape[0], 24, generator=g).to(dtype)
    layer_weight = (torch.randn(27, 13, 24, generator=g) / 24 ** 0.5).to(dtype)   # [K, Cin=13, Cout=24]
    got = prims["_gather_mm_transposed"](grad, layer_weight, nbr, True)
    assert got.shape == (ind.shape[0], 13)
    assert_close_to_fp64(got, gather_mm_transposed_reference(grad, layer_weight, nbr_t, False), dtype)


def test_transposed_gather_mm_rejects_what_it_does_not_support(prims):
    f, w, nbr = _transposed_inputs(4, 3, 5, 6, 3, torch.float32, seed=3)
    with pytest.raises(ValueError, match=r"weight: expected \[K=3, Cout, Cin=5\] \(read transposed\), got \[3, 5, 6\]"):
        prims["_gather_mm_transposed"](f, w.transpose(1, 2).contiguous(), nbr, False)
    with pytest.raises(ValueError, match=r"weight: expected \[K=3, Cout, Cin=5\]"):
        prims["_gather_mm_transposed"](f, w[:2], nbr, False)
    with pytest.raises(ValueError, match=r"weight: expected dtype torch.float32 like features, got torch.bfloat16"):
        prims["_gather_mm_transposed"](f, w.bfloat16(), nbr, False)
    with pytest.raises(ValueError, match=r"features: the Ascend kernels support float32, float16 and bfloat16, "
                                         r"got float64"):
        prims["_gather_mm_transposed"](f.double(), w.double(), nbr, True)
    with pytest.raises(ValueError, match=r"nbr: expected dtype int32, got int64"):
        prims["_gather_mm_transposed"](f, w, nbr.long(), True)
    with pytest.raises(ValueError, match=r"nbr: entries must be -1 or a row of features in \[0, 4\), got 4"):
        prims["_gather_mm_transposed"](f, w, nbr.clamp(min=0) + 4, True)
    with pytest.raises(ValueError, match=r"channels: the Ascend gather_mm supports Cin, Cout <= 65535 per group"):
        prims["_gather_mm_transposed"](f[:, :1], torch.zeros(3, 65536, 1), nbr, False)
    before = launches("GatherMm")
    empty = prims["_gather_mm_transposed"](f, w, nbr[:0], True)
    assert empty.shape == (0, 6) and launches("GatherMm") == before   # no launch, as in the binding


def test_stats_name_every_kernel():
    stats = ascend.emulator_stats()
    assert list(stats) == ["SubmMap", "ConvOutKeys", "UniqueSortedKeys", "GatherMm", "GatherMmBackpropFilter"]
    assert all(isinstance(v, int) and v >= 0 for v in stats.values())


def test_without_sources_or_compiler_the_error_says_what_is_needed(monkeypatch, tmp_path):
    """An installed wheel has no kernel sources next to the package: a clear error, no build attempt."""
    monkeypatch.setattr(ascend, "_lib", None)
    assert ascend.emulator_stats() == {name: 0 for name in ascend.KERNELS}
    monkeypatch.setattr(ascend, "_BUILD_SCRIPT", tmp_path / "tools" / "ascend_emulator" / "cpu_debug_build.sh")
    assert not ascend.emulator_available()
    with pytest.raises(RuntimeError, match=r"needs a source checkout of mx_sparse .* and a C\+\+ compiler; "
                                           r"missing: .*cpu_debug_build.sh"):
        ascend.emulator_primitives()
    monkeypatch.undo()
    monkeypatch.setattr(ascend, "_lib", None)
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    assert not ascend.emulator_available()
    with pytest.raises(RuntimeError, match=r"missing: a C\+\+ compiler \(.*no-such-compiler; set CXX"):
        ascend.emulator_primitives()


def test_launches_from_several_threads(prims):
    """The emulator's launch state is global: the library serialises launches (the GIL is released
    during a call), so concurrent callers get the results of sequential ones."""
    import threading

    g = torch.Generator().manual_seed(9)
    cases = []
    for i in range(4):
        f, w, _ = _inputs(40 + i, 0, 8, 8, 27, torch.float32, seed=i)
        cases.append((f, w, torch.randint(-1, 40 + i, (50, 27), generator=g, dtype=torch.int32)))
    results = [None] * len(cases)

    def work(i):
        results[i] = prims["_gather_mm_one_group"](*cases[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (f, w, nbr), got in zip(cases, results):
        assert_close_to_fp64(got, gather_mm_reference(f, w, nbr), torch.float32)
