"""The CUDA primitives (host side): tile choice and launch of the Triton kernels for one group
(contracts: kernels/schema/schema.cpp, _gather_mm_one_group / _gather_mm_backprop_filter_one_group).
The argument checks and the per-group loop are the accelerator orchestration's
(mx_sparse/_accelerator/gather_mm.py); here only what the kernels themselves need.

  _gather_mm_one_group:                 out[m] = sum_k features[nbr[m, k]] @ weight[k]
  _gather_mm_transposed:                out[m] = sum_k features[nbr[m, k]] @ weight[k']^T, k' = k or K-1-k
                                        (the input gradient, weight read in place: WEIGHT_T)
  _gather_mm_backprop_filter_one_group: dW[k]  = sum_m a[nbr[m, k]]^T (x) grad[m], a = features, or
                                        relu(features * scale + shift) applied as the kernel loads
                                        them (ACTIVATION: no recompute launch in the backward of a
                                        convolution after a fused BatchNorm+ReLU)

A forward launch (the weight requires grad) also writes per-tile moments of its output for the
BatchNorm that usually follows (``tile_stats``; batch_norm_relu.py takes them instead of
launching its moments kernel), and, the first time on a plan, the weight gradient's tile lists
of that plan (tile_lists.to_fill: no tile_lists launch in the backward).

Both run the mask-gated schedule of map_plan.py: rows in neighbour-bitmask order, each tile
looping over the offsets present in it. Neither syncs with the host: a map entry outside
[-1, rows) is reported by a device-side assertion (index_checks.assert_map_rows, from
map_plan.plan), once per map.
"""
import torch
from .._core.weak_id_map import WeakIdMap

from .._accelerator import index_checks
from . import launch, map_plan, tile_lists, tiles

# CUDA's limit on the second and third grid dimensions (output-channel blocks).
MAX_GRID_YZ = 65535


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _check_grid(programs: int, what: str) -> None:
    """A grid dimension other than the first (``what`` names the argument that sets it)."""
    if programs > MAX_GRID_YZ:
        raise ValueError(f"{what} need {programs} programs along a grid dimension; CUDA allows {MAX_GRID_YZ}")


def _check_int32(features: int, nbr: int, name: str, size: int) -> None:
    """The kernels take their sizes as int32 scalars (the one compiled variant); ``name`` is the
    argument whose ``size`` elements the launch also indexes (weight, or grad: the size of its dW).
    (Positional: no keyword dict built per call.)"""
    if max(features, nbr, size) < 2**31:      # (the usual case: one C call, no loop)
        return
    for what, value in (("features", features), ("nbr", nbr), (name, size)):
        if value >= 2**31:
            raise ValueError(f"{what}: {value} elements or rows exceed the CUDA kernels' int32 sizes")


class _Shaped:
    """What a gather_mm launch takes that its shapes alone decide (not the map's entries): tile, grid,
    scalars and keyword arguments, for one (output rows, offsets, input rows, Cin, Cout, dtype, TF32
    switch, counting, moments, weight layout): made once per such key and shared by every map of
    that shape (a network repeats a few shapes, and a training step brings fresh maps).
    ``transposed``: the weight is a layer's [K, Cout, Cin], read transposed (WEIGHT_T)."""
    __slots__ = ("dtype", "tile", "grid", "scalars", "constexprs", "lists_constexprs", "tiles", "block_m", "gates",
                 "lists_shape", "stats")

    def __init__(self, features, weight, nbr, stats, transposed=False):
        m, kvol = nbr.shape
        n_in, cin, cout = features.shape[0], features.shape[1], weight.shape[1 if transposed else 2]
        _check_int32(n_in, m, "weight", weight.numel())
        self.dtype = launch.operand_type(features.dtype)
        tile = tiles.gather_tile(self.dtype, kvol, cin, cout)
        _check_grid(_cdiv(cout, tile.block_n), "weight: the output channels per group")
        self.tile, self.grid = tile.name(), (_cdiv(m, tile.block_m), _cdiv(cout, tile.block_n), 1)
        self.scalars = (m, n_in, kvol, cin, cout)
        self.tiles, self.block_m = self.grid[0], tile.block_m
        # the tile moments where they compile without spills (cubins.py): every tile but the generic
        # half-precision ones (a first layer under autocast; with the epilogue, 4 B spilled on triton
        # 3.6's sm_80), whose BatchNorm launches its moments kernel
        self.stats = stats = stats and (tile.aligned or self.dtype in ("fp32", "fp64"))
        # the weight gradient's tile lists of a plan: built in a launch (LISTS) by the aligned tiles
        # (every layer after a network's first), whose filter kernel's gates are the offsets (the
        # same step choice: tiles._step_k); the generic variant with that branch spilled (sm_80/sm_90,
        # cubins.py): a first layer's plan launches tile_lists_kernel
        filter_tile = tiles.filter_tile(self.dtype, kvol, cin, cout)
        fits = tile.aligned and (filter_tile.block_k, filter_tile.aligned) == (tile.block_k, tile.aligned)
        self.lists_shape = (tile.aligned, kvol, cin, tile.block_k) if fits and 0 not in self.grid else None
        self.gates = (tile_lists.gates(tile.aligned, kvol, cin, tile.block_k), tile_lists.span(cin, tile.block_k))
        constants = launch.dot_constants(features.dtype)
        self.constexprs = dict(BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k,
                               ALIGNED=tile.aligned, num_warps=tile.num_warps, num_stages=tile.num_stages,
                               **constants, CHANNELS_FIRST=tiles.channels_first(self.dtype, constants["PRECISION"], tile),
                               STATS=stats, **launch.count_constant(), BLOCK_T=tile_lists.BLOCK_T,
                               WEIGHT_T=transposed)
        self.lists_constexprs = dict(self.constexprs, LISTS=True)
        self.constexprs["LISTS"] = False


# (output rows, offsets, input rows, Cin, Cout, dtype, TF32, counting, moments) -> _Shaped, and
# (output rows, offsets, "filter", ..., activation) -> _FilterShaped: made once per shape, shared by
# every map of that shape
_by_shape = launch.ShapeCache(4096).get


class _Launch:
    """What a gather_mm launch on one map takes besides its operands: the shapes' part (``shaped``,
    shared) and the map's plan; prepared once per map and shape, kept with the map."""
    __slots__ = ("shaped", "plan", "present", "lists_shape")

    def __init__(self, shaped, nbr, n_in):
        self.shaped = shaped
        plan = map_plan.plan(nbr, shaped.block_m, n_in)
        self.plan = (plan.order, plan.counts, plan.offsets)
        self.present = plan.present
        # the weight gradient's tile lists of this plan, while it has none (see _Shaped)
        self.lists_shape = shaped.lists_shape


# map tensor -> (its version, {shape key: _Launch}); weak, like the plans (map_plan.py)
_launches = WeakIdMap()


def _kept(nbr, key, make):
    """``make()``, kept with the map ``nbr`` under ``key`` until the map is written to."""
    if nbr.is_inference() or launch.is_fake(nbr):    # no version counter / no identity worth keeping
        return make()
    entry = _launches.get(nbr)
    if entry is None or entry[0] != nbr._version:
        entry = _launches[nbr] = (nbr._version, {})
    found = entry[1].get(key)
    if found is None:
        found = entry[1][key] = make()
    return found


def _prepared(features, weight, nbr, stats, transposed=False) -> _Launch:
    key = (features.shape[0], features.shape[1], weight.shape[1 if transposed else 2], features.dtype,
           features.dtype == torch.float32 and launch.tf32_allowed(), launch.count_constant()["COUNT"], stats,
           transposed)
    shaped = (*nbr.shape, *key)
    return _kept(nbr, key, lambda: _Launch(_by_shape(shaped, lambda: _Shaped(features, weight, nbr, stats, transposed)),
                                           nbr, features.shape[0]))


# gather_mm output -> (its version, stats [tiles, 2, Cout] float64, rows per tile): the per-tile moments a forward
# launch wrote beside it. Weak (an entry goes with its tensor), by identity: the output reaches
# the BatchNorm after it as the same tensor object (the conv -> BN -> ReLU of SparseSequential);
# a write to it in place bumps its version and the moments no longer apply.
_tile_stats = WeakIdMap()


def _wants_stats(weight) -> bool:
    """A forward launch of training (the weight requires grad: the backward's launches take a
    weight that does not), where a BatchNorm with batch statistics usually follows."""
    return weight.requires_grad


# gather_mm_kernel's (k_first, k_step): offset k reads weight slice k_first + k_step * k
_WEIGHT_AS_IS = (0, 1)


def gather_mm_one_group(features, weight, nbr):
    wanted = _wants_stats(weight)      # (asked first: a contiguous copy made here would not require grad)
    features, weight, nbr = launch.aligned_all(features, weight, nbr)
    args = _prepared(features, weight, nbr, wanted)
    shaped = args.shaped
    out = features.new_empty((nbr.shape[0], weight.shape[2]))
    if shaped.stats:
        moments = out.new_empty((shaped.tiles, 2, out.shape[1]), dtype=torch.float64)
        if not out.is_inference():
            _tile_stats[out] = (out._version, moments, shaped.block_m)
    else:
        moments = out       # never read (STATS off)
    # a training forward also builds the weight gradient's tile lists of the plan, once per plan
    lists = None
    if shaped.stats and args.lists_shape:
        lists = tile_lists.to_fill(args.present, *args.lists_shape)
        args.lists_shape = None         # the plan has its lists from now on (the plan and these args go together)
    counter = launch.step_counter(features)
    if lists is None:
        launch.run(launch.kernels().gather_mm_kernel, "gather_mm", shaped.dtype, shaped.tile, shaped.grid,
                   (features, weight, nbr, *args.plan, out, moments, nbr, nbr, nbr, counter), *shaped.scalars, 0, 0,
                   *_WEIGHT_AS_IS, **shaped.constexprs)
    else:
        launch.run(launch.kernels().gather_mm_kernel, "gather_mm", shaped.dtype, shaped.tile,
                   (shaped.grid[0] + shaped.gates[0], shaped.grid[1], 1),
                   (features, weight, nbr, *args.plan, out, moments, args.present, *lists, counter), *shaped.scalars,
                   *shaped.gates, *_WEIGHT_AS_IS, **shaped.lists_constexprs)
    launch.record_steps("gather_mm", counter)
    return out


def gather_mm_transposed(features, weight, nbr, reverse_offsets):
    """out[m] = sum_k features[nbr[m, k]] @ weight[k']^T with k' = K-1-k (``reverse_offsets``) or k,
    for a layer's weight [K, Cout, Cin] read where it lies (WEIGHT_T): the input gradient of a
    convolution (kernels/schema/autograd.cpp) without the transposed (and reversed) copy of the
    weight it would otherwise make per backward. No moments, no tile lists (a backward launch)."""
    index_checks.check_gather_map(nbr, features.shape[0])   # CPU tensors: the CPU kernel's error
    features, weight, nbr = launch.aligned_all(features, weight, nbr)
    args = _prepared(features, weight, nbr, False, transposed=True)
    shaped = args.shaped
    out = features.new_empty((nbr.shape[0], weight.shape[1]))
    counter = launch.step_counter(features)
    kvol = nbr.shape[1]
    launch.run(launch.kernels().gather_mm_kernel, "gather_mm", shaped.dtype, shaped.tile, shaped.grid,
               (features, weight, nbr, *args.plan, out, out, nbr, nbr, nbr, counter), *shaped.scalars, 0, 0,
               *((kvol - 1, -1) if reverse_offsets else _WEIGHT_AS_IS), **shaped.constexprs)
    launch.record_steps("gather_mm", counter)
    return out


def tile_stats(x: torch.Tensor):
    """(stats, rows per tile) when ``x`` is a gather_mm output whose launch wrote its moments and
    which nobody has written to since, else None; the entry is dropped (read once: a BatchNorm
    takes it)."""
    entry = _tile_stats.pop(x, None)
    if entry is None or entry[0] != x._version:
        return None
    return entry[1], entry[2]


class _FilterShaped:
    """What a gather_mm_backprop_filter launch takes that its shapes alone decide: tile, grid, splits
    and keyword arguments, for one (output rows, offsets, input rows, Cin, Cout, dtype, TF32 switch,
    counting, activation): made once per such key and shared by every map of that shape, as the
    forward's _Shaped."""
    __slots__ = ("dtype", "tile", "grid", "splits", "acc", "constexprs", "block_m", "aligned", "block_k")

    def __init__(self, features, grad, nbr, activation):
        m, kvol = nbr.shape
        n_in, cin, cout = features.shape[0], features.shape[1], grad.shape[1]
        _check_int32(n_in, m, "grad", kvol * cin * cout)   # grad: the size of its dW
        self.dtype = dtype = launch.operand_type(features.dtype)
        tile = tiles.filter_tile(dtype, kvol, cin, cout)
        blocks_k, blocks_n = _cdiv(kvol * cin, tile.block_k), _cdiv(cout, tile.block_n)
        _check_grid(blocks_n, "grad: the output-channel blocks")
        self.splits, _ = tiles.filter_splits(m, blocks_k, blocks_n, 1, tile.block_m)
        self.acc = torch.float64 if features.dtype == torch.float64 else torch.float32
        self.tile, self.grid = tile.name(), (blocks_k, blocks_n, self.splits)
        self.block_m, self.aligned, self.block_k = tile.block_m, tile.aligned, tile.block_k
        constants = launch.dot_constants(features.dtype)
        # T: the activation's compute type (the fused BatchNorm's: float64 features in float64, the
        # others in float32), which is the accumulator's
        self.constexprs = dict(BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k, ALIGNED=tile.aligned,
                               CHANNELS_FIRST=tiles.channels_first(dtype, constants["PRECISION"], tile),
                               num_warps=tiles.filter_warps(dtype, constants["PRECISION"], tile, activation),
                               num_stages=tile.num_stages, **constants, **launch.count_constant(),
                               ACTIVATION=activation, T=constants["ACC"])
        # one split: the kernel writes dW itself; else the last split program of a block adds them into dW
        self.constexprs["SUM_SPLITS"] = not (self.splits == 1 and features.dtype == self.acc)


class _FilterLaunch:
    """What a gather_mm_backprop_filter launch on one map takes besides its operands and outputs: the
    shapes' part (``shaped``, shared) and the map's plan order and tile lists; prepared once per map
    and shape, kept with the map beside the forward's _Launch (the layers of a stage share their map
    and shapes)."""
    __slots__ = ("shaped", "order", "lists", "counts", "scalars")

    def __init__(self, shaped, nbr, n_in, cin, cout):
        m, kvol = nbr.shape
        self.shaped = shaped
        plan = map_plan.plan(nbr, shaped.block_m, n_in)
        # each program's compacted list of the tiles its offsets are present in (no in-loop branch)
        self.lists, self.counts = tile_lists.lists(plan.present, shaped.aligned, kvol, cin, shaped.block_k)
        self.order = plan.order
        self.scalars = (m, n_in, kvol, cin, cout, self.lists.shape[1], shaped.splits)


def _prepared_filter(features, grad, nbr, activation) -> _FilterLaunch:
    key = ("filter", features.shape[0], features.shape[1], grad.shape[1], features.dtype,
           features.dtype == torch.float32 and launch.tf32_allowed(), launch.count_constant()["COUNT"], activation)
    shaped = (*nbr.shape, *key)
    return _kept(nbr, key, lambda: _FilterLaunch(
        _by_shape(shaped, lambda: _FilterShaped(features, grad, nbr, activation)), nbr, features.shape[0],
        features.shape[1], grad.shape[1]))


def gather_mm_backprop_filter_one_group(features, grad, nbr, scale=None, shift=None):
    """dW of one group; with ``scale`` and ``shift`` (the orchestration checked them: both, [Cin])
    of relu(features * scale + shift), which the kernel applies as it loads ``features``."""
    activation = scale is not None
    if activation:
        acc = torch.float64 if features.dtype == torch.float64 else torch.float32   # the recompute's types
        if scale.dtype != acc or shift.dtype != acc:      # (the BatchNorm's own are: no call)
            scale, shift = scale.to(acc), shift.to(acc)
        features, scale, shift, grad, nbr = launch.aligned_all(features, scale, shift, grad, nbr)
    else:
        features, grad, nbr = launch.aligned_all(features, grad, nbr)
        scale = shift = features      # never read (ACTIVATION off)
    args = _prepared_filter(features, grad, nbr, activation)
    shaped = args.shaped
    kvol, cin, cout = nbr.shape[1], features.shape[1], grad.shape[1]
    dw = features.new_empty((kvol, cin, cout))
    partial = torch.empty((shaped.splits, kvol, cin, cout), dtype=shaped.acc, device=features.device) \
        if shaped.constexprs["SUM_SPLITS"] else dw
    tickets = split_tickets(features, shaped.grid[0] * shaped.grid[1])
    counter = launch.step_counter(features)
    launch.run(launch.kernels().filter_splits_kernel, "gather_mm_backprop_filter", shaped.dtype, shaped.tile,
               shaped.grid,
               (features, scale, shift, grad, nbr, args.order, args.lists, args.counts, partial, dw, tickets, counter),
               *args.scalars, **shaped.constexprs)
    launch.record_steps("gather_mm_backprop_filter", counter)
    return dw


# (device, stream) -> the filter kernel's split tickets: int32 zeros, one per block of dW, which
# the last split program of a block sets back to 0 (so no launch zeroes them). Launches on one
# stream run one after another and never share a ticket while counting; another stream has
# its own. Grown (a fresh zeroed tensor) when a launch needs more.
_tickets = {}
MIN_TICKETS = 4096


def split_tickets(like: torch.Tensor, blocks: int) -> torch.Tensor:
    if launch.is_fake(like):
        return like.new_zeros((max(blocks, 1),), dtype=torch.int32)
    stream = torch.cuda.current_stream(like.device).stream_id if like.is_cuda else None
    found = _tickets.get((like.device, stream))
    if found is None or found.numel() < blocks:
        found = _tickets[(like.device, stream)] = like.new_zeros((max(blocks, MIN_TICKETS),), dtype=torch.int32)
    return found


PRIMITIVES = {
    "_gather_mm_one_group": gather_mm_one_group,
    "_gather_mm_transposed": gather_mm_transposed,
    "_gather_mm_backprop_filter_one_group": gather_mm_backprop_filter_one_group,
}
