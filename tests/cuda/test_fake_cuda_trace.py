"""Verification item 4 of the CUDA backend: device-generic. The accelerator orchestration
(mx_sparse/_accelerator), the torch-operator fallback primitives it calls on CUDA and the Triton
primitives' launch code are traced on FAKE CUDA tensors (FakeTensorMode: shapes and devices,
no data, no GPU needed) under a dispatch mode that sees every operator called, the primitives
(internal mx_sparse ops, answered by their fake kernels there) included. The trace shows that

- no operator creates or reads a CPU tensor,
- the host reads device data only through host_sync.read, and exactly the reads its
  docstring lists per op (any other .item()/.tolist()/bool() shows up as _local_scalar_dense),
- no data-dependent-shape operator (nonzero, unique, masked_select) hides a sync,
- each op calls the primitives it should (one per group for the gathers), and the fallback
  primitives, traced themselves, neither sync nor touch the CPU,
- the Triton kernels are launched (recorded by launch.run, not run) on CUDA tensors;

and that mixed devices are rejected naming the argument."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from cuda_cases import CUDA
from mx_sparse._accelerator import fallback, host_sync
from mx_sparse._cuda import gather_mm as triton_primitives
from mx_sparse._cuda import launch

SYNCING_OPS = {"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.masked_select.default",
               "aten._unique2.default", "aten.unique_dim.default", "aten.unique_consecutive.default",
               "aten.item.default", "aten.equal.default", "aten.is_nonzero.default"}


class OperatorLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.cpu, self.syncs, self.ops = [], [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        self.ops.append(name)
        if name in SYNCING_OPS:
            self.syncs.append(name)
        out = func(*args, **(kwargs or {}))
        flat = torch.utils._pytree.tree_leaves((args, kwargs, out))
        for t in flat:
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                self.cpu.append((name, tuple(t.shape)))
        return out


@pytest.fixture
def trace(monkeypatch):
    """(fake mode, operator log, list of host reads); host_sync.read answers "all is well" with
    the sizes the test gives in ``answers``."""
    reads, answers = [], {}

    def read(values, why):
        reads.append(why)
        return answers[why]

    monkeypatch.setattr(host_sync, "read", read)
    with FakeTensorMode() as mode:
        log = OperatorLog()
        with log:
            yield mode, log, reads, answers


def cuda(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="cuda")


def index_rows(n, ndim=3):
    return torch.empty((n, 1 + ndim), dtype=torch.int32, device="cuda")


def test_the_log_sees_cpu_tensors_and_syncs(trace):
    """The checks below can fail: a CPU tensor is seen, and an .item() both is seen and fails
    (fake tensors have no value to give)."""
    from torch._subclasses.fake_tensor import DataDependentOutputException
    _, log, _, _ = trace
    torch.arange(3)
    with pytest.raises(DataDependentOutputException):
        cuda(4).sum().item()
    assert log.cpu and log.syncs == ["aten._local_scalar_dense.default"]


def check(log, reads, expected_reads, primitives=None):
    assert log.cpu == [], f"CPU tensors in the CUDA path: {log.cpu[:5]}"
    assert log.syncs == [], f"undocumented syncs: {log.syncs}"
    assert reads == expected_reads
    if primitives is not None:
        called = [op.split(".")[1] for op in log.ops if op.startswith("mx_sparse._")]
        assert called == primitives


BIG = 2**40   # "no offending row" in every check (each compares the row with the row count)
# build_subm_map's value checks as read for rows that pass on any grid: every column's lowest and
# highest value 0, no key twice
PASSING_SUBM = [0] * 9


def test_map_builders(trace):
    _, log, reads, answers = trace
    answers["build_subm_map: value checks"] = PASSING_SUBM
    nbr = CUDA["build_subm_map"](index_rows(100), [10, 12, 14], 2, [3, 3, 3], [1, 1, 1])
    assert nbr.device.type == "cuda" and nbr.shape == (100, 27)
    # (the lookup writes the map's rows in input order itself: unsorted indices)
    check(log, reads, ["build_subm_map: value checks"], ["_sorted_key_lookup_rows"])
    reads.clear()
    log.ops.clear()
    answers["build_conv_map: value checks and output count"] = [BIG, BIG, 37]
    out, nbr, out_shape = CUDA["build_conv_map"](index_rows(100), [10, 12, 14], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1],
                                                 [1, 1, 1])
    assert out.device.type == "cuda" and out.shape == (37, 4) and nbr.shape == (37, 27)
    assert list(out_shape) == [5, 6, 7]     # (s + 2 - 2 - 1) // 2 + 1: from the arguments, nothing read
    check(log, reads, ["build_conv_map: value checks and output count"],
          ["_conv_out_keys", "_conv_output_rows", "_sorted_key_lookup_rows"])
    reads.clear()
    log.ops.clear()
    t = CUDA["transpose_map"](nbr, 100)     # a map the builder made: nothing to check, nothing read
    assert t.device.type == "cuda" and t.shape == (100, 27)
    check(log, reads, [], [])
    # nothing computed either: the lookup's launch wrote the transpose, kept with the map
    assert not [op for op in log.ops if "scatter" in op or "full" in op], log.ops
    assert CUDA["transpose_map"](nbr, 100) is t            # kept with the map
    answers["transpose_map: entries in range, each (input row, offset) once"] = [BIG, BIG]
    t = CUDA["transpose_map"](cuda(37, 27, dtype=torch.int32), 100)     # any other map is checked
    assert t.device.type == "cuda" and t.shape == (100, 27)
    check(log, reads, ["transpose_map: entries in range, each (input row, offset) once"], [])
    reads.clear()
    log.ops.clear()
    answers["build_conv_transpose_map: value checks and output count"] = [BIG, BIG, 41]
    out, nbr, out_shape = CUDA["build_conv_transpose_map"](index_rows(100), [10, 12, 14], 2, [3, 3, 2], [2, 2, 1],
                                                           [1, 0, 0], [0, 1, 0], [1, 1, 2], [1, 0, 1])
    assert out.device.type == "cuda" and out.shape == (41, 4) and nbr.shape == (41, 18)
    assert list(out_shape) == [21, 24, 17]   # (s - 1)*stride - pb - pe + d(k - 1) + 1 + output_padding
    check(log, reads, ["build_conv_transpose_map: value checks and output count"],
          ["_unique_sorted_keys", "_sorted_key_lookup"])
    reads.clear()
    log.ops.clear()
    answers["build_conv_map: value checks and output count"] = [BIG, BIG, 37]   # asymmetric pads
    out, nbr, out_shape = CUDA["build_conv_map"](index_rows(100), [10, 12, 14], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1],
                                                 [1, 1, 1], [0, 2, 1])
    assert out.device.type == "cuda" and out.shape == (37, 4) and nbr.shape == (37, 27)
    assert list(out_shape) == [5, 7, 7]     # (s + 1 + pads_end - 2 - 1) // 2 + 1
    check(log, reads, ["build_conv_map: value checks and output count"],
          ["_conv_out_keys", "_conv_output_rows", "_sorted_key_lookup_rows"])


@pytest.mark.parametrize("transposed", [False, True])
def test_map_at_given_outputs(trace, transposed):
    """build_conv_map_at: one read (both index tensors' value checks), one lookup, no output count."""
    _, log, reads, answers = trace
    answers["build_conv_map_at: value checks"] = [BIG, BIG, BIG, BIG]
    nbr = CUDA["build_conv_map_at"](index_rows(100), index_rows(30), [10, 12, 14], 2, [3, 2, 3], [2, 1, 2],
                                    [1, 0, 2], [1, 2, 1], transposed)
    assert nbr.device.type == "cuda" and nbr.shape == (30, 18) and nbr.dtype == torch.int32
    check(log, reads, ["build_conv_map_at: value checks"], ["_sorted_key_lookup"])


def test_checked_indices_are_not_read_again(trace):
    """Indices that passed a builder's checks, or that a builder emitted, are not checked again on a
    grid and batch at least as large: a submanifold map on them reads nothing, a strided one its
    output count only. Larger batch or grid: still vouched for; smaller: checked again."""
    _, log, reads, answers = trace
    indices = index_rows(100)
    answers["build_subm_map: value checks"] = PASSING_SUBM
    CUDA["build_subm_map"](indices, [10, 12, 14], 2, [3, 3, 3], [1, 1, 1])
    answers["build_conv_map: output count"] = [37]
    out, _, _ = CUDA["build_conv_map"](indices, [10, 12, 14], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    CUDA["build_subm_map"](out, [5, 6, 7], 2, [3, 3, 3], [1, 1, 1])
    CUDA["build_subm_map"](indices, [11, 12, 14], 3, [3, 3, 3], [1, 1, 1])
    check(log, reads, ["build_subm_map: value checks", "build_conv_map: output count"])
    CUDA["build_subm_map"](indices, [9, 12, 14], 2, [3, 3, 3], [1, 1, 1])
    CUDA["build_subm_map"](out, [5, 6, 7], 1, [3, 3, 3], [1, 1, 1])
    indices.add_(0)                          # written in place: checked again
    CUDA["build_subm_map"](indices, [10, 12, 14], 2, [3, 3, 3], [1, 1, 1])
    check(log, reads, ["build_subm_map: value checks", "build_conv_map: output count"]
          + ["build_subm_map: value checks"] * 3)


def test_packed_maps(trace):
    _, log, reads, answers = trace
    nbr = cuda(2500, 27, dtype=torch.int32)
    answers["pack_map: entries >= -1 and value count"] = [BIG, 900]
    mask, values, starts = CUDA["pack_map"](nbr)
    assert (mask.shape, values.shape, starts.shape) == ((2500, 2), (900,), (4,))
    assert {mask.device.type, values.device.type, starts.device.type} == {"cuda"}
    back = CUDA["unpack_map"](mask, values, starts, 27)     # pack_map's own output: nothing to check
    assert back.device.type == "cuda" and back.shape == (2500, 27)
    check(log, reads, ["pack_map: entries >= -1 and value count"])
    answers["unpack_map: block_starts checks"] = [0, 900, BIG, BIG, BIG]
    back = CUDA["unpack_map"](mask, values.clone(), starts, 27)     # any other packed form is checked
    assert back.device.type == "cuda" and back.shape == (2500, 27)
    check(log, reads, ["pack_map: entries >= -1 and value count", "unpack_map: block_starts checks"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_gathers_call_one_primitive_per_group(trace, dtype):
    _, log, reads, _ = trace
    features, weight, nbr = cuda(300, 16, dtype=dtype), cuda(27, 8, 32, dtype=dtype), cuda(200, 27, dtype=torch.int32)
    out = CUDA["gather_mm"](features, weight, nbr, None, 2)
    assert out.device.type == "cuda" and out.shape == (200, 32) and out.dtype == dtype
    dw = CUDA["gather_mm_backprop_filter"](features, cuda(200, 32, dtype=dtype), nbr, None, 2)
    assert dw.device.type == "cuda" and dw.shape == (27, 8, 32) and dw.dtype == dtype
    check(log, reads, [], ["_gather_mm_one_group"] * 2 + ["_gather_mm_backprop_filter_one_group"] * 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_triton_primitives_launch_kernels_on_cuda_tensors(trace, dtype):
    _, log, reads, _ = trace
    before = sum(launch.launches.values())
    features, weight, nbr = cuda(300, 8, dtype=dtype), cuda(27, 8, 16, dtype=dtype), cuda(200, 27, dtype=torch.int32)
    out = triton_primitives.gather_mm_one_group(features, weight, nbr)
    assert out.device.type == "cuda" and out.shape == (200, 16) and out.dtype == dtype
    dw = triton_primitives.gather_mm_backprop_filter_one_group(features, cuda(200, 16, dtype=dtype), nbr)
    assert dw.device.type == "cuda" and dw.shape == (27, 8, 16) and dw.dtype == dtype
    # the map's plan (tiles only, once: both gathers use 32-row tiles, and a map of 7 tiles keeps its
    # row order, map_plan.SORTED_FROM_TILES: no row keys), gather, the filter's tile lists, filter (one
    # split of 200 rows; for half types it also converts into dW itself)
    assert sum(launch.launches.values()) == before + 1 + 1 + 1 + 1
    check(log, reads, [])


def test_triton_map_primitives_launch_kernels_on_cuda_tensors(trace):
    """_conv_out_keys, _sorted_key_lookup, _unique_sorted_keys and _conv_output_rows on CUDA: one
    launch each; no host read, no CPU tensor."""
    from mx_sparse._cuda import map_primitives
    _, log, reads, _ = trace
    before = sum(launch.launches.values())
    pairs = map_primitives.conv_out_keys(index_rows(100), [10, 12, 14], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    # 2 of the 3 kernel positions per axis are slots at stride 2: 8 rows of keys, not 27
    assert pairs.device.type == "cuda" and pairs.shape == (800,) and pairs.dtype == torch.int64
    keys, deltas = cuda(100, dtype=torch.int64), cuda(27, dtype=torch.int64)
    found = map_primitives.sorted_key_lookup(keys, keys, deltas, 3, 1000)
    assert found.device.type == "cuda" and found.shape == (100, 27) and found.dtype == torch.int32
    unique, count = map_primitives.unique_sorted_keys(pairs)
    assert unique.shape == (800,) and count.shape == (1,) and count.dtype == torch.int32
    assert {unique.device.type, count.device.type} == {"cuda"}
    rows, query, count = map_primitives.conv_output_rows(pairs, [5, 6, 7], [13, 15, 17], [2, 2, 2])
    assert rows.shape == (800, 4) and rows.dtype == torch.int32 and query.shape == (800,)
    assert query.dtype == torch.int64 and count.shape == (1,) and count.dtype == torch.int32
    assert {rows.device.type, query.device.type, count.device.type} == {"cuda"}
    assert sum(launch.launches.values()) == before + 4
    check(log, reads, [])


def test_fallback_primitives_stay_on_the_device_without_syncs(trace):
    """The torch-operator primitives CUDA runs for the maps (and any device for any primitive
    it lacks), traced themselves: no host read, no CPU tensor."""
    _, log, reads, _ = trace
    keys, deltas = cuda(100, dtype=torch.int64), cuda(27, dtype=torch.int64)
    assert fallback.sorted_key_lookup(keys, keys, deltas, 3, 1000).shape == (100, 27)
    pairs = fallback.conv_out_keys(index_rows(100), [10, 12, 14], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    assert pairs.shape == (800,) and pairs.dtype == torch.int64
    unique, count = fallback.unique_sorted_keys(pairs)
    assert unique.shape == (800,) and count.shape == (1,) and count.dtype == torch.int32
    features, nbr = cuda(300, 8, dtype=torch.bfloat16), cuda(200, 27, dtype=torch.int32)
    assert fallback.gather_mm_one_group(features, cuda(27, 8, 16, dtype=torch.bfloat16), nbr).shape == (200, 16)
    assert fallback.gather_mm_backprop_filter_one_group(features, cuda(200, 16, dtype=torch.bfloat16),
                                                        nbr).shape == (27, 8, 16)
    check(log, reads, [])


def test_batch_norm_relu(trace):
    """On CUDA tensors the fused BatchNorm+ReLU is its Triton kernels (2 launches forward, 1 recompute,
    2 backward) and torch allocations only: no other torch operator, no host read."""
    _, log, reads, _ = trace
    x, gamma, beta = cuda(500, 16), cuda(16), cuda(16)
    mean, var = cuda(16), cuda(16)
    before = sum(n for (k, _, _), n in launch.launches.items() if k.startswith("bn_"))
    y, m, inv, scale, shift = CUDA["batch_norm_relu_forward"](x, gamma, beta, mean, var, True, 0.1, 1e-5)
    assert all(t.device.type == "cuda" for t in (y, m, inv, scale, shift))
    CUDA["scale_shift_relu"](x, scale, shift)
    dx, dg, db = CUDA["batch_norm_relu_backward"](cuda(500, 16), x, m, inv, gamma, scale, shift, True)
    assert all(t.device.type == "cuda" for t in (dx, dg, db))
    check(log, reads, [])
    assert sum(n for (k, _, _), n in launch.launches.items() if k.startswith("bn_")) - before == 5
    kernels = {op for op in log.ops if not op.startswith(("aten.empty", "prim."))}   # prim: metadata
    assert kernels == set(), kernels


def test_mixed_devices_name_the_argument(trace):
    features, weight = cuda(10, 4), cuda(27, 4, 6)
    nbr_cpu = torch.empty((5, 27), dtype=torch.int32)
    with pytest.raises(ValueError, match=r"nbr: expected a tensor on cuda:0 like features, got one on cpu"):
        CUDA["gather_mm"](features, weight, nbr_cpu, None, 1)
    with pytest.raises(ValueError, match=r"weight: expected a tensor on cuda:0 like features, got one on cpu"):
        CUDA["gather_mm"](features, torch.empty(27, 4, 6), cuda(5, 27, dtype=torch.int32), None, 1)
    with pytest.raises(ValueError, match=r"grad: expected a tensor on cuda:0 like features"):
        CUDA["gather_mm_backprop_filter"](features, torch.empty(5, 6), cuda(5, 27, dtype=torch.int32), None, 1)
    with pytest.raises(ValueError, match=r"running_mean: expected a tensor on cuda:0 like input"):
        CUDA["batch_norm_relu_forward"](cuda(5, 4), None, None, torch.empty(4), None, True, 0.1, 1e-5)


def test_sparse_tensor_rejects_features_and_indices_on_two_devices():
    import mx_sparse
    idx = torch.zeros(3, 4, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"features: expected a tensor on cpu, the device of indices, got one on meta"):
        mx_sparse.SparseConvTensor(torch.empty(3, 2, device="meta"), idx, [4, 4, 4], 1)
    x = mx_sparse.SparseConvTensor(torch.ones(3, 2), idx, [4, 4, 4], 1)
    with pytest.raises(ValueError, match=r"features: expected a tensor on cpu"):
        x.replace_feature(torch.empty(3, 2, device="meta"))
