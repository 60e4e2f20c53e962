"""mx_sparse.compat.open3d against Open3D-ML itself (``open3d.ml.torch`` of the PyPI package
open3d-cpu 0.20.0, the oracle: skipped with the reason when it is not installed) and against
references written from the definitions (a loop over the neighbour lists; a brute-force search
over the points), so the surface is also checked where Open3D is absent. Runs through the CUDA
and NPU paths too (tests/cuda/test_cuda_on_cpu.py, tests/ascend/test_npu_on_cpu.py)."""
import itertools

import pytest
import torch

from mx_sparse.compat import open3d as mo

FLOAT = torch.float32   # Open3D's ops take float32 only


def oracle():
    """open3d.ml.torch, or a skip naming why it is unavailable."""
    try:
        import open3d.ml.torch as ml3d
    except Exception as e:   # ImportError, or its RuntimeError on a torch minor-version mismatch
        pytest.skip(f"open3d.ml.torch (pip install open3d-cpu==0.20.0) is not usable here: {e}")
    return ml3d


def rel_err(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


# ---------------------------------------------------------------- neighbour lists (CSR)

def random_lists(seed, n=11, m=8, k=8, duplicates=False):
    """A CSR list: each output names some filter elements, each once unless ``duplicates``."""
    g = torch.Generator().manual_seed(seed)
    index, kernel, splits = [], [], [0]
    for _ in range(m):
        count = int(torch.randint(0, k, (), generator=g))
        elements = torch.randperm(k, generator=g)[:count].tolist()
        if duplicates and elements:
            elements += elements[:2]
        for e in elements:
            index.append(int(torch.randint(0, n, (), generator=g)))
            kernel.append(e)
        splits.append(len(index))
    return (torch.tensor(index, dtype=torch.int32), torch.tensor(kernel, dtype=torch.uint8),
            torch.tensor(splits, dtype=torch.int64))


def inverse_lists(index, splits, importance, n):
    """Open3D's per-input lists of the same pairs: (inp_neighbors_index, inp_row_splits,
    inp_neighbors_importance_sum)."""
    per_input = [[] for _ in range(n)]
    for m in range(splits.numel() - 1):
        for e in range(int(splits[m]), int(splits[m + 1])):
            per_input[int(index[e])].append((m, e))
    inp_index = torch.tensor([m for lst in per_input for m, _ in lst], dtype=torch.int32)
    inp_splits = torch.tensor([0] + list(itertools.accumulate(len(lst) for lst in per_input)), dtype=torch.int64)
    sums = torch.tensor([sum(float(importance[e]) for _, e in lst) for lst in per_input]) if importance.numel() \
        else torch.empty(0)
    return inp_index, inp_splits, sums


def loop_conv(filters, x, inp_imp, index, kernel, nbr_imp, splits, normalize):
    """Open3D's sparse_conv definition, entry by entry, differentiable (float64)."""
    w = filters.reshape(-1, filters.shape[-2], filters.shape[-1])
    rows = []
    for m in range(splits.numel() - 1):
        acc, total = torch.zeros(w.shape[2], dtype=x.dtype), 0.0
        for e in range(int(splits[m]), int(splits[m + 1])):
            a = float(nbr_imp[e]) if nbr_imp.numel() else 1.0
            b = float(inp_imp[int(index[e])]) if inp_imp.numel() else 1.0
            acc = acc + (x[int(index[e])] * a * b) @ w[int(kernel[e])]
            total += a
        rows.append(acc / total if normalize and total != 0 else acc)
    return torch.stack(rows)


def loop_conv_transpose(filters, out_imp, x, inp_sum, inp_splits, index, kernel, nbr_imp, splits, normalize):
    w = filters.reshape(-1, filters.shape[-2], filters.shape[-1])
    counts = (inp_splits[1:] - inp_splits[:-1]).tolist()
    rows = []
    for m in range(splits.numel() - 1):
        acc = torch.zeros(w.shape[2], dtype=x.dtype)
        for e in range(int(splits[m]), int(splits[m + 1])):
            i = int(index[e])
            a = float(nbr_imp[e]) if nbr_imp.numel() else 1.0
            n = (float(inp_sum[i]) if nbr_imp.numel() else counts[i]) if normalize else 1.0
            acc = acc + (x[i] * a / (n if n != 0 else 1.0)) @ w[int(kernel[e])]
        rows.append(acc * (float(out_imp[m]) if out_imp.numel() else 1.0))
    return torch.stack(rows)


def csr_case(seed, duplicates=False, dtype=FLOAT):
    g = torch.Generator().manual_seed(seed)
    index, kernel, splits = random_lists(seed, duplicates=duplicates)
    n, m = 11, splits.numel() - 1
    filters = torch.randn(2, 2, 2, 3, 4, generator=g).to(dtype)
    x = torch.randn(n, 3, generator=g).to(dtype)
    inp_imp = (torch.rand(n, generator=g) + 0.5).to(dtype)
    nbr_imp = (torch.rand(index.numel(), generator=g) + 0.5).to(dtype)
    out_imp = (torch.rand(m, generator=g) + 0.5).to(dtype)
    return filters, x, inp_imp, index, kernel, nbr_imp, splits, out_imp


def run(fn, filters, x, *args, **kwargs):
    """fn's output and its filter and feature gradients for a fixed upstream gradient."""
    f, xx = filters.clone().requires_grad_(), x.clone().requires_grad_()
    out = fn(f, xx, *args, **kwargs)
    upstream = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)
    out.backward(upstream)
    return out.detach(), f.grad, xx.grad


EMPTY = torch.empty(0)
FLAGS = list(itertools.product([False, True], [False, True], [False, True]))


def conv_args(case, use_inp, use_nbr):
    filters, x, inp_imp, index, kernel, nbr_imp, splits, _ = case
    return (inp_imp if use_inp else EMPTY, index, kernel, nbr_imp if use_nbr else EMPTY, splits)


def call_conv(lib):
    return lambda f, x, *a, **k: lib.sparse_conv(f, x, *a, **k)


def transpose_args(case, use_out, use_nbr):
    filters, x, _, index, kernel, nbr_imp, splits, out_imp = case
    used = nbr_imp if use_nbr else EMPTY
    inp_index, inp_splits, sums = inverse_lists(index, splits, used, x.shape[0])
    return out_imp if use_out else EMPTY, inp_index, sums, inp_splits, index, kernel, used, splits


def call_transpose(lib):
    return lambda f, x, out_imp, *a, **k: lib.sparse_conv_transpose(f, out_imp, x, *a, **k)


@pytest.mark.parametrize("use_inp,use_nbr,normalize", FLAGS)
def test_sparse_conv_matches_open3d(use_inp, use_nbr, normalize):
    ml3d = oracle()
    case = csr_case(1)
    args = conv_args(case, use_inp, use_nbr)
    want = run(call_conv(ml3d.ops), case[0], case[1], *args, normalize=normalize)
    got = run(call_conv(mo.ops), case[0], case[1], *args, normalize=normalize)
    for a, b in zip(got, want):
        assert rel_err(a, b) < 1e-5


@pytest.mark.parametrize("use_out,use_nbr,normalize", FLAGS)
def test_sparse_conv_transpose_matches_open3d(use_out, use_nbr, normalize):
    ml3d = oracle()
    case = csr_case(2)
    args = transpose_args(case, use_out, use_nbr)
    want = run(call_transpose(ml3d.ops), case[0], case[1], *args, normalize=normalize)
    got = run(call_transpose(mo.ops), case[0], case[1], *args, normalize=normalize)
    for a, b in zip(got, want):
        assert rel_err(a, b) < 1e-5


def test_backprop_filter_ops_match_open3d_autograd():
    ml3d = oracle()
    filters, x, inp_imp, index, kernel, nbr_imp, splits, out_imp = csr_case(3)
    grad = torch.randn(splits.numel() - 1, 4)
    f = filters.clone().requires_grad_()
    ml3d.ops.sparse_conv(f, x, inp_imp, index, kernel, nbr_imp, splits, normalize=True).backward(grad)
    got = mo.sparse_conv_backprop_filter(filters, x, inp_imp, index, kernel, nbr_imp, splits, grad, normalize=True)
    assert got.shape == filters.shape and rel_err(got, f.grad) < 1e-5
    inp_index, inp_splits, sums = inverse_lists(index, splits, nbr_imp, x.shape[0])
    f = filters.clone().requires_grad_()
    ml3d.ops.sparse_conv_transpose(f, out_imp, x, inp_index, sums, inp_splits, index, kernel, nbr_imp, splits,
                                   normalize=True).backward(grad)
    got = mo.sparse_conv_transpose_backprop_filter(filters, out_imp, x, sums, inp_splits, index, kernel, nbr_imp,
                                                   splits, grad, normalize=True)
    assert rel_err(got, f.grad) < 1e-5


@pytest.mark.parametrize("duplicates", [False, True])
@pytest.mark.parametrize("use_inp,use_nbr,normalize", FLAGS)
def test_sparse_conv_matches_its_definition(duplicates, use_inp, use_nbr, normalize):
    """Without Open3D, in float64 where the path has it. With ``duplicates`` a list names one
    filter element twice for one output: Open3D's backward keeps one of the two there, the
    reference (and mx_sparse) sums both."""
    dtype = torch.float32 if npu_path() else torch.float64
    case = csr_case(4, duplicates=duplicates, dtype=dtype)
    args = conv_args(case, use_inp, use_nbr)
    want = run(lambda f, x, *a, **k: loop_conv(f, x, *a, **k), case[0], case[1], *args, normalize=normalize)
    got = run(call_conv(mo.ops), case[0], case[1], *args, normalize=normalize)
    for a, b in zip(got, want):
        assert rel_err(a, b) < (1e-5 if dtype == torch.float32 else 1e-12)


@pytest.mark.parametrize("use_out,use_nbr,normalize", FLAGS)
def test_sparse_conv_transpose_matches_its_definition(use_out, use_nbr, normalize):
    dtype = torch.float32 if npu_path() else torch.float64
    case = csr_case(5, duplicates=True, dtype=dtype)
    args = transpose_args(case, use_out, use_nbr)
    want = run(lambda f, x, o, ii, s, isp, *a, **k: loop_conv_transpose(f, o, x, s, isp, *a, **k),
               case[0], case[1], *args, normalize=normalize)
    got = run(call_transpose(mo.ops), case[0], case[1], *args, normalize=normalize)
    for a, b in zip(got, want):
        assert rel_err(a, b) < (1e-5 if dtype == torch.float32 else 1e-12)


def npu_path():
    from mx_sparse._accelerator import registration
    return registration.npu_on_cpu_requested()


# ---------------------------------------------------------------- layers on point positions

def cloud(seed, n, extent, voxel_size, phase=0.5):
    g = torch.Generator().manual_seed(seed)
    cells = torch.unique(torch.randint(0, extent, (n, 3), generator=g), dim=0)
    return ((cells.double() + phase) * voxel_size).to(FLOAT)


def brute_force(layer, x, inp, out, voxel_size, importance):
    """The layer by definition: input i reaches output o with filter element (z, y, x) =
    rel + (ks-1)/2 + offset, rel = (in - out) / voxel_size (conv) or (out - in) / voxel_size
    (transposed), as Open3D's search with its nearest-neighbour filter lookup does on a grid."""
    ks = layer.kernel_size[0]
    pad = ((ks - 1) / 2 + layer.offset.double()).flip(0)
    w = layer.kernel.double().reshape(ks ** 3, x.shape[1], -1)
    pairs = []
    for o in range(out.shape[0]):
        for i in range(inp.shape[0]):
            rel = torch.round(((inp[i] - out[o]) if not layer.transposed else (out[o] - inp[i])).double()
                              / voxel_size).flip(0)
            k = rel + pad
            if bool(((k >= 0) & (k < ks)).all()):
                k = k.long()
                pairs.append((o, i, int(k[0] * ks * ks + k[1] * ks + k[2])))
    fan = torch.zeros(inp.shape[0], dtype=torch.float64)
    for _, i, _ in pairs:
        fan[i] += 1
    y = torch.zeros(out.shape[0], w.shape[2], dtype=torch.float64)
    count = torch.zeros(out.shape[0], dtype=torch.float64)
    for o, i, k in pairs:
        f = x[i].double()
        if not layer.transposed and importance is not None:
            f = f * float(importance[i])
        if layer.transposed and layer.normalize:
            f = f / fan[i]
        y[o] += f @ w[k]
        count[o] += 1
    if layer.normalize and not layer.transposed:
        y = y / count.clamp_min(1)[:, None]
    if layer.transposed and importance is not None:
        y = y * importance.double()[:, None]
    return y + layer.bias.double()


LAYER_CASES = [(t, ks, off, norm, imp) for t in (False, True) for ks in (1, 2, 3, 4) for off in ("default", "shifted")
               for norm in (False, True) for imp in (False, True)]


def layer_pair(ml3d, transposed, ks, offset, normalize):
    if offset == "default":
        off = None
    else:
        off = torch.tensor([1.0, 0.0, -1.0]) if ks % 2 else torch.tensor([0.5, -0.5, -1.5])
    kwargs = dict(in_channels=3, filters=4, kernel_size=[ks] * 3, normalize=normalize, offset=off)
    ours = (mo.SparseConvTranspose if transposed else mo.SparseConv)(**kwargs)
    torch.nn.init.normal_(ours.bias)
    theirs = None
    if ml3d is not None:
        theirs = (ml3d.layers.SparseConvTranspose if transposed else ml3d.layers.SparseConv)(**kwargs)
        theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def layer_inputs(seed, transposed):
    voxel_size = 0.3
    inp, out = cloud(seed, 50, 6, voxel_size), cloud(seed + 100, 35, 6, voxel_size)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(inp.shape[0], 3, generator=g)
    importance = torch.rand((out if transposed else inp).shape[0], generator=g) + 0.5
    return x, inp, out, voxel_size, importance


def run_layer(layer, x, inp, out, voxel_size, importance):
    xx = x.clone().requires_grad_()
    layer.zero_grad()
    key = "out_importance" if layer.__class__.__name__ == "SparseConvTranspose" else "inp_importance"
    y = layer(xx, inp, out, voxel_size, **({key: importance} if importance is not None else {}))
    y.backward(torch.linspace(-1, 1, y.numel()).reshape(y.shape))
    return y.detach(), xx.grad, layer.kernel.grad, layer.bias.grad


@pytest.mark.parametrize("transposed,ks,offset,normalize,importance", LAYER_CASES)
def test_layers_match_open3d(transposed, ks, offset, normalize, importance):
    ml3d = oracle()
    ours, theirs = layer_pair(ml3d, transposed, ks, offset, normalize)
    x, inp, out, voxel_size, imp = layer_inputs(ks, transposed)
    imp = imp if importance else None
    for a, b in zip(run_layer(ours, x, inp, out, voxel_size, imp), run_layer(theirs, x, inp, out, voxel_size, imp)):
        assert rel_err(a, b) < 1e-5


@pytest.mark.parametrize("transposed,ks,offset,normalize,importance",
                         [c for c in LAYER_CASES if c[1] in (2, 3)])
def test_layers_match_the_brute_force_definition(transposed, ks, offset, normalize, importance):
    ours, _ = layer_pair(None, transposed, ks, offset, normalize)
    x, inp, out, voxel_size, imp = layer_inputs(ks + 10, transposed)
    imp = imp if importance else None
    got = ours(x, inp, out, voxel_size, **({("out_importance" if transposed else "inp_importance"): imp}
                                            if importance else {}))
    assert rel_err(got, brute_force(ours, x, inp, out, voxel_size, imp)) < 1e-5


def test_open3d_state_dict_loads_unchanged():
    ml3d = oracle()
    theirs = ml3d.layers.SparseConv(in_channels=2, filters=5, kernel_size=[2, 2, 2])
    ours = mo.SparseConv(in_channels=2, filters=5, kernel_size=[2, 2, 2])
    state = theirs.state_dict()
    assert {k: tuple(v.shape) for k, v in state.items()} == {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    ours.load_state_dict(state)
    assert torch.equal(ours.kernel, theirs.kernel) and torch.equal(ours.offset, theirs.offset)


def test_layer_parameters_have_open3ds_names_and_shapes():
    layer = mo.SparseConvTranspose(in_channels=2, filters=5, kernel_size=[4, 4, 4])
    assert {k: tuple(v.shape) for k, v in layer.state_dict().items()} == \
        {"kernel": (4, 4, 4, 2, 5), "bias": (5,), "offset": (3,)}
    assert layer.offset.tolist() == [-0.5, -0.5, -0.5]
    assert not hasattr(mo.SparseConv(2, 5, [3, 3, 3], use_bias=False), "bias")


def test_outputs_sharing_a_voxel_get_the_same_result():
    layer = mo.SparseConv(in_channels=3, filters=4, kernel_size=[3, 3, 3])
    x, inp, out, voxel_size, _ = layer_inputs(1, False)
    twice = torch.cat([out, out[:5]])
    y = layer(x, inp, twice, voxel_size)
    assert torch.equal(y[-5:], y[:5])


# ---------------------------------------------------------------- bad input

def test_importance_of_the_wrong_length_is_named():
    filters, x, inp_imp, index, kernel, nbr_imp, splits, out_imp = csr_case(6)
    with pytest.raises(ValueError, match=r"inp_importance: expected shape \[11\]"):
        mo.sparse_conv(filters, x, inp_imp[:-1], index, kernel, nbr_imp, splits)
    with pytest.raises(ValueError, match=r"neighbors_importance: expected shape"):
        mo.sparse_conv(filters, x, inp_imp, index, kernel, nbr_imp[:-1], splits)
    layer = mo.SparseConv(in_channels=3, filters=4, kernel_size=[3, 3, 3])
    xx, inp, out, voxel_size, imp = layer_inputs(2, False)
    with pytest.raises(ValueError, match=r"inp_importance: expected shape"):
        layer(xx, inp, out, voxel_size, inp_importance=imp[:-1])
    with pytest.raises(ValueError, match=r"out_importance: expected shape"):
        mo.SparseConvTranspose(3, 4, [3, 3, 3])(xx, inp, out, voxel_size, out_importance=torch.ones(2))


@pytest.mark.parametrize("change,message", [
    (lambda a: a.update(neighbors_kernel_index=a["neighbors_kernel_index"] + 8), r"neighbors_kernel_index: expected values in \[0, 8\)"),
    (lambda a: a.update(neighbors_index=a["neighbors_index"] + 11), r"neighbors_index: expected values in \[0, 11\)"),
    (lambda a: a.update(neighbors_row_splits=a["neighbors_row_splits"][:-1]), r"neighbors_row_splits: expected a non-decreasing"),
    (lambda a: a.update(neighbors_index=a["neighbors_index"].float()), r"neighbors_index: expected a 1-D integer"),
    (lambda a: a.update(inp_features=a["inp_features"][:, :2]), r"inp_features: expected 3 channels"),
])
def test_bad_lists_are_named(change, message):
    filters, x, inp_imp, index, kernel, nbr_imp, splits, _ = csr_case(7)
    args = dict(filters=filters, inp_features=x, inp_importance=inp_imp, neighbors_index=index,
                neighbors_kernel_index=kernel, neighbors_importance=nbr_imp, neighbors_row_splits=splits)
    change(args)
    with pytest.raises(ValueError, match=message):
        mo.sparse_conv(**args)


def test_transpose_importance_sum_must_come_with_importance():
    filters, x, _, index, kernel, nbr_imp, splits, _ = csr_case(8)
    inp_index, inp_splits, sums = inverse_lists(index, splits, nbr_imp, x.shape[0])
    with pytest.raises(ValueError, match="inp_neighbors_importance_sum: expected one value per row"):
        mo.sparse_conv_transpose(filters, EMPTY, x, inp_index, EMPTY, inp_splits, index, kernel, nbr_imp, splits,
                                 normalize=True)
    with pytest.raises(ValueError, match="inp_neighbors_importance_sum: expected a zero-length tensor"):
        mo.sparse_conv_transpose(filters, EMPTY, x, inp_index, sums, inp_splits, index, kernel, EMPTY, splits)


def test_bad_layer_arguments_are_named():
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['strides'\]"):
        mo.SparseConv(in_channels=3, filters=4, kernel_size=[3, 3, 3], strides=2)
    with pytest.raises(ValueError, match="kernel_size: expected a cubic kernel"):
        mo.SparseConv(in_channels=3, filters=4, kernel_size=[3, 3, 1])
    with pytest.raises(ValueError, match="offset: expected .* an integer"):
        mo.SparseConv(in_channels=3, filters=4, kernel_size=[3, 3, 3], offset=torch.tensor([0.25, 0.0, 0.0]))
    layer = mo.SparseConv(in_channels=3, filters=4, kernel_size=[3, 3, 3])
    x, inp, out, voxel_size, _ = layer_inputs(3, False)
    off_grid = out.clone()
    off_grid[2, 1] += 0.3 * voxel_size
    with pytest.raises(ValueError, match="out_positions: expected points on the voxel grid.*row 2"):
        layer(x, inp, off_grid, voxel_size)
    with pytest.raises(ValueError, match="inp_positions: expected points in distinct voxels"):
        layer(torch.cat([x, x[:1]]), torch.cat([inp, inp[:1]]), out, voxel_size)
    with pytest.raises(ValueError, match="voxel_size: expected a positive scalar"):
        layer(x, inp, out, 0.0)
    with pytest.raises(ValueError, match="fixed_radius_search_hash_table: expected None"):
        layer(x, inp, out, voxel_size, fixed_radius_search_hash_table=object())
    with pytest.raises(ValueError, match=r"inp_features: expected a tensor \[num_points, 3\]"):
        layer(x[:, :2], inp, out, voxel_size)
