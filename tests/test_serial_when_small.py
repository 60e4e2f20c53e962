"""Small map ops run on the calling thread (kernels/cpu/serial_when_small.h): the thread count
torch was set to comes back afterwards, also after an error, and below and above the
16,384-row threshold the maps equal the 1-thread maps bit for bit."""
import pytest
import torch

import mx_sparse  # noqa: F401  (loads the ops)

OPS = torch.ops.mx_sparse


def cloud(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    xyz = torch.stack([torch.randint(0, s, (3 * n,), generator=g) for s in (41, 400, 352)], 1)
    xyz = torch.unique(xyz, dim=0)[:n]
    return torch.cat([torch.zeros(len(xyz), 1, dtype=torch.long), xyz], 1).int().contiguous()


def maps(idx):
    subm = OPS.build_subm_map(idx, [41, 400, 352], 1, [3, 3, 3], [1, 1, 1])
    out, conv, _ = OPS.build_conv_map(idx, [41, 400, 352], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], None)
    return subm, out, conv, OPS.transpose_map(conv, idx.shape[0])


def with_threads(n, fn):
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn(), torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("n", [1000, 20000])
def test_maps_bitwise_and_thread_count_restored(n):
    idx = cloud(n)
    one, _ = with_threads(1, lambda: maps(idx))
    two, after = with_threads(2, lambda: maps(idx))
    assert after == 2
    for a, b in zip(one, two):
        assert torch.equal(a, b)


def test_thread_count_restored_after_an_error():
    idx = cloud(100)
    bad = idx.clone()
    bad[0, 1] = 41   # outside the grid

    def call():
        with pytest.raises(ValueError):
            OPS.build_subm_map(bad, [41, 400, 352], 1, [3, 3, 3], [1, 1, 1])
    _, after = with_threads(2, call)
    assert after == 2


@pytest.mark.parametrize("n", [1000, 20000])
def test_batch_norm_relu_bitwise_and_thread_count_restored(n):
    g = torch.Generator().manual_seed(n)
    x, dy = torch.randn(n, 32, generator=g), torch.randn(n, 32, generator=g)
    w, b = torch.rand(32, generator=g) + 0.5, torch.randn(32, generator=g)

    def step():
        y, mean, invstd, scale, shift = OPS.batch_norm_relu_forward(x, w, b, None, None, True, 0.1, 1e-5)
        return (y, *OPS.batch_norm_relu_backward(dy, x, mean, invstd, w, scale, shift, True))
    one, _ = with_threads(1, step)
    two, after = with_threads(2, step)
    assert after == 2
    for a, c in zip(one, two):
        assert torch.equal(a, c)
