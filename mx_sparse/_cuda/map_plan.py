"""The schedule data of one neighbor map for the mask-gated kernels (gather_kernels.py), built
on the device (no host read) by two Triton kernels (plan_kernels.py) around one stable torch
sort -- one kernel for a map an accelerator builder made from a Triton lookup, whose launch
wrote the row keys (below) already, and for its transpose (the pair keys' launch wrote them) --
and cached per map tensor.

For a map ``nbr`` [M, K] and a row-tile height ``block_m``:

  order   int32 [M]      the map's rows sorted by their neighbour bitmask (stable sort), so rows
                         that have the same offsets share tiles;
  counts  int32 [T]      per tile of block_m sorted rows (T = ceil(M / block_m)), the number of
                         offsets present in at least one of its rows (the OR of its rows' masks);
  offsets int32 [T, K]   those offsets, ascending, first in each row (then the absent ones,
                         ascending: never read);
  present int32 [T, K]   1 where offset k is present in tile t (the filter kernel's gate).

The kernels loop over a tile's present offsets only; absent (row, offset) pairs inside a tile
are still masked (loaded as zero), as before. The order of rows changes which rows share a
tile, never which terms a row's sum has, nor their order: each output row sums its present
offsets in ascending offset order, as the ungated kernel did.

Small maps keep their rows in map order (``order`` the identity, no key, no sort): a plan of at
most SORTED_FROM_TILES - 1 tiles. What the sort buys is less issued work in total -- tiles whose
rows share their offsets skip the rest -- and that shortens a kernel only where its programs run
in more than one wave. A small map's kernels run in one: each of gather_mm_kernel's programs owns
a tile (times a block or two of output channels), and the kernel takes as long as its busiest
tile, which has (nearly) every offset sorted or not; each of the weight gradient's programs loops
over the tiles its offsets are present in, and the centre offset of a submanifold map is present
in every tile either way. Without the sort the plan is one launch instead of a torch sort (a few
kernels and an allocation on a GPU, ~20 us of host time) plus that launch. This is a model of the
GPU, not an observation (no GPU has run these kernels yet: docs/en/cuda.md). What changes with
the order is rounding, never which terms are summed: the weight gradient adds the tiles in plan
order and the BatchNorm that follows a training forward combines per-tile moments, so those bits
differ between a sorted and an unsorted plan of the same map (both repeat from run to run: the
choice is a function of the map's shape).

The bitmask of a row has bit k set where nbr[m, k] >= 0, for the first 63 offsets (K > 63:
rows that differ only in later offsets sort together; that costs issued work, never results);
the key is int32 where the bitmask fits (K <= 31), a narrower sort. A map a builder made from
a ``_sorted_key_lookup`` on CUDA comes with its keys (map_kernels.sorted_key_lookup_kernel writes
them with the positions; the builder keeps them with the map, built_maps.row_key, in the map's
row order): its plans skip row_mask_kernel. So do the plans of such a strided map's transpose on
its input rows (the input gradient's map): map_kernels.conv_out_keys_kernel writes each input
row's offset bitmask with the pair keys, the builder keeps them with the map and transpose_map
with the transpose. Any other map (a submanifold map's transpose, a map a user made or changed in
place, a map from another path) gets its keys from row_mask_kernel.

Cache: keyed on the map tensor's identity (weakly: an entry goes with its tensor), valid while
its in-place version counter is unchanged; an in-place write bumps the version (a new plan).
One entry per (map, block_m). A map made under inference_mode (an inference tensor: no version
counter, so a write could not be seen) gets a new plan on every call, never cached. On CUDA a
training step holds its maps dense (the orchestration does not pack them there,
mx_sparse/_accelerator/registration.py PACKS_MAPS), every layer sharing an ``indice_key`` passes
the same map tensor, and a symmetric map's input gradient runs on the map itself, so a training
step builds each map's plan once.

The map's entries are range-checked (a device-side assertion) once per plan and input row
count -- and not at all for a map an accelerator builder made (mx_sparse/_accelerator/built_maps.py:
its entries are known to lie in [-1, rows)), which is every map of a training step.
"""
import torch
from .._core.weak_id_map import WeakIdMap

from .._accelerator import built_maps, index_checks
from . import launch

# The number of offsets whose presence bits make up the sort key (int64, sign bit unused).
KEY_BITS = 63
# Rows per program of the key kernel; offsets per step of the tile kernel's loop.
KEY_ROWS = 128
MAX_OFFSET_BLOCK = 128
# Plans of fewer tiles keep the map's row order (module docstring): up to 63 tiles (2016 rows in
# tiles of 32), times one or two output-channel blocks, is at most 126 programs, two per SM of an
# A100 (108 SMs, the smallest GPU the kernels are compiled for): one wave.
SORTED_FROM_TILES = 64

_cache = WeakIdMap()


class MapPlan:
    __slots__ = ("order", "counts", "offsets", "present", "block_m", "version", "checked_rows")

    def __init__(self, order, counts, offsets, present, block_m, version):
        self.order, self.counts, self.offsets, self.present = order, counts, offsets, present
        self.block_m, self.version = block_m, version      # version: of the tensor it was built from
        self.checked_rows = set()     # the input row counts the map's entries were checked against


def sorts(m: int, block_m: int) -> bool:
    """Whether the plan of an ``m``-row map in tiles of ``block_m`` rows sorts its rows (module docstring)."""
    return -(-m // block_m) >= SORTED_FROM_TILES


def _build(nbr: torch.Tensor, block_m: int) -> MapPlan:
    """One Triton launch (plan_kernels.py), after a stable torch sort of the row keys where the
    plan sorts (``sorts``: a map of SORTED_FROM_TILES tiles or more; a smaller map's plan is that
    launch alone, IN_MAP_ORDER)."""
    m, kvol = nbr.shape
    tiles, dev = -(-m // block_m), nbr.device
    order32 = torch.empty((m,), dtype=torch.int32, device=dev)
    counts = torch.empty((tiles,), dtype=torch.int32, device=dev)
    offsets = torch.empty((tiles, kvol), dtype=torch.int32, device=dev)
    present = torch.empty((tiles, kvol), dtype=torch.int32, device=dev)
    if m == 0 or kvol == 0:
        return MapPlan(order32, counts.zero_(), offsets, present, block_m, _version(nbr))
    nbr = launch.aligned(nbr)
    k = launch.plan_kernels()
    in_map_order = not sorts(m, block_m)
    if in_map_order:
        order = nbr     # not read (IN_MAP_ORDER)
    else:
        key = built_maps.row_key(nbr)   # written by the lookup the map was built from, if it was
        if key is None:
            key = torch.empty((m,), dtype=key_dtype(kvol), device=dev)
            launch.run(k.row_mask_kernel, "row_mask", "int32", f"m{KEY_ROWS}", (-(-m // KEY_ROWS),), (nbr, key),
                       m, kvol, key_bits(kvol), BLOCK_M=KEY_ROWS, BLOCK_K=pow2(key_bits(kvol)))
        order = torch.sort(key, stable=True).indices
    launch.run(k.tile_plan_kernel, "tile_plan", "int32", f"m{block_m}" + ("-as-is" if in_map_order else ""), (tiles,),
               (nbr, order, order32, counts, offsets, present), m, kvol,
               BLOCK_M=block_m, BLOCK_K=min(pow2(kvol), MAX_OFFSET_BLOCK), IN_MAP_ORDER=in_map_order)
    return MapPlan(order32, counts, offsets, present, block_m, _version(nbr))


def reference_build(nbr: torch.Tensor, block_m: int) -> MapPlan:
    """The same plan from torch operators (about twenty kernels): what the kernels are tested
    against, and what bench/cuda_work.py computes the schedule with (the interpreter would take
    minutes per scene)."""
    m, kvol = nbr.shape
    tiles = -(-m // block_m)
    live = nbr >= 0
    if sorts(m, block_m):
        bits = key_bits(kvol)
        key = live.narrow(1, 0, bits).long().bitwise_left_shift(torch.arange(bits, device=nbr.device)).sum(1)
        order = torch.sort(key, stable=True).indices
    else:
        order = torch.arange(m, device=nbr.device)
    padding = torch.zeros((tiles * block_m - m, kvol), dtype=torch.bool, device=nbr.device)
    present = torch.cat([live.index_select(0, order), padding]).view(tiles, block_m, kvol).any(1)
    # present offsets first, ascending, then the absent ones (a stable sort of the absent flags)
    offsets = torch.sort(present.logical_not().int(), dim=1, stable=True).indices
    return MapPlan(order.int(), present.sum(1).int(), offsets.int().contiguous(), present.int().contiguous(),
                   block_m, _version(nbr))


def pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def key_bits(kvol: int) -> int:
    """The offsets whose presence bits make up a row's key."""
    return min(kvol, KEY_BITS)


def key_dtype(kvol: int) -> torch.dtype:
    """int32 keys where the bitmask fits (a narrower sort), int64 up to 63 offsets."""
    return torch.int32 if key_bits(kvol) <= 31 else torch.int64


def _version(nbr: torch.Tensor) -> int:
    """The map's in-place version; -1 for an inference tensor (made under inference_mode), which
    has no version counter."""
    return -1 if nbr.is_inference() else nbr._version


def _entries(key) -> dict:
    entries = _cache.get(key)
    if entries is None:
        entries = _cache[key] = {}
    return entries


def plan(nbr: torch.Tensor, block_m: int, num_rows: int) -> MapPlan:
    """The (cached) schedule of ``nbr`` for tiles of ``block_m`` rows, its entries checked
    against ``num_rows`` input rows (once per map and row count, index_checks.assert_map_rows)."""
    if nbr.is_inference():
        # no version counter: an in-place write could not be seen, so the plan is not cached
        found = _build(nbr, block_m)
    else:
        found = _entries(nbr).get(block_m)
        if found is None or found.version != nbr._version:
            found = _entries(nbr)[block_m] = _build(nbr, block_m)
    if num_rows not in found.checked_rows:
        if not built_maps.built_for(nbr, num_rows):
            index_checks.assert_map_rows(nbr, num_rows, "nbr")
        found.checked_rows.add(num_rows)
    return found
