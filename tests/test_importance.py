"""Normalisation and importance weights of the core (mx_sparse/functional/importance.py,
``functional.weighted_gather_mm``) against a loop over the map written from the definition, and
float64 gradcheck of features, weight and every importance. Through the CUDA and NPU paths
(MXS_CUDA_ON_CPU=1 / MXS_NPU_ON_CPU=1, tests/cuda/test_cuda_on_cpu.py and
tests/ascend/test_npu_on_cpu.py) the same file runs in float32 there (no float64 on the NPU)."""
import pytest
import torch

from mx_sparse import functional as F
from mx_sparse._accelerator import registration

ON_NPU_PATH = registration.npu_on_cpu_requested()
DTYPE = torch.float32 if ON_NPU_PATH else torch.float64
TOL = dict(rtol=1e-5, atol=1e-5) if DTYPE == torch.float32 else dict(rtol=1e-10, atol=1e-10)
N, M, K, CIN, COUT = 9, 7, 5, 3, 2


def valid_map(seed, n=N, m=M, k=K, holes=0.3):
    """A map of gather_mm's contract: each (input, offset) named at most once."""
    g = torch.Generator().manual_seed(seed)
    nbr = torch.stack([torch.randperm(n, generator=g)[:m] for _ in range(k)], 1).to(torch.int32)
    nbr[torch.rand(m, k, generator=g) < holes] = -1
    return nbr


def inputs(seed=0, groups=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, CIN * groups, generator=g, dtype=torch.float64).to(DTYPE)
    w = torch.randn(K, CIN, COUT * groups, generator=g, dtype=torch.float64).to(DTYPE)
    imp = dict(inp_importance=(torch.rand(N, generator=g, dtype=torch.float64) + 0.5).to(DTYPE),
               nbr_importance=torch.randn(M, K, generator=g, dtype=torch.float64).to(DTYPE),
               out_importance=torch.randn(M, generator=g, dtype=torch.float64).to(DTYPE))
    return x, w, imp


def reference(x, w, nbr, groups=1, inp_importance=None, nbr_importance=None, out_importance=None, normalize=False):
    """The definition, one pair at a time (float64)."""
    x, w = x.double(), w.double()
    pair = [[0.0 if nbr[m, k] < 0 else (1.0 if nbr_importance is None else float(nbr_importance[m, k]))
             for k in range(nbr.shape[1])] for m in range(nbr.shape[0])]
    fan = [0.0] * x.shape[0]
    for m in range(nbr.shape[0]):
        for k in range(nbr.shape[1]):
            if nbr[m, k] >= 0:
                fan[int(nbr[m, k])] += pair[m][k]
    cin, cout = w.shape[1], w.shape[2] // groups
    out = torch.zeros(nbr.shape[0], w.shape[2], dtype=torch.float64)
    for m in range(nbr.shape[0]):
        for k in range(nbr.shape[1]):
            i = int(nbr[m, k])
            if i < 0:
                continue
            f = x[i] * pair[m][k] * (1.0 if inp_importance is None else float(inp_importance[i]))
            if normalize == "input" and fan[i] != 0:
                f = f / fan[i]
            for gr in range(groups):
                out[m, gr * cout:(gr + 1) * cout] += f[gr * cin:(gr + 1) * cin] @ w[k, :, gr * cout:(gr + 1) * cout]
        total = sum(pair[m])
        if normalize in (True, "output") and total != 0:
            out[m] /= total
        if out_importance is not None:
            out[m] *= float(out_importance[m])
    return out


USES = [(), ("inp_importance",), ("nbr_importance",), ("out_importance",),
        ("inp_importance", "nbr_importance", "out_importance")]


@pytest.mark.parametrize("normalize", [False, True, "input"])
@pytest.mark.parametrize("use", USES, ids=lambda u: "+".join(u) or "plain")
def test_forward_matches_the_definition(normalize, use):
    x, w, imp = inputs()
    nbr = valid_map(1)
    chosen = {name: imp[name] for name in use}
    got = F.weighted_gather_mm(x, w, nbr, None, 1, normalize=normalize, **chosen)
    torch.testing.assert_close(got.double(), reference(x, w, nbr, normalize=normalize, **chosen), **TOL)


def test_groups_and_zero_sum_rows():
    """groups=2; a row whose neighbour importances sum to zero stays undivided (Open3D's rule)."""
    x, w, imp = inputs(seed=3, groups=2)
    nbr = valid_map(4)
    ni = imp["nbr_importance"].clone()
    row = int((nbr >= 0).sum(1).argmax())
    cols = (nbr[row] >= 0).nonzero().flatten()
    ni[row, cols] = 0
    ni[row, cols[0]], ni[row, cols[1]] = 1.5, -1.5
    got = F.weighted_gather_mm(x, w, nbr, None, 2, nbr_importance=ni, normalize=True)
    want = reference(x, w, nbr, groups=2, nbr_importance=ni, normalize=True)
    torch.testing.assert_close(got.double(), want, **TOL)
    assert want[row].abs().sum() > 0


def test_without_weights_it_is_gather_mm():
    x, w, _ = inputs()
    nbr = valid_map(2)
    torch.testing.assert_close(F.weighted_gather_mm(x, w, nbr), F.gather_mm(x, w, nbr, None), rtol=0, atol=0)


@pytest.mark.skipif(DTYPE != torch.float64, reason="float64 gradcheck: no float64 on the NPU path")
@pytest.mark.parametrize("normalize", [False, True, "input"])
def test_gradcheck_every_argument(normalize):
    x, w, imp = inputs(seed=5)
    nbr = valid_map(6)
    leaves = [t.clone().requires_grad_() for t in (x, w, imp["inp_importance"], imp["nbr_importance"],
                                                   imp["out_importance"])]

    def f(x, w, ii, ni, oi):
        return F.weighted_gather_mm(x, w, nbr, None, 1, inp_importance=ii, nbr_importance=ni, out_importance=oi,
                                    normalize=normalize)
    assert torch.autograd.gradcheck(f, leaves)
    assert torch.autograd.gradcheck(lambda x, w, ii: F.weighted_gather_mm(x, w, nbr, inp_importance=ii,
                                                                          normalize=normalize), leaves[:3])


def test_gradients_match_the_reference_in_float32_paths():
    """The feature and weight gradients against autograd through the float64 definition (on
    every path, also where float64 gradcheck does not run)."""
    x, w, imp = inputs(seed=7)
    nbr = valid_map(8)
    xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
    out = F.weighted_gather_mm(xs, ws, nbr, None, 1, normalize=True, **imp)
    g = torch.randn(out.shape, dtype=torch.float64).to(DTYPE)
    out.backward(g)
    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
    ref = reference_autograd(xr, wr, nbr, imp)
    ref.backward(g.double())
    torch.testing.assert_close(xs.grad.double(), xr.grad, **TOL)
    torch.testing.assert_close(ws.grad.double(), wr.grad, **TOL)


def reference_autograd(x, w, nbr, imp):
    """The definition (normalize="output", all importances) in differentiable torch operations."""
    rows = []
    for m in range(nbr.shape[0]):
        acc, total = torch.zeros(w.shape[2], dtype=torch.float64), 0.0
        for k in range(nbr.shape[1]):
            i = int(nbr[m, k])
            if i >= 0:
                a = float(imp["nbr_importance"][m, k])
                acc = acc + (x[i] * a * float(imp["inp_importance"][i])) @ w[k]
                total += a
        rows.append(acc / (total if total != 0 else 1.0) * float(imp["out_importance"][m]))
    return torch.stack(rows)


@pytest.mark.parametrize("name,value,message", [
    ("inp_importance", torch.ones(N - 1), r"inp_importance: expected shape \[9\]"),
    ("out_importance", torch.ones(M + 1), r"out_importance: expected shape \[7\]"),
    ("nbr_importance", torch.ones(M, K + 1), r"nbr_importance: expected shape \[7, 5\]"),
    ("inp_importance", torch.ones(N, dtype=torch.int64), r"inp_importance: expected a floating-point"),
    ("normalize", "rows", r"normalize: expected True, False or one of"),
])
def test_bad_arguments_are_named(name, value, message):
    x, w, _ = inputs()
    with pytest.raises(ValueError, match=message):
        F.weighted_gather_mm(x, w, valid_map(0), **{name: value})


def test_unknown_argument_is_named():
    x, w, _ = inputs()
    with pytest.raises(TypeError, match="importance"):
        F.weighted_gather_mm(x, w, valid_map(0), importance=torch.ones(N))


def test_a_layer_map_with_importance():
    """On the map of a real submanifold layer (mx_sparse.SubMConv3d's geometry)."""
    g = torch.Generator().manual_seed(11)
    coords = torch.unique(torch.randint(0, 5, (30, 3), generator=g), dim=0)
    indices = torch.cat([torch.zeros(coords.shape[0], 1, dtype=torch.long), coords], 1).to(torch.int32)
    nbr = F.build_subm_map(indices, [5, 5, 5], 1, [3, 3, 3], [1, 1, 1])
    x = torch.randn(indices.shape[0], 2, generator=g, dtype=torch.float64).to(DTYPE)
    w = torch.randn(27, 2, 3, generator=g, dtype=torch.float64).to(DTYPE)
    ii = (torch.rand(indices.shape[0], generator=g, dtype=torch.float64) + 0.5).to(DTYPE)
    got = F.weighted_gather_mm(x, w, nbr, inp_importance=ii, normalize=True)
    torch.testing.assert_close(got.double(), reference(x, w, nbr, inp_importance=ii, normalize=True), **TOL)


def test_the_requested_backend_path_is_the_one_running():
    """Under MXS_CUDA_ON_CPU=1 / MXS_NPU_ON_CPU=1 (the subprocess runs of this file and
    test_open3d_surface.py) the CPU kernels of gather_mm and build_conv_map_at must be the
    accelerator orchestration, else those runs would test the C++ CPU backend a second time."""
    if not (registration.cuda_on_cpu_requested() or registration.npu_on_cpu_requested()):
        pytest.skip("the C++ CPU backend run: no switch set")
    for op in ("gather_mm", "build_conv_map_at", "transpose_map"):
        cpu = [line for line in torch._C._dispatch_dump("mx_sparse::" + op).splitlines() if line.startswith("CPU:")]
        assert cpu and "registration.py" in cpu[0], (op, cpu)


# ---------------------------------------------------------------- the core layers

def _grid(seed, shape=(5, 6, 4), batch=2):
    g = torch.Generator().manual_seed(seed)
    cells = torch.rand(batch, *shape, generator=g) < 0.35
    indices = cells.nonzero().to(torch.int32)
    x = torch.randn(indices.shape[0], 3, generator=g, dtype=torch.float64).to(DTYPE)
    imp = (torch.rand(indices.shape[0], generator=g, dtype=torch.float64) + 0.5).to(DTYPE)
    return indices, x, imp, list(shape), batch


@pytest.mark.parametrize("kind", ["subm", "strided"])
def test_core_layers_normalize_and_importance_against_dense(kind):
    """SubMConv3d / SparseConv3d(normalize=True) with inp_importance: the dense float64 conv of
    the importance-scaled features divided by the dense conv of the occupancy with a ones kernel
    (the number of contributing inputs), sampled at the output voxels, plus the bias."""
    import dense_reference as dense
    import mx_sparse
    indices, x, imp, shape, batch = _grid(21)
    if kind == "subm":
        layer = mx_sparse.SubMConv3d(3, 4, 3, normalize=True)
    else:
        layer = mx_sparse.SparseConv3d(3, 4, 3, stride=2, padding=1, normalize=True)
    layer = layer.to(DTYPE)
    torch.nn.init.normal_(layer.bias)
    out = layer(mx_sparse.SparseConvTensor(x, indices, shape, batch), inp_importance=imp)
    w = layer.weight.detach().double()
    ones_w = torch.ones(3, 3, 3, 1, 1, dtype=torch.float64)
    scaled, ones = (x * imp[:, None]).double(), torch.ones(x.shape[0], 1, dtype=torch.float64)
    if kind == "subm":
        want = dense.subm_reference(scaled, indices, shape, batch, w, None, [1] * 3, 1)
        count = dense.subm_reference(ones, indices, shape, batch, ones_w, None, [1] * 3, 1)
        where = indices
    else:
        want, where, _ = dense.conv_reference(scaled, indices, shape, batch, w, None, [2] * 3, [1] * 3, [1] * 3, 1)
        count, _, _ = dense.conv_reference(ones, indices, shape, batch, ones_w, None, [2] * 3, [1] * 3, [1] * 3, 1)
    assert torch.equal(out.indices.long(), where.long())
    torch.testing.assert_close(out.features.detach().double(), want / count + layer.bias.detach().double(), **TOL)


def test_core_layer_out_importance_and_gradient():
    import mx_sparse
    indices, x, imp, shape, batch = _grid(22)
    layer = mx_sparse.SubMConv3d(3, 2, 3, bias=False).to(DTYPE)
    t = mx_sparse.SparseConvTensor(x, indices, shape, batch)
    plain = layer(t).features
    weighted = layer(t, out_importance=imp).features
    torch.testing.assert_close(weighted, plain * imp[:, None], rtol=1e-6, atol=1e-6)
    # float64 gradcheck on the C++ CPU backend only: under Triton's interpreter its hundreds of
    # layer calls take 90 s (the op-level gradcheck above runs on every path)
    if not (registration.cuda_on_cpu_requested() or ON_NPU_PATH):
        xs = x.clone().requires_grad_()
        layer.normalize = "input"
        assert torch.autograd.gradcheck(
            lambda f: layer(mx_sparse.SparseConvTensor(f, indices, shape, batch), inp_importance=imp).features, (xs,))
    with pytest.raises(ValueError, match="normalize: expected"):
        mx_sparse.SubMConv3d(3, 2, 3, normalize="mean")
