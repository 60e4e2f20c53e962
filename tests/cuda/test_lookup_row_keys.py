"""The row keys of a map's plan (mx_sparse/_cuda/map_plan.py: each row's neighbour bitmask) written
by the Triton lookup the map was built from (map_kernels.sorted_key_lookup_kernel) and kept with the
map (built_maps.row_key): the map's plans run no row_mask launch and equal
map_plan.reference_build bit for bit; so does a strided map's transpose, whose keys the pair keys'
launch wrote (map_kernels.conv_out_keys_kernel). A map not made that way (a submanifold map's
transpose, a map written in place, a map a user made) gets its keys from row_mask_kernel as before."""
import math

import pytest
import torch

from cuda_cases import CPU, CUDA, cpu_is_cuda_path, voxels
from mx_sparse._accelerator import built_maps
from mx_sparse._cuda import launch, map_plan

pytestmark = cpu_is_cuda_path

BLOCK_M = 32


@pytest.fixture(autouse=True)
def every_plan_sorts(monkeypatch):
    """The keys are what a sorted plan sorts: these maps (a few hundred rows) would keep their row
    order otherwise (map_plan.SORTED_FROM_TILES), reading no key at all."""
    monkeypatch.setattr(map_plan, "SORTED_FROM_TILES", 1)


# (kernel, dilation): 27 offsets (int32 keys), 125 (int64 keys, 63 bits), 175 (the lookup's offsets in
# two chunks of 128; bits past 63 not in the key), 24 (int32, a non-cubic window)
SUBM = [((3, 3, 3), (1, 1, 1)), ((5, 5, 5), (1, 1, 1)), ((5, 5, 7), (1, 1, 1)), ((2, 3, 4), (1, 2, 1))]
CONV = [((3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1)), ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1)),
        ((5, 5, 5), (2, 2, 2), (2, 2, 2), (1, 1, 1))]


def scene(seed=0):
    return voxels([9, 10, 11], 3, density=0.3, seed=seed, empty_batches=(1,))


def expected_key(nbr):
    """Bit k for the first 63 offsets k with nbr[m, k] >= 0, by torch operators."""
    bits = min(nbr.shape[1], map_plan.KEY_BITS)
    return (nbr[:, :bits] >= 0).long().bitwise_left_shift(torch.arange(bits)).sum(1)


def row_mask_launches():
    return sum(n for (name, _, _), n in launch.launches.items() if name == "row_mask")


def planned(nbr, rows):
    """The map's plan, and the row_mask launches its building made."""
    before = row_mask_launches()
    plan = map_plan.plan(nbr, BLOCK_M, rows)
    return plan, row_mask_launches() - before


def assert_reference_plan(plan, nbr):
    want = map_plan.reference_build(nbr, BLOCK_M)
    for name in ("order", "counts", "offsets", "present"):
        assert torch.equal(getattr(plan, name), getattr(want, name)), name


def check_lookup_built(nbr, rows):
    key = built_maps.row_key(nbr)
    assert key is not None, "the builder kept the lookup's row keys with the map"
    assert key.dtype == map_plan.key_dtype(nbr.shape[1]) and torch.equal(key.long(), expected_key(nbr))
    plan, masks = planned(nbr, rows)
    assert masks == 0, "a lookup-built map's plan runs no row_mask launch"
    assert_reference_plan(plan, nbr)


@pytest.mark.parametrize("kernel,dilation", SUBM)
def test_submanifold_map_keys_come_from_its_lookup(kernel, dilation):
    idx = scene()
    args = ([9, 10, 11], 3, list(kernel), list(dilation))
    nbr = CUDA["build_subm_map"](idx, *args)
    assert torch.equal(nbr, CPU.build_subm_map(idx, *args))
    check_lookup_built(nbr, idx.shape[0])
    # its transpose has no lookup behind it: row_mask computes its keys
    nbr_t = CUDA["transpose_map"](nbr, idx.shape[0])
    assert built_maps.row_key(nbr_t) is None
    plan, masks = planned(nbr_t, nbr.shape[0])
    assert masks == 1
    assert_reference_plan(plan, nbr_t)


@pytest.mark.parametrize("kernel,stride,padding,dilation", CONV)
def test_strided_map_keys_come_from_its_lookup(kernel, stride, padding, dilation):
    idx = scene(seed=1)
    args = ([9, 10, 11], 3, list(kernel), list(stride), list(padding), list(dilation))
    out_idx, nbr, out_shape = CUDA["build_conv_map"](idx, *args)
    want = CPU.build_conv_map(idx, *args)
    assert torch.equal(out_idx, want[0]) and torch.equal(nbr, want[1])
    check_lookup_built(nbr, idx.shape[0])


def test_keys_dropped_once_the_map_is_written_or_copied():
    """An in-place write to the map (a new version) or a copy of it (another tensor): no kept keys,
    row_mask runs, the plan still the reference's."""
    idx = scene(seed=2)
    nbr = CUDA["build_subm_map"](idx, [9, 10, 11], 3, [3, 3, 3], [1, 1, 1])
    copy = nbr.clone()
    assert built_maps.row_key(copy) is None
    plan, masks = planned(copy, idx.shape[0])
    assert masks == 1
    assert_reference_plan(plan, copy)
    nbr[0, :5] = -1
    assert built_maps.row_key(nbr) is None
    plan, masks = planned(nbr, idx.shape[0])
    assert masks == 1
    assert_reference_plan(plan, nbr)


def test_lookup_writes_the_keys_of_its_rows():
    """The lookup alone (query rows not a map's: no builder), against its fallback and the keys of
    its result; empty inputs keep no keys."""
    from mx_sparse._accelerator import fallback
    from mx_sparse._cuda import map_primitives
    g = torch.Generator().manual_seed(3)
    keys = torch.sort(torch.randint(0, 5000, (700,), generator=g)).values
    query = keys[::3].contiguous() + 1
    for kvol in (1, 31, 32, 63, 64, 130):
        deltas = torch.randint(-30, 30, (kvol,), generator=g)
        found = map_primitives.sorted_key_lookup(query, keys, deltas, 5, 6000)
        assert torch.equal(found, fallback.sorted_key_lookup(query, keys, deltas, 5, 6000))
        key = built_maps.result_row_key(found)
        assert key.dtype == map_plan.key_dtype(kvol) and torch.equal(key.long(), expected_key(found))
    empty = map_primitives.sorted_key_lookup(query, keys[:0], deltas, 5, 6000)
    assert bool((empty == -1).all()) and built_maps.result_row_key(empty) is None


# The strided map's transpose: its row keys come from _conv_out_keys' launch (conv_out_keys_kernel:
# bit k of input n where the pair (k, n) reaches an output). (spatial shape, kernel, stride, padding,
# dilation, pads_end): 2D and 3D, kernel sizes 1 to 5 per axis (1 to 125 offsets: int32 and int64
# keys), strides 1 to 3, symmetric and asymmetric padding, dilations 1 to 3.
STRIDED = [([9, 10, 11], (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), None),
           ([9, 10, 11], (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), None),
           ([9, 10, 11], (5, 5, 5), (2, 2, 2), (2, 2, 2), (1, 1, 1), None),
           ([9, 10, 11], (3, 1, 1), (2, 1, 1), (0, 0, 0), (1, 1, 1), None),
           ([9, 10, 11], (1, 4, 5), (1, 3, 2), (0, 1, 2), (1, 1, 2), (0, 2, 1)),
           ([9, 10, 11], (3, 2, 4), (3, 1, 2), (2, 0, 1), (2, 3, 1), (0, 1, 3)),
           ([13, 17], (5, 3), (2, 3), (2, 1), (1, 2), None),
           ([13, 17], (4, 5), (2, 2), (1, 0), (3, 1), (2, 2)),
           ([13, 17], (1, 1), (2, 1), (0, 0), (1, 1), None)]


def check_transpose_keyed(nbr, rows):
    """The transpose of a builder's strided map on its input rows: the kept keys are the transpose's
    (by torch operators), its plan runs no row_mask launch and equals reference_build."""
    nbr_t = CUDA["transpose_map"](nbr, rows)
    assert torch.equal(nbr_t, CPU.transpose_map(nbr, rows))
    key = built_maps.row_key(nbr_t)
    assert key is not None, "the builder kept _conv_out_keys' row keys for the map's transpose"
    assert key.dtype == map_plan.key_dtype(nbr.shape[1]) and torch.equal(key.long(), expected_key(nbr_t))
    plan, masks = planned(nbr_t, nbr.shape[0])
    assert masks == 0, "the strided map's transpose runs no row_mask launch"
    assert_reference_plan(plan, nbr_t)


@pytest.mark.parametrize("case", range(len(STRIDED)))
def test_strided_map_transpose_keys_come_from_conv_out_keys(case):
    shape, kernel, stride, padding, dilation, pads_end = STRIDED[case]
    idx = voxels(shape, 3, density=0.3, seed=10 + case, empty_batches=(1,))
    args = (shape, 3, list(kernel), list(stride), list(padding), list(dilation),
            None if pads_end is None else list(pads_end))
    # fresh indices (the builder checks them), then a 3^d stride-2 map on the outputs it emitted
    # (vouched for: not checked again)
    ndim = len(shape)
    for _ in range(2):
        out_idx, nbr, out_shape = CUDA["build_conv_map"](idx, *args)
        want = CPU.build_conv_map(idx, *args)
        assert torch.equal(out_idx, want[0]) and torch.equal(nbr, want[1])
        check_transpose_keyed(nbr, idx.shape[0])
        idx = out_idx
        args = (list(out_shape), 3, [3] * ndim, [2] * ndim, [1] * ndim, [1] * ndim, None)


def test_transpose_on_more_rows_gets_its_keys_from_row_mask():
    """A transpose on more rows than the map's inputs (rows no entry names): the kept keys are not
    its rows'; row_mask computes them, the plan still the reference's."""
    idx = scene(seed=4)
    _, nbr, _ = CUDA["build_conv_map"](idx, [9, 10, 11], 3, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    wide = CUDA["transpose_map"](nbr, idx.shape[0] + 5)
    assert built_maps.row_key(wide) is None
    plan, masks = planned(wide, nbr.shape[0])
    assert masks == 1
    assert_reference_plan(plan, wide)


def reaches(row, k, shape, batch, kernel, stride, padding, dilation):
    """Whether input ``row`` reaches an output through kernel offset k (row-major positions): on
    every axis i + p - kp*d is a multiple of s whose quotient lies in the output extent."""
    for d in reversed(range(len(shape))):
        k, kp = divmod(k, kernel[d])
        num = row[1 + d] + padding[d] - kp * dilation[d]
        extent = (shape[d] + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1
        if num < 0 or num % stride[d] or num // stride[d] >= extent:
            return False
    return True


def test_conv_out_keys_writes_the_offset_bitmasks_of_its_rows():
    """_conv_out_keys alone, against its fallback and the bitmasks of its pairs (kernel volumes of
    1, 27, 32, 64 and 625 offsets: int32 and int64 keys, bits past 63 not in the key), 1 to 4 axes."""
    from mx_sparse._accelerator import fallback
    from mx_sparse._cuda import map_primitives
    for shape, kernel in (([50], [1]), ([9, 10, 11], [3, 3, 3]), ([8, 9], [4, 8]), ([6, 7, 5], [4, 4, 4]),
                          ([4, 5, 3, 6], [5, 5, 5, 5])):
        ndim = len(shape)
        idx = voxels(shape, 2, density=0.4, seed=ndim)
        geometry = (shape, 2, kernel, [2] + [1] * (ndim - 1), [1] * ndim, [1] * (ndim - 1) + [2])
        pairs = map_primitives.conv_out_keys(idx, *geometry)
        assert torch.equal(pairs, fallback.conv_out_keys(idx, *geometry))
        kvol = math.prod(kernel)
        bits = min(kvol, map_plan.KEY_BITS)
        reached = torch.tensor([[reaches(row, k, *geometry) for k in range(bits)] for row in idx.tolist()]).long()
        key = built_maps.result_row_key(pairs)
        assert key.dtype == map_plan.key_dtype(kvol)
        assert torch.equal(key.long(), reached.bitwise_left_shift(torch.arange(bits)).sum(1))


STEP = """
import collections, torch
from bench import host_cost, host_ops
from mx_sparse._cuda import launch
from mx_sparse.models import VoxelBackBone8x
launches = host_ops._stub_triton_launches()     # the compute kernels and plans counted, not run
data = host_cost.scene(60)
torch.manual_seed(0)
net = VoxelBackBone8x(data["features"].shape[1]).train()
host_cost._one_step(net, data)
counts = collections.Counter()
for (name, _, _), n in launches.items():
    counts[name] += n
print("LAUNCHES", dict(counts))
"""


def test_training_step_runs_no_row_mask():
    """A VoxelBackBone8x training step on the CUDA path (MXS_CUDA_ON_CPU=1, a 60-voxel KITTI crop;
    the map kernels interpreted, the compute kernels counted but not run): every map it plans has
    its row keys from a map kernel's launch -- the submanifold and strided maps from their lookup,
    the strided maps' transposes (the input gradients) from _conv_out_keys -- so no row_mask launch."""
    import ast
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, MXS_CUDA_ON_CPU="1", TRITON_INTERPRET="1", PYTHONPATH=root)
    done = subprocess.run([sys.executable, "-c", STEP], cwd=root, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("LAUNCHES "))
    counts = ast.literal_eval(line.removeprefix("LAUNCHES "))
    assert counts.get("conv_out_keys") == 4 and counts.get("tile_plan", 0) > 0, counts
    assert counts.get("row_mask", 0) == 0, counts
