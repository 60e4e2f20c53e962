"""Verification item 1 of the CUDA backend: every Triton kernel EXECUTED under Triton's
interpreter on CPU tensors (the conftest sets TRITON_INTERPRET=1), against the CPU backend:
gather_mm, its input gradient (gather_mm on the transposed map) and the filter gradient
within dtype tolerance of float64, over the issue's shapes (ragged tiles, K = 1, 8, 27, 125,
Cin->Cout 3->5, 16->32, 55->77, 128->256, groups 2 and depthwise, empty inputs), and every
tile configuration the dispatcher can pick executed at least once."""
import itertools

import pytest
import torch

from cuda_cases import (CPU, CUDA, TRITON_PRIMITIVES, assert_close_to, cpu_is_cuda_path, launched,  # noqa: F401
                        operands, references, run_cuda_path, triton_on_cpu)
from mx_sparse._cuda import launch, tiles

pytestmark = [cpu_is_cuda_path, pytest.mark.usefixtures("triton_on_cpu")]

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]

# (rows M, input rows N, K, Cin, Cout, groups): ragged M (not a multiple of 64) everywhere
SHAPES = [
    (70, 90, 27, 3, 5, 1),       # a first layer
    (70, 60, 1, 16, 32, 1),      # K = 1 (1x1x1 conv)
    (45, 50, 8, 16, 32, 1),      # K = 8 (2x2x2)
    (33, 40, 125, 3, 5, 1),      # K = 125 (5x5x5)
    (40, 40, 8, 55, 77, 1),      # channels that fill no block
    (20, 30, 1, 128, 256, 1),    # wide layer, several output blocks
    (70, 80, 27, 8, 12, 2),      # groups = 2
    (70, 80, 27, 16, 16, 16),    # depthwise
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n_in,kvol,cin,cout,groups", SHAPES)
def test_gather_mm_and_gradients_match_cpu_backend(m, n_in, kvol, cin, cout, groups, dtype):
    features, weight, grad, nbr = operands(m, n_in, kvol, cin, cout, groups, dtype, seed=m + kvol + cin)
    expected = references(features, weight, grad, nbr, groups)
    for what, actual, ref in zip(("gather_mm", "input gradient", "filter gradient"),
                                 run_cuda_path(features, weight, grad, nbr, groups), expected):
        assert_close_to(actual, ref, dtype, what)


def test_generated_lidar_scene():
    """A SECOND first layer (SubM 4 -> 16) and its strided successor on a crop of a generated
    KITTI-like scene: the maps the CUDA backend builds, gather_mm and both gradients."""
    from mx_sparse import synthetic
    batch = synthetic.make_batch("kitti", batch_size=1, seed=3)
    ind, feats = batch["indices"], batch["features"]
    keep = (ind[:, 2] >= 760) & (ind[:, 2] < 800) & (ind[:, 3] < 100)
    ind, feats = ind[keep].contiguous(), feats[keep].float().contiguous()
    assert 500 < ind.shape[0] < 2000
    shape = [41, 1600, 1408]
    nbr = CUDA["build_subm_map"](ind, shape, 1, [3, 3, 3], [1, 1, 1])
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(27, feats.shape[1], 16, generator=g) / 10
    grad = torch.randn(ind.shape[0], 16, generator=g)
    for what, actual, ref in zip(("gather_mm", "input gradient", "filter gradient"),
                                 run_cuda_path(feats, weight, grad, nbr, 1), references(feats, weight, grad, nbr, 1)):
        assert_close_to(actual, ref, torch.float32, what)
    out_idx, down, _ = CUDA["build_conv_map"](ind, shape, 1, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    weight2 = torch.randn(27, feats.shape[1], 8, generator=g) / 10
    grad2 = torch.randn(out_idx.shape[0], 8, generator=g)
    for what, actual, ref in zip(("strided gather_mm", "strided input gradient", "strided filter gradient"),
                                 run_cuda_path(feats, weight2, grad2, down, 1),
                                 references(feats, weight2, grad2, down, 1)):
        assert_close_to(actual, ref, torch.float32, what)


def test_float32_agrees_with_cpu_float32_to_1e_5():
    """The CPU backend's own float32 result (not float64) as the reference: the issue's
    fp32 <= 1e-5 relative, element-wise where values are not tiny."""
    features, weight, grad, nbr = operands(70, 90, 27, 16, 32, 1, torch.float32, seed=3)
    cpu = (torch.ops.mx_sparse.gather_mm(features, weight, nbr, None, 1),
           torch.ops.mx_sparse.gather_mm_backprop_filter(features, grad, nbr, None, 1))
    cuda = (CUDA["gather_mm"](features, weight, nbr, None, 1),
            CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, 1))
    for a, b in zip(cuda, cpu):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5 * b.abs().max().item())


@pytest.mark.parametrize("m,n_in", [(0, 0), (0, 5), (7, 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_empty_inputs(m, n_in, dtype):
    """No output rows, no input rows (every map entry -1): zeros of the right shapes."""
    features, weight, grad, nbr = operands(m, n_in, 27, 4, 6, 1, dtype, seed=1)
    out, dx, dw = run_cuda_path(features, weight, grad, nbr, 1)
    assert out.shape == (m, 6) and dx.shape == (n_in, 4) and dw.shape == (27, 4, 6)
    assert not out.any() and not dx.any() and not dw.any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_filter_gradient_over_several_splits(dtype):
    """Enough rows for several row splits, added in split order by each block's last split
    program (float16: into the narrower dW): the reference's values, the same bits on a second
    run, and every split ticket back at 0 for the next launch."""
    from mx_sparse._cuda import gather_mm
    m = 3 * tiles.MIN_SPLIT_ROWS + 17
    splits, _ = tiles.filter_splits(m, 1, 1, 1, 64)
    assert splits > 1
    features, weight, grad, nbr = operands(m, m, 1, 5, 7, 1, dtype, seed=9, density=0.8)
    dw = CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, 1)
    assert_close_to(dw, references(features, weight, grad, nbr, 1)[2], dtype, "filter gradient")
    assert torch.equal(CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, 1), dw)
    assert not gather_mm.split_tickets(features, 1).any()


def _shape_for(kernel, dtype, tile):
    """A small (K, Cin/groups, Cout/groups) for which the dispatcher picks ``tile``."""
    choose = tiles.gather_tile if kernel == "gather_mm" else tiles.filter_tile
    for kvol, cin_g, cout_g in itertools.product((1, 8, 27), (3, 16, 32), (5, 16, 20, 32, 40, 64, 100, 128, 256)):
        if choose(dtype, kvol, cin_g, cout_g) == tile:
            return kvol, cin_g, cout_g
    raise AssertionError(f"no test shape picks {kernel} {dtype} {tile.name()}")


# (kernel, dtype, tile, TF32 allowed): float32 runs twice, as IEEE and as TF32
CONFIGS = [(kernel, d, t, tf32) for kernel, table in (("gather_mm", tiles.GATHER_TILES),
                                                      ("gather_mm_backprop_filter", tiles.FILTER_TILES))
           for d, t in table for tf32 in ((False, True) if d == "fp32" else (False,))]
TORCH_DTYPE = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": torch.float64}


def _config_id(value):
    if isinstance(value, tiles.Tile):
        return value.name()
    return {False: "ieee", True: "tf32"}.get(value, value) if isinstance(value, bool) else value


@pytest.mark.parametrize("kernel,dtype,tile,tf32", CONFIGS, ids=_config_id)
def test_every_tile_configuration_runs(kernel, dtype, tile, tf32, monkeypatch):
    """Each tile the dispatcher can pick, run and checked; float32 also with TF32 allowed (the
    interpreter computes fp32, so that only proves the TF32 constant path runs)."""
    monkeypatch.setattr(launch, "tf32_allowed", lambda: tf32)
    kvol, cin_g, cout_g = _shape_for(kernel, dtype, tile)
    torch_dtype = TORCH_DTYPE[dtype]
    features, weight, grad, nbr = operands(70, 60, kvol, cin_g, cout_g, 1, torch_dtype, seed=kvol + cout_g)
    if kernel == "gather_mm":
        actual, ref = CUDA["gather_mm"](features, weight, nbr, None, 1), references(features, weight, grad, nbr, 1)[0]
    else:
        actual = CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, 1)
        ref = references(features, weight, grad, nbr, 1)[2]
    assert_close_to(actual, ref, torch_dtype, kernel)
    assert (dtype, tile.name()) in launched(kernel)


def test_dispatcher_picks_only_listed_tiles():
    """Every shape (K up to 125, channels up to 300) picks a tile of the tables that the test
    above runs and tests/cuda/test_cubins.py compiles."""
    gather, filt = set(tiles.GATHER_TILES), set(tiles.FILTER_TILES)
    channels = sorted(set(range(1, 40)) | set(range(40, 301, 7)) | {64, 65, 128, 129, 256})
    for dtype in tiles.DTYPES:
        for kvol, cin_g, cout_g in itertools.product((1, 2, 8, 27, 125), channels, channels):
            assert (dtype, tiles.gather_tile(dtype, kvol, cin_g, cout_g)) in gather
            assert (dtype, tiles.filter_tile(dtype, kvol, cin_g, cout_g)) in filt


def test_bf16_dot_widened_only_in_the_interpreter():
    """Triton 3.8's interpreter gets tl.dot of two bfloat16 operands wrong; the kernels widen
    them to fp32 there (exact for bf16 values and their products), and only there. This test
    fails once the interpreter is fixed, so the workaround can go."""
    import numpy as np
    import triton
    import triton.language as tl

    @triton.jit
    def dot16(a, b, c):
        i = tl.arange(0, 16)
        x = tl.load(a + i[:, None] * 16 + i[None, :])
        y = tl.load(b + i[:, None] * 16 + i[None, :])
        tl.store(c + i[:, None] * 16 + i[None, :], tl.dot(x, y, out_dtype=tl.float32))

    a, b = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16()
    c = torch.empty(16, 16)
    dot16[(1,)](a, b, c)
    exact = a.float() @ b.float()
    assert not np.allclose(c.numpy(), exact.numpy(), rtol=1e-2, atol=1e-2), "bf16 tl.dot works in the interpreter now"
    assert launch.interpreting() and launch.dot_constants(torch.bfloat16)["WIDEN"]
    assert not launch.dot_constants(torch.float16)["WIDEN"]


def test_float32_is_ieee_unless_tf32_is_allowed():
    """The kernels' fp32 dot follows torch's switch for TF32 matmuls, read at every call."""
    matmul = torch.backends.cuda.matmul
    before = matmul.allow_tf32
    try:
        matmul.allow_tf32 = False
        assert launch.dot_constants(torch.float32)["PRECISION"] == "ieee"
        matmul.allow_tf32 = True
        assert launch.dot_constants(torch.float32)["PRECISION"] == "tf32"
        assert launch.dot_constants(torch.float16)["PRECISION"] == "ieee"   # TF32 concerns float32 only
    finally:
        matmul.allow_tf32 = before


@pytest.mark.parametrize("m,n_in,kvol,cin,cout,density", [
    (150, 120, 27, 4, 16, 0.25),     # generic steps spanning offsets (a first layer)
    (130, 100, 27, 16, 32, 0.3),     # aligned: one offset per step
    (90, 200, 8, 32, 16, 0.1),       # sparse: tiles skip most offsets
    (1000, 900, 3, 16, 16, 0.5),     # several filter splits
])
def test_executed_steps_match_the_schedule(m, n_in, kvol, cin, cout, density):
    """The kernels' executed-step counter (COUNT=True: every tl.dot adds its multiply-adds)
    equals the analytic count bench/cuda_work.py uses (mx_sparse._cuda.schedule), and the
    gated kernels issue less than the ungated schedule wherever a tile lacks an offset."""
    from mx_sparse._cuda import schedule
    features, weight, grad, nbr = operands(m, n_in, kvol, cin, cout, 1, torch.float32, seed=m, density=density)
    with launch.counting_steps() as executed:
        out = CUDA["gather_mm"](features, weight, nbr, None, 1)
        dw = CUDA["gather_mm_backprop_filter"](features, grad, nbr, None, 1)
    assert executed["gather_mm"] == schedule.gather_issued_macs(nbr, n_in, cin, cout, "fp32")
    assert executed["gather_mm_backprop_filter"] == schedule.filter_issued_macs(nbr, n_in, cin, cout, "fp32")
    assert executed["gather_mm"] < schedule.ungated_gather_issued_macs(nbr, cin, cout, "fp32")
    assert executed["gather_mm_backprop_filter"] < schedule.ungated_filter_issued_macs(nbr, cin, cout, "fp32")
    expected = references(features, weight, grad, nbr, 1)
    assert_close_to(out, expected[0], torch.float32, "gather_mm")
    assert_close_to(dw, expected[2], torch.float32, "filter gradient")


def test_results_repeat_bit_for_bit_and_plans_are_cached():
    """Run to run the same bits (fixed tiles, fixed order, no atomics on values); the map's plan
    is built once and rebuilt after an in-place write to the map."""
    from mx_sparse._cuda import map_plan
    features, weight, grad, nbr = operands(300, 260, 27, 16, 32, 1, torch.float32, seed=5, density=0.3)
    first = run_cuda_path(features, weight, grad, nbr, 1)
    plan = map_plan.plan(nbr, 32, features.shape[0])
    again = run_cuda_path(features, weight, grad, nbr, 1)
    assert map_plan.plan(nbr, 32, features.shape[0]) is plan
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    nbr[0, 0] = -1 if nbr[0, 0] >= 0 else 0
    assert map_plan.plan(nbr, 32, features.shape[0]) is not plan


def test_rows_sorted_by_neighbour_mask(monkeypatch):
    """The plan's order groups rows by bitmask (stable), and each tile's offset list is exactly
    the offsets present in its rows (a plan that sorts: SORTED_FROM_TILES lowered to this map's 3 tiles)."""
    from mx_sparse._cuda import map_plan
    monkeypatch.setattr(map_plan, "SORTED_FROM_TILES", 3)
    nbr = torch.tensor([[0, -1, 2], [-1, -1, 3], [1, -1, 4], [-1, 5, -1], [6, -1, 7]], dtype=torch.int32)
    for build in (map_plan._build, map_plan.reference_build):     # the Triton kernels, the torch version
        plan = build(nbr, 2)
        # masks (bit k for offset k): 5, 4, 5, 2, 5 -> ascending, stable: rows 3, 1, 0, 2, 4
        assert plan.order.tolist() == [3, 1, 0, 2, 4]
        assert plan.counts.tolist() == [2, 2, 2]       # tiles {3, 1}: offsets 1, 2; {0, 2}: 0, 2; {4}: 0, 2
        assert plan.offsets.tolist() == [[1, 2, 0], [0, 2, 1], [0, 2, 1]]   # then the absent ones
        assert plan.present.tolist() == [[0, 1, 1], [1, 0, 1], [1, 0, 1]]


@pytest.mark.parametrize("m,kvol,block_m,density", [(100, 27, 32, 0.2), (1000, 27, 32, 0.05), (64, 40, 32, 0.3),
                                                    (77, 200, 16, 0.05), (3, 1, 32, 0.5), (0, 27, 32, 0.5),
                                                    (10, 0, 32, 0.5)])
@pytest.mark.parametrize("sorted_from_tiles", [1, None], ids=["sorted", "as-is"])
def test_plan_kernels_equal_the_torch_version(m, kvol, block_m, density, sorted_from_tiles, monkeypatch):
    """plan_kernels.py (int32 keys up to 31 offsets, int64 beyond; offsets in chunks of 128) against
    map_plan.reference_build, bit for bit: plans that sort their rows (every one, SORTED_FROM_TILES
    lowered to 1) and plans as the threshold leaves them (these maps keep their row order)."""
    from mx_sparse._cuda import map_plan
    if sorted_from_tiles is not None:
        monkeypatch.setattr(map_plan, "SORTED_FROM_TILES", sorted_from_tiles)
    g = torch.Generator().manual_seed(m + kvol)
    nbr = torch.where(torch.rand(m, kvol, generator=g) < density, torch.randint(0, 50, (m, kvol), generator=g),
                      -1).int()
    got, want = map_plan._build(nbr, block_m), map_plan.reference_build(nbr, block_m)
    if m == 0 or kvol == 0:
        assert got.order.shape == (m,) and bool((got.counts == 0).all())
        return
    for name in ("order", "counts", "offsets", "present"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype == torch.int32 and torch.equal(a, b), name


def test_small_maps_keep_their_row_order_with_the_same_sums(monkeypatch):
    """A plan of fewer than SORTED_FROM_TILES tiles keeps the map's row order (no key, no sort); one
    of that many tiles sorts. Either way each output row sums the same terms in the same order:
    gather_mm and the input gradient are the same bits as with a sorted plan; the weight gradient,
    which adds the tiles in plan order, agrees within rounding."""
    from mx_sparse._cuda import map_plan
    features, weight, grad, nbr = operands(300, 260, 27, 16, 32, 1, torch.float32, seed=7, density=0.3)
    tiles = -(-300 // 32)
    assert not map_plan.sorts(300, 32) and map_plan.sorts(map_plan.SORTED_FROM_TILES * 32, 32)
    as_is = run_cuda_path(features, weight, grad, nbr, 1)
    assert torch.equal(map_plan.plan(nbr, 32, 260).order, torch.arange(300, dtype=torch.int32))
    monkeypatch.setattr(map_plan, "SORTED_FROM_TILES", tiles)
    nbr_sorted = nbr.clone()      # a new tensor: a new plan
    by_mask = run_cuda_path(features, weight, grad, nbr_sorted, 1)
    order = map_plan.plan(nbr_sorted, 32, 260).order
    assert not torch.equal(order, torch.arange(300, dtype=torch.int32))
    assert torch.equal(order.long(), map_plan.reference_build(nbr, 32).order.long())
    assert torch.equal(as_is[0], by_mask[0]) and torch.equal(as_is[1], by_mask[1])
    torch.testing.assert_close(as_is[2], by_mask[2], rtol=1e-5, atol=1e-5)
    expected = references(features, weight, grad, nbr, 1)
    assert_close_to(as_is[2], expected[2], torch.float32, "filter gradient")


def test_absent_neighbour_times_inf_is_skipped_or_nan(monkeypatch):
    """The absent-neighbour contract (docs/en/cuda.md, Limits): with an Inf in one offset's
    weight, an output lacking that neighbour is the skipping sum (the CPU kernels') where its
    whole tile lacks the offset, else NaN (0 x Inf); outputs having it are Inf/NaN as the
    CPU's; everything else equals the CPU kernels' result. (A sorted plan, which groups the rows
    lacking the offset into tiles of their own: this 7-tile map would keep its row order.)"""
    from mx_sparse._cuda import map_plan
    monkeypatch.setattr(map_plan, "SORTED_FROM_TILES", 1)
    features, weight, grad, nbr = operands(200, 150, 27, 16, 16, 1, torch.float32, seed=11, density=0.2)
    nbr[:, 5] = torch.where(torch.arange(200) % 7 == 0, nbr[:, 5].clamp(min=0), -1).int()  # offset 5: few rows
    weight[5, 3, 2] = float("inf")
    out = CUDA["gather_mm"](features, weight, nbr, None, 1)
    skip = CPU.gather_mm(features.double(), weight.double(), nbr, None, 1).float()
    rows = torch.isfinite(skip).all(1)      # rows without the Inf term: the skipping sum, or NaN from 0 x Inf
    a, e = out[rows], skip[rows]
    assert bool((((a - e).abs() <= 1e-5 * (1 + e.abs())) | torch.isnan(a)).all())
    lacking = nbr[:, 5] < 0
    nan_rows = torch.isnan(out).any(1)
    assert bool(nan_rows[lacking].any()), "some rows lacking offset 5 share a tile with one that has it"
    assert not bool(nan_rows[lacking].all()), "rows whose tile lacks offset 5 skip it"
    assert bool((~torch.isfinite(out[~lacking])).any(1).all())


def test_a_map_made_under_inference_mode_gets_an_uncached_plan():
    """A map made under inference_mode is an inference tensor, which has no version counter: its
    plan is built for the call and not cached (the cache checks versions), results unchanged."""
    from mx_sparse._cuda import map_plan
    features, weight, grad, nbr = operands(120, 100, 27, 16, 32, 1, torch.float32, seed=11, density=0.3)
    expected = references(features, weight, grad, nbr, 1)
    with torch.inference_mode():
        inference_nbr = nbr.clone()
        out = CUDA["gather_mm"](features, weight, inference_nbr, None, 1)
        assert inference_nbr not in map_plan._cache
    assert_close_to(out, expected[0], torch.float32, "gather_mm")


# (K, Cin, Cout of the layer): aligned and generic tiles, K = 1 (nothing to reverse), 8 and 27
TRANSPOSED_SHAPES = [(27, 16, 32), (27, 3, 16), (8, 32, 64), (1, 5, 7), (27, 64, 64)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kvol,cin,cout", TRANSPOSED_SHAPES)
def test_input_gradient_reads_the_layer_weight_in_place(kvol, cin, cout, dtype):
    """_gather_mm_transposed (WEIGHT_T) on the layer's own weight equals the gather on the
    transposed copy autograd made before, offsets reversed or not, bit for bit: only the weight's
    addresses differ, not the products or their order."""
    layer_weight = operands(40, 50, kvol, cin, cout, 1, dtype, seed=kvol + cin)[1]
    grad, _, _, nbr = operands(50, 40, kvol, cout, cin, 1, dtype, seed=cout)   # grad [40, Cout], nbr [50, K]
    for reverse in (False, True):
        copy = layer_weight.transpose(1, 2)
        copy = (copy.flip(0) if reverse else copy).contiguous()
        expected = TRITON_PRIMITIVES["_gather_mm_one_group"](grad, copy, nbr)
        actual = TRITON_PRIMITIVES["_gather_mm_transposed"](grad, layer_weight, nbr, reverse)
        assert torch.equal(actual, expected), (reverse, (actual - expected).abs().max())


@pytest.mark.parametrize("dtype,tile", tiles.GATHER_TILES, ids=_config_id)
def test_every_gather_tile_runs_with_the_weight_transposed(dtype, tile):
    """Each gather tile the dispatcher can pick, as the input gradient launches it (WEIGHT_T),
    against the float64 reference of the gather on the transposed copy."""
    kvol, cin_g, cout_g = _shape_for("gather_mm", dtype, tile)       # the launch's (K, Cin, Cout)
    torch_dtype = TORCH_DTYPE[dtype]
    grad, copy, _, nbr = operands(70, 60, kvol, cin_g, cout_g, 1, torch_dtype, seed=kvol + cout_g)
    layer_weight = copy.flip(0).transpose(1, 2).contiguous()          # [K, Cout_g, Cin_g], offsets reversed
    actual = TRITON_PRIMITIVES["_gather_mm_transposed"](grad, layer_weight, nbr, True)
    reference = CPU.gather_mm(grad.double(), copy.double(), nbr, None, 1)
    assert_close_to(actual, reference, torch_dtype, "transposed gather")
    assert (dtype, tile.name()) in launched("gather_mm")
