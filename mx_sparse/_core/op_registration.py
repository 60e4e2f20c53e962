"""The op registration of mx_sparse's Python side: loads the compiled operators (``_C``, and the
NPU binding where built), registers their fake (meta) kernels and the accelerator orchestration,
and answers which kernels the dispatcher holds (``has_kernel``, ``kernel_for_key``). ``ops`` is
``torch.ops.mx_sparse``, the dispatcher's namespace of the ops.

The op schema, the CPU kernels and autograd live in C++ (kernels/); importing
``mx_sparse._C`` registers them as ``torch.ops.mx_sparse.*``. The accelerator
orchestration (mx_sparse/_accelerator, for CUDA and NPU) and its device primitives are
registered at the end of this module (mx_sparse/_accelerator/registration.py). The
fake kernels are here because ``build_conv_map`` returns a data-dependent number of
rows, which torch expresses with an unbacked symbolic size (its third result, the output
spatial shape, depends on the arguments alone: the fake kernel gives it from the same rule).
"""
import functools

import torch

from .. import _C  # noqa: F401  (registers torch.ops.mx_sparse.*)

ops = torch.ops.mx_sparse


def _load_npu_kernels() -> bool:
    """Registers the NPU primitives under PrivateUse1 when this build has them (setup.py builds
    mx_sparse/_C_npu*.so only where torch_npu and CANN exist); torch_npu goes first."""
    import glob
    import os
    libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(__file__)), "_C_npu*.so"))   # in mx_sparse/
    if libs:
        import torch_npu  # noqa: F401
        torch.ops.load_library(libs[0])
    return bool(libs)



def _register_fake(name):
    register = getattr(torch.library, "register_fake", None) or getattr(torch.library, "impl_abstract", None)
    if register is None:  # torch < 2.2: no FakeTensor support to register with
        return lambda fn: fn
    return register("mx_sparse::" + name)


def _data_dependent_size():
    """An unbacked symbolic size (>= 0) for a data-dependent output length.

    ``ctx.new_dynamic_size()`` refuses unless dynamo's ``capture_dynamic_output_shape_ops`` is
    set (a process-wide switch that also changes how dynamo treats ``nonzero``/``unique`` in the
    user's own code), and the graph then breaks at every strided convolution. The Python layer
    handles unbacked voxel counts (no guard depends on them), so where a shape environment
    exists the symbol is created directly, as torch's own data-dependent fake kernels do; the
    range constraint is the one ``new_dynamic_size`` applies."""
    ctx = torch.library.get_ctx()
    shape_env = getattr(ctx, "_shape_env", None)
    if shape_env is None:
        return ctx.new_dynamic_size()   # raises DynamicOutputShapeException: nothing to bind to
    from torch.fx.experimental.symbolic_shapes import _constrain_range_for_size
    size = shape_env.create_unbacked_symint()
    _constrain_range_for_size(size, min=0)
    return size


def _kernel_volume(kernel_size):
    volume = 1
    for k in kernel_size:
        volume *= k
    return volume


@_register_fake("build_subm_map")
def _build_subm_map_fake(indices, spatial_shape, batch_size, kernel_size, dilation):
    return indices.new_empty((indices.shape[0], _kernel_volume(kernel_size)))


@_register_fake("build_conv_map")
def _build_conv_map_fake(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, pads_end=None):
    from .contract import conv_output_shape
    # the output grid is a function of the arguments alone (the rule the builders return it from)
    out_shape = conv_output_shape(spatial_shape, kernel_size, stride, padding, dilation, batch_size, pads_end)
    m = _data_dependent_size()
    return (indices.new_empty((m, indices.shape[1])), indices.new_empty((m, _kernel_volume(kernel_size))), out_shape)


@_register_fake("build_conv_transpose_map")
def _build_conv_transpose_map_fake(indices, spatial_shape, batch_size, kernel_size, stride, pads_begin, pads_end,
                                   dilation, output_padding):
    from .contract import conv_transpose_output_shape
    out_shape = conv_transpose_output_shape(spatial_shape, kernel_size, stride, pads_begin, pads_end, dilation,
                                            output_padding, batch_size)
    m = _data_dependent_size()   # the generated voxels: known only from the data
    return (indices.new_empty((m, indices.shape[1])), indices.new_empty((m, _kernel_volume(kernel_size))), out_shape)


@_register_fake("build_conv_map_at")
def _build_conv_map_at_fake(indices, out_indices, spatial_shape, batch_size, kernel_size, stride, pads_begin,
                            dilation, transposed=False, out_spatial_shape=None):
    return indices.new_empty((out_indices.shape[0], _kernel_volume(kernel_size)))   # one row per given output


@_register_fake("transpose_map")
def _transpose_map_fake(nbr, num_rows):
    return nbr.new_empty((num_rows, nbr.shape[1]))


@_register_fake("pack_map")
def _pack_map_fake(nbr):
    from .contract import PACK_LANES, PACK_ROWS_PER_BLOCK
    m, kvol = nbr.shape
    blocks = (m + PACK_ROWS_PER_BLOCK - 1) // PACK_ROWS_PER_BLOCK
    return (nbr.new_empty((m, (kvol + PACK_LANES - 1) // PACK_LANES), dtype=torch.int16), nbr.new_empty((_data_dependent_size(),)),
            nbr.new_empty((blocks + 1,), dtype=torch.int64))


@_register_fake("unpack_map")
def _unpack_map_fake(mask, values, block_starts, kvol):
    return values.new_empty((mask.shape[0], kvol))


@_register_fake("gather_mm")
def _gather_mm_fake(features, weight, nbr, nbr_t, groups, symmetric=False, source=None, source_scale=None,
                    source_shift=None):
    return features.new_empty((nbr.shape[0], weight.shape[2]))


@_register_fake("gather_mm_backprop_filter")
def _gather_mm_backprop_filter_fake(features, grad, nbr, nbr_t, groups, symmetric=False, scale=None, shift=None):
    return features.new_empty((nbr.shape[1], features.shape[1] // groups, grad.shape[1]))


@_register_fake("batch_norm_relu_forward")
def _batch_norm_relu_forward_fake(input, weight, bias, running_mean, running_var, batch_stats, momentum, eps):
    c = input.shape[1]
    stats = [input.new_empty((c,), dtype=torch.float64) for _ in range(2)]
    held = torch.float64 if input.dtype == torch.float64 else torch.float32  # (b)float16 computes in float32
    return (torch.empty_like(input), *stats, input.new_empty((c,), dtype=held), input.new_empty((c,), dtype=held))


@_register_fake("scale_shift_relu")
def _scale_shift_relu_fake(input, scale, shift):
    return torch.empty_like(input)


@_register_fake("batch_norm_relu_backward")
def _batch_norm_relu_backward_fake(grad, input, mean, invstd, weight, scale, shift, batch_stats):
    c = input.shape[1]
    # the wider of the features' and the weight's dtype: float32 master weights under autocast
    channels = input.dtype if weight is None else torch.promote_types(input.dtype, weight.dtype)
    return torch.empty_like(input), input.new_empty((c,), dtype=channels), input.new_empty((c,), dtype=channels)


def pool_offset_dtype(kvol):
    """The dtype of sparse_max_pool's argmax (kernel offsets and -1) for a map of kvol offsets."""
    return torch.int8 if kvol <= 127 else torch.int16 if kvol <= 32767 else torch.int32


@_register_fake("sparse_max_pool")
def _sparse_max_pool_fake(features, nbr):
    shape = (nbr.shape[0], features.shape[1])
    return features.new_empty(shape), features.new_empty(shape, dtype=pool_offset_dtype(nbr.shape[1]))


@_register_fake("sparse_max_pool_backward")
def _sparse_max_pool_backward_fake(grad, argmax, nbr, num_rows):
    return grad.new_empty((num_rows, grad.shape[1]))


@_register_fake("sparse_avg_pool")
def _sparse_avg_pool_fake(features, nbr):
    return features.new_empty((nbr.shape[0], features.shape[1]))


@_register_fake("sparse_avg_pool_backward")
def _sparse_avg_pool_backward_fake(grad, nbr, num_rows):
    return grad.new_empty((num_rows, grad.shape[1]))


@_register_fake("voxelize_dynamic")
def _voxelize_dynamic_fake(points, batch, voxel_size, point_cloud_range):
    m = _data_dependent_size()
    return (points.new_empty((m, 1 + len(voxel_size)), dtype=torch.int32), points.new_empty((m,), dtype=torch.int32),
            points.new_empty((points.shape[0],), dtype=torch.int64))


@_register_fake("voxelize_hard")
def _voxelize_hard_fake(points, batch, voxel_size, point_cloud_range, max_points, max_voxels):
    m = _data_dependent_size()
    return (points.new_empty((m, max_points, points.shape[1])), points.new_empty((m, 1 + len(voxel_size)), dtype=torch.int32),
            points.new_empty((m,), dtype=torch.int32), points.new_empty((points.shape[0],), dtype=torch.int64))


# The accelerator primitives (internal ops, contracts in kernels/schema/schema.cpp).
@_register_fake("_sorted_key_lookup")
def _sorted_key_lookup_fake(query_keys, sorted_keys, key_deltas, group, key_bound):
    return query_keys.new_empty((query_keys.shape[0], key_deltas.shape[0]), dtype=torch.int32)


@_register_fake("_conv_out_keys")
def _conv_out_keys_fake(indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation):
    from .contract import conv_out_slot_volume
    # one row of keys per slot (the kernel volume at stride 1)
    return indices.new_empty((conv_out_slot_volume(kernel_size, stride, dilation) * indices.shape[0],),
                             dtype=torch.int64)


@_register_fake("_unique_sorted_keys")
def _unique_sorted_keys_fake(sorted_keys):
    return torch.empty_like(sorted_keys), sorted_keys.new_empty((1,), dtype=torch.int32)


@_register_fake("_sorted_key_lookup_rows")
def _sorted_key_lookup_rows_fake(query_keys, sorted_keys, key_deltas, group, key_bound, order, scatter_rows,
                                 transpose_rows):
    kvol = key_deltas.shape[0]
    return (query_keys.new_empty((query_keys.shape[0], kvol), dtype=torch.int32),
            query_keys.new_empty((transpose_rows, kvol), dtype=torch.int32))


@_register_fake("_conv_output_rows")
def _conv_output_rows_fake(sorted_keys, out_shape, query_shape, stride):
    c = sorted_keys.shape[0]
    return (sorted_keys.new_empty((c, 1 + len(out_shape)), dtype=torch.int32), torch.empty_like(sorted_keys),
            sorted_keys.new_empty((1,), dtype=torch.int32))


@_register_fake("_gather_mm_one_group")
def _gather_mm_one_group_fake(features, weight, nbr):
    return features.new_empty((nbr.shape[0], weight.shape[2]))


@_register_fake("_gather_mm_transposed")
def _gather_mm_transposed_fake(features, weight, nbr, reverse_offsets):
    return features.new_empty((nbr.shape[0], weight.shape[1]))


@_register_fake("_gather_mm_backprop_filter_one_group")
def _gather_mm_backprop_filter_one_group_fake(features, grad, nbr, scale=None, shift=None):
    return features.new_empty((nbr.shape[1], features.shape[1], grad.shape[1]))


def kernel_for_key(op: str, dispatch_key: str):
    """``torch.ops.mx_sparse.<op>``'s kernel for ``dispatch_key`` ("CUDA", "PrivateUse1", ...) as a
    function of the op's arguments, on tensors of any device: the call is redispatched to that
    key's entry instead of the one of the tensors' device. This is how the CUDA / NPU voxelization
    (C++ with torch's operators, kernels/generic/voxelize_generic.cpp) runs on CPU tensors, under
    MXS_CUDA_ON_CPU / MXS_NPU_ON_CPU and in the tests, with no entry point of its own in _C."""
    overload = getattr(ops, op).default
    if not torch._C._dispatch_has_kernel_for_dispatch_key(overload.name(), dispatch_key):
        raise ValueError(f"op: mx_sparse::{op} has no kernel for dispatch key {dispatch_key}")
    keyset = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, dispatch_key))
    return functools.partial(overload.redispatch, keyset)


def _register_accelerators():
    """The accelerator orchestration for CUDA (and PrivateUse1 with the NPU binding), the device
    primitives, and with MXS_CUDA_ON_CPU=1 / MXS_NPU_ON_CPU=1 for CPU tensors too (see
    mx_sparse/_accelerator/registration.py)."""
    from .._accelerator import registration
    registration.register(npu_binding=_load_npu_kernels())


_register_accelerators()


def has_kernel(device_type: str, op: str = "gather_mm") -> bool:
    """True when this build has a kernel of ``op`` for ``device_type`` ('cpu', 'cuda', 'npu')."""
    key = {"cpu": "CPU", "cuda": "CUDA", "npu": "PrivateUse1"}.get(device_type)
    return key is not None and torch._C._dispatch_has_kernel_for_dispatch_key("mx_sparse::" + op, key)
