"""``spconv.pytorch.tables``: JoinTable (concat features), AddTable (sum), ConcatTable."""
import torch

from ....nn.modules import SparseModule
from . import functional as F


def _same_voxels(inputs, what):
    for t in inputs:
        if t.spatial_shape != inputs[0].spatial_shape or t.batch_size != inputs[0].batch_size or \
                t.indices.shape[0] != inputs[0].indices.shape[0]:
            raise ValueError(f"{what}: all inputs need the same voxels")


class JoinTable(SparseModule):
    def forward(self, input):
        _same_voxels(input, "JoinTable")
        return input[0].replace_feature(torch.cat([t.features for t in input], 1))


class AddTable(SparseModule):
    def forward(self, input):
        _same_voxels(input, "AddTable")
        return input[0].replace_feature(sum(t.features for t in input))


class AddTableMisaligned(SparseModule):
    def forward(self, input):
        return F.sparse_add(*input)


class ConcatTable(SparseModule):
    def forward(self, input):
        return [module(input) for module in self._modules.values()]

    def add(self, module):
        self._modules[str(len(self._modules))] = module
        return self
