"""mx_sparse._core.contract is the C++ contract, not a copy of it: for the same bad input each of
its checks raises exactly the message the C++ CPU kernels raise (the ops are called directly,
below the Python layer), and its key deltas, key packing and output extents agree with
hand-computed cases and with what the C++ map builders produce."""
import math
import re

import pytest
import torch

import mx_sparse
from mx_sparse import _C
from mx_sparse._core import contract as _contract
from mx_sparse._accelerator import neighbor_map as accelerator_maps

ops = torch.ops.mx_sparse


def message(fn):
    with pytest.raises(ValueError) as err:
        fn()
    return str(err.value)


def same_error(contract_call, op_call):
    """Both raise ValueError with the identical message; returns it."""
    a, b = message(contract_call), message(op_call)
    assert a == b
    return a


def idx(rows):
    return torch.tensor(rows, dtype=torch.int32)


ONE = idx([[0, 1, 1, 1]])


# --- argument checks: the contract raises the CPU kernels' own messages -------------------------

@pytest.mark.parametrize("shape,batch,expected", [
    ([4, 0, 4], 1, r"spatial_shape: expected every dimension >= 1, got \[4, 0, 4\]"),
    ([4, 4, 4, 4, 4], 1, r"spatial_shape: expected 1 to 4 dimensions, got 5"),
    ([4, 4, 4], 0, r"batch_size: expected >= 1, got 0"),
    ([2**21, 2**21, 2**21], 2, r"spatial_shape: batch_size \(2\) x prod\(spatial_shape .* int64 voxel-key range"),
])
def test_grid(shape, batch, expected):
    got = same_error(lambda: _contract.grid(shape, batch),
                     lambda: ops.build_subm_map(idx([[0] * (1 + len(shape))]), shape, batch, [1] * len(shape),
                                                [1] * len(shape)))
    assert re.match(expected, got)
    assert _contract.grid([4, 5], 3) == [4, 5]


@pytest.mark.parametrize("name,value,expected", [
    ("kernel_size", [3, 3], r"kernel_size: expected 3 values \(one per spatial axis\), got \[3, 3\]"),
    ("stride", [1, 0, 1], r"stride: expected every value in \[1, 2\^31 - 1\], got \[1, 0, 1\]"),
    ("padding", [0, -1, 0], r"padding: expected every value in \[0, 2\^31 - 1\]"),
    ("dilation", [2**31, 1, 1], r"dilation: expected every value in \[1, 2\^31 - 1\]"),
])
def test_per_axis(name, value, expected):
    args = dict(kernel_size=[3, 3, 3], stride=[1, 1, 1], padding=[0, 0, 0], dilation=[1, 1, 1])
    args[name] = value
    minimum = 0 if name == "padding" else 1
    got = same_error(lambda: _contract.per_axis(name, value, 3, minimum),
                     lambda: ops.build_conv_map(ONE, [4, 4, 4], 1, **args))
    assert re.match(expected, got)
    assert _contract.per_axis("stride", (2, 1, 3), 3, 1) == [2, 1, 3]


def test_per_axis_beyond_int64_gets_the_same_message():
    """Python ints beyond int64 cannot cross into C++; _contract words their error like C++'s."""
    assert message(lambda: _contract.per_axis("stride", [2**40], 1, 1)) == \
        "stride: expected every value in [1, 2^31 - 1], got [1099511627776]"
    assert message(lambda: _contract.per_axis("stride", [2**70], 1, 1)) == \
        f"stride: expected every value in [1, 2^31 - 1], got [{2**70}]"


def test_kernel_volume():
    kernel = [1025, 1025, 1]
    got = same_error(lambda: _contract.kernel_volume(kernel),
                     lambda: ops.build_subm_map(ONE, [4, 4, 4], 1, kernel, [1, 1, 1]))
    assert got == f"kernel_size: {kernel} has more than {2**20} offsets (the columns of a neighbor map)"
    assert _contract.kernel_volume([3, 5, 7]) == 105 and _contract.MAX_KERNEL_VOLUME == 2**20


@pytest.mark.parametrize("shape,kernel,stride,padding,batch,expected", [
    ([2, 4, 4], [3, 3, 3], [1, 1, 1], [0, 0, 0], 1, r"spatial_shape: the convolution output is empty on axis 0"),
    ([4, 4, 4], [1, 1, 1], [1, 1, 1], [0, 2**30, 0], 1, r"padding: the convolution output has 2147483652 cells"),
    ([2**20, 2**20, 2**20], [1, 1, 1], [1, 1, 1], [0, 0, 2**19], 7,
     r"batch_size, padding: batch_size \(7\) x the convolution's output grid exceeds"),
])
def test_conv_output_shape(shape, kernel, stride, padding, batch, expected):
    got = same_error(lambda: _contract.conv_output_shape(shape, kernel, stride, padding, [1, 1, 1], batch),
                     lambda: ops.build_conv_map(ONE, shape, batch, kernel, stride, padding, [1, 1, 1]))
    assert re.match(expected, got)


@pytest.mark.parametrize("indices,expected", [
    (torch.zeros(1, 4, dtype=torch.int64), "indices: expected dtype int32, got Long"),
    (torch.zeros(1, 3, dtype=torch.int32), r"indices: expected shape \[N, 4\] \(batch \+ 3 spatial coordinates\), "
                                           r"got \[1, 3\]"),
])
def test_indices(indices, expected):
    got = same_error(lambda: _contract.indices(indices, 3),
                     lambda: ops.build_subm_map(indices, [4, 4, 4], 1, [3, 3, 3], [1, 1, 1]))
    assert re.fullmatch(expected, got)


def test_neighbor_map():
    bad = torch.zeros(2, 3, dtype=torch.int64)
    got = same_error(lambda: _contract.neighbor_map(bad, "nbr"), lambda: ops.transpose_map(bad, 2))
    assert got == "nbr: expected an int32 neighbor map [M, K], got Long [2, 3]"


def gather_cases():
    f, nbr = torch.ones(3, 4), torch.zeros(3, 2, dtype=torch.int32)
    w = torch.ones(2, 4, 6)
    return [  # (features, weight, nbr, nbr_t, groups, expected message start)
        (f, torch.ones(3, 4, 6), nbr, None, 1, "weight: expected [K=2, Cin/groups, Cout]"),
        (f, w.double(), nbr, None, 1, "weight: expected dtype Float like features, got Double"),
        (f.int(), w.int(), nbr, None, 1, "features: expected float32, float64, float16 or bfloat16, got Int"),
        (f, w, nbr, None, 0, "groups: expected >= 1, got 0"),
        (f, torch.ones(2, 3, 6), nbr, None, 1, "weight: expected Cin/groups = 4/1 input channels per group"),
        (f, torch.ones(2, 2, 5), nbr, None, 2, "weight: out channels 5 are not divisible by groups=2"),
        (f, w, nbr, torch.zeros(3, 5, dtype=torch.int32), 1, "nbr_t: expected 2 kernel offsets like nbr, got 5"),
        (f, w, nbr.long(), None, 1, "nbr: expected an int32 neighbor map [M, K], got Long [3, 2]"),
        (torch.ones(3, 4, 1), w, nbr, None, 1, "features: expected [N, C], got [3, 4, 1]"),
    ]


@pytest.mark.parametrize("case", range(len(gather_cases())))
def test_gather_mm_shapes(case):
    f, w, nbr, nbr_t, groups, expected = gather_cases()[case]
    got = same_error(lambda: _contract.gather_mm_shapes(f, w, nbr, nbr_t, groups),
                     lambda: ops.gather_mm(f, w, nbr, nbr_t, groups))
    assert got.startswith(expected)


@pytest.mark.parametrize("grad,groups,expected", [
    (torch.ones(2, 6), 1, "grad: expected [M=3, Cout], got [2, 6]"),
    (torch.ones(3, 6).double(), 1, "grad: expected dtype Float like features, got Double"),
    (torch.ones(3, 6), 4, "groups: 4 must divide the input channels (4) and output channels (6)"),
])
def test_backprop_filter_shapes(grad, groups, expected):
    f, nbr = torch.ones(3, 4), torch.zeros(3, 2, dtype=torch.int32)
    got = same_error(lambda: _contract.backprop_filter_shapes(f, grad, nbr, None, groups),
                     lambda: ops.gather_mm_backprop_filter(f, grad, nbr, None, groups))
    assert got == expected


def test_shapes_of_good_calls():
    f, nbr = torch.ones(3, 4), torch.zeros(3, 2, dtype=torch.int32)
    assert tuple(_contract.gather_mm_shapes(f, torch.ones(2, 2, 6), nbr, None, 2)) == (2, 3)
    assert tuple(_contract.backprop_filter_shapes(f, torch.ones(3, 6), nbr, nbr, 2)) == (2, 3)


def test_float_dtypes_are_the_ones_check_float_accepts():
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
                  torch.int32, torch.int64, torch.bool, torch.complex64):
        t = torch.zeros(1, dtype=dtype)
        if dtype in _contract.FLOAT_DTYPES:
            _contract.float_tensor(t, "features")
        else:
            assert message(lambda: _contract.float_tensor(t, "features")).startswith(
                "features: expected float32, float64, float16 or bfloat16, got ")


def test_same_device():
    f = torch.ones(2, 2)
    _contract.same_device("features", f, weight=torch.ones(1), nbr_t=None)
    got = message(lambda: _contract.same_device("features", f, weight=torch.ones(1), nbr=torch.ones(1, device="meta")))
    assert got == "nbr: expected a tensor on cpu like features, got one on meta"
    got = message(lambda: _contract.gather_mm_shapes(f, torch.ones(1, 2, 2, device="meta"),
                                                     torch.zeros(2, 1, dtype=torch.int32), None, 1))
    assert got == "weight: expected a tensor on cpu like features, got one on meta"


@pytest.mark.parametrize("rows,bad,dup,expected", [
    ([[0, 0, 0, 0], [0, 4, 0, 0]], 1, 2, "indices: row 1 is (batch, *coords) = (0, 4, 0, 0), expected 0 <= batch < "
                                         "batch_size (2) and 0 <= coord < spatial_shape [4, 4, 4] on every axis"),
    ([[1, 1, 2, 3], [0, 0, 0, 0], [1, 1, 2, 3]], 3, 2,
     "indices: duplicate voxel (1, 1, 2, 3) at row 2; expected every (batch, *coords) row to be unique"),
])
def test_index_error(rows, bad, dup, expected):
    """One message for the CPU builders, the tensor-operator checks and the Python face."""
    i = idx(rows)
    got = same_error(lambda: _contract.index_error(i, [4, 4, 4], 2, bad, dup),
                     lambda: ops.build_subm_map(i, [4, 4, 4], 2, [3, 3, 3], [1, 1, 1]))
    assert got == expected
    assert message(lambda: ops.build_conv_map(i, [4, 4, 4], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])) == got
    # the accelerator orchestration's tensor-operator checks (run here on CPU tensors, fallback primitives)
    assert message(lambda: accelerator_maps.build_subm_map(i, [4, 4, 4], 2, [3, 3, 3], [1, 1, 1])) == got
    _contract.index_error(i, [4, 4, 4], 2, len(rows), len(rows))  # none: no error


# --- key deltas, packing, extents: hand-computed and as the kernels use them --------------------

def test_key_deltas_by_hand():
    # grid [5, 7]: one step on axis 0 is 7 keys
    assert _contract.key_deltas([3, 3], [1, 1], [5, 7], True) == [-8, -7, -6, -1, 0, 1, 6, 7, 8]
    assert _contract.key_deltas([3, 3], [1, 1], [5, 7], False) == [0, 1, 2, 7, 8, 9, 14, 15, 16]
    assert _contract.key_deltas([3, 3], [2, 1], [5, 7], True) == [-15, -14, -13, -1, 0, 1, 13, 14, 15]
    # even kernel: centre k//2, one more step backwards
    assert _contract.key_deltas([2], [3], [10], True) == [-3, 0]
    assert _contract.key_deltas([2, 1, 2], [1, 1, 1], [4, 5, 6], False) == [0, 1, 30, 31]


def test_key_deltas_are_the_subm_map_builders():
    """Every neighbour the CPU submanifold builder finds sits key_deltas[k] keys away."""
    g = torch.Generator().manual_seed(0)
    shape, kernel, dilation = [6, 7, 5], [3, 3, 3], [1, 2, 1]
    keys = torch.randperm(2 * math.prod(shape), generator=g)[:120]
    indices = _contract.unpack_keys(keys, shape)
    nbr = ops.build_subm_map(indices, shape, 2, kernel, dilation)
    deltas = torch.tensor(_contract.key_deltas(kernel, dilation, shape, True))
    packed = _contract.pack_keys(indices, shape)
    found = nbr >= 0
    assert found.sum() > 120  # more than the centres
    diff = packed[nbr.clamp(min=0).long()] - packed[:, None]
    assert torch.equal(diff[found], deltas.expand_as(diff)[found])


def test_pack_and_unpack_by_hand():
    rows = torch.tensor([[1, 2, 3, 4], [0, 0, 0, 0], [2, 3, 4, 5]], dtype=torch.int32)
    keys = _contract.pack_keys(rows, [4, 5, 6])
    assert keys.dtype == torch.int64 and keys.tolist() == [((1 * 4 + 2) * 5 + 3) * 6 + 4, 0, 359]
    assert torch.equal(_contract.unpack_keys(keys, [4, 5, 6]), rows)
    # shift moves onto a padded grid, scale maps output coordinates (o * stride)
    shifted = _contract.pack_keys(rows.long(), [6, 7, 8], shift=[1, 1, 1], scale=[2, 1, 1])
    assert shifted.tolist() == [((1 * 6 + 5) * 7 + 4) * 8 + 5, (1 * 7 + 1) * 8 + 1, ((2 * 6 + 7) * 7 + 5) * 8 + 6]
    # any leading shape; int64 coordinates beyond int32 pack exactly
    big = torch.tensor([[[0, 2**40, 3]]])
    assert _contract.pack_keys(big, [2**41, 5]).tolist() == [[2**40 * 5 + 3]]
    assert message(lambda: _contract.pack_keys(rows, [4, 5])).startswith("indices: expected shape [..., 3]")
    assert message(lambda: _contract.pack_keys(rows.float(), [4, 5, 6])).startswith(
        "indices: expected an integer dtype")


def test_conv_map_outputs_are_in_packed_key_order():
    """The strided builder lists its outputs in canonical order: their packed keys increase, and
    unpacking them gives the outputs back."""
    g = torch.Generator().manual_seed(1)
    shape = [9, 8, 7]
    indices = _contract.unpack_keys(torch.randperm(2 * math.prod(shape), generator=g)[:80], shape)
    out, _, out_shape = ops.build_conv_map(indices, shape, 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    assert out_shape == _contract.conv_output_shape(shape, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], 2) == [5, 4, 4]
    keys = _contract.pack_keys(out, out_shape)
    assert bool((keys[1:] > keys[:-1]).all())
    assert torch.equal(_contract.unpack_keys(keys, out_shape), out)


def test_output_extents():
    assert _contract.conv_output_extent([10, 9, 2], [3, 3, 3], [2, 1, 1], [1, 0, 0], [1, 2, 1]) == [5, 5, 0]
    assert _contract.conv_output_shape([10, 9, 3], [3, 3, 3], [2, 1, 1], [1, 0, 0], [1, 2, 1], 1) == [5, 5, 1]
    # transposed: (s - 1)*stride - 2p + d(k - 1) + 1 + output_padding (pads_begin = pads_end = p)
    assert _contract.conv_transpose_output_extent([5, 4], [3, 2], [2, 3], [1, 0], [1, 0], [1, 2], [1, 0]) == [10, 12]
    # a dense input grid reaches every output cell: the builder's outputs span the extent
    shape = [5, 6, 4]
    dense = _contract.unpack_keys(torch.arange(math.prod(shape)), shape)
    out, _, out_shape = ops.build_conv_map(dense, shape, 1, [3, 2, 3], [2, 2, 1], [1, 0, 2], [1, 1, 2])
    extent = _contract.conv_output_extent(shape, [3, 2, 3], [2, 2, 1], [1, 0, 2], [1, 1, 2])
    assert (out[:, 1:].max(0).values + 1).tolist() == extent == out_shape and out.shape[0] == math.prod(extent)


def test_spconv_output_size_helpers_follow_spconv():
    from mx_sparse.compat.spconv2.pytorch import ops as spconv_ops
    assert spconv_ops.get_conv_output_size([10, 9], [3, -1], [2, 1], [1, 0], [1, 1]) == [5, 1]
    # spconv's deconv formula has no dilation term
    assert spconv_ops.get_deconv_output_size([5, 4], [3, 2], [2, 3], [1, 0], [3, 3], [1, 0]) == [10, 11]


def test_compiled_backends_come_from_the_dispatcher():
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    backends = mx_sparse.compiled_backends()
    assert backends[0] == "cpu" and _C.compiled_backends() == backends
    assert ("cuda" in backends) == has("mx_sparse::gather_mm", "CUDA")
    assert ("npu" in backends) == has("mx_sparse::gather_mm", "PrivateUse1")


# --- pack/unpack_map, transpose_map, BatchNorm+ReLU: one message set, in kernels/contract -------

from mx_sparse._accelerator.registration import ORCHESTRATION as ACCELERATOR  # noqa: E402


def cpu_and_accelerator_error(op, *args):
    """The CPU kernel and the accelerator orchestration (run on CPU tensors) raise the identical
    ValueError for the same bad call; returns it."""
    return same_error(lambda: getattr(ops, op)(*args), lambda: ACCELERATOR[op](*args))


def _packed(m=2048, kvol=3):
    nbr = torch.full((m, kvol), -1, dtype=torch.int32)
    nbr[:, 0] = 1
    return ops.pack_map(nbr)


def test_pack_map_errors_come_from_the_contract():
    assert cpu_and_accelerator_error("pack_map", torch.zeros(2, 3, dtype=torch.long)) == \
        "nbr: expected an int32 neighbor map [M, K], got Long [2, 3]"
    nbr = torch.full((3, 27), -1, dtype=torch.int32)
    nbr[1, 4] = -7
    assert cpu_and_accelerator_error("pack_map", nbr) == \
        "nbr: entries must be input rows (>= 0) or -1 (no neighbor), got -7 at [1, 4]"
    _contract.pack_map_entries(-1, 0, 27)   # none: no error
    assert _contract.PACK_ROWS_PER_BLOCK == 1024 and _contract.PACK_LANES == 16
    assert [t.shape[0] for t in _packed()] == [2048, 2048, 3]   # 2 blocks of 1024 rows: 3 starts


def test_unpack_map_errors_come_from_the_contract():
    mask, values, starts = _packed()
    decreasing = starts.clone()
    decreasing[1] = starts[2] + 1
    spare = mask.clone()
    spare[5, 0] |= 1 << 3                    # lane 3 of kvol=3
    flipped = mask.clone()
    flipped[1500, 0] ^= 1 << 1               # block 1 gains a value its share does not hold
    cases = [((mask, values, starts, 0), "kvol: expected a kernel volume in [1, 1048576], got 0"),
             ((mask, values, starts, 40), "mask: expected int16 [M, 3] for kvol=40, got Short [2048, 1]"),
             ((mask, values.long(), starts, 3), "values: expected int32 [P], got Long [2048]"),
             ((mask, values, starts[:2], 3), "block_starts: expected int64 [3] (one per 1024 rows, plus the end), "
                                             "got Long [2]"),
             ((mask, values[:-1], starts, 3), "block_starts: expected to run from 0 to 2047 (the number of values), "
                                              "got 0 .. 2048"),
             ((mask, values, decreasing, 3), "block_starts: expected non-decreasing, got a decrease at block 1"),
             ((spare, values, starts, 3), "mask: row 5 sets bits past kvol=3 (offsets that do not exist)"),
             ((flipped, values, starts, 3), "mask: the set bits of rows 1024..2047 do not match their block_starts "
                                            "share of values")]
    for args, expected in cases:
        assert cpu_and_accelerator_error("unpack_map", *args) == expected
    assert torch.equal(ACCELERATOR["unpack_map"](mask, values, starts, 3), ops.unpack_map(mask, values, starts, 3))


def test_transpose_map_errors_come_from_the_contract():
    assert cpu_and_accelerator_error("transpose_map", idx([[0, 1]]), -1) == \
        "num_rows: expected 0 <= num_rows < 2^31 - 1, got -1"
    assert cpu_and_accelerator_error("transpose_map", idx([[0, 1], [5, -1]]), 3) == \
        "nbr: row 1 holds an input row outside [0, num_rows=3)"
    assert cpu_and_accelerator_error("transpose_map", idx([[0, 1], [2, -1], [0, -1]]), 3) == \
        "nbr: rows 0 and 2 both name input row 0 at offset 0; a neighbor map names each (input row, offset) at " \
        "most once"


BN_DTYPES = "float32, float64, bfloat16 or (CUDA, NPU) float16"


def test_batch_norm_relu_errors_come_from_the_contract():
    x, c3, c2 = torch.randn(4, 3), torch.ones(3), torch.ones(2)
    # float16 (autocast's activations): the accelerators' kernels take it, the CPU kernels refuse it
    with pytest.raises(ValueError, match=r"^input: expected .*\(CUDA, NPU\) float16, got Half$"):
        ops.batch_norm_relu_forward(x.half(), None, None, None, None, True, 0.1, 1e-5)
    ACCELERATOR["batch_norm_relu_forward"](x.half(), None, None, None, None, True, 0.1, 1e-5)
    forward = [((x.view(2, 2, 3), None, None, None, None, True), "input: expected a [N, C] tensor, got 3 dimensions"),
               ((x.int(), None, None, None, None, True), "input: expected " + BN_DTYPES + ", got Int"),
               ((x, c2, None, None, None, True), "weight: expected [3] (one per channel of input), got [2]"),
               ((x, None, None, c3.int(), c3, True), "running_mean: expected " + BN_DTYPES + ", got Int"),
               ((x[:0], None, None, None, None, True), "input: expected at least one row to take statistics over, "
                                                        "got 0"),
               ((x, None, None, c3, None, False), "running_mean, running_var: expected both when batch_stats is "
                                                  "false (normalising with the running statistics)")]
    for args, expected in forward:
        assert cpu_and_accelerator_error("batch_norm_relu_forward", *args, 0.1, 1e-5) == expected
    assert cpu_and_accelerator_error("scale_shift_relu", x, c2, c3) == \
        "scale: expected [3] (one per channel of input), got [2]"
    mean = c3.double()
    backward = [((x[:2], x, mean, mean, None, c3, c3), "grad: expected the shape of input [4, 3], got [2, 3]"),
                ((x, x, mean.int(), mean, None, c3, c3), "mean: expected " + BN_DTYPES + ", got Int"),
                ((x, x, mean, mean, None, c3, c2), "shift: expected [3] (one per channel of input), got [2]")]
    for args, expected in backward:
        assert cpu_and_accelerator_error("batch_norm_relu_backward", *args, True) == expected
    # every check runs before the running statistics are written
    running = torch.zeros(3)
    cpu_and_accelerator_error("batch_norm_relu_forward", x, c2, None, running, torch.zeros(3), True, 0.1, 1e-5)
    assert torch.equal(running, torch.zeros(3))


def test_activation_vectors_are_checked_against_the_features_they_follow():
    """The per-channel vectors of a gather's activation take their length from the features (or
    gather_mm's source); the message names both, since either may be the wrong one (the long fuzz
    found features of one channel too few blamed on scale alone)."""
    features, grad, one, two = torch.randn(3, 2), torch.randn(2, 4), torch.ones(1), torch.ones(2)
    nbr = idx([[0, -1], [1, 2]])
    nbr_t = ops.transpose_map(nbr, 3)
    assert cpu_and_accelerator_error("gather_mm_backprop_filter", features, grad, nbr, nbr_t, 1, False, one, two) == \
        "scale: expected [2] (one per channel of features), got [1]"
    weight = torch.randn(2, 2, 4)
    assert cpu_and_accelerator_error("gather_mm", features, weight, nbr, nbr_t, 1, False, features, two, one) == \
        "source_shift: expected [2] (one per channel of source), got [1]"
