"""What the crash fuzz (fuzz_ops.py) needs of each ``torch.ops.mx_sparse`` op: ONE entry in
SPECS per op, with

- ``valid(data)``: draws small valid arguments (a dict by schema name) from hypothesis'
  ``data``; the fuzz then damages some of them (fuzz_ops.py, from the schema's types);
- ``reference(**args)``: the op's contract, written independently of the kernels (plain
  loops, float64): returns the expected result, or raises ``Invalid(names)`` for an input the
  op must reject with an error naming one of those arguments. It receives copies; for ops
  that write into an argument it returns ``(result, {name: expected tensor after the call})``
  via ``Mutates``.

An op without an entry fails test_fuzz.py::test_every_op_has_a_fuzz_spec, so ops added to
the schema get a spec (and a contract) before they merge.
"""
import math
import os
from dataclasses import dataclass
from typing import Callable, Dict, Optional

import torch
from hypothesis import strategies as st

import voxel_reference

INT32_MAX = 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1
MAX_SPATIAL_DIMS = 4
MAX_KERNEL_VOLUME = 2 ** 20   # kernels/contract/op_args.h
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# The fused BatchNorm's feature dtypes: the CPU kernels take float32, float64 and bfloat16; the
# accelerators' (CUDA, NPU; these ops on CPU tensors under MXS_CUDA_ON_CPU / MXS_NPU_ON_CPU) float16
# too (autocast's activations), and return dgamma, dbeta in the wider of the features' and the
# weight's dtype (the CPU kernels: the features').
ACCELERATOR_PATH = any(os.environ.get(k, "0").strip().lower() not in ("", "0", "false", "off", "no")
                       for k in ("MXS_CUDA_ON_CPU", "MXS_NPU_ON_CPU"))
FEATURE_DTYPES_BN = (torch.float32, torch.float64, torch.bfloat16) + ((torch.float16,) if ACCELERATOR_PATH else ())
ROWS_PER_BLOCK = 1024         # pack_map's format


class Invalid(Exception):
    """The input breaks the op's contract; the op must raise naming one of ``names``."""

    def __init__(self, *names):
        super().__init__(", ".join(names))
        self.names = names


@dataclass
class Mutates:
    """A result plus the expected final value of arguments the op writes into (a tensor, or
    Bounded when it carries rounding)."""
    result: object
    written: Dict[str, object]


@dataclass
class Spec:
    valid: Callable
    reference: Callable
    rtol: float = 1e-5   # relative to the sum of |terms| of each output element (see fuzz_ops.compare)
    int_damage: Optional[list] = None   # values a damaged int argument takes instead of fuzz_ops.HUGE_INTS


def require(cond, *names):
    if not cond:
        raise Invalid(*names)


class Violations:
    """Checks that do not depend on each other: all are evaluated, and the op may report any
    failing one first."""

    def __init__(self):
        self.names = []

    def check(self, cond, *names):
        if not cond:
            self.names += [n for n in names if n not in self.names]

    def settle(self):
        require(not self.names, *self.names)


def is_tensor(t):
    return isinstance(t, torch.Tensor)


def int_list(value, name, ndim, minimum, maximum=INT32_MAX):
    require(isinstance(value, (list, tuple)) and len(value) == ndim, name, "spatial_shape")
    require(all(isinstance(v, int) and minimum <= v <= maximum for v in value), name)
    return list(value)


# ---------------------------------------------------------------- voxel grids and maps

def draw_grid(data, max_batch=2):
    ndim = data.draw(st.integers(1, 3), label="ndim")
    shape = [data.draw(st.integers(1, 5)) for _ in range(ndim)]
    batch = data.draw(st.integers(1, max_batch))
    cells = [(b, *c) for b in range(batch) for c in _cells(shape)]
    n = data.draw(st.integers(0, min(len(cells), 24)))
    rows = data.draw(st.permutations(cells))[:n]
    indices = torch.tensor(rows, dtype=torch.int32).reshape(n, 1 + ndim)
    return indices, shape, batch


def _cells(shape):
    if not shape:
        yield ()
        return
    for c in range(shape[0]):
        for rest in _cells(shape[1:]):
            yield (c, *rest)


def draw_map(data, m, n_in, kvol, allow_missing=True):
    values = [data.draw(st.integers(-1 if allow_missing else 0, n_in - 1)) if n_in > 0 else -1
              for _ in range(m * kvol)]
    return torch.tensor(values, dtype=torch.int32).reshape(m, kvol)


def check_grid(spatial_shape, batch_size):
    require(isinstance(spatial_shape, (list, tuple)) and 1 <= len(spatial_shape) <= MAX_SPATIAL_DIMS, "spatial_shape")
    require(all(isinstance(s, int) and s >= 1 for s in spatial_shape), "spatial_shape")
    require(isinstance(batch_size, int) and batch_size >= 1, "batch_size")
    require(batch_size * math.prod(spatial_shape) <= INT64_MAX, "spatial_shape", "batch_size")
    return list(spatial_shape)


def check_indices_layout(indices, ndim):
    require(is_tensor(indices) and indices.dtype == torch.int32, "indices")
    require(indices.dim() == 2 and indices.shape[1] == 1 + ndim, "indices", "spatial_shape")


def check_indices(indices, shape, batch_size):
    rows = [tuple(r) for r in indices.tolist()]
    for r in rows:
        require(0 <= r[0] < batch_size and all(0 <= c < s for c, s in zip(r[1:], shape)), "indices")
    require(len(set(rows)) == len(rows), "indices")
    return rows


def check_kernel(kernel_size, ndim):
    kernel = int_list(kernel_size, "kernel_size", ndim, 1)
    require(math.prod(kernel) <= MAX_KERNEL_VOLUME, "kernel_size")
    return kernel


def kernel_positions(kernel):
    return list(_cells(kernel))


# ---------------------------------------------------------------- build_subm_map

def valid_build_subm_map(data):
    indices, shape, batch = draw_grid(data)
    ndim = len(shape)
    return dict(indices=indices, spatial_shape=shape, batch_size=batch,
                kernel_size=[data.draw(st.integers(1, 3)) for _ in range(ndim)],
                dilation=[data.draw(st.integers(1, 2)) for _ in range(ndim)])


def ref_build_subm_map(indices, spatial_shape, batch_size, kernel_size, dilation):
    shape = check_grid(spatial_shape, batch_size)
    check_indices_layout(indices, len(shape))
    kernel = check_kernel(kernel_size, len(shape))
    dil = int_list(dilation, "dilation", len(shape), 1)
    rows = check_indices(indices, shape, batch_size)
    where = {r: i for i, r in enumerate(rows)}
    out = torch.full((len(rows), math.prod(kernel)), -1, dtype=torch.int32)
    for i, r in enumerate(rows):
        for k, kp in enumerate(kernel_positions(kernel)):
            nb = (r[0], *[c + (p - ks // 2) * d for c, p, ks, d in zip(r[1:], kp, kernel, dil)])
            out[i, k] = where.get(nb, -1)
    return out


def map_of_contributions(contributions, kernel, ndim):
    """(out_indices in canonical order, nbr) from {output voxel: {offset k: input row}}."""
    outs = sorted(contributions)
    out_indices = torch.tensor(outs, dtype=torch.int32).reshape(len(outs), 1 + ndim)
    nbr = torch.full((len(outs), math.prod(kernel)), -1, dtype=torch.int32)
    for m, o in enumerate(outs):
        for k, i in contributions[o].items():
            nbr[m, k] = i
    return out_indices, nbr


# ---------------------------------------------------------------- build_conv_map

def valid_build_conv_map(data):
    indices, shape, batch = draw_grid(data)
    ndim = len(shape)
    kernel = [data.draw(st.integers(1, 3)) for _ in range(ndim)]
    dilation = [data.draw(st.integers(1, 2)) for _ in range(ndim)]
    padding = [data.draw(st.integers(0, 2)) for _ in range(ndim)]
    # keep every output axis non-empty: (s + 2p - d(k-1) - 1) >= 0
    padding = [max(p, -(-(d * (k - 1) + 1 - s) // 2)) for p, k, d, s in zip(padding, kernel, dilation, shape)]
    args = dict(indices=indices, spatial_shape=shape, batch_size=batch, kernel_size=kernel,
                stride=[data.draw(st.integers(1, 3)) for _ in range(ndim)], padding=padding, dilation=dilation)
    args["pads_end"] = None                             # symmetric: padding on both sides
    if data.draw(st.booleans(), label="asymmetric"):   # pads_end moved by up to 2 either way, output kept
        args["pads_end"] = [max(0, p + data.draw(st.integers(-2, 2)), d * (k - 1) + 1 - s - p)
                            for p, k, d, s in zip(padding, kernel, dilation, shape)]
    return args


def ref_build_conv_map(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, pads_end=None):
    shape = check_grid(spatial_shape, batch_size)
    ndim = len(shape)
    check_indices_layout(indices, ndim)
    kernel = check_kernel(kernel_size, ndim)
    st_ = int_list(stride, "stride", ndim, 1)
    pad = int_list(padding, "padding", ndim, 0)
    dil = int_list(dilation, "dilation", ndim, 1)
    end = pad if pads_end is None else int_list(pads_end, "pads_end", ndim, 0)
    out_shape = [(s + p + e - d * (k - 1) - 1) // t + 1
                 for s, k, t, p, e, d in zip(shape, kernel, st_, pad, end, dil)]
    geometry = ("spatial_shape", "kernel_size", "stride", "padding", "pads_end", "dilation")
    require(all(o >= 1 for o in out_shape), *geometry)
    require(all(o <= INT32_MAX for o in out_shape), *geometry)            # int32 output coordinates
    require(batch_size * math.prod(out_shape) <= INT64_MAX, *geometry, "batch_size")
    if NPU_LIMITS and indices.shape[0] > 0:   # the NPU's output-key kernel works in float-exact coordinates,
        require(batch_size <= NPU_MAX_COORD, "batch_size")   # checked before the index values are read
        require(all(s + p < NPU_MAX_COORD and (k - 1) * d < NPU_MAX_COORD
                    for s, p, k, d in zip(shape, pad, kernel, dil)), "spatial_shape")
    rows = check_indices(indices, shape, batch_size)
    contributions = {}
    for i, r in enumerate(rows):
        for k, kp in enumerate(kernel_positions(kernel)):
            o = []
            for c, p, t, pd, d, os_ in zip(r[1:], kp, st_, pad, dil, out_shape):
                num = c + pd - p * d
                if num < 0 or num % t or num // t >= os_:
                    break
                o.append(num // t)
            else:
                contributions.setdefault((r[0], *o), {})[k] = i
    return (*map_of_contributions(contributions, kernel, ndim), out_shape)


# ---------------------------------------------------------------- build_conv_transpose_map

def valid_build_conv_transpose_map(data):
    indices, shape, batch = draw_grid(data)
    ndim = len(shape)
    kernel = [data.draw(st.integers(1, 3)) for _ in range(ndim)]
    stride = [data.draw(st.integers(1, 3)) for _ in range(ndim)]
    dilation = [data.draw(st.integers(1, 2)) for _ in range(ndim)]
    output_padding = [data.draw(st.integers(0, max(t, d) - 1)) for t, d in zip(stride, dilation)]
    pads_begin, pads_end = [], []
    for s, k, t, d, op in zip(shape, kernel, stride, dilation, output_padding):
        full = (s - 1) * t + d * (k - 1) + 1 + op            # extent without padding
        b = data.draw(st.integers(0, min(3, full - 1)))
        pads_begin.append(b)
        pads_end.append(data.draw(st.integers(0, min(3, full - 1 - b))))   # keep >= 1 output cell
    return dict(indices=indices, spatial_shape=shape, batch_size=batch, kernel_size=kernel, stride=stride,
                pads_begin=pads_begin, pads_end=pads_end, dilation=dilation, output_padding=output_padding)


def ref_build_conv_transpose_map(indices, spatial_shape, batch_size, kernel_size, stride, pads_begin, pads_end,
                                 dilation, output_padding):
    shape = check_grid(spatial_shape, batch_size)
    ndim = len(shape)
    check_indices_layout(indices, ndim)
    kernel = check_kernel(kernel_size, ndim)
    st_ = int_list(stride, "stride", ndim, 1)
    pb = int_list(pads_begin, "pads_begin", ndim, 0)
    pe = int_list(pads_end, "pads_end", ndim, 0)
    dil = int_list(dilation, "dilation", ndim, 1)
    op = int_list(output_padding, "output_padding", ndim, 0)
    require(all(o < t or o < d for o, t, d in zip(op, st_, dil)), "output_padding")   # ONNX / torch
    out_shape = [(s - 1) * t - b - e + d * (k - 1) + 1 + o
                 for s, k, t, b, e, d, o in zip(shape, kernel, st_, pb, pe, dil, op)]
    geometry = ("spatial_shape", "kernel_size", "stride", "pads_begin", "pads_end", "dilation", "output_padding")
    require(all(o >= 1 for o in out_shape), *geometry)
    require(all(o <= INT32_MAX for o in out_shape), *geometry)            # int32 output coordinates
    require(batch_size * math.prod(out_shape) <= INT64_MAX, *geometry, "batch_size")
    rows = check_indices(indices, shape, batch_size)
    contributions = {}
    for i, r in enumerate(rows):
        for k, kp in enumerate(kernel_positions(kernel)):
            o = [c * t - b + p * d for c, p, t, b, d in zip(r[1:], kp, st_, pb, dil)]
            if all(0 <= x < n for x, n in zip(o, out_shape)):
                contributions.setdefault((r[0], *o), {})[k] = i
    return (*map_of_contributions(contributions, kernel, ndim), out_shape)


# ---------------------------------------------------------------- build_conv_map_at

def conv_map_at_grid(shape, kernel, stride, pads_begin, dilation, transposed):
    """The output grid build_conv_map_at derives: every output whose window meets the input grid."""
    if transposed:
        return [(s - 1) * t - b + d * (k - 1) + 1 for s, k, t, b, d in zip(shape, kernel, stride, pads_begin, dilation)]
    return [(s - 1 + b) // t + 1 for s, t, b in zip(shape, stride, pads_begin)]


def valid_build_conv_map_at(data):
    indices, shape, batch = draw_grid(data)
    ndim = len(shape)
    kernel = [data.draw(st.integers(1, 4)) for _ in range(ndim)]        # even kernels too
    stride = [data.draw(st.integers(1, 3)) for _ in range(ndim)]
    dilation = [data.draw(st.integers(1, 2)) for _ in range(ndim)]
    transposed = data.draw(st.booleans(), label="transposed")
    reach = [(s - 1) * t + d * (k - 1) if transposed else 3 for s, k, t, d in zip(shape, kernel, stride, dilation)]
    pads_begin = [data.draw(st.integers(0, min(3, r))) for r in reach]  # transposed: keep >= 1 output cell
    grid = conv_map_at_grid(shape, kernel, stride, pads_begin, dilation, transposed)
    out_spatial_shape = None
    if data.draw(st.booleans(), label="named grid"):                    # a larger grid: far outputs read nothing
        out_spatial_shape = grid = [g + data.draw(st.integers(0, 3)) for g in grid]
    cells = [(b, *c) for b in range(batch) for c in _cells(grid)]
    m = data.draw(st.integers(0, min(len(cells), 16)))
    out_indices = torch.tensor(data.draw(st.permutations(cells))[:m], dtype=torch.int32).reshape(m, 1 + ndim)
    return dict(indices=indices, out_indices=out_indices, spatial_shape=shape, batch_size=batch, kernel_size=kernel,
                stride=stride, pads_begin=pads_begin, dilation=dilation, transposed=transposed,
                out_spatial_shape=out_spatial_shape)


def ref_build_conv_map_at(indices, out_indices, spatial_shape, batch_size, kernel_size, stride, pads_begin, dilation,
                          transposed=False, out_spatial_shape=None):
    shape = check_grid(spatial_shape, batch_size)
    ndim = len(shape)
    check_indices_layout(indices, ndim)
    require(is_tensor(out_indices) and out_indices.dtype == torch.int32, "out_indices")
    require(out_indices.dim() == 2 and out_indices.shape[1] == 1 + ndim, "out_indices", "spatial_shape")
    kernel = check_kernel(kernel_size, ndim)
    st_ = int_list(stride, "stride", ndim, 1)
    pb = int_list(pads_begin, "pads_begin", ndim, 0)
    dil = int_list(dilation, "dilation", ndim, 1)
    geometry = ("spatial_shape", "kernel_size", "stride", "pads_begin", "dilation", "out_spatial_shape")
    if out_spatial_shape is None:
        grid = conv_map_at_grid(shape, kernel, st_, pb, dil, transposed)
        require(all(g >= 1 for g in grid), *geometry)
        require(all(g <= INT32_MAX for g in grid), *geometry)              # int32 output coordinates
    else:
        grid = int_list(out_spatial_shape, "out_spatial_shape", ndim, 1)
    require(batch_size * math.prod(grid) <= INT64_MAX, *geometry, "batch_size")
    rows = check_indices(indices, shape, batch_size)
    outs = [tuple(r) for r in out_indices.tolist()]
    for r in outs:
        require(0 <= r[0] < batch_size and all(0 <= c < g for c, g in zip(r[1:], grid)), "out_indices")
    require(len(set(outs)) == len(outs), "out_indices")
    where = {r: i for i, r in enumerate(rows)}
    nbr = torch.full((len(outs), math.prod(kernel)), -1, dtype=torch.int32)
    for m, (b, *o) in enumerate(outs):
        for k, kp in enumerate(kernel_positions(kernel)):
            if transposed:   # the input i with i*s - pb + kp*d == o
                num = [c + p - q * d for c, p, q, d in zip(o, pb, kp, dil)]
                if any(v < 0 or v % t for v, t in zip(num, st_)):
                    continue
                i = [v // t for v, t in zip(num, st_)]
            else:            # the input at o*s - pb + kp*d
                i = [c * t - p + q * d for c, t, p, q, d in zip(o, st_, pb, kp, dil)]
            nbr[m, k] = where.get((b, *i), -1)
    return nbr


# ---------------------------------------------------------------- transpose_map

def check_map(nbr, name="nbr"):
    require(is_tensor(nbr) and nbr.dtype == torch.int32 and nbr.dim() == 2, name)


def valid_transpose_map(data):
    m, num_rows, kvol = data.draw(st.integers(0, 12)), data.draw(st.integers(0, 12)), data.draw(st.integers(1, 5))
    # a valid map names each (input row, offset) at most once: per column, a partial injection
    cols = []
    for _ in range(kvol):
        targets = data.draw(st.permutations(list(range(num_rows)) + [-1] * m))[:m]
        cols.append(targets)
    nbr = torch.tensor(cols, dtype=torch.int32).T.reshape(m, kvol).contiguous()
    return dict(nbr=nbr, num_rows=num_rows)


def ref_transpose_map(nbr, num_rows):
    check_map(nbr)
    require(isinstance(num_rows, int) and 0 <= num_rows < INT32_MAX, "num_rows")
    m, kvol = nbr.shape
    out = torch.full((num_rows, kvol), -1, dtype=torch.int32)
    for r, row in enumerate(nbr.tolist()):
        for k, i in enumerate(row):
            if i == -1:
                continue
            require(0 <= i < num_rows, "nbr")
            require(out[i, k] == -1, "nbr")   # (input row, offset) named twice: no transpose exists
            out[i, k] = r
    return out


# ---------------------------------------------------------------- pack_map / unpack_map

def valid_pack_map(data):
    m = data.draw(st.sampled_from([0, 1, 5, 17, ROWS_PER_BLOCK + 3]))
    kvol = data.draw(st.sampled_from([1, 3, 16, 17, 27]))
    density = data.draw(st.sampled_from([0.0, 0.3, 1.0]))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 1000)))
    nbr = torch.randint(0, 50, (m, kvol), generator=g, dtype=torch.int32)
    nbr[torch.rand(m, kvol, generator=g) >= density] = -1
    return dict(nbr=nbr)


def packed_reference(nbr):
    m, kvol = nbr.shape
    words = (kvol + 15) // 16
    mask = torch.zeros(m, words, dtype=torch.int32)
    values = []
    starts = [0]
    for r, row in enumerate(nbr.tolist()):
        for k, v in enumerate(row):
            if v >= 0:
                mask[r, k // 16] |= 1 << (k % 16)
                values.append(v)
        if (r + 1) % ROWS_PER_BLOCK == 0 or r == m - 1:
            starts.append(len(values))
    mask = torch.where(mask >= 2 ** 15, mask - 2 ** 16, mask).to(torch.int16)
    return mask, torch.tensor(values, dtype=torch.int32), torch.tensor(starts, dtype=torch.int64)


def ref_pack_map(nbr):
    check_map(nbr)
    require(bool((nbr >= -1).all()), "nbr")
    return packed_reference(nbr)


def valid_unpack_map(data):
    nbr = valid_pack_map(data)["nbr"]
    mask, values, starts = packed_reference(nbr)
    return dict(mask=mask, values=values, block_starts=starts, kvol=nbr.shape[1])


def ref_unpack_map(mask, values, block_starts, kvol):
    require(isinstance(kvol, int) and 0 < kvol <= MAX_KERNEL_VOLUME, "kvol")
    words = (kvol + 15) // 16
    require(is_tensor(mask) and mask.dtype == torch.int16 and mask.dim() == 2 and mask.shape[1] == words, "mask")
    m = mask.shape[0]
    blocks = (m + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK
    require(is_tensor(values) and values.dtype == torch.int32 and values.dim() == 1, "values")
    require(is_tensor(block_starts) and block_starts.dtype == torch.int64 and block_starts.dim() == 1
            and block_starts.shape[0] == blocks + 1, "block_starts")
    starts = block_starts.tolist()
    require(starts[0] == 0 and starts[-1] == values.shape[0], "block_starts", "values")
    require(all(a <= b for a, b in zip(starts, starts[1:])), "block_starts")
    bits = mask.to(torch.int32) & 0xFFFF
    spare = (1 << 16) - (1 << (kvol - 16 * (words - 1)))   # lanes past kvol in the last word
    require(not bool((bits[:, -1] & spare).any()) if m else True, "mask")
    out = torch.full((m, kvol), -1, dtype=torch.int32)
    vals = values.tolist()
    for b in range(blocks):
        pos = starts[b]
        for r in range(b * ROWS_PER_BLOCK, min(m, (b + 1) * ROWS_PER_BLOCK)):
            for k in range(kvol):
                if (bits[r, k // 16] >> (k % 16)) & 1:
                    require(pos < starts[b + 1], "mask", "block_starts")
                    out[r, k] = vals[pos]
                    pos += 1
        require(pos == starts[b + 1], "mask", "block_starts")
    return out


# ---------------------------------------------------------------- gather_mm and its filter gradient

def draw_features(data, n, c, dtype):
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 10 ** 6)))
    return (torch.randn(n, c, generator=g, dtype=torch.float64) * 2).to(dtype)


def valid_gather(data, grad_instead_of_weight):
    dtype = data.draw(st.sampled_from(FLOAT_DTYPES))
    groups = data.draw(st.integers(1, 3))
    cin, cout = groups * data.draw(st.integers(1, 4)), groups * data.draw(st.integers(1, 4))
    n_in, m, kvol = data.draw(st.integers(0, 10)), data.draw(st.integers(0, 10)), data.draw(st.integers(1, 5))
    nbr = draw_map(data, m, n_in, kvol)
    args = dict(features=draw_features(data, n_in, cin, dtype), nbr=nbr,
                nbr_t=data.draw(st.sampled_from([None, "transpose"])), groups=groups,
                symmetric=data.draw(st.booleans()))
    if args["nbr_t"] == "transpose":   # a map with duplicates has no transpose: give none
        try:
            args["nbr_t"] = ref_transpose_map(nbr, n_in)
        except Invalid:
            args["nbr_t"] = None
    if grad_instead_of_weight:
        args["grad"] = draw_features(data, m, cout, dtype)
    else:
        args["weight"] = draw_features(data, kvol * (cin // groups), cout, dtype).reshape(kvol, cin // groups, cout)
    # sometimes the features' activation (features = relu(x * scale + shift): a fused BatchNorm+ReLU's
    # output): gather_mm is given x, scale and shift beside them, the filter gradient x and scale, shift
    activated = dtype in FEATURE_DTYPES_BN and data.draw(st.booleans(), label="activated")
    held = compute_dtype(dtype)
    scale = shift = x = None
    if activated:
        scale = draw_features(data, 1, cin, held).reshape(cin)
        shift = draw_features(data, 1, cin, held).reshape(cin)
        x = args["features"]
    if grad_instead_of_weight:
        args.update(scale=scale, shift=shift)
    else:
        args.update(source=x, source_scale=scale, source_shift=shift)
        if activated:
            args["features"] = _activated(x, scale, shift)
    return args


def _activated(x, scale, shift):
    """relu(x * scale + shift) as scale_shift_relu computes it: in float64 from the compute dtype's
    operands, rounded to it, then to x's dtype."""
    held = compute_dtype(x.dtype)
    z = (x.to(held).double() * scale.to(held).double() + shift.to(held).double()).to(held)
    return torch.relu(z).to(x.dtype)


def check_activation(features, x, x_name, scale, scale_name, shift, shift_name):
    """A gather's activation (schema.cpp): all or none; x [N, C] like the features, in a dtype the
    fused BatchNorm takes; scale and shift [C] as scale_shift_relu takes them. True if given."""
    named = ((x_name, x), (scale_name, scale), (shift_name, shift))
    if all(t is None for n, t in named if n != "features"):     # (the filter gradient's x is its features)
        return False
    require(all(t is not None for _, t in named), *[n for n, _ in named])
    require(is_tensor(x) and x.shape == features.shape and x.dtype == features.dtype, x_name)
    require(x.dim() == 2 and x.dtype in FEATURE_DTYPES_BN, x_name)
    c = x.shape[1]
    same_channels(c, **{scale_name: scale, shift_name: shift})
    channel(scale, c, scale_name, any_real_dtype=True)
    channel(shift, c, shift_name, any_real_dtype=True)
    return True


def check_gather(features, nbr, nbr_t, groups, other, other_name):
    """The shared contract of gather_mm (other = weight) and its filter gradient (other = grad)."""
    check_map(nbr)
    require(is_tensor(features) and features.dim() == 2, "features")
    require(isinstance(groups, int) and groups >= 1, "groups")
    if nbr_t is not None:
        check_map(nbr_t, "nbr_t")
    require(features.dtype in FLOAT_DTYPES, "features")
    require(is_tensor(other) and other.dtype == features.dtype, other_name)
    require(other.dim() == (3 if other_name == "weight" else 2), other_name)
    v = Violations()
    if nbr_t is not None:
        v.check(nbr_t.shape[1] == nbr.shape[1], "nbr_t", "nbr")
        # (its rows matter only to autograd's input gradient, which checks them: not read here)
    vals = nbr.reshape(-1)
    v.check(bool(((vals >= -1) & (vals < features.shape[0])).all()), "nbr", "features")
    if other_name == "weight":
        v.check(other.shape[0] == nbr.shape[1], "weight", "nbr")
        v.check(other.shape[1] * groups == features.shape[1], "weight", "groups", "features")
        v.check(other.shape[2] % groups == 0, "weight", "groups")
    else:
        v.check(other.shape[0] == nbr.shape[0], "grad", "nbr")
        v.check(features.shape[1] % groups == 0 and other.shape[1] % groups == 0, "groups", "features", "grad")
    v.settle()


def check_npu_dtype(features):
    """The NPU's kernels have no float64 path: refused by the primitive, after all of the op's own
    checks (its activation's included: an input that also breaks one of those names it)."""
    require(not (NPU_LIMITS and features.dtype == torch.float64), "features")


# The CUDA backend's Triton kernels multiply an absent neighbour by zero instead of skipping it
# wherever its offset is present in another row of the same tile of rows (a dense tile over
# (offset, channel) pairs, as spconv's implicit GEMM does), and skip it where the whole tile
# lacks the offset (mx_sparse/_cuda/map_plan.py). The sums are the same, but an Inf or NaN in the
# other operand turns 0 x Inf into NaN in some outputs where the CPU kernels, which skip, give a
# finite value. Under MXS_CUDA_ON_CPU=1 the contract of the two compute primitives is that each
# output is either (docs/en/cuda.md): the references then carry both.
ABSENT_TIMES_ZERO = os.environ.get("MXS_CUDA_ON_CPU", "0") not in ("", "0")
# The NPU backend's kernels (MXS_NPU_ON_CPU=1: the AscendC kernels in the emulator) have limits of
# their own, checked before each launch (kernels/ascend/<op>/op_host/<op>_limits.h): no float64,
# coordinates and batch indices below 2^24 for the strided map's output keys. Under that switch an
# input beyond them is a rejection naming the argument.
NPU_LIMITS = os.environ.get("MXS_NPU_ON_CPU", "0") not in ("", "0")
NPU_MAX_COORD = 1 << 24


def neighbour_terms(x, nbr, groups, absent_times_zero=False):
    """(r, k, g, a) for every term of a gather over ``nbr``: a = group g's columns of the input
    row nbr[r, k]; absent neighbours are skipped, or zero rows with ``absent_times_zero``."""
    cin_g = x.shape[1] // groups
    zero = torch.zeros(cin_g, dtype=x.dtype)
    for r in range(nbr.shape[0]):
        for k in range(nbr.shape[1]):
            i = int(nbr[r, k])
            if i < 0 and not absent_times_zero:
                continue
            for g in range(groups):
                yield r, k, g, x[i, g * cin_g:(g + 1) * cin_g] if i >= 0 else zero


def _gather_sum(x, w, nbr, groups, absent_times_zero):
    cout_g = w.shape[2] // groups
    out = torch.zeros(nbr.shape[0], w.shape[2], dtype=torch.float64)
    bound = torch.zeros_like(out)
    for r, k, g, a in neighbour_terms(x, nbr, groups, absent_times_zero):
        b = w[k, :, g * cout_g:(g + 1) * cout_g]
        out[r, g * cout_g:(g + 1) * cout_g] += a @ b
        bound[r, g * cout_g:(g + 1) * cout_g] += a.abs() @ b.abs()
    return out, bound


def _filter_sum(x, dy, nbr, groups, absent_times_zero):
    cout_g = dy.shape[1] // groups
    dw = torch.zeros(nbr.shape[1], x.shape[1] // groups, dy.shape[1], dtype=torch.float64)
    bound = torch.zeros_like(dw)
    for r, k, g, a in neighbour_terms(x, nbr, groups, absent_times_zero):
        b = dy[r, g * cout_g:(g + 1) * cout_g]
        dw[k, :, g * cout_g:(g + 1) * cout_g] += torch.outer(a, b)
        bound[k, :, g * cout_g:(g + 1) * cout_g] += torch.outer(a.abs(), b.abs())
    return dw, bound


def _either(total, a, b, groups, dtype):
    """The skipping sum; under ABSENT_TIMES_ZERO the zero-multiplying one too, as the alternative."""
    value, bound = total(a, b, groups, False)
    if not ABSENT_TIMES_ZERO:
        return Bounded(value.to(dtype), bound)
    zeroed, zeroed_bound = total(a, b, groups, True)
    # the error scale of an element that matches the alternative is the skipping sum's
    return Bounded(zeroed.to(dtype), torch.where(torch.isfinite(zeroed_bound), zeroed_bound, bound),
                   alternative=value.to(dtype))


def ref_gather_mm(features, weight, nbr, nbr_t, groups, symmetric, source=None, source_scale=None,
                  source_shift=None):
    check_gather(features, nbr, nbr_t, groups, weight, "weight")
    check_activation(features, source, "source", source_scale, "source_scale", source_shift, "source_shift")
    check_npu_dtype(features)
    x, w = features.double(), weight.double()
    return _either(lambda a, b, g, z: _gather_sum(a, b, nbr, g, z), x, w, groups, features.dtype)


def ref_gather_mm_backprop_filter(features, grad, nbr, nbr_t, groups, symmetric, scale=None, shift=None):
    check_gather(features, nbr, nbr_t, groups, grad, "grad")
    activated = check_activation(features, features, "features", scale, "scale", shift, "shift")
    check_npu_dtype(features)
    if activated:
        features = _activated(features, scale, shift)
    x, dy = features.double(), grad.double()
    return _either(lambda a, b, g, z: _filter_sum(a, b, nbr, g, z), x, dy, groups, features.dtype)


@dataclass
class Bounded:
    """An expected floating-point result and, per element, the sum of |terms| it adds up
    (the scale of the rounding error of any summation order); ``precision``: the dtype whose
    rounding the result carries, when it is not the output's own (float64 statistics of
    float32 data); ``alternative``: an element may instead match this value where ``value`` is
    not finite (the CUDA path's absent neighbours, see ABSENT_TIMES_ZERO)."""
    value: torch.Tensor
    bound: torch.Tensor
    precision: Optional[torch.dtype] = None
    alternative: Optional[torch.Tensor] = None


# ---------------------------------------------------------------- BatchNorm + ReLU

def check_bn_input(input):
    require(is_tensor(input) and input.dim() == 2 and input.dtype in FEATURE_DTYPES_BN, "input")
    return input.shape[1]


def channel(t, c, name, optional=False, any_real_dtype=False):
    if t is None:
        require(optional, name)
        return None
    require(is_tensor(t) and t.dim() == 1, name)
    require(t.shape[0] == c, name, "input")   # either side of a mismatch may be the one named
    require(t.dtype in FEATURE_DTYPES_BN or (any_real_dtype and not t.is_complex()), name)
    return t.double()


def same_channels(c, **vectors):
    """Every given [C] vector matches the input's C; a mismatch may be reported on any of them."""
    wrong = [n for n, t in vectors.items() if is_tensor(t) and t.dim() == 1 and t.shape[0] != c]
    require(not wrong, *wrong, "input")


def compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def valid_batch_norm_relu_forward(data):
    dtype = data.draw(st.sampled_from(FEATURE_DTYPES_BN))
    n, c = data.draw(st.integers(1, 9)), data.draw(st.integers(1, 5))
    vec = lambda: draw_features(data, 1, c, dtype).reshape(c)  # noqa: E731
    affine, running = data.draw(st.booleans()), data.draw(st.booleans())
    batch_stats = data.draw(st.booleans()) or not running
    return dict(input=draw_features(data, n, c, dtype), weight=vec() if affine else None,
                bias=vec() if affine else None, running_mean=vec() if running else None,
                running_var=vec().abs() + 0.5 if running else None, batch_stats=batch_stats,
                momentum=data.draw(st.sampled_from([0.1, 0.0, 1.0])), eps=data.draw(st.sampled_from([1e-5, 1e-3])))


def ref_batch_norm_relu_forward(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    c = check_bn_input(input)
    same_channels(c, weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    gamma = channel(weight, c, "weight", optional=True)
    beta = channel(bias, c, "bias", optional=True)
    rm = channel(running_mean, c, "running_mean", optional=True)
    rv = channel(running_var, c, "running_var", optional=True)
    x = input.double()
    n = x.shape[0]
    written = {}
    if batch_stats:
        require(n > 0, "input")
        mean, var = x.mean(0), x.var(0, unbiased=False)
        unbiased = var * (n / (n - 1) if n > 1 else 1.0)
        if rm is not None:
            # batch statistics carry the rounding of the input's dtype (float32 sums of float32 data)
            # into float64 running statistics too
            written["running_mean"] = Bounded(((1 - momentum) * rm + momentum * mean).to(running_mean.dtype),
                                              ((1 - momentum) * rm).abs() + abs(momentum) * x.abs().mean(0),
                                              precision=input.dtype)
        if rv is not None:
            written["running_var"] = Bounded(((1 - momentum) * rv + momentum * unbiased).to(running_var.dtype),
                                             ((1 - momentum) * rv).abs()
                                             + abs(momentum) * (x * x).mean(0) * (n / (n - 1) if n > 1 else 1.0),
                                             precision=input.dtype)
    else:
        require(rm is not None and rv is not None, "running_mean", "running_var")
        mean, var = rm, rv
    invstd = 1 / torch.sqrt(var + eps)
    scale = (gamma if gamma is not None else 1) * invstd
    shift = (beta if beta is not None else 0) - mean * scale
    y = torch.relu(x * scale + shift)   # relu keeps NaN, as the kernel does
    held = compute_dtype(input.dtype)
    # error scales: statistics of rounded data lose relative precision as var shrinks against mean^2
    # (batch statistics only; running statistics are exact inputs)
    ratio = ((x * x).mean(0) / (var + eps)) if batch_stats else torch.ones_like(invstd)
    mean_b = x.abs().mean(0) if batch_stats else mean.abs()
    scale_b = scale.abs() * ratio
    shift_b = (beta.abs() if beta is not None else 0) + mean_b * scale.abs() + mean.abs() * scale_b
    p = input.dtype if batch_stats else None
    result = (Bounded(y.to(input.dtype), x.abs() * scale_b + shift_b, precision=held if p else None),
              Bounded(mean, mean_b, precision=p), Bounded(invstd, invstd.abs() * ratio, precision=p),
              Bounded(scale.to(held), scale_b, precision=p), Bounded(shift.to(held), shift_b, precision=p))
    return Mutates(result, written)


def valid_scale_shift_relu(data):
    dtype = data.draw(st.sampled_from(FEATURE_DTYPES_BN))
    n, c = data.draw(st.integers(0, 9)), data.draw(st.integers(1, 5))
    held = compute_dtype(dtype)
    return dict(input=draw_features(data, n, c, dtype), scale=draw_features(data, 1, c, held).reshape(c),
                shift=draw_features(data, 1, c, held).reshape(c))


def ref_scale_shift_relu(input, scale, shift):
    c = check_bn_input(input)
    same_channels(c, scale=scale, shift=shift)
    held = compute_dtype(input.dtype)
    s = channel(scale, c, "scale", any_real_dtype=True).to(held).double()
    b = channel(shift, c, "shift", any_real_dtype=True).to(held).double()
    x = input.double()
    return Bounded(torch.relu(x * s + b).to(input.dtype), x.abs() * s.abs() + b.abs())


def valid_batch_norm_relu_backward(data):
    fwd = valid_batch_norm_relu_forward(data)
    fwd["batch_stats"] = fwd["batch_stats"] and fwd["input"].shape[0] > 0
    _, mean, invstd, scale, shift = (b.value for b in ref_batch_norm_relu_forward(**fwd).result)
    x = fwd["input"]
    return dict(grad=draw_features(data, x.shape[0], x.shape[1], x.dtype), input=x, mean=mean, invstd=invstd,
                weight=fwd["weight"], scale=scale, shift=shift, batch_stats=fwd["batch_stats"])


def ref_batch_norm_relu_backward(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    c = check_bn_input(input)
    require(is_tensor(grad) and not grad.is_complex(), "grad")
    require(grad.shape == input.shape, "grad", "input")
    same_channels(c, mean=mean, invstd=invstd, weight=weight, scale=scale, shift=shift)
    mu, inv = channel(mean, c, "mean"), channel(invstd, c, "invstd")
    gamma = channel(weight, c, "weight", optional=True)
    held = compute_dtype(input.dtype)
    s = channel(scale, c, "scale").to(held).double()
    b = channel(shift, c, "shift").to(held).double()
    x = input.double()
    dy = grad.to(input.dtype).double()
    g = torch.where(x.to(held).double() * s + b > 0, dy, torch.zeros_like(dy))
    xhat = (x - mu) * inv
    dbeta, dgamma = g.sum(0), (g * xhat).sum(0)
    a = (gamma if gamma is not None else torch.ones(c, dtype=torch.float64)) * inv
    n = x.shape[0]
    dx = a * (g - dbeta / n - xhat * dgamma / n) if batch_stats else a * g
    scale_dx = a.abs() * (g.abs() + g.abs().sum(0) / max(n, 1) + xhat.abs() * (g * xhat).abs().sum(0) / max(n, 1))
    wider = ACCELERATOR_PATH and weight is not None
    channels = torch.promote_types(input.dtype, weight.dtype) if wider else input.dtype
    return (Bounded(dx.to(input.dtype), scale_dx), Bounded(dgamma.to(channels), (g * xhat).abs().sum(0)),
            Bounded(dbeta.to(channels), g.abs().sum(0)))


# ---------------------------------------------------------------- voxelize_hard / voxelize_dynamic

def valid_voxelize(data, hard):
    ndim = data.draw(st.integers(1, 4))
    n, c = data.draw(st.integers(1, 30)), ndim + data.draw(st.integers(0, 2))
    size = [data.draw(st.sampled_from([0.25, 0.5, 1.0, 0.3])) for _ in range(ndim)]
    lo = [data.draw(st.sampled_from([-2.0, -0.5, 0.0])) for _ in range(ndim)]
    hi = [a + data.draw(st.sampled_from([0.5, 1.0, 2.5])) for a in lo]
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 10 ** 6)))
    # on a quarter grid reaching past the range: points on cell edges, on both bounds and outside
    coords = torch.randint(-12, 16, (n, ndim), generator=g).double() / 4
    points = torch.cat([coords, torch.randn(n, c - ndim, generator=g, dtype=torch.float64)], 1)
    batch = None
    if data.draw(st.booleans()):
        batch = torch.randint(0, 3, (n,), generator=g).to(data.draw(st.sampled_from([torch.int32, torch.int64])))
    args = dict(points=points.to(data.draw(st.sampled_from(FLOAT_DTYPES))), batch=batch, voxel_size=size,
                point_cloud_range=lo + hi)
    if hard:
        args.update(max_points=data.draw(st.integers(1, 3)), max_voxels=data.draw(st.sampled_from([-1, 1, 2, 5])))
    return args


def check_voxelize(points, batch, voxel_size, point_cloud_range):
    """The arguments' contract (kernels/contract/voxelize_args.h states it too); returns ndim."""
    require(isinstance(voxel_size, (list, tuple)) and 1 <= len(voxel_size) <= MAX_SPATIAL_DIMS, "voxel_size")
    ndim = len(voxel_size)
    require(isinstance(point_cloud_range, (list, tuple)) and len(point_cloud_range) == 2 * ndim,
            "point_cloud_range", "voxel_size")
    f32 = [float(torch.tensor(v, dtype=torch.float64).float()) for v in list(voxel_size) + list(point_cloud_range)]
    size, lo, hi = f32[:ndim], f32[ndim:2 * ndim], f32[2 * ndim:]
    require(all(math.isfinite(v) and v > 0 for v in size), "voxel_size")
    require(all(math.isfinite(a) and math.isfinite(b) and b > a for a, b in zip(lo, hi)), "point_cloud_range")
    extents = voxel_reference.extents(voxel_size, point_cloud_range)
    require(all(1 <= e <= INT32_MAX for e in extents), "voxel_size", "point_cloud_range")
    require(math.prod(extents) <= INT64_MAX, "voxel_size", "point_cloud_range")
    require(is_tensor(points) and points.dtype in FLOAT_DTYPES, "points")
    require(points.dim() == 2 and points.shape[1] >= ndim and points.shape[0] >= 1, "points")
    if batch is not None:
        require(is_tensor(batch) and batch.dtype in (torch.int32, torch.int64), "batch")
        require(batch.dim() == 1 and batch.shape[0] == points.shape[0], "batch", "points")
        require(int(batch.min()) >= 0, "batch")
        require((int(batch.max()) + 1) * math.prod(extents) <= INT64_MAX, "batch")
    require(bool(torch.isfinite(points).all()), "points")   # values last: the ops check them with the keys
    return ndim


def voxelize_reference(points, batch, voxel_size, point_cloud_range, max_points=None, max_voxels=None):
    """voxel_reference.voxelize (one pass over the points per sample, NumPy float32 cell
    arithmetic, float64 for float64 points) on the points' exact values."""
    wide = points.double() if points.dtype == torch.float64 else points.float()
    voxels, coords, num, point_voxel = voxel_reference.voxelize(
        wide.numpy(), list(voxel_size), list(point_cloud_range), max_points, max_voxels,
        None if batch is None else batch.long().numpy())
    out = (torch.from_numpy(coords), torch.from_numpy(num), torch.from_numpy(point_voxel))
    if voxels is None:
        return out
    return (torch.from_numpy(voxels).to(points.dtype),) + out


def ref_voxelize_dynamic(points, batch, voxel_size, point_cloud_range):
    check_voxelize(points, batch, voxel_size, point_cloud_range)
    return voxelize_reference(points, batch, voxel_size, point_cloud_range)


def ref_voxelize_hard(points, batch, voxel_size, point_cloud_range, max_points, max_voxels):
    check_voxelize(points, batch, voxel_size, point_cloud_range)
    v = Violations()
    v.check(1 <= max_points <= INT64_MAX, "max_points")   # beyond int64 the schema's int refuses it
    v.check(1 <= max_voxels <= INT64_MAX or max_voxels == -1, "max_voxels")
    v.settle()
    cap = None if max_voxels == -1 else max_voxels
    coords = voxelize_reference(points, batch, voxel_size, point_cloud_range, None, cap)[0]
    m, c = coords.shape[0], points.shape[1]
    # the voxels tensor [M, max_points, C]: strides within int64 and, when it holds voxels, bytes
    # within any memory (VOXELIZE_INT_DAMAGE keeps the machine-dependent middle out)
    require(max_points * c <= INT64_MAX if m == 0 else m * max_points * c * points.element_size() <= 2 ** 40,
            "max_points")
    return voxelize_reference(points, batch, voxel_size, point_cloud_range, max_points, cap)


# damaged ints of the caps: a [M, 2^31, C] voxels tensor (12 GiB to 2 TiB here) may or may not be
# allocatable depending on the machine, so 2^31 - 1 and 2^31 are left out; the contract is exact
# for the others (a cap of 2^62 or more always exceeds any memory or overflows)
VOXELIZE_INT_DAMAGE = [-1, 0, -5, 2 ** 62, 2 ** 63 - 1, -2 ** 63]


# ---------------------------------------------------------------- pooling over a neighbor map

def offset_dtype(kvol):
    """argmax holds kernel offsets in the narrowest of int8, int16, int32 (kernels/schema/schema.cpp)."""
    return torch.int8 if kvol <= 127 else torch.int16 if kvol <= 32767 else torch.int32


def valid_pool(data):
    dtype = data.draw(st.sampled_from(FLOAT_DTYPES))
    n_in, m, kvol, c = (data.draw(st.integers(0, 10)), data.draw(st.integers(0, 10)), data.draw(st.integers(1, 5)),
                        data.draw(st.integers(1, 4)))
    return dict(features=draw_features(data, n_in, c, dtype), nbr=draw_map(data, m, n_in, kvol))


def check_pool(x, nbr, name, num_rows):
    require(is_tensor(x) and x.dim() == 2 and x.dtype in FLOAT_DTYPES, name)
    check_map(nbr)
    vals = nbr.reshape(-1).long()
    require(bool(((vals >= -1) & (vals < num_rows)).all()), "nbr", name)


def ref_sparse_max_pool(features, nbr):
    """Per output row and channel the largest input of its window (the lowest offset on ties, a NaN
    over a number), and that offset; a row without inputs gives 0 and -1."""
    check_pool(features, nbr, "features", features.shape[0] if is_tensor(features) and features.dim() == 2 else 0)
    m, c = nbr.shape[0], features.shape[1]
    out = torch.zeros(m, c, dtype=features.dtype)
    argmax = torch.full((m, c), -1, dtype=offset_dtype(nbr.shape[1]))
    for r in range(m):
        for ch in range(c):
            for k in range(nbr.shape[1]):
                i = int(nbr[r, k])
                if i < 0:
                    continue
                v, best = features[i, ch], out[r, ch]
                if argmax[r, ch] < 0 or v > best or (bool(v.isnan()) and not bool(best.isnan())):
                    out[r, ch], argmax[r, ch] = v, k
    return out, argmax


def valid_max_pool_backward(data):
    args = valid_pool(data)
    _, argmax = ref_sparse_max_pool(**args)
    grad = draw_features(data, args["nbr"].shape[0], args["features"].shape[1], args["features"].dtype)
    return dict(grad=grad, argmax=argmax, nbr=args["nbr"], num_rows=args["features"].shape[0])


def check_num_rows(num_rows):
    require(isinstance(num_rows, int) and 0 <= num_rows < INT32_MAX, "num_rows")


def ref_sparse_max_pool_backward(grad, argmax, nbr, num_rows):
    require(is_tensor(grad) and grad.dim() == 2 and grad.dtype in FLOAT_DTYPES, "grad")
    check_map(nbr)
    require(nbr.shape[0] == grad.shape[0], "nbr", "grad")
    require(is_tensor(argmax) and argmax.shape == grad.shape and argmax.dtype == offset_dtype(nbr.shape[1]), "argmax")
    check_num_rows(num_rows)
    check_pool(grad, nbr, "grad", num_rows)
    a = argmax.long()
    require(bool(((a >= -1) & (a < nbr.shape[1])).all()), "argmax")
    dx = torch.zeros(num_rows, grad.shape[1], dtype=torch.float64)
    bound = torch.zeros_like(dx)   # the sum of |terms| (several windows can pick the same input)
    for r in range(grad.shape[0]):
        for ch in range(grad.shape[1]):
            k = int(a[r, ch])
            if k >= 0:
                i = int(nbr[r, k])
                require(i >= 0, "argmax")
                dx[i, ch] += float(grad[r, ch])
                bound[i, ch] += abs(float(grad[r, ch]))
    return Bounded(dx.to(grad.dtype), bound)


def ref_sparse_avg_pool(features, nbr):
    check_pool(features, nbr, "features", features.shape[0] if is_tensor(features) and features.dim() == 2 else 0)
    x = features.double()
    out = torch.zeros(nbr.shape[0], x.shape[1], dtype=torch.float64)
    bound = torch.zeros_like(out)
    for r in range(nbr.shape[0]):
        rows = [int(i) for i in nbr[r] if i >= 0]
        for i in rows:
            out[r] += x[i] / len(rows)
            bound[r] += x[i].abs() / len(rows)
    return Bounded(out.to(features.dtype), bound)


def valid_avg_pool_backward(data):
    args = valid_pool(data)
    grad = draw_features(data, args["nbr"].shape[0], args["features"].shape[1], args["features"].dtype)
    return dict(grad=grad, nbr=args["nbr"], num_rows=args["features"].shape[0])


def ref_sparse_avg_pool_backward(grad, nbr, num_rows):
    require(is_tensor(grad) and grad.dim() == 2 and grad.dtype in FLOAT_DTYPES, "grad")
    check_map(nbr)
    require(nbr.shape[0] == grad.shape[0], "nbr", "grad")
    check_num_rows(num_rows)
    check_pool(grad, nbr, "grad", num_rows)
    g = grad.double()
    dx = torch.zeros(num_rows, g.shape[1], dtype=torch.float64)
    bound = torch.zeros_like(dx)
    for r in range(g.shape[0]):
        rows = [int(i) for i in nbr[r] if i >= 0]
        for i in rows:
            dx[i] += g[r] / len(rows)
            bound[i] += g[r].abs() / len(rows)
    return Bounded(dx.to(grad.dtype), bound)


# ---------------------------------------------------------------- the table

SPECS: Dict[str, Spec] = {
    "build_subm_map": Spec(valid_build_subm_map, ref_build_subm_map),
    "build_conv_map": Spec(valid_build_conv_map, ref_build_conv_map),
    "build_conv_transpose_map": Spec(valid_build_conv_transpose_map, ref_build_conv_transpose_map),
    "build_conv_map_at": Spec(valid_build_conv_map_at, ref_build_conv_map_at),
    "transpose_map": Spec(valid_transpose_map, ref_transpose_map),
    "pack_map": Spec(valid_pack_map, ref_pack_map),
    "unpack_map": Spec(valid_unpack_map, ref_unpack_map),
    "gather_mm": Spec(lambda d: valid_gather(d, False), ref_gather_mm),
    "gather_mm_backprop_filter": Spec(lambda d: valid_gather(d, True), ref_gather_mm_backprop_filter),
    "batch_norm_relu_forward": Spec(valid_batch_norm_relu_forward, ref_batch_norm_relu_forward),
    "scale_shift_relu": Spec(valid_scale_shift_relu, ref_scale_shift_relu),
    "batch_norm_relu_backward": Spec(valid_batch_norm_relu_backward, ref_batch_norm_relu_backward),
    "voxelize_dynamic": Spec(lambda d: valid_voxelize(d, False), ref_voxelize_dynamic),
    "voxelize_hard": Spec(lambda d: valid_voxelize(d, True), ref_voxelize_hard,
                          int_damage=VOXELIZE_INT_DAMAGE),
    "sparse_max_pool": Spec(valid_pool, ref_sparse_max_pool),
    "sparse_max_pool_backward": Spec(valid_max_pool_backward, ref_sparse_max_pool_backward),
    "sparse_avg_pool": Spec(valid_pool, ref_sparse_avg_pool),
    "sparse_avg_pool_backward": Spec(valid_avg_pool_backward, ref_sparse_avg_pool_backward),
}


def spec_for(op_name: str) -> Optional[Spec]:
    return SPECS.get(op_name)
