"""A cached neighbor map (indice_key) is reused only for the indices it was built from and a
batch size that covers their batch indices (issue 28: after an in-place edit of the indices the
stale map was reused, max difference 0.088 against a fresh build, no error)."""
import pytest
import torch

import mx_sparse

from helpers import random_features, random_voxels

SHAPE = [6, 7, 8]


def two_subm_layers():
    torch.manual_seed(0)
    return (mx_sparse.SubMConv3d(3, 4, 3, indice_key="k").double(),
            mx_sparse.SubMConv3d(4, 4, 3, indice_key="k").double())


@pytest.mark.parametrize("mode", ["grad", "inference_mode"])
def test_in_place_edit_of_indices_refuses_the_stale_map(mode):
    first, second = two_subm_layers()
    ctx = torch.inference_mode if mode == "inference_mode" else torch.enable_grad
    with ctx():
        idx = random_voxels(SHAPE, 2, density=0.4, seed=1)
        x = mx_sparse.SparseConvTensor(random_features(idx.shape[0], 3), idx, SHAPE, 2)
        y = first(x)                                   # caches the map under "k"
        y.indices[:, 3] = (SHAPE[2] - 1) - y.indices[:, 3]   # mirrored in place: other neighbours
        with pytest.raises(ValueError, match="indice_key 'k': the indices were modified in place"):
            second(y)


def test_unchanged_indices_and_equal_copies_still_reuse():
    first, second = two_subm_layers()
    idx = random_voxels(SHAPE, 2, density=0.4, seed=1)
    x = mx_sparse.SparseConvTensor(random_features(idx.shape[0], 3), idx, SHAPE, 2)
    y = first(x)
    data = x.indice_dict["k"]
    z = second(y)
    assert x.indice_dict["k"] is data
    # same values in a new tensor: still the same voxels (compared in full, off the hot path)
    copy = y.replace_feature(y.features)
    copy.indices = y.indices.clone()
    assert torch.equal(second(copy).features, z.features)
    # reference: a fresh build on the same input gives the same result
    fresh = mx_sparse.SparseConvTensor(y.features, y.indices.clone(), SHAPE, 2)
    assert torch.equal(second(fresh).features, z.features)


def test_batch_size_not_covering_the_batch_indices_is_refused():
    first, second = two_subm_layers()
    idx = random_voxels(SHAPE, 3, density=0.4, seed=2)
    x = mx_sparse.SparseConvTensor(random_features(idx.shape[0], 3), idx, SHAPE, 3)
    y = first(x)
    smaller = y.replace_feature(y.features)
    smaller.batch_size = 2                     # indices still hold batch 2
    with pytest.raises(ValueError, match="batch_size: expected more than 2"):
        second(smaller)
    larger = y.replace_feature(y.features)
    larger.batch_size = 5                      # covers every batch index: the map holds
    assert torch.equal(second(larger).features, second(y).features)


def test_inverse_conv_refuses_edited_output_indices():
    torch.manual_seed(0)
    down = mx_sparse.SparseConv3d(3, 4, 3, 2, 1, indice_key="d").double()
    up = mx_sparse.SparseInverseConv3d(4, 3, 3, indice_key="d").double()
    idx = random_voxels(SHAPE, 2, density=0.4, seed=3)
    y = down(mx_sparse.SparseConvTensor(random_features(idx.shape[0], 3), idx, SHAPE, 2))
    y.indices[:, 1] = y.indices[:, 1].flip(0)
    with pytest.raises(ValueError, match="indice_key 'd': the indices were modified in place"):
        up(y)
