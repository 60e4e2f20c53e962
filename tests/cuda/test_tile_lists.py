"""mx_sparse/_cuda/tile_lists.py: the weight-gradient kernel's per-gate compacted tile lists
(the Triton kernel, interpreted, and the torch formulation it replaced) against a direct Python
reference (each gate's tiles in which one of its offsets is present, ascending, first), for the
aligned gates (one offset each) and the generic ones (blocks of (offset, channel) pairs spanning
offsets), and the per-plan cache."""
import pytest
import torch

from mx_sparse._cuda import tile_lists

BUILDERS = {"kernel": tile_lists.build, "torch": tile_lists.reference_build}


def _reference(present, aligned, kvol, cin, block_k):
    tiles = present.shape[0]
    if aligned:
        gates = [[k] for k in range(kvol)]
    else:
        gates = [sorted({r // cin for r in range(r0, min(r0 + block_k, kvol * cin))})
                 for r0 in range(0, kvol * cin, block_k)]
    return [[t for t in range(tiles) if any(present[t, k] for k in offsets)] for offsets in gates]


@pytest.mark.parametrize("aligned,kvol,cin,block_k", [(True, 27, 16, 16), (False, 27, 3, 16), (False, 8, 5, 32),
                                                      (False, 1, 4, 16), (False, 125, 3, 32)])
@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_lists_match_the_reference(builder, aligned, kvol, cin, block_k):
    g = torch.Generator().manual_seed(kvol + cin)
    present = (torch.rand(13, kvol, generator=g) < 0.3).int()
    present[5] = 0                                  # a tile with no offset
    lists, counts = BUILDERS[builder](present, aligned, kvol, cin, block_k)
    expected = _reference(present, aligned, kvol, cin, block_k)
    assert lists.dtype == counts.dtype == torch.int32 and lists.is_contiguous()
    assert lists.shape == (13, len(expected))
    assert counts.tolist() == [len(e) for e in expected]
    for gate, tiles in enumerate(expected):
        assert lists[:len(tiles), gate].tolist() == tiles
        # the rest: the other tiles (never read), so each column is a permutation
        assert sorted(lists[:, gate].tolist()) == list(range(13))


def test_cached_per_plan_and_gate_shape():
    present = torch.tensor([[1, 0], [0, 1], [1, 1]], dtype=torch.int32)
    first = tile_lists.lists(present, True, 2, 16, 16)
    assert tile_lists.lists(present, True, 2, 32, 32) is first          # aligned gates: the offsets alone
    generic = tile_lists.lists(present, False, 2, 3, 16)
    assert generic is not first and tile_lists.lists(present, False, 2, 3, 16) is generic
    assert tile_lists.lists(present.clone(), True, 2, 16, 16) is not first  # another plan's tensor


@pytest.mark.parametrize("aligned,kvol,cin,block_k", [(True, 27, 32, 16), (False, 27, 4, 16), (False, 27, 3, 16),
                                                      (False, 8, 5, 32), (False, 125, 3, 32), (False, 2, 40, 16)])
@pytest.mark.parametrize("density", [0.02, 0.5])
def test_kernel_equals_the_torch_formulation(aligned, kvol, cin, block_k, density):
    """Random tile masks over more tiles than one step of the kernel's loop (a ragged last step):
    the kernel's whole table, the never-read tail of each column included, is the torch one's."""
    g = torch.Generator().manual_seed(kvol * 7 + cin)
    tiles = tile_lists.BLOCK_T + 77
    present = (torch.rand(tiles, kvol, generator=g) < density).int()
    lists, counts = tile_lists.build(present, aligned, kvol, cin, block_k)
    want_lists, want_counts = tile_lists.reference_build(present, aligned, kvol, cin, block_k)
    assert counts.dtype == torch.int32 and torch.equal(counts, want_counts)
    assert lists.dtype == torch.int32 and torch.equal(lists, want_lists)


def test_no_tiles():
    lists, counts = tile_lists.build(torch.zeros((0, 27), dtype=torch.int32), False, 27, 3, 16)
    assert lists.shape == (0, 6) and counts.tolist() == [0] * 6


@pytest.mark.parametrize("cin, cout, fused", [(16, 32, True), (4, 36, False)], ids=["aligned", "generic"])
def test_a_training_forward_gather_builds_the_lists_of_its_plan(cin, cout, fused):
    """gather_mm with a weight that requires grad, aligned: its launch's LISTS programs fill the
    plan's lists (no tile_lists launch), the kernel's whole table; generic (a first layer): one
    tile_lists launch as before. The weight gradient then launches none and matches the CPU backend."""
    from cuda_cases import TRITON_PRIMITIVES, assert_close_to, operands, references
    from mx_sparse._cuda import launch, map_plan, tiles

    def tile_list_launches():
        return sum(n for (k, _, _), n in launch.launches.items() if k == "tile_lists")

    features, weight, grad, nbr = operands(700, 300, 27, cin, cout, 1, torch.float32, seed=cin)
    before = tile_list_launches()
    TRITON_PRIMITIVES["_gather_mm_one_group"](features, weight.requires_grad_(), nbr)
    plan = map_plan.plan(nbr, tiles.ROWS_PER_TILE, 300)
    tile = tiles.filter_tile("fp32", 27, cin, cout)
    kept = tile_lists.lists(plan.present, tile.aligned, 27, cin, tile.block_k)
    assert tile_list_launches() == before + (0 if fused else 1)
    built = tile_lists.build(plan.present, tile.aligned, 27, cin, tile.block_k)
    assert torch.equal(kept[0], built[0]) and torch.equal(kept[1], built[1])
    before = tile_list_launches()
    dw = TRITON_PRIMITIVES["_gather_mm_backprop_filter_one_group"](features, grad, nbr)
    assert tile_list_launches() == before
    assert_close_to(dw, references(features, weight.detach(), grad, nbr, 1)[2], torch.float32, "dW")
