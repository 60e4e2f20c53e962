"""``spconv.pytorch.functional``: ``sparse_add`` (union of voxels, features summed)."""
import torch

from ...._core import contract as _contract
from ....nn.sparse_tensor import SparseConvTensor as _CoreTensor


def sparse_add(*tens: _CoreTensor) -> _CoreTensor:
    """Sum of sparse tensors with possibly different voxels: the output holds the union of
    their voxels in sorted (batch, *spatial) order. As in spconv, the map cache of the
    operand with the most voxels is kept if the union has no more voxels than it."""
    first = tens[0]
    for t in tens[1:]:
        if t.spatial_shape != first.spatial_shape or t.batch_size != first.batch_size or \
                t.features.shape[1] != first.features.shape[1]:
            raise ValueError("sparse_add: operands need the same spatial_shape, batch_size and channels")
    key = _contract.pack_keys(torch.cat([t.indices for t in tens]), first.spatial_shape)
    uniq, inverse = torch.unique(key, return_inverse=True)
    feats = torch.cat([t.features for t in tens])
    out_f = feats.new_zeros(uniq.numel(), feats.shape[1]).index_add(0, inverse, feats)
    out_i = _contract.unpack_keys(uniq, first.spatial_shape)
    out = type(first)(out_f, out_i, first.spatial_shape, first.batch_size)
    largest = max(tens, key=lambda t: t.indices.shape[0])
    if uniq.numel() == largest.indices.shape[0]:
        out.indice_dict = largest.indice_dict
    return out


sparse_add_hash_based = sparse_add
