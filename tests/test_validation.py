"""Every bad input raises an exception whose message names the argument, what was
expected and what came."""
import pytest
import torch

import mx_sparse
from mx_sparse import functional as F


def idx(rows):
    return torch.tensor(rows, dtype=torch.int32)


def sct(rows, shape=(4, 4, 4), batch=1, channels=2):
    i = idx(rows)
    return mx_sparse.SparseConvTensor(torch.ones(i.shape[0], channels), i, list(shape), batch)


def raises(match, fn, exc=ValueError):
    with pytest.raises(exc, match=match):
        fn()


def test_indices_dtype_shape_rank():
    raises(r"indices: expected dtype int32 or int64, got torch.float32",
           lambda: mx_sparse.SparseConvTensor(torch.ones(1, 2), torch.zeros(1, 4), [4, 4, 4], 1))
    raises(r"indices: expected shape \[N, 4\].*got \[1, 3\]",
           lambda: mx_sparse.SparseConvTensor(torch.ones(1, 2), torch.zeros(1, 3, dtype=torch.int32), [4, 4, 4], 1))
    raises(r"indices: expected shape \[N, 3\].*spatial_shape of 2 dims",
           lambda: mx_sparse.SparseConvTensor(torch.ones(1, 2), torch.zeros(1, 4, dtype=torch.int32), [4, 4], 1))


def test_int64_indices_converted_and_checked():
    x = mx_sparse.SparseConvTensor(torch.ones(1, 2), torch.zeros(1, 4, dtype=torch.int64), [4, 4, 4], 1)
    assert x.indices.dtype == torch.int32
    raises(r"indices: int64 values outside the int32 range",
           lambda: mx_sparse.SparseConvTensor(torch.ones(1, 2), torch.tensor([[0, 0, 0, 2**31]]), [4, 4, 4], 1))


def test_features_rows_dtype_and_channels():
    raises(r"features: expected 2 rows \(one per row of indices\), got 3",
           lambda: mx_sparse.SparseConvTensor(torch.ones(3, 2), idx([[0, 0, 0, 0], [0, 0, 0, 1]]), [4, 4, 4], 1))
    raises(r"features: expected dtype float32, float16, bfloat16 or float64, got torch.int64",
           lambda: mx_sparse.SparseConvTensor(torch.ones(1, 2, dtype=torch.long), idx([[0, 0, 0, 0]]), [4, 4, 4], 1))
    x = sct([[0, 0, 0, 0]])
    raises(r"features: expected 1 rows", lambda: setattr(x, "features", torch.ones(2, 2)))
    raises(r"input.features: expected 3 channels \(in_channels\), got 2", lambda: mx_sparse.SubMConv3d(3, 4, 3)(x))
    raises(r"input: expected a 2D SparseConvTensor", lambda: mx_sparse.SubMConv2d(2, 4, 3)(x))
    raises(r"input: expected a SparseConvTensor, got Tensor", lambda: mx_sparse.SubMConv3d(2, 4, 3)(torch.ones(1)),
           TypeError)


@pytest.mark.parametrize("row,what", [([0, -1, 0, 0], "row 1 is"), ([0, 0, 4, 0], "row 1 is"),
                                      ([1, 0, 0, 0], "0 <= batch < batch_size \\(1\\)"), ([-1, 0, 0, 0], "row 1")])
@pytest.mark.parametrize("layer", ["subm", "conv"])
def test_coordinates_outside_grid_or_batch(row, what, layer):
    x = sct([[0, 0, 0, 0], row])
    conv = mx_sparse.SubMConv3d(2, 2, 3) if layer == "subm" else mx_sparse.SparseConv3d(2, 2, 3)
    raises(r"indices: .*" + what + r".*spatial_shape \[4, 4, 4\]", lambda: conv(x))


@pytest.mark.parametrize("layer", ["subm", "conv"])
def test_duplicate_coordinates(layer):
    x = sct([[0, 1, 2, 3], [0, 0, 0, 0], [0, 1, 2, 3]])
    conv = mx_sparse.SubMConv3d(2, 2, 3) if layer == "subm" else mx_sparse.SparseConv3d(2, 2, 3)
    raises(r"indices: duplicate voxel \(0, 1, 2, 3\) at row 2", lambda: conv(x))


def test_grid_arguments():
    raises(r"spatial_shape: expected 1 to 4 positive ints, got \[4, 0, 4\]",
           lambda: mx_sparse.SparseConvTensor(torch.ones(0, 2), torch.zeros(0, 4, dtype=torch.int32), [4, 0, 4], 1))
    raises(r"batch_size: expected an int >= 1, got 0",
           lambda: mx_sparse.SparseConvTensor(torch.ones(0, 2), torch.zeros(0, 4, dtype=torch.int32), [4, 4, 4], 0))


@pytest.mark.parametrize("kwargs,match", [
    (dict(kernel_size=0), r"kernel_size: expected integers >= 1, got 0"),
    (dict(kernel_size=(3, 3)), r"kernel_size: expected an int or 3 values"),
    (dict(stride=0), r"stride: expected integers >= 1, got 0"),
    (dict(dilation=(1, 0, 1)), r"dilation: expected integers >= 1, got \(1, 0, 1\)"),
    (dict(padding=-1), r"padding: expected integers >= 0, got -1"),
    (dict(groups=3), r"groups: expected a divisor of in_channels \(4\) and out_channels \(8\), got 3"),
    (dict(mode="tf"), r"mode: expected one of \['mmcv', 'spconv'\], got 'tf'"),
])
def test_layer_arguments(kwargs, match):
    args = dict(in_channels=4, out_channels=8, kernel_size=3)
    args.update(kwargs)
    raises(match, lambda: mx_sparse.SparseConv3d(**args))


def test_empty_output_shape():
    x = sct([[0, 0, 0, 0]], shape=(2, 4, 4))
    raises(r"spatial_shape: the convolution output is empty on axis 0", lambda: mx_sparse.SparseConv3d(2, 2, 3)(x))


def test_grid_too_large_for_int64_keys():
    x = sct([[0, 0, 0, 0]], shape=(2**21, 2**21, 2**21))
    raises(r"spatial_shape: batch_size \(1\) x prod\(spatial_shape .*exceeds the int64 voxel-key range",
           lambda: mx_sparse.SubMConv3d(2, 2, 3)(x))


def test_op_level_checks():
    i = idx([[0, 0, 0, 0]])
    nbr = F.build_subm_map(i, [4, 4, 4], 1, [3, 3, 3], [1, 1, 1])
    raises(r"weight: expected \[K=27, Cin/groups, Cout\]",
           lambda: F.gather_mm(torch.ones(1, 2), torch.ones(26, 2, 2), nbr, nbr, 1))
    raises(r"weight: expected dtype Float like features, got Double",
           lambda: F.gather_mm(torch.ones(1, 2), torch.ones(27, 2, 2, dtype=torch.double), nbr, nbr, 1))
    bad = nbr.clone()
    bad[0, 0] = 5
    raises(r"nbr: row 0 holds an input row outside \[-1, 1\)",
           lambda: F.gather_mm(torch.ones(1, 2), torch.ones(27, 2, 2), bad, nbr, 1))
    raises(r"kernel_size: expected 3 values", lambda: F.build_subm_map(i, [4, 4, 4], 1, [3, 3], [1, 1, 1]))


def test_indice_key_misuse_names_the_key():
    x = sct([[0, 0, 0, 0], [0, 1, 1, 1]])
    mx_sparse.SubMConv3d(2, 2, 3, indice_key="subm1")(x)
    raises(r"indice_key 'subm1': cached subm map .*kernel_size=\(3, 3, 3\).* does not match",
           lambda: mx_sparse.SubMConv3d(2, 2, 5, indice_key="subm1")(x))
    raises(r"indice_key 'subm1': cached subm map .*dilation=\(1, 1, 1\).* does not match",
           lambda: mx_sparse.SubMConv3d(2, 2, 3, dilation=2, indice_key="subm1")(x))
    raises(r"indice_key 'subm1': holds a subm map, but SparseConv3d needs a conv map",
           lambda: mx_sparse.SparseConv3d(2, 2, 3, indice_key="subm1")(x))
    raises(r"indice_key 'subm1': holds a subm map; an inverse conv needs",
           lambda: mx_sparse.SparseInverseConv3d(2, 2, 3, indice_key="subm1")(x))
    raises(r"indice_key 'nope': not found", lambda: mx_sparse.SparseInverseConv3d(2, 2, 3, indice_key="nope")(x))
    other = sct([[0, 2, 2, 2]])
    other.indice_dict = x.indice_dict
    raises(r"indice_key 'subm1': the cached map was built for other voxels",
           lambda: mx_sparse.SubMConv3d(2, 2, 3, indice_key="subm1")(other))
    y = mx_sparse.SparseConv3d(2, 2, 3, stride=2, padding=1, indice_key="down")(x)
    raises(r"indice_key 'down': kernel_size \(2, 2, 2\) differs from the \(3, 3, 3\)",
           lambda: mx_sparse.SparseInverseConv3d(2, 2, 2, indice_key="down")(y))
    raises(r"indice_key 'down': input voxels differ", lambda: mx_sparse.SparseInverseConv3d(2, 2, 3, indice_key="down")(x))
    # constructible without a key (mmcv's build_conv_layer, spconv's tests); running needs one
    raises(r"indice_key: SparseInverseConv3d was built without one; an inverse convolution needs",
           lambda: mx_sparse.SparseInverseConv3d(2, 2, 2)(y))


def test_gather_mm_nbr_t_rows_are_checked_where_autograd_uses_them():
    """The forward does not read nbr_t (inference passes nbr there); the input gradient runs on it,
    so backward checks its rows and names it."""
    x = torch.randn(3, 2, requires_grad=True)
    w = torch.randn(2, 2, 2)
    nbr = torch.tensor([[0, 1], [2, -1]], dtype=torch.int32)
    y = F.gather_mm(x, w, nbr, nbr, 1)   # nbr (2 rows) in place of the 3-row transpose
    raises(r"nbr_t: expected one row per input row \(3\) for the input gradient, got 2", lambda: y.sum().backward())
