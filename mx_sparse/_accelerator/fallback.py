"""Torch-operator versions of the five accelerator primitives (contracts: kernels/schema/schema.cpp),
registered under CompositeExplicitAutograd: a device with no kernel of its own for a primitive
runs these, on its own tensors (CUDA runs the three map primitives this way; the tests run all
five on CPU tensors). Simple and exact rather than fast: a binary search, per-axis integer
arithmetic, a consecutive-difference compaction, and one index + matmul per kernel offset.

None of them reads device data on the host or creates a tensor on another device, so they keep
the orchestration's host-read count (tests/cuda/test_fake_cuda_trace.py traces them).
"""
import torch

from . import op_args, voxel_keys

INT64_MAX = torch.iinfo(torch.int64).max
NO_NEIGHBOR = -1
# Offsets are looked up in chunks whose temporaries hold about this many int64 values.
CHUNK_VALUES = 1 << 23


def sorted_key_lookup(query_keys, sorted_keys, key_deltas, group, key_bound):
    """out[s, k] = position of query_keys[s] + key_deltas[k] in sorted_keys, or -1 (a binary
    search per (s, k); ``group`` and ``key_bound`` are kernel hints, not needed here)."""
    s, kvol, c = query_keys.shape[0], key_deltas.shape[0], sorted_keys.shape[0]
    if s == 0 or kvol == 0 or c == 0:
        return torch.full((s, kvol), NO_NEIGHBOR, dtype=torch.int32, device=query_keys.device)
    per_chunk = max(1, min(kvol, CHUNK_VALUES // max(1, 3 * s)))
    columns = []
    for k0 in range(0, kvol, per_chunk):
        query = query_keys.unsqueeze(1) + key_deltas.narrow(0, k0, min(kvol, k0 + per_chunk) - k0)
        at = torch.searchsorted(sorted_keys, query).clamp_(max=c - 1)
        found = torch.take(sorted_keys, at) == query
        columns.append(torch.where(found, at, NO_NEIGHBOR).int())
    return columns[0] if len(columns) == 1 else torch.cat(columns, 1)


def lattice(kernel_size, stride, dilation):
    """Per axis, the constants of _conv_out_keys' slots (kernels/common/conv_rules.h, conv_out_slots):
    (slots, step, inverse, gcd). The kernel positions kp through which coordinate u = i + p reaches
    an output (u - kp*d a multiple of s) are one residue class modulo step = s / gcd(s, d), empty
    unless gcd divides u mod s; its least member is ((u mod s) / gcd * inverse) mod step, inverse =
    (d / gcd)^-1 modulo step (0 when step is 1)."""
    return [(slots, step, pow(d // g, -1, step) if step > 1 else 0, g)
            for (slots, step, g), d in zip(op_args.conv_lattice(kernel_size, stride, dilation), dilation)]


def conv_out_keys(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation):
    """The output-grid key of every (slot j, input n) pair, slot-major: along each axis, slot j of
    coordinate i is its j-th kernel position (ascending) on the stride's lattice, kp*d = i + p
    (mod s) (``lattice``), and the pair's key is that of the output o = (i + p - kp*d) / s it
    reaches; INT64_MAX where the position does not exist (kp >= k) or o lies outside [0, O). Every
    (offset, input) pair that reaches an output is there once (stride 1: slot j is offset j)."""
    ndim = len(spatial_shape)
    out_shape = op_args.conv_output_extent(spatial_shape, kernel_size, stride, padding, dilation)
    idx = indices.long()
    # pairs as [j_0, ..., j_{nd-1}, N] by broadcasting (row-major slots), flattened at the end
    reach, coords = None, []
    for d, (slots, step, inverse, g) in enumerate(lattice(kernel_size, stride, dilation)):
        along = [1] * ndim
        along[d] = slots
        u = idx.select(1, 1 + d) + padding[d]
        r = u.remainder(stride[d])
        first = (r.div(g, rounding_mode="floor") * inverse).remainder_(step)
        o0 = (u - first * dilation[d]).div(stride[d], rounding_mode="floor")    # exact where the class exists
        j = torch.arange(slots, device=indices.device).view(along + [1])
        o = o0 - j * (dilation[d] // g)
        ok = (first + j * step < kernel_size[d]) & (o >= 0) & (o < out_shape[d])
        if g > 1:
            ok &= r.remainder(g) == 0
        reach = ok if reach is None else reach & ok
        coords.append(o)
    key = voxel_keys.pack_columns(idx.select(1, 0), coords, out_shape)
    return torch.where(reach, key, INT64_MAX).reshape(-1)


def unique_sorted_keys(sorted_keys):
    """The distinct keys of a sorted array (INT64_MAX sentinels dropped) compacted to the front,
    and their number as an int32 [1] tensor; nothing is read on the host."""
    c, dev = sorted_keys.shape[0], sorted_keys.device
    unique = torch.full((c + 1,), INT64_MAX, dtype=torch.int64, device=dev)
    if c == 0:
        return unique.narrow(0, 0, 0), torch.zeros((1,), dtype=torch.int32, device=dev)
    first = torch.cat([torch.ones((1,), dtype=torch.bool, device=dev),
                       sorted_keys.narrow(0, 1, c - 1) != sorted_keys.narrow(0, 0, c - 1)])
    first &= sorted_keys != INT64_MAX
    at = torch.cumsum(first, 0) - 1
    # each distinct key's first occurrence writes its slot; every other entry writes the spare
    # slot c, dropped below
    unique.scatter_(0, torch.where(first, at, c), sorted_keys)
    return unique.narrow(0, 0, c), first.sum(dtype=torch.int32).view(1)


def _accumulation_dtype(dtype):
    """float64 stays float64; every other float type is accumulated in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _gathered(features, rows, acc):
    """features[rows] in ``acc``, zero rows where rows == -1 (an absent neighbour contributes
    nothing, even where some feature is Inf or NaN)."""
    if features.shape[0] == 0:                       # no input rows: every entry is absent
        return features.new_zeros((rows.shape[0], features.shape[1]), dtype=acc)
    present = (rows >= 0).unsqueeze(1)
    picked = features.index_select(0, rows.clamp(min=0).long()).to(acc)
    return torch.where(present, picked, 0)


def gather_mm_one_group(features, weight, nbr):
    """out[m] = sum_k features[nbr[m, k]] @ weight[k], offsets summed in order k = 0..K-1."""
    acc = _accumulation_dtype(features.dtype)
    m, kvol = nbr.shape
    out = torch.zeros((m, weight.shape[2]), dtype=acc, device=features.device)
    for k in range(kvol):
        out += _gathered(features, nbr.select(1, k), acc) @ weight.select(0, k).to(acc)
    return out.to(features.dtype)


def gather_mm_backprop_filter_one_group(features, grad, nbr, scale=None, shift=None):
    """dW[k] = a[nbr[:, k]]^T @ grad (absent rows zero), a = features, or with scale and shift
    relu(features * scale + shift) made first by the scale_shift_relu op."""
    if scale is not None:
        features = torch.ops.mx_sparse.scale_shift_relu(features, scale, shift)
    acc = _accumulation_dtype(features.dtype)
    kvol = nbr.shape[1]
    g = grad.to(acc)
    if kvol == 0:
        return torch.zeros((0, features.shape[1], grad.shape[1]), dtype=features.dtype, device=features.device)
    dw = [_gathered(features, nbr.select(1, k), acc).t() @ g for k in range(kvol)]
    return torch.stack(dw).to(features.dtype)


PRIMITIVES = {
    "_sorted_key_lookup": sorted_key_lookup,
    "_conv_out_keys": conv_out_keys,
    "_unique_sorted_keys": unique_sorted_keys,
    "_gather_mm_one_group": gather_mm_one_group,
    "_gather_mm_backprop_filter_one_group": gather_mm_backprop_filter_one_group,
}
