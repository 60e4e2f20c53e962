"""Writes the checkpoints tests/compat/test_import_paths.py loads: pickled by mx_sparse before the
top-level modules moved into subpackages (issue 34; run at commit 4c5e4f5, where SparseConvTensor
was mx_sparse.sparse_tensor.SparseConvTensor, SubMConv3d mx_sparse.conv.SubMConv3d, ...), so their
class paths are the old ones. Kept for the record; rerunning it today writes the new paths.

    PYTHONPATH=$PWD python tests/compat/data/make_old_path_pickles.py
"""
import os

import torch
from torch import nn

import mx_sparse

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    coords = torch.randint(0, 8, (40, 3), generator=g)
    coords = torch.unique(coords, dim=0)
    indices = torch.cat([torch.zeros(coords.shape[0], 1, dtype=torch.long), coords], 1).int()
    x = mx_sparse.SparseConvTensor(torch.randn(indices.shape[0], 3, generator=g), indices, [8, 8, 8], 1)
    net = mx_sparse.SparseSequential(
        mx_sparse.SubMConv3d(3, 4, 3, indice_key="s1"), nn.BatchNorm1d(4), nn.ReLU(),
        mx_sparse.SparseConv3d(4, 5, 3, stride=2, padding=1, indice_key="d1"),
        mx_sparse.SparseInverseConv3d(5, 2, 3, indice_key="d1")).eval()
    y = net(x)   # y carries the map cache: IndiceData with its HeldMap maps
    torch.save(y, os.path.join(HERE, "old_paths_tensor.pt"))          # loads under weights_only=True
    torch.save({"net": net, "input": x, "output": y.features}, os.path.join(HERE, "old_paths_model.pt"))


if __name__ == "__main__":
    main()
