"""The NPU binding's parts written with tensor operators (kernels/ops/index_checks_generic.h,
transpose_map_generic.h), executed here on CPU tensors through mx_sparse._C: the same results
and the same ValueErrors as the CPU backend. On an NPU, torch_npu runs the same operators."""
import pytest
import torch

import mx_sparse

OPS = torch.ops.mx_sparse
GENERIC = mx_sparse._C


def error(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


def voxels(shape, batch, n, seed):
    g = torch.Generator().manual_seed(seed)
    cells = torch.randperm(batch * shape[0] * shape[1] * shape[2], generator=g)[:n]
    rows = []
    for dim in reversed(shape):
        rows.append(cells % dim)
        cells = cells // dim
    return torch.stack([cells] + rows[::-1], 1).int()


@pytest.mark.parametrize("seed", range(3))
def test_valid_indices_pass(seed):
    idx = voxels([5, 6, 7], 2, 60, seed)
    GENERIC.check_index_values_generic(idx, [5, 6, 7], 2)
    GENERIC.check_index_values_generic(idx[:0], [5, 6, 7], 2)


@pytest.mark.parametrize("row,value", [(3, [0, -1, 0, 0]), (7, [2, 0, 0, 0]), (0, [0, 0, 6, 0]),
                                       (59, [0, 0, 0, 7]), (11, [-1, 0, 0, 0]), (4, [1, 4, 5, 2 ** 30])])
def test_rows_outside_the_grid_give_the_cpu_error(row, value):
    idx = voxels([5, 6, 7], 2, 60, 0)
    idx[row] = torch.tensor(value, dtype=torch.int32)
    want = error(lambda: OPS.build_subm_map(idx, [5, 6, 7], 2, [3, 3, 3], [1, 1, 1]))
    assert want.startswith(f"indices: row {row} is (batch, *coords)")
    assert error(lambda: GENERIC.check_index_values_generic(idx, [5, 6, 7], 2)) == want


@pytest.mark.parametrize("first,second", [(0, 1), (5, 40), (58, 59), (2, 30)])
def test_duplicate_voxels_give_the_cpu_error(first, second):
    idx = voxels([5, 6, 7], 2, 60, 1)
    idx[second] = idx[first]
    want = error(lambda: OPS.build_conv_map(idx, [5, 6, 7], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])[1])
    assert f"at row {second};" in want
    assert error(lambda: GENERIC.check_index_values_generic(idx, [5, 6, 7], 2)) == want


def test_layout_and_grid_errors_name_the_argument():
    idx = voxels([5, 6, 7], 2, 10, 0)
    assert error(lambda: GENERIC.check_index_values_generic(idx.long(), [5, 6, 7], 2)).startswith("indices:")
    assert error(lambda: GENERIC.check_index_values_generic(idx, [5, 6], 2)).startswith("indices:")
    assert error(lambda: GENERIC.check_index_values_generic(idx, [5, 0, 7], 2)).startswith("spatial_shape:")
    assert error(lambda: GENERIC.check_index_values_generic(idx, [5, 6, 7], 0)).startswith("batch_size:")


def maps():
    idx = voxels([6, 7, 8], 2, 120, 2)
    yield OPS.build_subm_map(idx, [6, 7, 8], 2, [3, 3, 3], [1, 1, 1]), 120
    out, nbr = OPS.build_conv_map(idx, [6, 7, 8], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    yield nbr, 120
    yield OPS.transpose_map(nbr, 120), out.shape[0]
    yield torch.full((5, 27), -1, dtype=torch.int32), 0
    yield torch.full((0, 8), -1, dtype=torch.int32), 4
    yield torch.full((3, 0), -1, dtype=torch.int32), 2


@pytest.mark.parametrize("case", range(6))
def test_transpose_map_bitwise_equal(case):
    nbr, num_rows = list(maps())[case]
    got = GENERIC.transpose_map_generic(nbr, num_rows)
    assert got.dtype == torch.int32 and torch.equal(got, OPS.transpose_map(nbr, num_rows))


def test_transpose_map_errors_equal_the_cpu_kernel():
    nbr = OPS.build_subm_map(voxels([6, 7, 8], 2, 120, 3), [6, 7, 8], 2, [3, 3, 3], [1, 1, 1])
    twice = nbr.clone()
    twice[17, 5], twice[40, 5] = 3, 3                 # input row 3 named twice at offset 5 (or thrice)
    twice[40, 9], twice[55, 9] = 8, 8                 # and at offset 9
    below, beyond = nbr.clone(), nbr.clone()
    below[30, 2], beyond[12, 26] = -2, 120
    for args in [(twice, 120), (below, 120), (beyond, 120), (nbr, -1), (nbr, 2 ** 31 - 1), (nbr.long(), 120),
                 (nbr[0], 120)]:
        assert error(lambda: GENERIC.transpose_map_generic(*args)) == error(lambda: OPS.transpose_map(*args))
    assert "both name input row" in error(lambda: OPS.transpose_map(twice, 120))
