"""gather_mm and gather_mm_backprop_filter of the accelerator backends: the argument checks,
then one call of the device's one-group primitive per group on channel slices (groups == 1:
one call on the tensors themselves). This is the only per-group loop in the project: every
device kernel (Triton, AscendC, the fallback) computes one group.

  gather_mm:                 out[:, g*Cout_g:(g+1)*Cout_g] = one_group(features[:, g*Cin_g:...],
                                                                       weight[:, :, g*Cout_g:...], nbr)
  gather_mm_backprop_filter: dW[:, :, g*Cout_g:...] = one_group(features[:, g*Cin_g:...],
                                                                grad[:, g*Cout_g:...], nbr)

The input gradient is gather_mm again (autograd, kernels/schema/autograd.cpp). nbr_t and
symmetric are read by autograd only, and so is gather_mm's activation (source, source_scale,
source_shift: what features are made of); gather_mm_backprop_filter's (scale, shift) goes to the
primitive, per group its channels' slice. Neither op reads device data on the host.
"""
import torch

from . import index_checks, op_args

primitives = torch.ops.mx_sparse


def _per_group(groups, cat_dim, one_group):
    """groups > 1 (groups == 1: one call on the tensors themselves, no closure made)."""
    return torch.cat([one_group(g) for g in range(groups)], cat_dim)


def gather_mm(features, weight, nbr, nbr_t, groups, symmetric=False, source=None, source_scale=None,
              source_shift=None):
    cin_g, cout_g = op_args.gather_mm_shapes(features, weight, nbr, nbr_t, groups)
    if source is not None or source_scale is not None or source_shift is not None:
        op_args.gather_mm_activation(features, source, source_scale, source_shift, half_ok=True)
    index_checks.check_gather_map(nbr, features.shape[0])   # CPU tensors: the CPU kernel's error
    if groups == 1:
        return primitives._gather_mm_one_group(features, weight, nbr)
    return _per_group(groups, 1, lambda g: primitives._gather_mm_one_group(
        features.narrow(1, g * cin_g, cin_g), weight.narrow(2, g * cout_g, cout_g), nbr))


def gather_mm_backprop_filter(features, grad, nbr, nbr_t, groups, symmetric=False, scale=None, shift=None):
    cin_g, cout_g = op_args.backprop_filter_shapes(features, grad, nbr, nbr_t, groups)
    if scale is not None or shift is not None:
        op_args.backprop_filter_activation(features, scale, shift, half_ok=True)
    index_checks.check_gather_map(nbr, features.shape[0])
    if groups == 1:
        return primitives._gather_mm_backprop_filter_one_group(features, grad, nbr, scale, shift)
    return _per_group(groups, 2, lambda g: primitives._gather_mm_backprop_filter_one_group(
        features.narrow(1, g * cin_g, cin_g), grad.narrow(1, g * cout_g, cout_g), nbr,
        *_channels(g * cin_g, cin_g, scale, shift)))


def _channels(start, length, *vectors):
    """Each per-channel vector's [start, start + length) (None stays None)."""
    return [v if v is None else v.narrow(0, start, length) for v in vectors]
