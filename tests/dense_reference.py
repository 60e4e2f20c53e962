"""Independent reference for the sparse convolutions: densify, run torch's dense
conv / conv_transpose in float64, sample at the active voxels. Shares no code
with mx_sparse beyond SparseConvTensor.dense()-free indexing done here by hand."""
import math

import torch
import torch.nn.functional as F

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


def densify(features, indices, spatial_shape, batch_size):
    """[B, C, *spatial] with features scattered at indices (differentiable)."""
    c = features.shape[1]
    dense = features.new_zeros([batch_size, *spatial_shape, c])
    idx = indices.long()
    dense = dense.index_put(tuple(idx[:, d] for d in range(idx.shape[1])), features)
    return dense.movedim(-1, 1)


def sample(dense, indices):
    idx = indices.long()
    return dense.movedim(1, -1)[tuple(idx[:, d] for d in range(idx.shape[1]))]


def torch_weight(weight, groups):
    """Our [*k, Cin/g, Cout] -> torch conv weight [Cout, Cin/g, *k]."""
    nd = weight.dim() - 2
    return weight.permute(nd + 1, nd, *range(nd))


def torch_weight_transposed(weight, groups):
    """Our [*k, Cin/g, Cout] (inverse conv) -> conv_transpose weight [Cin, Cout/g, *k]."""
    nd = weight.dim() - 2
    k = weight.shape[:nd]
    cin_g, cout = weight.shape[nd], weight.shape[nd + 1]
    w = weight.reshape(math.prod(k), cin_g, groups, cout // groups).permute(2, 1, 3, 0)
    return w.reshape(groups * cin_g, cout // groups, *k)


def subm_reference(features, indices, spatial_shape, batch_size, weight, bias, dilation, groups):
    nd = len(spatial_shape)
    k = weight.shape[:nd]
    x = densify(features, indices, spatial_shape, batch_size)
    pads = []
    for d in reversed(range(nd)):  # F.pad wants the last axis first
        pads += [(k[d] // 2) * dilation[d], (k[d] - 1 - k[d] // 2) * dilation[d]]
    y = CONV[nd](F.pad(x, pads), torch_weight(weight, groups), bias, 1, 0, dilation, groups)
    return sample(y, indices)


def active_outputs(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation):
    """Output voxels of a strided conv: where the conv of the occupancy grid with an
    all-ones kernel is positive."""
    nd = len(spatial_shape)
    occ = densify(torch.ones(indices.shape[0], 1, dtype=torch.float64), indices, spatial_shape, batch_size)
    ones = torch.ones(1, 1, *kernel_size, dtype=torch.float64)
    hit = CONV[nd](occ, ones, None, stride, padding, dilation)[:, 0] > 0
    return hit.nonzero().int()


def conv_reference(features, indices, spatial_shape, batch_size, weight, bias, stride, padding, dilation, groups):
    nd = len(spatial_shape)
    x = densify(features, indices, spatial_shape, batch_size)
    y = CONV[nd](x, torch_weight(weight, groups), bias, stride, padding, dilation, groups)
    out_idx = active_outputs(indices, spatial_shape, batch_size, weight.shape[:nd], stride, padding, dilation)
    return sample(y, out_idx), out_idx, list(y.shape[2:])


def inverse_reference(features, out_indices, out_shape, batch_size, weight, bias, in_indices, in_shape,
                      stride, padding, dilation, groups):
    """Transposed conv from the strided conv's outputs back to its input grid."""
    nd = len(in_shape)
    k = weight.shape[:nd]
    x = densify(features, out_indices, out_shape, batch_size)
    natural = [(o - 1) * s - 2 * p + d * (kk - 1) + 1
               for o, s, p, d, kk in zip(out_shape, stride, padding, dilation, k)]
    output_padding = [i - n for i, n in zip(in_shape, natural)]
    y = CONV_T[nd](x, torch_weight_transposed(weight, groups), bias, stride, padding, output_padding, groups,
                   dilation)
    return sample(y, in_indices)
