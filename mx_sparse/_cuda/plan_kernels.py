"""The Triton kernels that build a map's plan (map_plan.py): two launches and one torch sort per
map instead of about twenty small torch kernels (this module imports triton; launch.py imports
it only when a plan is first built).

  row_mask_kernel:   key[m] = sum of 2^k over the first KEY_BITS offsets k with nbr[m, k] >= 0
                     (the row's neighbour bitmask; int32 where it fits, else int64)
  tile_plan_kernel:  for tile t of BLOCK_M rows in the sorted order: order32 = order as int32,
                     present[t, k] = 1 where some row of the tile has offset k, counts[t] their
                     number, offsets[t] the present offsets ascending, then the absent ones
                     ascending (what a stable sort of the absent flags gives)

Every value is an integer function of the map: the same on any device and in any order of work.
"""
import triton
import triton.language as tl

_SCALARS = ["m", "kvol", "bits"]


# Reductions through tl.reduce / tl.associative_scan with these combiners, not tl.sum / tl.max /
# tl.cumsum: those are jit functions of triton.language, compiled when it is imported, and torch
# may import triton before MXS_CUDA_ON_CPU=1 sets TRITON_INTERPRET; the interpreter then cannot
# call them. Combiners defined here are made with the interpreter's jit.
@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _max(a, b):
    return tl.maximum(a, b)


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
                     BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    pos = t * BLOCK_M + tl.arange(0, BLOCK_M)
    inside = pos < m
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
