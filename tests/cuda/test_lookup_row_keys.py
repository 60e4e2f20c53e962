"""The row keys of a map's plan (mx_sparse/_cuda/map_plan.py: each row's neighbour bitmask) written
by the Triton lookup the map was built from (map_kernels.sorted_key_lookup_kernel) and kept with the
map (built_maps.row_key): the map's plans run no row_mask launch and equal
map_plan.reference_build bit for bit; a map not made that way (a transpose, a map written in place,
a map a user made) gets its keys from row_mask_kernel as before."""
import pytest
import torch

from cuda_cases import CPU, CUDA, cpu_is_cuda_path, voxels
from mx_sparse._accelerator import built_maps
from mx_sparse._cuda import launch, map_plan

pytestmark = cpu_is_cuda_path

BLOCK_M = 32
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
        key = built_maps.lookup_row_key(found)
        assert key.dtype == map_plan.key_dtype(kvol) and torch.equal(key.long(), expected_key(found))
    empty = map_primitives.sorted_key_lookup(query, keys[:0], deltas, 5, 6000)
    assert bool((empty == -1).all()) and built_maps.lookup_row_key(empty) is None
