"""The CUDA backend's map builders, map transpose and packed maps, executed on CPU tensors
(the very torch-operator code CUDA tensors run): bitwise equal to the CPU backend, and the
same ValueErrors for bad input."""
import itertools

import pytest
import torch

from cuda_cases import CPU, CUDA, cpu_is_cuda_path, voxels

pytestmark = cpu_is_cuda_path

SUBM = [((3, 3, 3), (1, 1, 1)), ((2, 2, 2), (1, 1, 1)), ((5, 5, 5), (1, 1, 1)), ((3, 1, 3), (2, 1, 1)),
        ((1, 1, 1), (1, 1, 1)), ((2, 3, 4), (1, 2, 1))]
CONV = [((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1)), ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1)),
        ((3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)), ((3, 1, 1), (2, 1, 1), (0, 0, 0), (1, 1, 1)),
        ((2, 3, 1), (1, 2, 3), (0, 1, 0), (2, 1, 1)), ((5, 5, 5), (2, 2, 2), (2, 2, 2), (1, 1, 1)),
        ((3, 3, 3), (2, 2, 2), (0, 0, 0), (2, 2, 2)),
        # _conv_out_keys' lattice slots where gcd(stride, dilation) > 1 and where a modular inverse is needed
        ((5, 3, 3), (4, 3, 2), (2, 1, 0), (2, 3, 1)), ((4, 2, 3), (2, 2, 3), (1, 0, 2), (1, 1, 2))]


def scene(shape=(9, 10, 11), batch=3, seed=0):
    return voxels(list(shape), batch, density=0.3, seed=seed, empty_batches=(1,))


def assert_same_conv_map(got, want):
    """(out_indices, nbr) bitwise equal, and the same output spatial shape (the third result)."""
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and list(got[2]) == list(want[2])


@pytest.mark.parametrize("kernel,dilation", SUBM)
def test_subm_map_bitwise_equal(kernel, dilation):
    idx = scene()
    args = ([9, 10, 11], 3, list(kernel), list(dilation))
    nbr = CUDA["build_subm_map"](idx, *args)
    assert torch.equal(nbr, CPU.build_subm_map(idx, *args))
    # the transpose of a map the builder made (no checks: mx_sparse/_accelerator/built_maps.py)
    assert torch.equal(CUDA["transpose_map"](nbr, idx.shape[0]), CPU.transpose_map(nbr, idx.shape[0]))


def test_built_maps_and_indices_are_checked_again_once_written():
    """What a builder vouched for (its map, checked or emitted indices) is checked again after an
    in-place write, with the CPU backend's errors."""
    idx = scene(seed=2)
    args = ([9, 10, 11], 3, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    out, nbr, _ = CUDA["build_conv_map"](idx, *args)
    first = CUDA["transpose_map"](nbr, idx.shape[0])
    assert CUDA["transpose_map"](nbr, idx.shape[0]) is first             # kept with the map
    assert CUDA["transpose_map"](nbr, idx.shape[0] + 5).shape[0] == idx.shape[0] + 5
    nbr[1, 4] = nbr[0, 4] = 0                       # input row 0 named twice at offset 4
    assert _error(lambda: CUDA["transpose_map"](nbr, idx.shape[0])) == \
        _error(lambda: CPU.transpose_map(nbr, idx.shape[0]))
    out[1] = out[0]                                 # a duplicate voxel in the emitted indices
    sub = ([5, 5, 6], 3, [3, 3, 3], [1, 1, 1])
    assert _error(lambda: CUDA["build_subm_map"](out, *sub)) == _error(lambda: CPU.build_subm_map(out, *sub))
    CUDA["build_subm_map"](idx, [9, 10, 11], 3, [3, 3, 3], [1, 1, 1])    # checked: vouched for
    idx[0, 1] = 9                                   # outside the grid
    assert _error(lambda: CUDA["build_conv_map"](idx, *args)) == _error(lambda: CPU.build_conv_map(idx, *args))


@pytest.mark.parametrize("kernel,stride,padding,dilation", CONV)
def test_conv_map_and_transpose_bitwise_equal(kernel, stride, padding, dilation):
    idx = scene(seed=1)
    args = ([9, 10, 11], 3, list(kernel), list(stride), list(padding), list(dilation))
    out_cuda, nbr_cuda, shape_cuda = CUDA["build_conv_map"](idx, *args)
    out_cpu, nbr_cpu, shape_cpu = CPU.build_conv_map(idx, *args)
    assert torch.equal(out_cuda, out_cpu) and torch.equal(nbr_cuda, nbr_cpu) and list(shape_cuda) == shape_cpu
    assert torch.equal(CUDA["transpose_map"](nbr_cuda, idx.shape[0]), CPU.transpose_map(nbr_cpu, idx.shape[0]))


@pytest.mark.parametrize("ndim", [1, 2, 4])
def test_other_ranks_bitwise_equal(ndim):
    shape = {1: [40], 2: [9, 13], 4: [4, 5, 3, 6]}[ndim]
    idx = voxels(shape, 2, density=0.3, seed=ndim)
    k, s, p, d = [3] * ndim, [2] * ndim, [1] * ndim, [1] * ndim
    assert torch.equal(CUDA["build_subm_map"](idx, shape, 2, k, d), CPU.build_subm_map(idx, shape, 2, k, d))
    conv = (shape, 2, k, s, p, d)
    assert_same_conv_map(CUDA["build_conv_map"](idx, *conv), CPU.build_conv_map(idx, *conv))


def test_huge_sparse_grid_bitwise_equal():
    """A grid of 2^40 cells per sample with a few hundred voxels: nothing proportional to the
    grid is allocated (int64 keys, sort-based)."""
    shape = [5, 6, 2 ** 20, 2 ** 20][:3]
    idx = voxels([5, 6, 7], 2, density=0.3, seed=4)
    idx[:, 3] *= 2 ** 17
    args = (shape, 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    assert_same_conv_map(CUDA["build_conv_map"](idx, *args), CPU.build_conv_map(idx, *args))
    assert torch.equal(CUDA["build_subm_map"](idx, shape, 2, [3, 3, 3], [1, 1, 1]),
                       CPU.build_subm_map(idx, shape, 2, [3, 3, 3], [1, 1, 1]))


@pytest.mark.parametrize("pads_begin,pads_end", [(2**31 - 1, 0), (0, 2**31 - 1), (2**31 - 2, 1)])
def test_asymmetric_padding_past_int32_bitwise_equal(pads_begin, pads_end):
    """Pads ~2^31 apart at stride 2: the output grid fits int32 (the CPU builder takes it), the grid
    the builder grows for _conv_out_keys' symmetric padding does not: its coordinates go in int64
    (the long fuzz found them refused)."""
    idx = torch.tensor([[0, 0], [0, 1], [0, 2], [1, 2]], dtype=torch.int32)
    args = ([3], 2, [3], [2], [pads_begin], [1], [pads_end])
    want = CPU.build_conv_map(idx, *args)
    assert want[1].numel() > 0 and (want[1] >= 0).any()
    assert_same_conv_map(CUDA["build_conv_map"](idx, *args), want)


def test_lidar_scene_maps_bitwise_equal():
    """The first layers of SECOND on a generated KITTI-like scene (cropped to keep the test
    short): submanifold map, strided map, transpose."""
    from mx_sparse import synthetic
    ind = synthetic.make_batch("kitti", batch_size=1, seed=3)["indices"]
    keep = (ind[:, 2] >= 700) & (ind[:, 2] < 900) & (ind[:, 3] < 200)
    ind = ind[keep].contiguous()
    shape = [41, 1600, 1408]
    assert ind.shape[0] > 1000
    subm = CUDA["build_subm_map"](ind, shape, 1, [3, 3, 3], [1, 1, 1])
    assert torch.equal(subm, CPU.build_subm_map(ind, shape, 1, [3, 3, 3], [1, 1, 1]))
    args = (shape, 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    (out_a, nbr_a, shape_a), (out_b, nbr_b, shape_b) = CUDA["build_conv_map"](ind, *args), \
        CPU.build_conv_map(ind, *args)
    assert torch.equal(out_a, out_b) and torch.equal(nbr_a, nbr_b) and list(shape_a) == shape_b == [21, 800, 704]
    assert torch.equal(CUDA["transpose_map"](nbr_a, ind.shape[0]), CPU.transpose_map(nbr_b, ind.shape[0]))


def test_empty_and_single_voxel():
    for idx in (torch.zeros(0, 4, dtype=torch.int32), torch.tensor([[0, 2, 2, 2]], dtype=torch.int32)):
        args = ([5, 5, 5], 1, [3, 3, 3], [1, 1, 1])
        assert torch.equal(CUDA["build_subm_map"](idx, *args), CPU.build_subm_map(idx, *args))
        cargs = ([5, 5, 5], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
        assert_same_conv_map(CUDA["build_conv_map"](idx, *cargs), CPU.build_conv_map(idx, *cargs))
    nbr = torch.full((3, 27), -1, dtype=torch.int32)
    assert torch.equal(CUDA["transpose_map"](nbr, 0), CPU.transpose_map(nbr, 0))


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_triton_map_primitives_equal_the_fallbacks(ndim):
    """mx_sparse/_cuda/map_kernels.py against the torch-operator fallbacks, bit for bit: output keys
    of every (offset, input) pair, their compaction (sentinels, runs across program blocks), and the
    sorted-key lookup (absent keys, an empty key set)."""
    from mx_sparse._accelerator import fallback
    from mx_sparse._cuda import map_primitives
    shape = {1: [3000], 2: [40, 50], 3: [9, 10, 11], 4: [4, 5, 3, 6]}[ndim]
    idx = voxels(shape, 3, density=0.3, seed=ndim)
    geometry = (shape, 3, [3] * ndim, [2] + [1] * (ndim - 1), [1] * ndim, [1] * (ndim - 1) + [2])
    pairs = map_primitives.conv_out_keys(idx, *geometry)
    assert torch.equal(pairs, fallback.conv_out_keys(idx, *geometry))
    ordered = torch.sort(pairs).values
    for a, b in zip(map_primitives.unique_sorted_keys(ordered), fallback.unique_sorted_keys(ordered)):
        assert torch.equal(a, b)
    keys = torch.sort(torch.randint(0, 5000, (1500,), generator=torch.Generator().manual_seed(ndim))).values
    query, deltas = keys[::3].contiguous() + 1, torch.tensor([-7, -1, 0, 2, 40])
    for sorted_keys in (keys, keys[:0]):
        assert torch.equal(map_primitives.sorted_key_lookup(query, sorted_keys, deltas, 5, 6000),
                           fallback.sorted_key_lookup(query, sorted_keys, deltas, 5, 6000))


@pytest.mark.parametrize("kvol", [1, 8, 27])
def test_lookup_writing_rows(kvol):
    """_sorted_key_lookup_rows on CUDA (the lookup's launch with ROWS, SCATTER, TRANSPOSE) against the
    positions of the fallback lookup turned into rows by hand: order[p] for position p (p itself
    without an order), -1 kept; with scatter_rows each query's row moved to row order[s]; with
    transpose_rows the map's transpose, as transpose_map's scatter makes it. The row bitmasks kept
    with the result move with the rows."""
    from mx_sparse._C import map_orchestration
    from mx_sparse._accelerator import built_maps, fallback
    from mx_sparse._cuda import map_primitives
    g = torch.Generator().manual_seed(kvol)
    keys = torch.randperm(6000, generator=g)[:1500] * 3         # distinct, unsorted: a voxel set
    sorted_keys, order = torch.sort(keys)
    deltas = torch.arange(kvol) * 3 - 3 * (kvol // 2)
    found = fallback.sorted_key_lookup(sorted_keys, sorted_keys, deltas, kvol, 20000)
    as_rows = torch.where(found >= 0, order[found.clamp(min=0).long()], -1).int()
    plain_key = built_maps.result_row_key(map_primitives.sorted_key_lookup(sorted_keys, sorted_keys, deltas, kvol,
                                                                           20000))
    lookup = map_primitives.sorted_key_lookup_rows
    gathered, none = lookup(sorted_keys, sorted_keys, deltas, kvol, 20000, order, False, 0)
    assert torch.equal(gathered, as_rows) and none.shape == (0, kvol)
    assert torch.equal(built_maps.result_row_key(gathered), plain_key)
    scattered, _ = lookup(sorted_keys, sorted_keys, deltas, kvol, 20000, order, True, 0)
    want = torch.empty_like(as_rows)
    want[order] = as_rows
    assert torch.equal(scattered, want)
    want_key = torch.empty_like(plain_key)
    want_key[order] = plain_key
    assert torch.equal(built_maps.result_row_key(scattered), want_key)
    # the query keys' own rows: each voxel finds itself at its centre offset
    assert torch.equal(scattered[:, kvol // 2].long(), torch.arange(1500))
    # a strided-like lookup: every third key queried, more rows than queries in the transpose
    query = sorted_keys[::3].contiguous()
    for rows_of_order in (order, None):
        nbr, transposed = lookup(query, sorted_keys, deltas, kvol, 20000, rows_of_order, False, 1500)
        positions = fallback.sorted_key_lookup(query, sorted_keys, deltas, kvol, 20000)
        want = positions if rows_of_order is None else map_orchestration.rows_of(positions, order)
        assert torch.equal(nbr, want)
        assert torch.equal(transposed, map_orchestration.scatter_transpose(want, 1500))
        assert int((transposed >= 0).sum()) == int((want >= 0).sum()) > 0
        # the ATen route (sizes past int32, bench.host_ops' reference) gives the same
        by_operators = map_primitives.lookup_rows_by_operators(positions, rows_of_order, False, 1500)
        assert torch.equal(by_operators[0], nbr) and torch.equal(by_operators[1], transposed)
    assert torch.equal(map_primitives.lookup_rows_by_operators(found, order, True, 0)[0], scattered)
    with pytest.raises(ValueError, match="transpose_rows"):
        lookup(sorted_keys, sorted_keys, deltas, kvol, 20000, order, True, 1500)


def _rows_and_queries(unique, count, out_shape, query_shape, stride):
    """The first ``count`` keys unpacked by repeated division (innermost axis first) and the rows'
    query keys in Horner form: the reference for _conv_output_rows."""
    rest, coords = unique[:count].clone(), []
    for extent in reversed(out_shape):
        coords.insert(0, rest % extent)
        rest = rest // extent
    query = rest.clone()
    for c, extent, s in zip(coords, query_shape, stride):
        query = query * extent + c * s
    return torch.stack([rest, *coords], 1).int(), query


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_output_rows_in_the_unique_launch(ndim):
    """_conv_output_rows on CUDA (unique_runs_kernel with NDIM: one launch) gives the unique keys'
    rows and query keys of the reference, over several tiles of keys and with sentinels; on a grid
    of 2^20 per axis too (up to 3 axes: keys near 2^60)."""
    from mx_sparse._accelerator import fallback
    from mx_sparse._cuda import launch, map_primitives
    from mx_sparse._core import contract
    shape = {1: [3000], 2: [40, 50], 3: [9, 10, 11], 4: [4, 5, 3, 6]}[ndim]
    big = [2**20] * ndim
    idx = voxels(shape, 3, density=0.3, seed=ndim)
    far = torch.tensor([[1] + [2**20 - 1] * ndim, [0] + [2**20 - 3] * ndim], dtype=torch.int32)
    grids = [(shape, idx)] + ([(big, torch.cat([idx, far]))] if ndim < 4 else [])    # 2^80 cells: past int64
    for grid, rows_in in grids:
        kernel, stride, padding, dilation = [3] * ndim, [2] + [1] * (ndim - 1), [1] * ndim, [1] * ndim
        out_shape = contract.conv_output_extent(grid, kernel, stride, padding, dilation)
        query_shape = [o * s + 3 for o, s in zip(out_shape, stride)]
        pairs = torch.sort(fallback.conv_out_keys(rows_in, grid, 3, kernel, stride, padding, dilation)).values
        before = sum(n for (name, _, _), n in launch.launches.items() if name == "unique_runs")
        rows, query, count = map_primitives.conv_output_rows(pairs, out_shape, query_shape, stride)
        assert sum(n for (name, _, _), n in launch.launches.items() if name == "unique_runs") == before + 1
        unique, want_count = fallback.unique_sorted_keys(pairs)
        assert torch.equal(count, want_count) and pairs.shape[0] > 1024
        want_rows, want_query = _rows_and_queries(unique, int(count), out_shape, query_shape, stride)
        m = int(count)
        assert torch.equal(rows[:m], want_rows) and torch.equal(query[:m], want_query)
        by_operators = map_primitives.output_rows_by_operators(unique, count, out_shape, query_shape, stride)
        assert torch.equal(by_operators[0][:m], want_rows) and torch.equal(by_operators[1][:m], want_query)
        if grid is big:
            assert int(query[:m].max()) > 2 ** (20 * ndim) and int(unique[:m].max()) > 2 ** (20 * ndim - 2)


@pytest.mark.parametrize("c", [1, 1023, 1024, 1025, 3 * 1024 + 7])
def test_single_pass_unique_keys_equal_the_fallback(c):
    """unique_runs_kernel (one launch: a look-back scan over tiles of 1024 keys) against the
    torch-operator fallback, bit for bit: runs across tile edges, all keys equal, all distinct,
    all sentinels; its scratch is zeros again after every launch (no launch zero-fills it)."""
    from mx_sparse._accelerator import fallback
    from mx_sparse._cuda import launch, map_primitives
    g = torch.Generator().manual_seed(c)
    sentinel = 2**63 - 1
    cases = [torch.randint(0, 40, (c,), generator=g), torch.randint(0, 2**62, (c,), generator=g),
             torch.full((c,), 7), torch.full((c,), sentinel), torch.arange(c) // 3]
    for keys in cases:
        keys = torch.sort(torch.where(torch.rand(c, generator=g) < 0.2, sentinel, keys)).values
        before = sum(n for (name, _, _), n in launch.launches.items() if name == "unique_runs")
        got, want = map_primitives.unique_sorted_keys(keys), fallback.unique_sorted_keys(keys)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert sum(n for (name, _, _), n in launch.launches.items() if name == "unique_runs") == before + 1
        assert not bool(map_primitives._scratch[(keys.device, None)].any())


def test_triton_output_keys_on_a_grid_beyond_int32():
    """2^20 cells per axis: output keys reach 2^58 (int64 products in the kernel)."""
    from mx_sparse._accelerator import fallback
    from mx_sparse._cuda import map_primitives
    big = 2**20
    idx = torch.tensor([[0, big - 1, big - 1, big - 1], [0, big - 2, big - 1, big - 1], [1, 0, 0, 0],
                        [1, 0, big - 1, 1]], dtype=torch.int32)
    geometry = ([big] * 3, 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    pairs = map_primitives.conv_out_keys(idx, *geometry)
    assert torch.equal(pairs, fallback.conv_out_keys(idx, *geometry)) and int(pairs[pairs < 2**63 - 1].max()) > 2**57


def _error(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


BAD_ROWS = [[0, -1, 0, 0], [0, 0, 4, 0], [1, 0, 0, 0], [-1, 0, 0, 0], [0, 0, 0, 2 ** 30]]


@pytest.mark.parametrize("row", BAD_ROWS)
@pytest.mark.parametrize("builder", ["build_subm_map", "build_conv_map"])
def test_value_errors_match_cpu(row, builder):
    idx = torch.tensor([[0, 1, 1, 1], [0, 3, 3, 3], row, [0, 2, 2, 2]], dtype=torch.int32)
    args = ([4, 4, 4], 1, [3, 3, 3], [1, 1, 1]) if builder == "build_subm_map" else \
        ([4, 4, 4], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    cuda = _error(lambda: CUDA[builder](idx, *args))
    assert cuda.startswith("indices: row 2 is (batch, *coords)")
    assert cuda == _error(lambda: getattr(CPU, builder)(idx, *args))


@pytest.mark.parametrize("builder", ["build_subm_map", "build_conv_map"])
def test_duplicate_error_matches_cpu(builder):
    idx = torch.tensor([[0, 1, 2, 3], [0, 0, 0, 0], [0, 1, 2, 3], [0, 0, 0, 0]], dtype=torch.int32)
    args = ([4, 4, 4], 1, [3, 3, 3], [1, 1, 1]) if builder == "build_subm_map" else \
        ([4, 4, 4], 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    cuda = _error(lambda: CUDA[builder](idx, *args))
    assert cuda.startswith("indices: duplicate voxel (0, 1, 2, 3) at row 2")
    assert cuda == _error(lambda: getattr(CPU, builder)(idx, *args))


@pytest.mark.parametrize("call,match", [
    (lambda ops, i: ops["build_subm_map"](i, [4, 4, 4], 1, [3, 3], [1, 1, 1]), "kernel_size: expected 3 values"),
    (lambda ops, i: ops["build_subm_map"](i, [4, 0, 4], 1, [3, 3, 3], [1, 1, 1]), "spatial_shape: expected every"),
    (lambda ops, i: ops["build_subm_map"](i, [4, 4, 4], 0, [3, 3, 3], [1, 1, 1]), "batch_size: expected >= 1"),
    (lambda ops, i: ops["build_subm_map"](i.long(), [4, 4, 4], 1, [3, 3, 3], [1, 1, 1]), "indices: expected dtype int32"),
    (lambda ops, i: ops["build_subm_map"](i, [2 ** 21] * 3, 1, [3, 3, 3], [1, 1, 1]), "spatial_shape: batch_size"),
    (lambda ops, i: ops["build_conv_map"](i, [2, 4, 4], 1, [3, 3, 3], [1, 1, 1], [0, 0, 0], [1, 1, 1]),
     "spatial_shape: the convolution output is empty on axis 0"),
    (lambda ops, i: ops["build_conv_map"](i, [4, 4, 4], 1, [3, 3, 3], [0, 1, 1], [0, 0, 0], [1, 1, 1]),
     r"stride: expected every value in \[1, 2\^31 - 1\]"),
    (lambda ops, i: ops["build_subm_map"](i, [4, 4, 4], 1, [3, 3, 3], [1, 2 ** 31, 1]),
     r"dilation: expected every value in \[1, 2\^31 - 1\]"),
    (lambda ops, i: ops["build_subm_map"](i, [4, 4, 4], 1, [1025, 1025, 1], [1, 1, 1]),
     "kernel_size: .* has more than 1048576 offsets"),
    (lambda ops, i: ops["build_conv_map"](i, [4, 4, 4], 1, [1, 1, 1], [1, 1, 1], [2 ** 30, 0, 0], [1, 1, 1]),
     "padding: the convolution output has 2147483652 cells on axis 0"),
    (lambda ops, i: ops["build_conv_map"](i, [4, 4, 4], 2 ** 40, [1, 1, 1], [1, 1, 1], [2 ** 20, 2 ** 20, 0],
                                          [1, 1, 1]),
     "batch_size, padding: batch_size"),
    (lambda ops, i: ops["transpose_map"](torch.tensor([[0, -1], [0, 1]], dtype=torch.int32), 2),
     r"nbr: rows 0 and 1 both name input row 0 at offset 0;"),
    (lambda ops, i: ops["transpose_map"](torch.full((1, 27), 3, dtype=torch.int32), 2),
     r"nbr: row 0 holds an input row outside \[0, num_rows=2\)"),
    (lambda ops, i: ops["transpose_map"](torch.full((1, 27), -1, dtype=torch.int32), -1), "num_rows: expected"),
])
def test_argument_errors_name_the_argument(call, match):
    """Same argument name and wording as the CPU backend (which the same regex matches)."""
    idx = torch.tensor([[0, 1, 1, 1]], dtype=torch.int32)
    cpu_ops = {name: getattr(CPU, name) for name in ("build_subm_map", "build_conv_map", "transpose_map")}
    for ops in (CUDA, cpu_ops):
        with pytest.raises(ValueError, match=match):
            call(ops, idx)


def _maps():
    idx = scene(seed=5)
    yield CPU.build_subm_map(idx, [9, 10, 11], 3, [3, 3, 3], [1, 1, 1])
    yield CPU.build_conv_map(idx, [9, 10, 11], 3, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])[1]
    yield CPU.build_subm_map(idx, [9, 10, 11], 3, [5, 5, 5], [1, 1, 1])     # K = 125: 8 mask words
    big = torch.full((2500, 16), -1, dtype=torch.int32)                    # several 1024-row blocks
    big[::3, 5] = torch.arange(0, 2500, 3, dtype=torch.int32)
    yield big
    yield torch.full((0, 27), -1, dtype=torch.int32)
    yield torch.full((4, 27), -1, dtype=torch.int32)


@pytest.mark.parametrize("case", range(6))
def test_pack_and_unpack_bitwise_equal(case):
    nbr = list(_maps())[case]
    packed_cuda, packed_cpu = CUDA["pack_map"](nbr), CPU.pack_map(nbr)
    for a, b in zip(packed_cuda, packed_cpu):
        assert a.dtype == b.dtype and torch.equal(a, b)
    assert torch.equal(CUDA["unpack_map"](*packed_cuda, nbr.shape[1]), nbr)


def test_pack_and_unpack_errors_match_cpu():
    nbr = torch.full((3, 27), -1, dtype=torch.int32)
    nbr[1, 4] = -7
    assert _error(lambda: CUDA["pack_map"](nbr)) == _error(lambda: CPU.pack_map(nbr))
    good = CPU.build_subm_map(scene(seed=6), [9, 10, 11], 3, [3, 3, 3], [1, 1, 1])
    mask, values, starts = CPU.pack_map(good)
    for args, match in [((mask, values[:-1], starts, 27), "block_starts: expected to run from 0 to"),
                        ((mask, values, starts, 40), r"mask: expected int16 \[M, 3\] for kvol=40"),
                        ((mask, values, starts, 0), r"kvol: expected a kernel volume in \[1, 1048576\], got 0"),
                        ((mask, values.long(), starts, 27), r"values: expected int32 \[P\]")]:
        for unpack in (CUDA["unpack_map"], CPU.unpack_map):
            with pytest.raises(ValueError, match=match):
                unpack(*args)
    spare = mask.clone()
    spare[2, 1] |= 1 << 12                  # lane 28 of kvol=27
    for unpack in (CUDA["unpack_map"], CPU.unpack_map):
        with pytest.raises(ValueError, match=r"mask: row 2 sets bits past kvol=27"):
            unpack(spare, values, starts, 27)
    flipped = mask.clone()
    flipped[0, 0] ^= 1                      # one bit more or less than block 0's share
    for unpack in (CUDA["unpack_map"], CPU.unpack_map):
        with pytest.raises(ValueError, match="do not match their block_starts share"):
            unpack(flipped, values, starts, 27)


def test_unpack_checks_a_packed_form_written_in_place():
    """unpack_map trusts pack_map's own output only while none of its three tensors is written to."""
    idx = scene(seed=7)
    nbr = CUDA["build_subm_map"](idx, [9, 10, 11], 3, [3, 3, 3], [1, 1, 1])
    mask, values, starts = CUDA["pack_map"](nbr)
    assert torch.equal(CUDA["unpack_map"](mask, values, starts, 27), nbr)
    mask[0, 0] ^= 1
    for unpack in (CUDA["unpack_map"], CPU.unpack_map):
        with pytest.raises(ValueError, match="do not match their block_starts share"):
            unpack(mask, values, starts, 27)


def test_unpack_checks_decreasing_starts():
    nbr = torch.full((2048, 3), -1, dtype=torch.int32)
    nbr[:, 0] = 1
    mask, values, starts = CPU.pack_map(nbr)
    bad = starts.clone()
    bad[1] = starts[2] + 1
    for unpack in (CUDA["unpack_map"], CPU.unpack_map):
        with pytest.raises(ValueError, match="block_starts"):
            unpack(mask, values, bad, 3)
