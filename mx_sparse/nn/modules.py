"""Containers and helpers for sparse networks: SparseModule (marker base class),
SparseSequential (runs sparse layers and plain per-voxel layers such as
BatchNorm1d/ReLU on the features), bn_relu (its fused BatchNorm1d+ReLU step for
hand-written blocks), ToDense."""
from collections import OrderedDict

import torch
from torch import nn

from .batch_norm_relu import batch_norm_relu, can_fuse
from .compile_support import check_batch_norm_rows, maybe_nonzero
from .sparse_tensor import SparseConvTensor


class SparseModule(nn.Module):
    """Base class of modules that take and return a SparseConvTensor."""

    def fused_with(self, bn: nn.BatchNorm1d):
        """A copy of this module computing ``bn(self(x))`` in one step with bn's running
        statistics (inference), or None where the module cannot carry it (the default). The
        sparse convolutions fold bn into their weight and bias (mx_sparse/nn/conv.py);
        ``SparseSequential.fused`` asks every module a BatchNorm1d follows."""
        return None


def is_sparse_module(module) -> bool:
    return isinstance(module, SparseModule)


def skipped_when_empty(module) -> bool:
    """A BatchNorm other than SyncBatchNorm: nothing to normalise on zero voxels. A
    SyncBatchNorm always runs: in training it takes part in its process group's collectives
    (with a count of 0 here), and skipping it would leave the other processes waiting."""
    return isinstance(module, nn.modules.batchnorm._BatchNorm) and not isinstance(module, nn.SyncBatchNorm)


class SparseSequential(SparseModule):
    """Like ``nn.Sequential``; non-sparse modules act on ``features``. With zero voxels a
    BatchNorm is skipped (nothing to normalise), except a SyncBatchNorm (see
    ``skipped_when_empty``); every other module still runs, so channel changes hold.

    A ``BatchNorm1d`` directly followed by a ``ReLU`` runs as one fused step that keeps one
    activation tensor instead of two for backward (see ``mx_sparse.nn.batch_norm_relu``);
    set ``SparseSequential.fuse_bn_relu = False`` to run torch's modules instead."""

    fuse_bn_relu = True

    def __init__(self, *args, **kwargs):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)
        for name, module in kwargs.items():
            if name in self._modules:
                raise ValueError(f"SparseSequential: name {name!r} is used twice")
            self.add_module(name, module)

    def __getitem__(self, idx):
        modules = list(self._modules.values())
        if isinstance(idx, slice):
            return SparseSequential(OrderedDict(list(self._modules.items())[idx]))
        return modules[idx]

    def __len__(self):
        return len(self._modules)

    def add(self, module, name=None):
        self.add_module(str(len(self._modules)) if name is None else name, module)

    def forward(self, x):
        modules = list(self._modules.values())
        i = 0
        while i < len(modules):
            module = modules[i]
            if isinstance(module, SparseModule) or not isinstance(x, SparseConvTensor):   # (is_sparse_module)
                x = module(x)
            elif (self.fuse_bn_relu and i + 1 < len(modules) and can_fuse(module, modules[i + 1], x.features)):
                x = x.replace_feature(batch_norm_relu(x.features, module))
                i += 1  # the ReLU ran too
            elif maybe_nonzero(x.indices.shape[0]) or not skipped_when_empty(module):
                check_batch_norm_rows(module, x.features)
                x = x.replace_feature(module(x.features))
            i += 1
        return x

    def fused(self) -> "SparseSequential":
        """A new SparseSequential in which every sparse convolution directly followed by a
        BatchNorm1d is replaced by a copy carrying the normalisation in its weight and bias
        (inference only: uses the running statistics). Nested SparseSequentials are fused
        too; every other module is the same object as here (as in mx_driving,
        so gradients of the fused net reach these modules' parameters)."""
        items = list(self._modules.items())
        out, i = OrderedDict(), 0
        while i < len(items):
            name, module = items[i]
            nxt = items[i + 1][1] if i + 1 < len(items) else None
            fused = module.fused_with(nxt) if is_sparse_module(module) and isinstance(nxt, nn.BatchNorm1d) else None
            if fused is not None:
                out[name] = fused
                i += 2
                continue
            out[name] = module.fused() if isinstance(module, SparseSequential) else module
            i += 1
        return SparseSequential(out)


def bn_relu(features: torch.Tensor, bn: nn.Module, relu: nn.Module) -> torch.Tensor:
    """``relu(bn(features))``, as the fused BatchNorm1d+ReLU step wherever ``SparseSequential``
    would fuse the pair: for blocks that call their modules on ``x.features`` themselves
    (residual blocks), with the same module objects and state_dict keys."""
    if SparseSequential.fuse_bn_relu and can_fuse(bn, relu, features):
        return batch_norm_relu(features, bn)
    check_batch_norm_rows(bn, features)
    return relu(bn(features))


class ToDense(SparseModule):
    """SparseConvTensor -> dense ``[B, C, *spatial]``."""

    def __init__(self, channels_first: bool = True):
        super().__init__()
        self.channels_first = channels_first

    def forward(self, x: SparseConvTensor) -> torch.Tensor:
        return x.dense(self.channels_first)
