"""Open3D-ML's functional sparse convolutions (``open3d.ml.torch.ops``) with Open3D's argument
lists, over mx_sparse's ``weighted_gather_mm`` (mx_sparse/functional/importance.py); this module only
translates arguments.

``filters`` is ``[*kernel_size, in, out]`` (the filter elements row-major), neighbour lists are
CSR (mx_sparse/compat/open3d/neighbor_lists.py). ``max_temp_mem_MB`` and ``allow_tf32`` are
accepted for compatibility and have no effect. Differences from Open3D (version 0.20.0):
float64 is accepted besides float32; any integer dtype for the index arguments; a list that names
one filter element twice for the same output gets the exact filter gradient (Open3D's
``sparse_conv`` backward keeps one of the two); the importances are differentiable too."""
import math

import torch

from ...functional import importance as weighting
from . import neighbor_lists


def _filter_matrix(filters, inp_features) -> torch.Tensor:
    if not isinstance(filters, torch.Tensor) or filters.dim() < 3:
        raise ValueError(f"filters: expected a tensor [*kernel_size, in_channels, out_channels], got "
                         f"{list(filters.shape) if isinstance(filters, torch.Tensor) else type(filters).__name__}")
    if not isinstance(inp_features, torch.Tensor) or inp_features.dim() != 2:
        raise ValueError(f"inp_features: expected a 2-D tensor [num_points, in_channels], got "
                         f"{list(inp_features.shape) if isinstance(inp_features, torch.Tensor) else type(inp_features).__name__}")
    if inp_features.shape[1] != filters.shape[-2]:
        raise ValueError(f"inp_features: expected {filters.shape[-2]} channels (filters.shape[-2]), "
                         f"got {inp_features.shape[1]}")
    if filters.dtype != inp_features.dtype or not filters.is_floating_point():
        raise ValueError(f"filters, inp_features: expected one floating-point dtype, got {filters.dtype} and "
                         f"{inp_features.dtype}")
    volume = math.prod(filters.shape[:-2])
    return filters.reshape(volume, filters.shape[-2], filters.shape[-1])


def _map(filters, inp_features, neighbors_index, neighbors_kernel_index, neighbors_importance, neighbors_row_splits):
    """(weight [S*K, in, out], nbr, nbr_importance): the S blocks of the map share the filter. The
    importance is never None: its pair path accepts lists naming one (input, filter element) for
    several outputs, which gather_mm's own map contract excludes."""
    weight = _filter_matrix(filters, inp_features)
    nbr, nbr_importance, blocks = neighbor_lists.csr_to_map(
        neighbors_index, neighbors_kernel_index, neighbors_row_splits, neighbors_importance,
        inp_features.shape[0], weight.shape[0], inp_features.dtype)
    if nbr_importance is None:
        nbr_importance = (nbr >= 0).to(inp_features.dtype)
    if blocks > 1:
        weight = weight.repeat(blocks, 1, 1)
    return weight, nbr.to(inp_features.device), nbr_importance.to(inp_features.device)


def sparse_conv(filters, inp_features, inp_importance, neighbors_index, neighbors_kernel_index, neighbors_importance,
                neighbors_row_splits, normalize=False, max_temp_mem_MB=64, allow_tf32=False):
    """``out[m] = sum_e inp_importance[i_e] * neighbors_importance[e] * inp_features[i_e] @ filters[k_e]``
    over the entries ``e`` of output ``m``'s list; ``normalize`` divides ``out[m]`` by the sum of
    ``neighbors_importance`` over the list (its length without importance; a zero sum leaves the row
    undivided). Zero-length ``inp_importance`` / ``neighbors_importance`` disable them."""
    weight, nbr, nbr_importance = _map(filters, inp_features, neighbors_index, neighbors_kernel_index,
                                       neighbors_importance, neighbors_row_splits)
    inp = neighbor_lists.optional_vector("inp_importance", inp_importance, inp_features.shape[0],
                                         "row of inp_features", inp_features.dtype)
    return weighting.weighted_gather_mm(inp_features, weight, nbr, inp_importance=inp, nbr_importance=nbr_importance,
                                        normalize=bool(normalize))


def _input_divisor_scale(normalize, neighbors_importance, inp_neighbors_importance_sum, counts, num_inputs, dtype):
    """Open3D's input-side normalisation as a per-input factor: 1 / (the given importance sum, or
    the length of the input's own neighbour list), 1 where that is zero; None without normalize."""
    given = neighbor_lists.optional_vector("inp_neighbors_importance_sum", inp_neighbors_importance_sum, num_inputs,
                                           "row of inp_features", dtype)
    has_importance = neighbors_importance is not None and neighbors_importance.numel() > 0
    if has_importance and given is None and normalize:
        raise ValueError("inp_neighbors_importance_sum: expected one value per row of inp_features when "
                         "neighbors_importance is given with normalize=True (Open3D 0.20 then ignores "
                         "neighbors_importance), got a zero-length tensor")
    if given is not None and not has_importance:
        raise ValueError("inp_neighbors_importance_sum: expected a zero-length tensor when neighbors_importance is "
                         "zero-length (Open3D 0.20 crashes on this combination)")
    if not normalize:
        return None
    total = given if given is not None else counts.to(dtype)
    return 1 / torch.where(total != 0, total, torch.ones_like(total))


def sparse_conv_transpose(filters, out_importance, inp_features, inp_neighbors_index, inp_neighbors_importance_sum,
                          inp_neighbors_row_splits, neighbors_index, neighbors_kernel_index, neighbors_importance,
                          neighbors_row_splits, normalize=False, max_temp_mem_MB=64, allow_tf32=False):
    """``out[m] = out_importance[m] * sum_e neighbors_importance[e] * inp_features[i_e] / n(i_e) @ filters[k_e]``
    over the entries ``e`` of output ``m``'s list (``neighbors_*``), where ``n(i) = 1`` without
    ``normalize`` and else ``inp_neighbors_importance_sum[i]`` (with importance) or the length of
    input ``i``'s list in ``inp_neighbors_row_splits`` (without); a zero ``n`` counts as 1.
    ``inp_neighbors_index`` is checked against its row splits and otherwise unused (mx_sparse
    derives the backward from the output lists)."""
    weight, nbr, nbr_importance = _map(filters, inp_features, neighbors_index, neighbors_kernel_index,
                                       neighbors_importance, neighbors_row_splits)
    inp_index = neighbor_lists.integer_vector("inp_neighbors_index", inp_neighbors_index)
    counts = neighbor_lists.row_counts("inp_neighbors_row_splits", inp_neighbors_row_splits, inp_features.shape[0],
                                       inp_index.numel())
    scale = _input_divisor_scale(normalize, neighbors_importance, inp_neighbors_importance_sum, counts,
                                 inp_features.shape[0], inp_features.dtype)
    out = neighbor_lists.optional_vector("out_importance", out_importance, nbr.shape[0],
                                         "output (row of neighbors_row_splits)", inp_features.dtype)
    return weighting.weighted_gather_mm(inp_features, weight, nbr, inp_importance=scale,
                                        nbr_importance=nbr_importance, out_importance=out)


def _filter_gradient(conv, filters, out_features_gradient, *args, **kwargs):
    with torch.enable_grad():
        leaf = filters.detach().requires_grad_(True)
        out = conv(leaf, *args, **kwargs)
        if not isinstance(out_features_gradient, torch.Tensor) or out_features_gradient.shape != out.shape:
            got = list(out_features_gradient.shape) if isinstance(out_features_gradient, torch.Tensor) else \
                type(out_features_gradient).__name__
            raise ValueError(f"out_features_gradient: expected shape {list(out.shape)} (that of the output), got {got}")
        return torch.autograd.grad(out, leaf, out_features_gradient.to(out.dtype))[0]


def sparse_conv_backprop_filter(filters, inp_features, inp_importance, neighbors_index, neighbors_kernel_index,
                                neighbors_importance, neighbors_row_splits, out_features_gradient, normalize=False,
                                max_temp_mem_MB=64):
    """The gradient of ``sum(sparse_conv(...) * out_features_gradient)`` w.r.t. ``filters`` (Open3D's
    op of that name), shape of ``filters``."""
    return _filter_gradient(sparse_conv, filters, out_features_gradient, inp_features, inp_importance,
                            neighbors_index, neighbors_kernel_index, neighbors_importance, neighbors_row_splits,
                            normalize=normalize)


def sparse_conv_transpose_backprop_filter(filters, out_importance, inp_features, inp_neighbors_importance_sum,
                                          inp_neighbors_row_splits, neighbors_index, neighbors_kernel_index,
                                          neighbors_importance, neighbors_row_splits, out_features_gradient,
                                          normalize=False, max_temp_mem_MB=64, inp_neighbors_index=None):
    """The gradient of ``sum(sparse_conv_transpose(...) * out_features_gradient)`` w.r.t.
    ``filters``. Open3D's op of that name takes no ``inp_neighbors_index``; it is optional here
    (only checked when given)."""
    if inp_neighbors_index is None:
        splits = neighbor_lists.integer_vector("inp_neighbors_row_splits", inp_neighbors_row_splits)
        inp_neighbors_index = torch.zeros(int(splits[-1]) if splits.numel() else 0, dtype=torch.int32)
    return _filter_gradient(sparse_conv_transpose, filters, out_features_gradient, out_importance, inp_features,
                            inp_neighbors_index, inp_neighbors_importance_sum, inp_neighbors_row_splits,
                            neighbors_index, neighbors_kernel_index, neighbors_importance, neighbors_row_splits,
                            normalize=normalize)
