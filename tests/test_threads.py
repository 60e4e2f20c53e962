"""Python threads: two models trained concurrently, and one eval model served from several
threads, give exactly the results of serial runs. What is shared between threads: the
module-level registries of held maps and fused-BatchNorm recipes (weak dictionaries keyed
by tensor identity), the CPU large-tensor pool (a mutex), and torch's intra-op thread pool;
per-thread: autograd's saved-tensor hooks, each input's indice_dict.
"""
import gc
import threading

import torch

import mx_sparse
from helpers import random_features, random_voxels
from mx_sparse.nn import batch_norm_relu, packed_map
from mx_sparse.models import SparseUNet, VoxelBackBone8x

SHAPE = [41, 40, 40]


def scene(seed, batch_size=2):
    idx = random_voxels(SHAPE, batch_size, density=0.012 + 0.001 * (seed % 5), seed=seed)
    return random_features(idx.shape[0], 4, torch.float32, seed=seed), idx


def new_model(seed):
    """Built before any thread starts: weight initialisation draws from torch's global RNG."""
    torch.manual_seed(seed)
    return VoxelBackBone8x(4)


def train(model, seed, steps=3, barrier=None):
    """``model`` trained on its own scenes; its parameters and buffers afterwards."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for step in range(steps):
        f, idx = scene(100 * seed + step)
        if barrier is not None:
            barrier.wait()   # both threads in the same step at the same time
        y = model(mx_sparse.SparseConvTensor(f, idx, SHAPE, 2))
        loss = y.features.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.clone() for k, v in model.state_dict().items()}


def run_threads(target, args_list):
    results, errors = [None] * len(args_list), []

    def body(i, args):
        try:
            results[i] = target(*args)
        except BaseException as e:  # noqa: BLE001  (reported by the test)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i, a)) for i, a in enumerate(args_list)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    return results


def registry_sizes():
    gc.collect()
    return len(packed_map._HOLDERS), len(batch_norm_relu._RECIPES)


def test_two_models_trained_in_two_threads_equal_serial_training():
    before = registry_sizes()
    serial = [train(new_model(1), 1), train(new_model(2), 2)]
    barrier = threading.Barrier(2)
    concurrent = run_threads(train, [(new_model(1), 1, 3, barrier), (new_model(2), 2, 3, barrier)])
    for s, c in zip(serial, concurrent):
        for k in s:
            assert torch.equal(s[k], c[k]), k
    assert not torch.equal(serial[0]["conv_input.0.weight"], serial[1]["conv_input.0.weight"])
    assert registry_sizes() == before   # nothing left behind by either thread


def serve(model, requests):
    outputs = []
    with torch.no_grad():
        for seed in requests:
            f, idx = scene(seed, batch_size=1)
            outputs.append(model(mx_sparse.SparseConvTensor(f, idx, SHAPE, 1)).features)
    return outputs


def test_one_eval_model_served_from_four_threads_equals_serial():
    torch.manual_seed(0)
    model = SparseUNet(4).eval()   # strided, submanifold and inverse convs, indice_key reuse
    requests = [[10 * t + r for r in range(3)] for t in range(4)]
    serial = [serve(model, r) for r in requests]
    concurrent = run_threads(serve, [(model, r) for r in requests])
    for s, c in zip(serial, concurrent):
        for a, b in zip(s, c):
            assert torch.equal(a, b)


def test_eval_model_with_grad_served_from_threads():
    """The same with autograd on (maps held packed, fused BatchNorm recipes registered):
    outputs and input gradients equal serial ones."""
    torch.manual_seed(0)
    model = VoxelBackBone8x(4).eval()

    def grads(seeds):
        out = []
        for seed in seeds:
            f, idx = scene(seed, batch_size=1)
            f.requires_grad_()
            y = model(mx_sparse.SparseConvTensor(f, idx, SHAPE, 1)).features
            y.square().sum().backward()
            out += [y.detach(), f.grad]
        return out

    requests = [[7 * t + r for r in range(2)] for t in range(3)]
    serial = [grads(r) for r in requests]
    for s, c in zip(serial, run_threads(grads, [(r,) for r in requests])):
        for a, b in zip(s, c):
            assert torch.equal(a, b)
