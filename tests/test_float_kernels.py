"""float32 compute primitives (the AVX-512 kernels where the CPU has them) against
float64 sums, over channel counts that reach every register-tile path: output
columns in 64-wide strips (6 rows x 4 vectors) with and without a masked tail,
32- and 16-wide remainders (14 rows x 2 or 1 vectors), gather_mm's pair-packed
path for at most 32 output channels per group (odd and even input channels), the
weight gradient's row-pair path for at most 16, and input channel counts that
leave every row-tail size of the weight-gradient tiles (whose rows are the input
channels)."""
import pytest
import torch

import mx_sparse  # noqa: F401  (loads the ops)
from pair_reference import filter_reference, gather_mm_reference, random_map

COUT = [1, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 96, 100, 130]
CIN = [1, 3, 6, 7, 13, 14, 15, 29, 64]


def randn(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def assert_float_close(actual, expected):
    assert actual.dtype == torch.float32
    scale = max(1.0, expected.abs().max().item())
    torch.testing.assert_close(actual.double(), expected, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("cout", COUT)
@pytest.mark.parametrize("cin", [3, 14, 64])
def test_gather_mm_float32_against_float64(cin, cout):
    # 257 output rows, density 0.3: offsets hold differing row counts, so the
    # compacted rows end in every row-tail size of a tile
    n_in, m, kvol = 300, 257, 27
    x, w = randn((n_in, cin), 1), randn((kvol, cin, cout), 2)
    nbr = random_map(m, n_in, kvol, 0.3, 3)
    assert_float_close(torch.ops.mx_sparse.gather_mm(x, w, nbr, nbr, 1), gather_mm_reference(x, w, nbr, 1))


@pytest.mark.parametrize("cin", CIN)
@pytest.mark.parametrize("cout", [16, 20, 32, 33, 64, 100])
def test_backprop_filter_float32_against_float64(cin, cout):
    # 2500 output rows: two row blocks (2048 and a tail), each offset its own work item,
    # about 1840 pairs per column of the first block: slices of 256 and a tail
    n_in, m, kvol = 400, 2500, 3
    x, grad = randn((n_in, cin), 4), randn((m, cout), 5)
    nbr = random_map(m, n_in, kvol, 0.9, 6)
    dw = torch.ops.mx_sparse.gather_mm_backprop_filter(x, grad, nbr, nbr, 1)
    assert dw.shape == (kvol, cin, cout)
    assert_float_close(dw, filter_reference(x, grad, nbr, 1))


@pytest.mark.parametrize("m,cin,cout,kvol", [(40000, 4, 16, 3), (6000, 128, 128, 27)])
def test_backprop_filter_row_blocks_against_float64(m, cin, cout, kvol):
    # 40000 rows: 20 blocks in one wave, enough items without cutting the offsets into
    # groups; 128 x 128 x 27: 1.7 MiB of partials per block, so its 6 blocks of 1024 rows
    # run in two waves (at most 8 MiB of partials at once)
    x, grad = randn((3000, cin), 11), randn((m, cout), 12)
    nbr = random_map(m, 3000, kvol, 0.3, 13)
    assert_float_close(torch.ops.mx_sparse.gather_mm_backprop_filter(x, grad, nbr, nbr, 1),
                       filter_reference(x, grad, nbr, 1))


@pytest.mark.parametrize("cin,cout,groups", [(8, 130, 2), (128, 96, 4), (14, 66, 2), (6, 20, 2), (10, 64, 2)])
def test_grouped_float32_against_float64(cin, cout, groups):
    n_in, m, kvol = 300, 600, 27
    x = randn((n_in, cin), 7)
    nbr = random_map(m, n_in, kvol, 0.3, 8)
    w = randn((kvol, cin // groups, cout), 9)
    assert_float_close(torch.ops.mx_sparse.gather_mm(x, w, nbr, nbr, groups), gather_mm_reference(x, w, nbr, groups))
    grad = randn((m, cout), 10)
    assert_float_close(torch.ops.mx_sparse.gather_mm_backprop_filter(x, grad, nbr, nbr, groups),
                       filter_reference(x, grad, nbr, groups))



# float64: the same AVX-512 templates with 8 lanes per vector, so the strips are 32, 16 and 8
# columns wide; COUT_F64 reaches every one with and without a masked tail.
COUT_F64 = [1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 64, 65, 100]


def assert_double_close(actual, expected):
    assert actual.dtype == torch.float64
    scale = max(1.0, expected.abs().max().item())
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("cout", COUT_F64)
@pytest.mark.parametrize("cin", [3, 14, 64])
def test_gather_mm_float64_against_reference(cin, cout):
    n_in, m, kvol = 300, 257, 27
    x, w = randn((n_in, cin), 1).double(), randn((kvol, cin, cout), 2).double()
    nbr = random_map(m, n_in, kvol, 0.3, 3)
    assert_double_close(torch.ops.mx_sparse.gather_mm(x, w, nbr, nbr, 1), gather_mm_reference(x, w, nbr, 1))


@pytest.mark.parametrize("cin", CIN)
@pytest.mark.parametrize("cout", [8, 16, 20, 32, 33, 64, 100])
def test_backprop_filter_float64_against_reference(cin, cout):
    n_in, m, kvol = 400, 2500, 3
    x, grad = randn((n_in, cin), 4).double(), randn((m, cout), 5).double()
    nbr = random_map(m, n_in, kvol, 0.9, 6)
    assert_double_close(torch.ops.mx_sparse.gather_mm_backprop_filter(x, grad, nbr, nbr, 1),
                        filter_reference(x, grad, nbr, 1))


def test_grouped_float64_against_reference():
    n_in, m, kvol, cin, cout, groups = 300, 600, 27, 14, 66, 2
    x, nbr = randn((n_in, cin), 7).double(), random_map(m, n_in, kvol, 0.3, 8)
    w, grad = randn((kvol, cin // groups, cout), 9).double(), randn((m, cout), 10).double()
    assert_double_close(torch.ops.mx_sparse.gather_mm(x, w, nbr, nbr, groups), gather_mm_reference(x, w, nbr, groups))
    assert_double_close(torch.ops.mx_sparse.gather_mm_backprop_filter(x, grad, nbr, nbr, groups),
                        filter_reference(x, grad, nbr, groups))


def shifted(t, elements):
    """t's values in a buffer starting `elements` past an allocation (another alignment)."""
    buf = torch.empty(t.numel() + elements, dtype=t.dtype)
    out = buf[elements:].view(t.shape)
    out.copy_(t)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernels_bitwise_across_threads_runs_and_alignments(dtype):
    """Deterministic = bitwise equal across runs, thread counts and buffer alignments: large
    enough calls (~8,000 rows, 64 channels) that both ops split their work over threads."""
    n_in, m, kvol, cin, cout = 8000, 8000, 27, 32, 64
    x, w = randn((n_in, cin), 21).to(dtype), randn((kvol, cin, cout), 22).to(dtype)
    grad, nbr = randn((m, cout), 23).to(dtype), random_map(m, n_in, kvol, 0.25, 24)
    previous = torch.get_num_threads()
    results = []
    try:
        for threads, shift in ((1, 0), (2, 0), (2, 0), (2, 1), (1, 3), (2, 5)):
            torch.set_num_threads(threads)
            xs, ws, gs = shifted(x, shift), shifted(w, shift), shifted(grad, shift)
            results.append((torch.ops.mx_sparse.gather_mm(xs, ws, nbr, nbr, 1),
                            torch.ops.mx_sparse.gather_mm_backprop_filter(xs, gs, nbr, nbr, 1)))
    finally:
        torch.set_num_threads(previous)
    for out, dw in results[1:]:
        assert torch.equal(out, results[0][0]) and torch.equal(dw, results[0][1])
