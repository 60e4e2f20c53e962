"""The Python face of the op contract: argument checks, bounds, output extents, key packing and
key deltas as the C++ kernels apply them (kernels/contract/op_args.h, pool_args.h,
packed_map_args.h, transpose_map_args.h, batch_norm_relu_args.h, voxelize_args.h, key_packing.h, index_errors.h, built
on kernels/common), reached through ``mx_sparse._C.contract`` -- not a copy. The Python
layer, the compat surfaces and the accelerator launch code call these, so a bad argument gets
the same ValueError on every backend. Every check raises ValueError naming the argument."""
import math
from typing import List, Optional, Sequence, Tuple

import torch

from .._C import contract as _cc

# The checks and extents of plain ints are functions of their arguments alone: under torch.compile
# dynamo runs them while tracing (they raise there, or their result is a constant of the graph)
# instead of breaking the graph at a C++ call it cannot trace.
_constant_under_compile = torch.compiler.assume_constant_result

INT32_MAX = _cc.INT32_MAX
INT64_MAX = _cc.INT64_MAX
MAX_SPATIAL_DIMS = _cc.MAX_SPATIAL_DIMS
MAX_GEOMETRY_VALUE = _cc.MAX_GEOMETRY_VALUE    # kMaxGeometryValue (why: op_args.h)
MAX_KERNEL_VOLUME = _cc.MAX_KERNEL_VOLUME      # kMaxKernelVolume (why: op_args.h)
# The dtypes check_float (op_args.h) accepts; tests/test_contract.py checks the two agree.
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def same_device(reference_name: str, reference: torch.Tensor, **tensors: Optional[torch.Tensor]) -> None:
    """Every given tensor (None: an absent optional argument) on the device of ``reference``."""
    _cc.same_device(reference_name, reference, list(tensors.items()))


@_constant_under_compile
def grid(spatial_shape: Sequence[int], batch_size: int) -> List[int]:
    """make_grid: 1..4 positive extents whose batch_size x product fits an int64 key."""
    return _cc.grid(list(spatial_shape), batch_size)


@_constant_under_compile
def per_axis(name: str, values: Sequence[int], ndim: int, minimum: int) -> List[int]:
    """``ndim`` values, each in [minimum, 2^31 - 1] (fill_axis_arg)."""
    values = list(values)
    try:
        return _cc.per_axis(name, values, ndim, minimum)
    except TypeError:
        # beyond int64 the call into C++ cannot take the value at all (pybind: TypeError); looked
        # for only then, so that the usual call pays for no pass over the values in Python
        if any(isinstance(v, int) and not -INT64_MAX - 1 <= v <= INT64_MAX for v in values):
            raise ValueError(f"{name}: expected every value in [{minimum}, 2^31 - 1], got {values}") from None
        raise


@_constant_under_compile
def kernel_volume(kernel_size: Sequence[int]) -> int:
    """prod(kernel_size), at most MAX_KERNEL_VOLUME (the columns of a neighbor map)."""
    return _cc.kernel_volume(list(kernel_size))


@_constant_under_compile
def conv_output_shape(shape, kernel, stride, padding, dilation, batch_size, pads_end=None) -> List[int]:
    """conv_output_grid: the strided conv's output extent per axis (conv_out_extent, floor
    division), every axis non-empty and within int32 coordinates, every output key within int64.
    ``padding`` is the padding below (pads_begin); ``pads_end`` the padding above, ``padding``
    when None (symmetric). The geometry is checked like build_conv_map's (make_geometry)."""
    return _cc.conv_output_shape(list(shape), list(kernel), list(stride), list(padding), list(dilation), batch_size,
                                 None if pads_end is None else list(pads_end))


@_constant_under_compile
def conv_transpose_output_shape(shape, kernel, stride, pads_begin, pads_end, dilation, output_padding,
                                batch_size) -> List[int]:
    """conv_transpose_output_grid: the transposed conv's output extent per axis
    ((s - 1)*stride - pads_begin - pads_end + dilation*(k - 1) + 1 + output_padding), with
    build_conv_transpose_map's checks: output_padding below stride or dilation per axis, every
    axis non-empty and within int32 coordinates, every output key within int64."""
    return _cc.conv_transpose_output_shape(list(shape), list(kernel), list(stride), list(pads_begin), list(pads_end),
                                           list(dilation), list(output_padding), batch_size)


@_constant_under_compile
def conv_map_at_output_shape(shape, kernel, stride, pads_begin, dilation, batch_size, transposed,
                             out_spatial_shape=None) -> List[int]:
    """conv_map_at_output_grid: the grid build_conv_map_at checks out_indices against --
    ``out_spatial_shape`` when given, else every output whose window meets the input grid
    (strided: (s - 1 + pads_begin) // stride + 1; transposed: (s - 1)*stride - pads_begin +
    dilation*(k - 1) + 1) --, with that op's geometry checks and messages."""
    return _cc.conv_map_at_output_shape(list(shape), list(kernel), list(stride), list(pads_begin), list(dilation),
                                        batch_size, bool(transposed),
                                        None if out_spatial_shape is None else list(out_spatial_shape))


@_constant_under_compile
def conv_lattice(kernel, stride, dilation) -> List[List[int]]:
    """_conv_out_keys' lattice per axis (kernels/common/conv_rules.h): [slots, step, gcd(s, d)], the
    kernel positions through which one input coordinate reaches an output being one residue class
    modulo step = s / gcd(s, d), at most slots = ceil(k / step) of them."""
    return _cc.conv_lattice(list(kernel), list(stride), list(dilation))


def conv_out_slot_volume(kernel, stride, dilation) -> int:
    """J, _conv_out_keys' output rows per input: the product of the slots per axis (conv_lattice;
    the kernel volume at stride 1)."""
    return math.prod(axis[0] for axis in conv_lattice(kernel, stride, dilation))


@_constant_under_compile
def conv_output_extent(shape, kernel, stride, padding, dilation, pads_end=None) -> List[int]:
    """conv_out_extent per axis without the bounds of conv_output_shape (may be <= 0), for
    arguments the caller has checked or that follow another library's rules (pads_end: as in
    conv_output_shape)."""
    return _cc.conv_output_extent(list(shape), list(kernel), list(stride), list(padding), list(dilation),
                                  None if pads_end is None else list(pads_end))


@_constant_under_compile
def conv_transpose_output_extent(shape, kernel, stride, pads_begin, pads_end, dilation,
                                 output_padding) -> List[int]:
    """conv_transpose_out_extent per axis without the bounds of conv_transpose_output_shape
    (may be <= 0): (s - 1)*stride - pads_begin - pads_end + dilation*(k - 1) + 1 + output_padding."""
    return _cc.conv_transpose_output_extent(list(shape), list(kernel), list(stride), list(pads_begin),
                                            list(pads_end), list(dilation), list(output_padding))


def indices(t: torch.Tensor, ndim: int, name: str = "indices") -> None:
    """int32 [N, 1 + ndim] with N < 2^31 - 1 (check_indices, check_row_count); ``name``: the argument."""
    _cc.indices(t, ndim, name)


def row_count(n: int, name: str = "indices") -> None:
    """n rows that an int32 neighbor map can name: n < 2^31 - 1 (check_row_count)."""
    _cc.row_count(int(n), name)


def neighbor_map(t: torch.Tensor, name: str) -> None:
    """An int32 [M, K] map (check_map)."""
    _cc.neighbor_map(t, name)


def float_tensor(t: torch.Tensor, name: str) -> None:
    """A tensor of one of FLOAT_DTYPES (check_float)."""
    _cc.float_tensor(t, name)


def gather_operands(features, name, operand, nbr, nbr_t, groups) -> None:
    """check_gather_call: devices, layouts, float features and an ``operand`` (``name``: the
    weight of gather_mm or the grad of the filter gradient) of the features' dtype."""
    _cc.gather_operands(features, name, operand, nbr, nbr_t, groups)


def gather_mm_shapes(features, weight, nbr, nbr_t, groups) -> Tuple[int, int]:
    """(cin_g, cout_g) of a gather_mm call, after its checks (check_gather_mm_args)."""
    return _cc.gather_mm_shapes(features, weight, nbr, nbr_t, groups)


def backprop_filter_shapes(features, grad, nbr, nbr_t, groups) -> Tuple[int, int]:
    """(cin_g, cout_g) of a gather_mm_backprop_filter call, after its checks."""
    return _cc.backprop_filter_shapes(features, grad, nbr, nbr_t, groups)


def gather_mm_activation(features, source, source_scale, source_shift, half_ok: bool = False) -> bool:
    """gather_mm's activation (all three or none; schema.cpp): whether one was given."""
    return _cc.gather_mm_activation(features, source, source_scale, source_shift, half_ok)


def backprop_filter_activation(features, scale, shift, half_ok: bool = False) -> bool:
    """gather_mm_backprop_filter's activation (both or none): whether one was given."""
    return _cc.backprop_filter_activation(features, scale, shift, half_ok)


def voxel_grid_extent(voxel_size: Sequence[float], point_cloud_range: Sequence[float]) -> List[int]:
    """Cells per point axis (x, y, z, ...) of the voxelization grid (make_voxel_grid,
    voxelize_args.h), the arguments checked like the voxelization ops check them."""
    return list(_cc.voxel_grid_extent([float(v) for v in voxel_size], [float(v) for v in point_cloud_range]))


def pool_offset_dtype(kvol: int) -> torch.dtype:
    """The dtype of sparse_max_pool's argmax (kernel offsets and -1) for a map of kvol offsets."""
    return _cc.pool_offset_dtype(kvol)


def pool_operands(features: torch.Tensor, nbr: torch.Tensor) -> None:
    """sparse_max_pool / sparse_avg_pool arguments (check_pool_args, pool_args.h): metadata only."""
    _cc.pool_operands(features, nbr)


def pool_backward_operands(grad: torch.Tensor, argmax: Optional[torch.Tensor], nbr: torch.Tensor,
                           num_rows: int) -> None:
    """sparse_max_pool_backward (``argmax`` given) / sparse_avg_pool_backward (``argmax=None``)
    arguments (check_pool_backward_args, pool_args.h): metadata only."""
    _cc.pool_backward_operands(grad, argmax, nbr, num_rows)


def transpose_map_operands(nbr: torch.Tensor, num_rows: int) -> None:
    """transpose_map's arguments (check_transpose_map_args, transpose_map_args.h)."""
    _cc.transpose_map_operands(nbr, num_rows)


def transpose_map_rows(bad_row: int, m: int, num_rows: int) -> None:
    """Raises transpose_map's ValueError for map row ``bad_row`` holding an input row outside
    [-1, num_rows); nothing for ``bad_row`` >= m (none)."""
    _cc.transpose_map_rows(int(bad_row), int(m), int(num_rows))


def transpose_map_named_twice(earlier: int, row: int, input_row: int, offset: int) -> None:
    """Raises transpose_map's ValueError for map rows ``earlier`` and ``row`` both naming
    (``input_row``, ``offset``)."""
    _cc.transpose_map_named_twice(int(earlier), int(row), int(input_row), int(offset))


# The packed-map format (packed_map_args.h): rows per block of block_starts, offsets per int16 mask word.
PACK_ROWS_PER_BLOCK = _cc.PACK_ROWS_PER_BLOCK
PACK_LANES = _cc.PACK_LANES


def pack_map_operands(nbr: torch.Tensor) -> None:
    """pack_map's argument (check_pack_map_args, packed_map_args.h): an int32 [M, K] map."""
    _cc.pack_map_operands(nbr)


def pack_map_entries(bad_entry: int, bad_value: int, kvol: int) -> None:
    """Raises pack_map's ValueError for the entry at flat index ``bad_entry`` (row * kvol +
    offset) holding ``bad_value`` below -1; nothing for ``bad_entry`` < 0 (none)."""
    _cc.pack_map_entries(int(bad_entry), int(bad_value), int(kvol))


def unpack_map_operands(mask: torch.Tensor, values: torch.Tensor, block_starts: torch.Tensor, kvol: int) -> None:
    """unpack_map's arguments (check_unpack_map_args, packed_map_args.h): metadata only."""
    _cc.unpack_map_operands(mask, values, block_starts, kvol)


def unpack_map_starts(first: int, last: int, total: int, decreasing_block: int, nblocks: int) -> None:
    """unpack_map's checks of block_starts' values, from what was read: its first and last
    value against 0 and the number of values ``total``, then ``decreasing_block`` (the first
    block whose start exceeds the next; ``nblocks`` or more: none)."""
    _cc.unpack_map_starts(int(first), int(last), int(total), int(decreasing_block), int(nblocks))


def unpack_map_mask(spare_row: int, mismatch_block: int, m: int, kvol: int) -> None:
    """unpack_map's checks of mask's values, from what was read: ``spare_row`` (the first row
    setting a bit past kvol; ``m`` or more: none), then ``mismatch_block`` (the first block
    whose set bits differ from its block_starts share; the number of blocks or more: none)."""
    _cc.unpack_map_mask(int(spare_row), int(mismatch_block), int(m), int(kvol))


def batch_norm_relu_forward_operands(input, weight, bias, running_mean, running_var, batch_stats: bool,
                                     half_ok: bool = False) -> None:
    """batch_norm_relu_forward's arguments (batch_norm_relu_args.h), all before anything is written;
    ``half_ok``: float16 accepted (the accelerators' kernels take autocast's activations)."""
    _cc.batch_norm_relu_forward_operands(input, weight, bias, running_mean, running_var, bool(batch_stats),
                                         bool(half_ok))


def scale_shift_relu_operands(input, scale, shift, half_ok: bool = False) -> None:
    """scale_shift_relu's arguments (batch_norm_relu_args.h)."""
    _cc.scale_shift_relu_operands(input, scale, shift, bool(half_ok))


def batch_norm_relu_backward_operands(grad, input, mean, invstd, weight, scale, shift, half_ok: bool = False) -> None:
    """batch_norm_relu_backward's arguments (batch_norm_relu_args.h)."""
    _cc.batch_norm_relu_backward_operands(grad, input, mean, invstd, weight, scale, shift, bool(half_ok))


@_constant_under_compile
def key_deltas(kernel_size, dilation, grid_shape, centered: bool) -> List[int]:
    """Key difference of every kernel offset k (row-major over kernel_size) on a row-major grid
    of ``grid_shape``: offset (kp - k//2)*dilation per axis when ``centered`` (submanifold),
    kp*dilation otherwise (kernel_offset_key_delta, conv_rules.h)."""
    return _cc.key_deltas(list(kernel_size), list(dilation), list(grid_shape), bool(centered))


def pack_keys(indices: torch.Tensor, shape, shift=None, scale=None) -> torch.Tensor:
    """int64 keys ((b*S0 + c0*scale0 + shift0)*S1 + ...) of the rows (batch, *coords) of
    ``indices [..., 1 + ndim]`` (any integer dtype), computed with torch operators on its device;
    shift / scale default to 0 / 1 per axis. The caller keeps every key within int64 (``grid``)."""
    return _cc.pack_keys(indices, list(shape), list(shift or ()), list(scale or ()))


def unpack_keys(keys: torch.Tensor, shape) -> torch.Tensor:
    """The rows (batch, *coords) of int64 ``keys [M]`` as int32 [M, 1 + ndim] (pack_keys' inverse)."""
    return _cc.unpack_keys(keys, list(shape))


def index_error(indices: torch.Tensor, spatial_shape, batch_size: int, bad_row: int, dup_row: int,
                name: str = "indices", grid_name: str = "spatial_shape") -> None:
    """Raises the map builders' ValueError for ``bad_row`` (a row outside the grid) or else
    ``dup_row`` (the later row of a duplicate voxel); a row >= N means none. Reads that row.
    ``name`` / ``grid_name``: the arguments holding the rows and their grid, for the message."""
    n, bad_row, dup_row = indices.shape[0], int(bad_row), int(dup_row)
    if not 0 <= bad_row < n and not 0 <= dup_row < n:
        return   # nothing to raise (what the C++ check concludes too), without the call into it
    _cc.index_error(indices, list(spatial_shape), int(batch_size), int(bad_row), int(dup_row), name, grid_name)


def map_row_error(name: str, row: int, num_rows: int) -> None:
    """Raises the gathers' ValueError for map row ``row`` (the lowest holding an entry outside
    [-1, num_rows)); nothing for row < 0 (index_errors.h raise_map_row_error)."""
    _cc.map_row_error(name, int(row), int(num_rows))


def pool_entries(name: str, lo: int, hi: int, num_rows: int) -> None:
    """The pooling map's entries, lowest ``lo`` and highest ``hi``, within [-1, num_rows)
    (pool_args.h check_pool_entries)."""
    _cc.pool_entries(name, int(lo), int(hi), int(num_rows))


def dtype_name(dtype: torch.dtype) -> str:
    """``dtype`` as the C++ checks spell it in their messages (Float, Long, BFloat16, ...)."""
    return _cc.dtype_name(torch.empty(0, dtype=dtype))
