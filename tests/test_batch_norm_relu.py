"""The fused BatchNorm1d+ReLU of SparseSequential against torch's two modules, float64
gradcheck, determinism, and the memory claim (the ReLU output is not kept for backward)."""
import copy
import gc
import weakref

import pytest
import torch
from torch import nn

import mx_sparse
from mx_sparse._accelerator import registration
from mx_sparse.nn.batch_norm_relu import batch_norm_relu, can_fuse
from helpers import random_features, random_voxels

# MXS_NPU_ON_CPU=1 (CPU tensors run the NPU path): its gather kernels have no float64 path (the
# primitive refuses it with a ValueError, as on an NPU), so the float64 convolutions these tests
# build their references with cannot run there
NPU_PATH = registration.npu_on_cpu_requested()
float64_convolutions = pytest.mark.skipif(NPU_PATH, reason="MXS_NPU_ON_CPU=1: the NPU's gather kernels take no "
                                                           "float64, these tests convolve in float64")


def make_bn(c, dtype, **kw):
    bn = nn.BatchNorm1d(c, **kw).to(dtype)
    if bn.affine:
        with torch.no_grad():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return bn


def features(n, c, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, c, generator=g, dtype=torch.float64) * 2 + 0.7).to(dtype)


TOL = {torch.float64: dict(rtol=1e-12, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-5)}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kw", [dict(), dict(momentum=None), dict(affine=False), dict(track_running_stats=False),
                                dict(eps=1e-3, momentum=0.01)])
@pytest.mark.parametrize("train", [True, False])
def test_matches_torch_modules(dtype, kw, train):
    bn = make_bn(19, dtype, **kw)
    if bn.track_running_stats:  # non-trivial running statistics for eval mode
        with torch.no_grad():
            bn(features(300, 19, dtype, seed=5))
    ref = copy.deepcopy(bn)
    bn.train(train), ref.train(train)
    for step in range(2):   # two steps: running statistics and momentum=None's counter advance
        x = features(257, 19, dtype, seed=step).requires_grad_()
        xr = x.detach().clone().requires_grad_()
        y, yr = batch_norm_relu(x, bn), torch.relu(ref(xr))
        dy = features(257, 19, dtype, seed=10 + step)
        y.backward(dy), yr.backward(dy)
        torch.testing.assert_close(y, yr, **TOL[dtype])
        torch.testing.assert_close(x.grad, xr.grad, **TOL[dtype])
        if bn.affine:
            torch.testing.assert_close(bn.weight.grad, ref.weight.grad, **TOL[dtype])
            torch.testing.assert_close(bn.bias.grad, ref.bias.grad, **TOL[dtype])
        if bn.track_running_stats:
            torch.testing.assert_close(bn.running_mean, ref.running_mean, **TOL[dtype])
            torch.testing.assert_close(bn.running_var, ref.running_var, **TOL[dtype])
            assert bn.num_batches_tracked.item() == ref.num_batches_tracked.item()


@pytest.mark.parametrize("kw", [dict(), dict(momentum=None), dict(affine=False)])
@pytest.mark.parametrize("train", [True, False])
def test_bfloat16_against_float64(kw, train):
    """bfloat16 features and parameters, computed in float32: outputs, gradients and running
    statistics against torch's modules in float64 on the same (bf16-rounded) values."""
    bn = make_bn(19, torch.bfloat16, **kw)
    with torch.no_grad():
        bn(features(300, 19, torch.bfloat16, seed=5))
    ref = copy.deepcopy(bn).double()
    bn.train(train), ref.train(train)
    x = features(257, 19, torch.bfloat16, seed=1).requires_grad_()
    xr = x.detach().double().requires_grad_()
    y, yr = batch_norm_relu(x, bn), torch.relu(ref(xr))
    assert y.dtype == torch.bfloat16 and can_fuse(bn, nn.ReLU(), x)
    dy = features(257, 19, torch.bfloat16, seed=11)
    y.backward(dy), yr.backward(dy.double())
    tol = dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(y.double(), yr, **tol)
    torch.testing.assert_close(x.grad.double(), xr.grad, **tol)
    if bn.affine:
        torch.testing.assert_close(bn.weight.grad.double(), ref.weight.grad, rtol=2e-2, atol=2e-1)
        torch.testing.assert_close(bn.bias.grad.double(), ref.bias.grad, rtol=2e-2, atol=2e-1)
    torch.testing.assert_close(bn.running_mean.double(), ref.running_mean, **tol)
    torch.testing.assert_close(bn.running_var.double(), ref.running_var, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("train", [True, False])
def test_nan_propagates_like_torch(dtype, train):
    """A NaN feature is not hidden by the ReLU: where torch's modules give NaN, so does the
    fused step (with batch statistics, the NaN's whole channel)."""
    bn = make_bn(5, dtype)
    ref = copy.deepcopy(bn)
    bn.train(train), ref.train(train)
    x = features(40, 5, dtype)
    x[3, 2] = float("nan")
    y, yr = batch_norm_relu(x, bn), torch.relu(ref(x))
    assert torch.equal(y.isnan(), yr.isnan()) and y.isnan().any()


def test_bfloat16_recompute_equals_forward_output():
    """The recipe (bf16 x, float32 scale and shift) rebuilds exactly the forward's output."""
    from mx_sparse.nn.batch_norm_relu import recipe_of
    bn = make_bn(7, torch.bfloat16)
    x = features(100, 7, torch.bfloat16).requires_grad_()
    y = batch_norm_relu(x, bn)
    recipe = recipe_of(y)
    assert recipe.scale.dtype == torch.float32
    assert torch.equal(recipe.recompute(), y)


@pytest.mark.parametrize("train", [True, False])
def test_gradcheck_float64(train):
    bn = make_bn(5, torch.float64, track_running_stats=not train)
    bn.train(train)
    if not train:
        with torch.no_grad():
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    x = features(40, 5, torch.float64).requires_grad_()
    w, b = bn.weight.detach().requires_grad_(), bn.bias.detach().requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w, b: _functional(x, w, b, bn), (x, w, b))


def _functional(x, w, b, bn):
    """batch_norm_relu with weight and bias as plain inputs (gradcheck differentiates them)."""
    clone = copy.deepcopy(bn)
    del clone.weight, clone.bias
    clone.weight, clone.bias = w, b
    return batch_norm_relu(x, clone)


@pytest.mark.skipif(NPU_PATH, reason="MXS_NPU_ON_CPU=1: the NPU path's statistics are torch operators (aclnn "
                                     "calls on an NPU), which on CPU tensors sum in an order that depends on the "
                                     "thread count; the thread-count promise is the C++ CPU kernels'")
def test_same_bits_for_any_thread_count():
    bn = make_bn(32, torch.float32)
    results = []
    for threads in (1, 2):
        old = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            b = copy.deepcopy(bn)
            x = features(5000, 32, torch.float32).requires_grad_()
            y = batch_norm_relu(x, b)
            y.backward(features(5000, 32, torch.float32, seed=3))
            results.append((y, x.grad, b.weight.grad, b.bias.grad, b.running_mean, b.running_var))
        finally:
            torch.set_num_threads(old)
    for a, b in zip(*results):
        assert torch.equal(a, b)


def block(cin, cout, key):
    return mx_sparse.SparseSequential(mx_sparse.SubMConv3d(cin, cout, 3, bias=False, indice_key=key),
                                      nn.BatchNorm1d(cout), nn.ReLU())


def sparse_input(seed=0):
    idx = random_voxels([8, 8, 8], 2, density=0.3, seed=seed)
    return mx_sparse.SparseConvTensor(random_features(idx.shape[0], 4, torch.float64), idx, [8, 8, 8], 2)


def assert_matches_unfused(monkeypatch, net, ref, y):
    """y = net(sparse_input()), fused; ref, a copy of net taken before, runs with torch's
    modules: same output and parameter gradients."""
    y.features.square().sum().backward()
    monkeypatch.setattr(mx_sparse.SparseSequential, "fuse_bn_relu", False)
    yr = ref(sparse_input())
    yr.features.square().sum().backward()
    torch.testing.assert_close(y.features, yr.features, rtol=1e-12, atol=1e-12)
    for (name, p), pr in zip(net.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, pr.grad, rtol=1e-10, atol=1e-12, msg=name)


@float64_convolutions
def test_network_gradients_match_unfused(monkeypatch):
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(block(4, 8, "a"), block(8, 8, "a"),
                                     mx_sparse.SparseConv3d(8, 6, 3, stride=2, padding=1, bias=False),
                                     nn.BatchNorm1d(6), nn.ReLU()).double()
    ref = copy.deepcopy(net)
    assert_matches_unfused(monkeypatch, net, ref, net(sparse_input()))


@float64_convolutions
def test_relu_output_is_not_kept_for_backward(monkeypatch):
    """The next convolution saves the recipe, so nothing else holds the ReLU output; with
    torch's modules the convolution keeps it alive."""
    for fused in (True, False):
        monkeypatch.setattr(mx_sparse.SparseSequential, "fuse_bn_relu", fused)
        torch.manual_seed(0)
        first, conv = block(4, 8, "a").double(), mx_sparse.SubMConv3d(8, 8, 3, indice_key="a").double()
        h = first(sparse_input())
        ref = weakref.ref(h.features)
        out = conv(h)
        del h
        gc.collect()
        assert (ref() is None) == fused
        out.features.sum().backward()   # the recomputed input gives the right weight gradient
        assert conv.weight.grad is not None


@float64_convolutions
def test_modified_output_is_saved_as_is():
    """An in-place change of the ReLU output before the conv voids the recipe: the conv
    saves the modified tensor and its gradients follow it."""
    torch.manual_seed(0)
    first, conv = block(4, 8, "a").double(), mx_sparse.SubMConv3d(8, 8, 3, indice_key="a").double()
    h = first(sparse_input())
    with torch.no_grad():
        h.features.mul_(2)
    conv(h).features.sum().backward()
    w_grad = conv.weight.grad.clone()
    conv.weight.grad = None
    detached = h.replace_feature(h.features.detach().clone())
    conv(detached).features.sum().backward()
    torch.testing.assert_close(w_grad, conv.weight.grad)


def test_double_backward_is_refused():
    bn = make_bn(3, torch.float64)
    x = features(10, 3, torch.float64).requires_grad_()
    torch.autograd.grad(batch_norm_relu(x, bn).sum(), x)   # first order works
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(batch_norm_relu(x, bn).sum(), x, create_graph=True)


@pytest.mark.parametrize("requires", ["x", "weight", "bias", "x,weight", "x,affine=False"])
def test_backward_node_is_cpp_and_gives_only_the_gradients_asked(requires):
    """The layer's node is the C++ one (kernels/schema/autograd.cpp, no Python Function per
    layer); its gradients are torch's modules' for every subset of x, weight, bias that requires
    one, and None for the others (needs_input_grad counts an absent weight and bias right)."""
    affine = "affine=False" not in requires
    bn = make_bn(7, torch.float64, affine=affine)
    ref = copy.deepcopy(bn)
    for module in (bn, ref):
        if affine:
            module.weight.requires_grad_("weight" in requires)
            module.bias.requires_grad_("bias" in requires)
    x = features(41, 7, torch.float64).requires_grad_("x" in requires)
    xr = x.detach().clone().requires_grad_("x" in requires)
    y, yr = batch_norm_relu(x, bn), torch.relu(ref(xr))
    # a Python autograd.Function's node is a BackwardCFunction subclass (_BatchNormReLUBackward before)
    assert not isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction)
    assert type(y.grad_fn).__name__ == "CppFunction" and "BatchNormRelu" in y.grad_fn.name()
    dy = features(41, 7, torch.float64, seed=3)
    y.backward(dy), yr.backward(dy)
    torch.testing.assert_close(y, yr, **TOL[torch.float64])
    pairs = [(x.grad, xr.grad)] + ([(bn.weight.grad, ref.weight.grad), (bn.bias.grad, ref.bias.grad)] if affine else [])
    for got, want in pairs:
        assert (got is None) == (want is None)
        if want is not None:
            torch.testing.assert_close(got, want, **TOL[torch.float64])
    with pytest.raises(RuntimeError, match="double backward through a fused BatchNorm1d\\+ReLU is not supported; "
                                           "set mx_sparse.SparseSequential.fuse_bn_relu = False"):
        torch.autograd.grad(batch_norm_relu(x, bn).sum(), [t for t in (x, bn.weight, bn.bias)
                                                            if t is not None and t.requires_grad], create_graph=True)


def test_one_row_in_training_is_an_error():
    with pytest.raises(ValueError, match="input: BatchNorm1d in training mode needs more than 1 value"):
        batch_norm_relu(torch.ones(1, 3), nn.BatchNorm1d(3))


def test_what_is_fused():
    x = torch.ones(4, 3)
    assert can_fuse(nn.BatchNorm1d(3), nn.ReLU(), x)
    assert not can_fuse(nn.BatchNorm1d(3), nn.LeakyReLU(), x)
    assert not can_fuse(nn.SyncBatchNorm(3), nn.ReLU(), x)
    # float16 features, and autocast's bfloat16 features with float32 parameters: fused where the
    # accelerator orchestration serves the tensors (MXS_CUDA_ON_CPU / MXS_NPU_ON_CPU here), not by
    # the C++ CPU kernels
    from mx_sparse._accelerator import registration
    accelerated = registration.orchestration_serves("cpu")
    assert can_fuse(nn.BatchNorm1d(3), nn.ReLU(), x.half()) == accelerated
    assert can_fuse(nn.BatchNorm1d(3), nn.ReLU(), x.bfloat16()) == accelerated
    assert can_fuse(nn.BatchNorm1d(3).bfloat16(), nn.ReLU(), x.bfloat16())
    assert not can_fuse(nn.BatchNorm1d(3), nn.ReLU(), x[:0])
    hooked = nn.BatchNorm1d(3)
    hooked.register_forward_hook(lambda *a: None)
    assert not can_fuse(hooked, nn.ReLU(), x)


@float64_convolutions
def test_under_torch_checkpoint(monkeypatch):
    """torch.utils.checkpoint installs its own saved-tensor hooks; they take precedence and the
    gradients stay those of torch's modules."""
    from torch.utils.checkpoint import checkpoint
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(block(4, 8, "a"), block(8, 8, "a")).double()
    ref = copy.deepcopy(net)

    def run(module, x):
        return checkpoint(lambda f: module(x.replace_feature(f)).features, x.features, use_reentrant=False)

    x = sparse_input()
    x.features.requires_grad_()
    run(net, x).square().sum().backward()
    monkeypatch.setattr(mx_sparse.SparseSequential, "fuse_bn_relu", False)
    xr = sparse_input()
    xr.features.requires_grad_()
    run(ref, xr).square().sum().backward()
    torch.testing.assert_close(x.features.grad, xr.features.grad, rtol=1e-10, atol=1e-12)
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-10, atol=1e-12)


@float64_convolutions
def test_bn_relu_in_a_residual_block(monkeypatch):
    """mx_sparse.bn_relu, as VoxelResBackBone8x's residual block calls it on x.features: the
    fused step where SparseSequential would fuse (its output carries the recompute recipe),
    torch's modules otherwise; same outputs, gradients and running statistics either way."""
    from mx_sparse.nn.batch_norm_relu import recipe_of
    from mx_sparse.models import backbones
    torch.manual_seed(0)
    net = mx_sparse.SparseSequential(block(4, 8, "a"), backbones.SparseBasicBlock(8, "a")).double()
    ref = copy.deepcopy(net)
    fused_outputs = []
    monkeypatch.setattr(backbones, "bn_relu", lambda *a: fused_outputs.append(mx_sparse.bn_relu(*a)) or fused_outputs[-1])
    y = net(sparse_input())
    assert len(fused_outputs) == 1 and recipe_of(fused_outputs[0]) is not None
    fused_outputs.clear()
    assert_matches_unfused(monkeypatch, net, ref, y)
    torch.testing.assert_close(net[1].bn1.running_var, ref[1].bn1.running_var, rtol=1e-12, atol=1e-12)

    x = features(50, 3, torch.float64)
    monkeypatch.setattr(mx_sparse.SparseSequential, "fuse_bn_relu", True)
    assert recipe_of(mx_sparse.bn_relu(x, make_bn(3, torch.float64), nn.ReLU())) is not None
    # not fusable (LeakyReLU): the modules run as they are
    leaky = mx_sparse.bn_relu(x, make_bn(3, torch.float64), nn.LeakyReLU(0.5))
    assert recipe_of(leaky) is None and (leaky < 0).any()


@float64_convolutions
def test_gradcheck_float64_through_a_convolution():
    """Finite differences of conv(relu(bn(x))): the convolution keeps the BatchNorm's input, scale
    and shift (not y) and its weight gradient applies the activation (kernels/schema/autograd.cpp);
    x's, gamma's, beta's and the weight's gradients against float64 finite differences."""
    torch.manual_seed(0)
    idx = random_voxels([4, 4, 4], 1, density=0.4, seed=3)
    bn = make_bn(3, torch.float64)
    conv = mx_sparse.SubMConv3d(3, 2, 3, bias=False, indice_key="g").double()
    net = mx_sparse.SparseSequential(bn, nn.ReLU(), conv)

    def run(f, gamma, beta, w):
        x = mx_sparse.SparseConvTensor(f, idx, [4, 4, 4], 1)
        params = {"0.weight": gamma, "0.bias": beta, "2.weight": w}
        return torch.func.functional_call(net, params, (x,)).features

    args = (random_features(idx.shape[0], 3, torch.float64).requires_grad_(),
            bn.weight.detach().clone().requires_grad_(), bn.bias.detach().clone().requires_grad_(),
            conv.weight.detach().clone().requires_grad_())
    assert torch.autograd.gradcheck(run, args, fast_mode=True)


@float64_convolutions
def test_source_modified_in_place_is_an_error():
    """The convolution after a fused BatchNorm+ReLU keeps the BatchNorm's input: written to in
    place after the forward, the backward refuses (as the recipe's check did)."""
    torch.manual_seed(0)
    first = mx_sparse.SubMConv3d(4, 8, 3, bias=False, indice_key="a").double()
    rest = mx_sparse.SparseSequential(nn.BatchNorm1d(8), nn.ReLU(),
                                      mx_sparse.SubMConv3d(8, 8, 3, indice_key="a")).double()
    h = first(sparse_input())
    out = rest(h)
    with torch.no_grad():
        h.features.add_(1)
    with pytest.raises(RuntimeError, match="modified in place"):
        out.features.sum().backward()



def test_activation_under_autocast():
    """Autocast casts features the activation does not describe: gather_mm then drops it (the
    cast features are saved, as without it), and the weight gradient of activated features that
    it casts applies the activation before the cast; the same results, bit for bit, as the ops
    given the features themselves."""
    ops = torch.ops.mx_sparse
    g = torch.Generator().manual_seed(0)
    x = torch.randn(30, 8, generator=g)
    scale, shift = torch.rand(8, generator=g) + 0.5, torch.rand(8, generator=g) - 0.5
    y = ops.scale_shift_relu(x, scale, shift)
    nbr = torch.randint(-1, 30, (20, 27), generator=g, dtype=torch.int32)
    grad = torch.randn(20, 6, generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        activated = ops.gather_mm_backprop_filter(x, grad, nbr, None, 1, False, scale, shift)
        plain = ops.gather_mm_backprop_filter(y, grad, nbr, None, 1)
    assert activated.dtype == torch.bfloat16 and torch.equal(activated, plain)
    w = torch.randn(27, 8, 6, generator=g)
    w_activated, w_plain = w.clone().requires_grad_(), w.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out_activated = ops.gather_mm(y, w_activated, nbr, None, 1, False, x, scale, shift)
        out_plain = ops.gather_mm(y, w_plain, nbr, None, 1)
    assert out_activated.dtype == torch.bfloat16 and torch.equal(out_activated, out_plain)
    out_activated.float().square().sum().backward()
    out_plain.float().square().sum().backward()
    assert torch.equal(w_activated.grad, w_plain.grad)
