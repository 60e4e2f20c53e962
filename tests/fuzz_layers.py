"""Crash fuzz of the public layers (part of fuzz_ops.py's run): SparseConvTensor and a
SubMConv3d, SparseConv3d or SparseInverseConv3d (after the strided conv it inverts) built
from damaged arguments, forward and, for float64 inputs, backward. Valid inputs must give
the dense float64 reference (dense_reference.py: torch's conv3d on the densified tensor,
cropped around the voxels), gradients included; where even the cropped, padded grid is too
large (a dilation of 2^31 - 1 is valid), the composition of the op contracts in fuzz_specs.py
instead. Invalid inputs must raise an exception naming one of their arguments.
"""
import math

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz_ops
from dense_reference import conv_reference, inverse_reference, subm_reference
import fuzz_specs
from fuzz_specs import INT32_MAX, MAX_KERNEL_VOLUME, Bounded, Invalid, Violations, draw_features, draw_grid, require

import mx_sparse

LAYER_ARGS = {"features": "Tensor", "indices": "Tensor", "spatial_shape": "List[int]", "batch_size": "int",
              "in_channels": "int", "out_channels": "int", "kernel_size": "List[int]", "stride": "List[int]",
              "padding": "List[int]", "dilation": "List[int]", "groups": "int"}


# damaged ints of the layers: small, or so large that no weight of that many channels fits
# anywhere (a count of 2^31 would have this process allocate and initialise gigabytes)
LAYER_INTS = [-1, 0, -5, 2 ** 62, 2 ** 63 - 1, -2 ** 63]


def valid_layer_args(data):
    indices, shape, batch = draw_grid(data)
    while len(shape) < 3:   # the dense reference is conv3d
        shape.append(1)
        indices = torch.cat([indices, torch.zeros(indices.shape[0], 1, dtype=torch.int32)], 1)
    groups = data.draw(st.integers(1, 2))
    cin, cout = groups * data.draw(st.integers(1, 3)), groups * data.draw(st.integers(1, 3))
    kind = data.draw(st.sampled_from(["subm", "strided", "inverse"]))
    kernel = [data.draw(st.integers(1, 3)) for _ in range(3)]
    dilation = [data.draw(st.integers(1, 2)) for _ in range(3)]
    padding = [max(data.draw(st.integers(0, 1)), -(-(d * (k - 1) + 1 - s) // 2))
               for k, d, s in zip(kernel, dilation, shape)]
    dtype = data.draw(st.sampled_from([torch.float64, torch.float32]))
    if data.draw(st.booleans(), label="int64 indices"):   # accepted, and narrowed to int32 when every value fits
        indices = indices.long()
    return kind, dict(features=draw_features(data, indices.shape[0], cin, dtype), indices=indices,
                      spatial_shape=shape, batch_size=batch, in_channels=cin, out_channels=cout, kernel_size=kernel,
                      stride=[data.draw(st.integers(1, 2)) for _ in range(3)], padding=padding, dilation=dilation,
                      groups=groups)


def tensor_contract(features, indices, spatial_shape, batch_size):
    require(isinstance(spatial_shape, list) and 1 <= len(spatial_shape) <= 4
            and all(isinstance(s, int) and s >= 1 for s in spatial_shape), "spatial_shape")
    ndim = len(spatial_shape)
    require(isinstance(indices, torch.Tensor) and indices.dim() == 2 and indices.shape[1] == 1 + ndim,
            "indices", "spatial_shape")
    require(indices.dtype in (torch.int32, torch.int64), "indices")
    require(indices.numel() == 0 or (int(indices.min()) >= -2 ** 31 and int(indices.max()) < 2 ** 31), "indices")
    require(isinstance(batch_size, int) and batch_size >= 1, "batch_size")
    require(isinstance(features, torch.Tensor) and features.dim() == 2, "features")
    require(features.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64), "features")
    require(features.shape[0] == indices.shape[0], "features", "indices")


def layer_contract(kind, a):
    """Invalid(...) where the layers must refuse; else the geometry the reference uses."""
    tensor_contract(a["features"], a["indices"], a["spatial_shape"], a["batch_size"])
    v = Violations()
    for name in ("in_channels", "out_channels", "groups"):
        v.check(isinstance(a[name], int) and 1 <= a[name], name)
    v.settle()
    v.check(a["in_channels"] % a["groups"] == 0 and a["out_channels"] % a["groups"] == 0, "groups",
            "in_channels", "out_channels")
    for name, low in (("kernel_size", 1), ("stride", 1), ("padding", 0), ("dilation", 1)):
        v.check(len(a[name]) == 3 and all(isinstance(x, int) and low <= x <= INT32_MAX for x in a[name]), name)
    v.settle()
    require(math.prod(a["kernel_size"]) <= MAX_KERNEL_VOLUME, "kernel_size")
    # a weight [*kernel, Cin/groups, Cout] beyond any memory (LAYER_INTS keep it small or absurd)
    require(math.prod(a["kernel_size"]) * (a["in_channels"] // a["groups"]) * a["out_channels"] <= 2 ** 40,
            "in_channels", "out_channels", "kernel_size")
    require(len(a["spatial_shape"]) == 3, "spatial_shape", "indices")
    require(a["features"].shape[1] == a["in_channels"], "features", "in_channels")
    shape, batch = a["spatial_shape"], a["batch_size"]
    require(batch * math.prod(shape) <= 2 ** 63 - 1, "spatial_shape", "batch_size")
    if kind == "subm":
        require_accelerator_keys(a, [s + 2 * (k // 2) * d for s, k, d in zip(shape, a["kernel_size"], a["dilation"])])
    rows = [tuple(r) for r in a["indices"].tolist()]
    require(all(0 <= r[0] < batch and all(0 <= c < s for c, s in zip(r[1:], shape)) for r in rows), "indices")
    require(len(set(rows)) == len(rows), "indices")
    if kind != "subm":
        out = [(s + 2 * p - d * (k - 1) - 1) // t + 1 for s, k, t, p, d in
               zip(shape, a["kernel_size"], a["stride"], a["padding"], a["dilation"])]
        names = ("spatial_shape", "kernel_size", "stride", "padding", "dilation")
        require(all(1 <= o <= INT32_MAX for o in out), *names)
        require(batch * math.prod(out) <= 2 ** 63 - 1, *names, "batch_size")
        # input i keyed at i + p on the grid padded above to the farthest cell a window reaches
        require_accelerator_keys(a, [s + p + max(0, (o - 1) * t - p + (k - 1) * d - (s - 1)) for s, k, t, p, d, o in
                                     zip(shape, a["kernel_size"], a["stride"], a["padding"], a["dilation"], out)])
        if fuzz_specs.NPU_LIMITS and a["indices"].shape[0] > 0:   # the NPU's output-key kernel (as build_conv_map's spec)
            require(batch <= fuzz_specs.NPU_MAX_COORD, "batch_size")
            require(all(s + p < fuzz_specs.NPU_MAX_COORD and (k - 1) * d < fuzz_specs.NPU_MAX_COORD
                        for s, p, k, d in zip(shape, a["padding"], a["kernel_size"], a["dilation"])), "spatial_shape")
    # MXS_NPU_ON_CPU=1: the NPU's gather kernels have no float64 path (refused by the primitive)
    require(not (fuzz_specs.NPU_LIMITS and a["features"].dtype == torch.float64), "features")


def require_accelerator_keys(a, padded):
    """MXS_CUDA_ON_CPU=1 / MXS_NPU_ON_CPU=1: the accelerators' map builders pack voxel keys on the
    grid padded by the kernel's reach, so its cells times the batch must stay within int64 (a
    ValueError naming spatial_shape and batch_size, raised before the index values are read; no
    check without voxels). The C++ CPU builders have no such grid."""
    if fuzz_specs.ACCELERATOR_PATH and a["indices"].shape[0] > 0:
        require(a["batch_size"] * math.prod(padded) <= 2 ** 63 - 1, "spatial_shape", "batch_size")


def run_layers(kind, a):
    """What a user writes; returns (input tensor, output tensor, the layer producing it, the strided layer)."""
    x = mx_sparse.SparseConvTensor(a["features"], a["indices"], a["spatial_shape"], a["batch_size"])
    geometry = dict(stride=a["stride"], padding=a["padding"], dilation=a["dilation"], groups=a["groups"])
    if kind == "subm":
        layer = mx_sparse.SubMConv3d(a["in_channels"], a["out_channels"], a["kernel_size"], **geometry)
        return x, layer_dtype(layer, a)(x), layer, None
    down = mx_sparse.SparseConv3d(a["in_channels"], a["out_channels"], a["kernel_size"], indice_key="k", **geometry)
    y = layer_dtype(down, a)(x)
    if kind == "strided":
        return x, y, down, None
    up = mx_sparse.SparseInverseConv3d(a["out_channels"], a["in_channels"], a["kernel_size"], indice_key="k",
                                       groups=a["groups"])
    return x, layer_dtype(up, a)(y), up, down


def layer_dtype(layer, a):
    return layer.to(a["features"].dtype) if a["features"].is_floating_point() else layer


def cropped_grid(kind, indices, shape, a):
    """(indices, shape) of the smallest grid that gives the same outputs: a valid spatial_shape
    may be 2^31 - 1 per axis, and the dense reference must not allocate it. Submanifold outputs
    see only the voxels' bounding box; a strided conv's grid is shifted by a multiple of its
    stride (output j becomes j - m), starting at or below the first voxel and below the first
    window that reaches one, and ending past the last window that reaches one."""
    if indices.shape[0] == 0:   # no outputs: any grid as valid as the given one
        if kind == "subm":
            return indices, [1] * len(shape)
        return indices, [min(s, (k - 1) * d + 1) for s, k, d in zip(shape, a["kernel_size"], a["dilation"])]
    lo, hi = indices[:, 1:].min(0).values.tolist(), indices[:, 1:].max(0).values.tolist()
    shifts, cropped = [], []
    for axis, s in enumerate(shape):
        if kind == "subm":
            shifts.append(lo[axis])
            cropped.append(hi[axis] - lo[axis] + 1)
            continue
        k, t, p, d = (a[name][axis] for name in ("kernel_size", "stride", "padding", "dilation"))
        # m * t <= lo keeps every voxel; outputs below m have windows ending below lo
        shift = max(0, min(lo[axis] // t, (lo[axis] + p - (k - 1) * d) // t)) * t
        shifts.append(shift)
        cropped.append(min(s - shift, hi[axis] - shift + (k - 1) * d + t + 1))
    moved = indices.clone()
    moved[:, 1:] -= torch.tensor(shifts, dtype=indices.dtype)
    return moved, cropped


DENSE_LIMIT = 1 << 24   # cells of a padded dense grid the dense reference may allocate


def dense_cells(kind, shape, batch, a):
    """Cells of the padded dense grid the dense reference would build."""
    if kind == "subm":
        pads = [(k // 2) * d for k, d in zip(a["kernel_size"], a["dilation"])]
    else:
        pads = a["padding"]
    return batch * math.prod(s + 2 * p for s, p in zip(shape, pads))


def gathered(features, nbr, weight, bias, groups):
    """bias + the op contract's gather (fuzz_specs.ref_gather_mm, float64, differentiable)."""
    return fuzz_specs.ref_gather_mm(features, weight, nbr, None, groups, False).value + bias


def sparse_reference(kind, x, y_layer, down, a):
    """The layers as the op contracts of fuzz_specs compose them (maps from plain loops over the
    voxels, then a gather in float64): for grids whose padded dense form is too large, e.g. a
    dilation of 2^31 - 1 on a valid input."""
    groups, feats, idx = a["groups"], x.features.double(), x.indices.int()
    shape, batch = a["spatial_shape"], a["batch_size"]

    def flat(w):
        return w.reshape(-1, w.shape[-2], w.shape[-1])

    if kind == "subm":
        w = y_layer.weight.double()
        nbr = fuzz_specs.ref_build_subm_map(idx, shape, batch, list(y_layer.kernel_size), list(y_layer.dilation))
        return gathered(feats, nbr, flat(w), y_layer.bias.double(), groups), w
    conv = down or y_layer
    w_down = conv.weight.double()
    out_idx, nbr, _ = fuzz_specs.ref_build_conv_map(idx, shape, batch, list(conv.kernel_size), list(conv.stride),
                                                  list(conv.padding), list(conv.dilation))
    mid = gathered(feats, nbr, flat(w_down), conv.bias.double(), groups)
    if kind == "strided":
        return mid, w_down
    w_up = y_layer.weight.double()
    nbr_t = fuzz_specs.ref_transpose_map(nbr, idx.shape[0])
    return gathered(mid, nbr_t, flat(w_up), y_layer.bias.double(), groups), w_up


def reference(kind, x, y_layer, down, a):
    # samples are independent: the dense grids need only the batches that hold voxels (a valid
    # batch_size may be 2^62) and the cells around them (cropped_grid)
    groups = a["groups"]
    batch = int(x.indices[:, 0].max()) + 1 if x.indices.shape[0] else 1
    indices, shape = cropped_grid(kind, x.indices.long(), a["spatial_shape"], a)
    if dense_cells(kind, shape, batch, a) > DENSE_LIMIT:
        return sparse_reference(kind, x, y_layer, down, a)
    x = mx_sparse.SparseConvTensor(x.features, indices, shape, batch)
    feats = x.features.double()
    if kind == "subm":
        w = y_layer.weight.double()
        return subm_reference(feats, x.indices, shape, batch, w, y_layer.bias.double(), y_layer.dilation, groups), w
    w_down = (down or y_layer).weight.double()
    mid, mid_idx, mid_shape = conv_reference(feats, x.indices, shape, batch, w_down, (down or y_layer).bias.double(),
                                             a["stride"], a["padding"], a["dilation"], groups)
    if kind == "strided":
        return mid, w_down
    w_up = y_layer.weight.double()
    return inverse_reference(mid, mid_idx, mid_shape, batch, w_up, y_layer.bias.double(), x.indices, shape,
                             down.stride, down.padding, down.dilation, groups), w_up


def check_layers(kind, a):
    try:
        layer_contract(kind, a)
        invalid = None
    except Invalid as e:
        invalid = e
    feats = a["features"]
    if invalid is None and feats.dtype == torch.float64:
        a = dict(a, features=feats.clone().requires_grad_())
    try:
        x, y, layer, down = run_layers(kind, a)
        error = None
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError, MemoryError, OverflowError) as e:
        error = e
    if invalid is not None:
        assert error is not None, f"layers({kind}): accepted an input that breaks the contract ({invalid.names})"
        assert fuzz_ops.names_one_of(str(error), invalid.names), (
            f"layers({kind}): error does not name {invalid.names}: {type(error).__name__}: {error}")
        return "rejected"
    assert error is None, f"layers({kind}): rejected a valid input: {type(error).__name__}: {error}"
    ref, w = reference(kind, x, layer, down, a)
    out = y.features
    bound = ref.abs() + 1   # features are O(1): an absolute floor keeps cancellation from tightening the check
    fuzz_ops.close(out, Bounded(ref.to(out.dtype), bound, precision=out.dtype), f"layers({kind}) forward")
    if out.dtype == torch.float64 and out.requires_grad and bool(torch.isfinite(ref).all()):
        g = torch.Generator().manual_seed(0)
        upstream = torch.randn(out.shape, generator=g, dtype=torch.float64)
        got = torch.autograd.grad(out, [a["features"], layer.weight], upstream, allow_unused=True)
        want = torch.autograd.grad(ref, [a["features"], layer.weight], upstream, allow_unused=True,
                                   retain_graph=True) if ref.requires_grad else (None, None)
        for name, gv, wv in zip(("features", "weight"), got, want):
            gv = torch.zeros_like(a["features"] if name == "features" else layer.weight) if gv is None else gv
            wv = torch.zeros_like(gv) if wv is None else wv
            fuzz_ops.close(gv, Bounded(wv.reshape(gv.shape), wv.abs().reshape(gv.shape) + 1),
                           f"layers({kind}) gradient of {name}")
    return "returned"


def fuzz(examples, progress):
    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(st.data())
    def run(data):
        kind, a = valid_layer_args(data)
        for _ in range(data.draw(st.integers(0, 2), label="damages")):
            name = data.draw(st.sampled_from(sorted(LAYER_ARGS)), label="argument")
            if LAYER_ARGS[name] == "int":
                a[name] = data.draw(st.sampled_from(LAYER_INTS + [a[name] + 1]))
            else:
                a[name] = fuzz_ops.damage(data, LAYER_ARGS[name], a[name])
        progress.note(f"layers[{kind}]", a)
        progress.count("layers", check_layers(kind, a))

    run()
