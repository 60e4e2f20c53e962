"""The Triton kernels that build a map's plan (map_plan.py): two launches and one torch sort per
map instead of about twenty small torch kernels (this module imports triton; launch.py imports
it only when a plan is first built).

  row_mask_kernel:   key[m] = sum of 2^k over the first KEY_BITS offsets k with nbr[m, k] >= 0
                     (the row's neighbour bitmask; int32 where it fits, else int64)
  tile_plan_kernel:  for tile t of BLOCK_M rows in the sorted order (IN_MAP_ORDER: in the map's own
                     order, a small map's plan, and ``order`` is not read): order32 = order as int32,
                     present[t, k] = 1 where some row of the tile has offset k, counts[t] their
                     number, offsets[t] the present offsets ascending, then the absent ones
                     ascending (what a stable sort of the absent flags gives)
  tile_lists_kernel: for gate g of the weight-gradient kernel (tile_lists.py): counts[g] = the
                     tiles in which one of its offsets first(g)..last(g) is present, and column
                     g of lists those tiles ascending, then the others ascending (its body,
                     gate_tile_list, also runs in a training forward's gather_mm launch:
                     gather_kernels.py LISTS)

Every value is an integer function of the map: the same on any device and in any order of work.
"""
import triton
import triton.language as tl

_SCALARS = ["m", "kvol", "bits", "tiles", "gates", "cin", "block_k", "span"]


# Reductions through tl.reduce / tl.associative_scan with triton.language's own sum and max
# combiners, not tl.sum / tl.max / tl.cumsum: those are jit functions of triton.language that
# torch may have imported (compiled) before MXS_CUDA_ON_CPU=1 set TRITON_INTERPRET, which the
# interpreter then cannot call. It never calls these two: it recognises them by identity and
# sums (scans, takes the maximum) with NumPy -- where any other combiner runs element by element
# through Python (a 1024-tile scan took seconds per program).
_add = tl.standard._sum_combine
_max = tl.standard._elementwise_max


@triton.jit(do_not_specialize=_SCALARS)
def row_mask_kernel(nbr, key, m, kvol, bits, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    ks = tl.arange(0, BLOCK_K)
    inside = rows < m
    entry = tl.load(nbr + rows[:, None] * kvol + ks[None, :], mask=inside[:, None] & (ks < bits)[None, :], other=-1)
    kind = key.dtype.element_ty
    # distinct powers of two: their sum is their OR
    weights = (entry >= 0).to(kind) << ks.to(kind)[None, :]
    tl.store(key + rows, tl.reduce(weights, 1, _add), mask=inside)


@triton.jit(do_not_specialize=_SCALARS)
def tile_plan_kernel(nbr, order, order32, counts, offsets, present, m, kvol,
                     BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, IN_MAP_ORDER: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    pos = t * BLOCK_M + tl.arange(0, BLOCK_M)
    inside = pos < m
    if IN_MAP_ORDER:
        rows = tl.where(inside, pos, 0)
    else:
        rows = tl.load(order + pos, mask=inside, other=0)
    tl.store(order32 + pos, rows.to(tl.int32), mask=inside)
    base = t * kvol
    # pass 1: which offsets the tile has, and how many
    total = 0
    for k0 in range(0, kvol, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        live_k = ks < kvol
        entry = tl.load(nbr + rows[:, None] * kvol + ks[None, :], mask=inside[:, None] & live_k[None, :], other=-1)
        here = tl.reduce((entry >= 0).to(tl.int32), 0, _max)
        tl.store(present + base + ks, here, mask=live_k)
        total += tl.reduce(here, 0, _add)
    tl.store(counts + t, total)
    tl.debug_barrier()      # pass 2 reads what other threads of the program stored
    # pass 2: present offsets to the front, absent ones after them, each group ascending
    seen_present = 0
    seen_absent = 0
    for k0 in range(0, kvol, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        live_k = ks < kvol
        here = tl.load(present + base + ks, mask=live_k, other=0)
        absent = tl.where(live_k, 1 - here, 0)
        slot = tl.where(here == 1, seen_present + tl.associative_scan(here, 0, _add) - here,
                        total + seen_absent + tl.associative_scan(absent, 0, _add) - absent)
        tl.store(offsets + base + slot, ks.to(tl.int32), mask=live_k)
        seen_present += tl.reduce(here, 0, _add)
        seen_absent += tl.reduce(absent, 0, _add)


@triton.jit
def _gate_flags(present, t, live_t, g, kvol, cin, block_k, span, ALIGNED: tl.constexpr, BLOCK_T: tl.constexpr):
    """1 where gate g is present in tile t (live_t: t < tiles): ALIGNED, offset g; otherwise one of
    the offsets first..last its block of (offset, channel) pairs [g * block_k, + block_k) spans
    (at most ``span`` of them)."""
    if ALIGNED:
        flags = (tl.load(present + t * kvol + g, mask=live_t, other=0) != 0).to(tl.int32)
    else:
        r0 = g * block_k
        first = r0 // cin
        last = (tl.minimum(r0 + block_k, kvol * cin) - 1) // cin
        flags = tl.full((BLOCK_T,), 0, tl.int32)
        for j in range(span):
            live_k = live_t & (first + j <= last)
            here = tl.load(present + t * kvol + (first + j), mask=live_k, other=0) != 0
            flags = tl.maximum(flags, here.to(tl.int32))
    return flags


@triton.jit(do_not_specialize=_SCALARS)
def tile_lists_kernel(present, lists, counts, tiles, kvol, gates, cin, block_k, span,
                      ALIGNED: tl.constexpr, BLOCK_T: tl.constexpr):
    # program: one gate
    gate_tile_list(present, lists, counts, tl.program_id(0), tiles, kvol, gates, cin, block_k, span, ALIGNED, BLOCK_T)


@triton.jit
def gate_tile_list(present, lists, counts, g, tiles, kvol, gates, cin, block_k, span,
                   ALIGNED: tl.constexpr, BLOCK_T: tl.constexpr):
    """counts[g] and column g of lists (also run by gather_mm_kernel's LISTS programs); the lists
    table is [tiles, gates], the gate's column strided by gates."""
    stride = gates.to(tl.int64)
    # pass 1: how many tiles the gate is present in (where its absent tiles start)
    total = 0
    for t0 in range(0, tiles, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        total += tl.reduce(_gate_flags(present, t.to(tl.int64), t < tiles, g, kvol, cin, block_k, span, ALIGNED,
                                         BLOCK_T), 0, _add)
    tl.store(counts + g, total)
    # pass 2: each tile's place in the column, a running count of its kind (present, absent)
    seen_present = 0
    seen_absent = 0
    for t0 in range(0, tiles, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        live_t = t < tiles
        here = _gate_flags(present, t.to(tl.int64), live_t, g, kvol, cin, block_k, span, ALIGNED, BLOCK_T)
        absent = tl.where(live_t, 1 - here, 0)
        place = tl.where(here == 1, seen_present + tl.associative_scan(here, 0, _add) - here,
                         total + seen_absent + tl.associative_scan(absent, 0, _add) - absent)
        tl.store(lists + place.to(tl.int64) * stride + g, t, mask=live_t)
        seen_present += tl.reduce(here, 0, _add)
        seen_absent += tl.reduce(absent, 0, _add)
