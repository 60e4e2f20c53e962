"""``spconv.pytorch.modules``: the containers are mx_sparse's own (same objects);
SparseBatchNorm / SparseReLU / SparseIdentity take a SparseConvTensor or a tensor."""
from torch import nn

from ....nn.modules import SparseModule, SparseSequential  # noqa: F401  (the same objects)
from ....nn.sparse_tensor import SparseConvTensor as _CoreTensor


def _on_features(module_cls):
    class Wrapped(module_cls):
        def forward(self, input):
            if isinstance(input, _CoreTensor):
                return input.replace_feature(super().forward(input.features))
            return super().forward(input)
    return Wrapped


class SparseBatchNorm(_on_features(nn.BatchNorm1d)):
    """BatchNorm1d on the features of a SparseConvTensor (or on a tensor)."""


class SparseSyncBatchNorm(_on_features(nn.SyncBatchNorm)):
    """SyncBatchNorm on the features of a SparseConvTensor (or on a tensor)."""


class SparseReLU(_on_features(nn.ReLU)):
    """ReLU on the features of a SparseConvTensor (or on a tensor)."""


class SparseIdentity(_on_features(nn.Identity)):
    """Identity on the features of a SparseConvTensor (or on a tensor)."""


def is_spconv_module(module) -> bool:
    return isinstance(module, (SparseModule, SparseBatchNorm, SparseReLU))


def is_sparse_conv(module) -> bool:
    from ....nn.conv import SparseConvolution
    return isinstance(module, SparseConvolution)


def assign_name_for_sparse_modules(module: nn.Module) -> None:
    for name, child in module.named_modules():
        if isinstance(child, SparseModule):
            child._sparse_unique_name = name
