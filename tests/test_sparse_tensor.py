"""SparseConvTensor: dense()/from_dense round trip, attributes, replace_feature."""
import torch

import mx_sparse
from helpers import random_features, random_voxels


def test_dense_from_dense_round_trip():
    idx = random_voxels([3, 4, 5], 2, density=0.3, seed=4)
    feats = random_features(idx.shape[0], 3, torch.float32) + 5.0  # no all-zero rows
    x = mx_sparse.SparseConvTensor(feats, idx, [3, 4, 5], 2)
    dense = x.dense()
    assert dense.shape == (2, 3, 3, 4, 5)
    for row, f in zip(idx.tolist(), feats):
        assert torch.equal(dense[row[0], :, row[1], row[2], row[3]], f)
    assert dense.abs().sum(1).gt(0).sum() == idx.shape[0]  # nothing else is set
    back = mx_sparse.SparseConvTensor.from_dense(x.dense(channels_first=False))
    order = torch.argsort(back.indices[:, 0] * 1000 + back.indices[:, 1] * 100 + back.indices[:, 2] * 10 +
                          back.indices[:, 3])
    expect = torch.argsort(idx[:, 0] * 1000 + idx[:, 1] * 100 + idx[:, 2] * 10 + idx[:, 3])
    assert torch.equal(back.indices[order], idx[expect])
    assert torch.equal(back.features[order], feats[expect])
    assert back.spatial_shape == [3, 4, 5] and back.batch_size == 2


def test_attributes_and_replace_feature():
    idx = torch.tensor([[0, 0, 0, 0], [1, 2, 3, 4]], dtype=torch.int32)
    x = mx_sparse.SparseConvTensor(torch.ones(2, 3), idx, [4, 5, 6], 2)
    assert x.spatial_size == 120 and abs(x.sparity - 2 / 240) < 1e-12
    assert x.find_indice_pair(None) is None and x.find_indice_pair("a") is None
    y = mx_sparse.SubMConv3d(3, 2, 3, indice_key="a")(x)
    assert x.find_indice_pair("a") is not None and y.indice_dict is x.indice_dict
    z = y.replace_feature(y.features * 2)
    assert z.indice_dict is x.indice_dict and z.indices is y.indices
    x.features = torch.zeros(2, 3)  # assignable
    assert x.features.sum() == 0


def test_derive_keeps_class_and_map_cache():
    class Tagged(mx_sparse.SparseConvTensor):
        pass

    idx = torch.tensor([[0, 0, 0, 0], [0, 1, 1, 1]], dtype=torch.int32)
    x = Tagged(torch.ones(2, 3), idx, [4, 4, 4], 1)
    y = mx_sparse.SparseConv3d(3, 2, 3, stride=2, padding=1, indice_key="d")(x)
    assert type(y) is Tagged and y.indice_dict is x.indice_dict and "d" in y.indice_dict
    z = y.derive(torch.zeros(1, 5), y.indices[:1], y.spatial_shape)
    assert type(z) is Tagged and z.indice_dict is x.indice_dict and z.batch_size == 1
