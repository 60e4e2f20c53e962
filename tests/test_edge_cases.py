"""Empty inputs and huge spatial shapes."""
import torch

import mx_sparse


def test_empty_input_flows_forward_and_backward():
    feats = torch.zeros(0, 4, requires_grad=True)
    x = mx_sparse.SparseConvTensor(feats, torch.zeros(0, 4, dtype=torch.int32), [5, 5, 5], 2)
    net = mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(4, 8, 3, indice_key="a"), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
        mx_sparse.SparseConv3d(8, 8, 3, stride=2, indice_key="d"),
        mx_sparse.SparseInverseConv3d(8, 4, 3, indice_key="d"))
    y = net(x)
    assert y.features.shape == (0, 4) and y.spatial_shape == [5, 5, 5]
    y.features.sum().backward()
    assert feats.grad.shape == (0, 4)
    assert net[0].weight.grad is not None and net[0].weight.grad.abs().sum() == 0


def test_huge_spatial_shape_without_dense_memory():
    """2^20 per axis: the int64 keys address 2^60 voxels with O(N) memory."""
    big = 2**20
    idx = torch.tensor([[0, big - 1, big - 1, big - 1], [0, big - 2, big - 1, big - 1], [1, 0, 0, 0],
                        [1, 0, big - 1, 1]], dtype=torch.int32)
    feats = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    x = mx_sparse.SparseConvTensor(feats, idx, [big, big, big], 2)
    subm = mx_sparse.SubMConv3d(1, 1, 3, bias=False)
    with torch.no_grad():
        subm.weight.fill_(1.0)
    # row 0 and 1 are neighbours along axis 0; rows 2 and 3 are far apart
    assert subm(x).features.flatten().tolist() == [3.0, 3.0, 3.0, 4.0]
    down = mx_sparse.SparseConv3d(1, 1, 2, stride=2, bias=False)
    with torch.no_grad():
        down.weight.fill_(1.0)
    y = down(x)
    assert y.spatial_shape == [big // 2] * 3
    # hand-computed: o = floor(i / 2) per axis, sorted by (batch, z, y, x)
    assert y.indices.tolist() == [[0, big // 2 - 1, big // 2 - 1, big // 2 - 1], [1, 0, 0, 0],
                                  [1, 0, big // 2 - 1, 0]]
    assert y.features.flatten().tolist() == [3.0, 3.0, 4.0]
