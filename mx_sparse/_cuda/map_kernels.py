"""The Triton kernels of the CUDA backend's map primitives (host side: map_primitives.py; this
module imports triton, launch.py imports it when a map is first built).

  conv_out_keys_kernel:     out[j*N + n] = key of the output voxel input n reaches through its
                            slot j (its j-th kernel offset on the stride's lattice, fallback.lattice)
                            on the output grid, INT64_MAX where there is none (contract:
                            _conv_out_keys, kernels/schema/schema.cpp), and key[n] = input n's
                            offset bitmask (bit k for the first KEY_BITS offsets with an output):
                            the row key of the strided map's transpose (every such output is in
                            the map), whose plans then need not compute it (no row_mask launch)
  sorted_key_lookup_kernel: out[s, k] = position of query[s] + delta[k] in sorted_keys, or -1
                            (contract: _sorted_key_lookup; a binary search per entry), and
                            key[s] = each row's neighbour bitmask (map_plan.py's row key: bit k
                            for the first KEY_BITS offsets found), which map_plan then need not
                            compute for the map made from this lookup (no row_mask launch); with
                            ROWS (and SCATTER) the positions as the sort's rows (and each query's
                            entries at its own row), with TRANSPOSE the map's transpose too
                            (contract: _sorted_key_lookup_rows)
  unique_runs_kernel:       the first key of each run of equal sorted keys (sentinels INT64_MAX
                            excluded) compacted to the front, INT64_MAX after them, their count
                            (contract: _unique_sorted_keys; one pass, a decoupled look-back scan,
                            instead of flags, a torch cumsum and a compaction: two launches fewer);
                            with NDIM > 0 also each run's key unpacked into its output voxel's row
                            and that row's query key (contract: _conv_output_rows)

One launch each instead of the torch-operator fallbacks' dozens of element-wise kernels
(fallback.py). Integer arithmetic only, in int64: the results are the fallbacks' bit for bit.
"""
import triton
import triton.language as tl

INT64_MAX = tl.constexpr(2**63 - 1)   # constexpr: a compiled kernel reads no plain Python global

_SCALARS = ["n", "kvol", "slots", "s", "c", "steps", "cells", "bits"]

# tl.reduce with triton.language's own sum combiner, not tl.sum: see plan_kernels.py
_add = tl.standard._sum_combine


@triton.jit
def _lattice_start(coord, pad, stride, dil, step, inverse, g):
    """One spatial axis (fallback.lattice): the least kernel position through which the coordinate
    reaches an output (kp*dil = coord + pad mod stride), the output it reaches there, and whether
    that residue class exists; (first, o_first, exists)."""
    u = coord + pad
    r = u % stride
    first = (r // g * inverse) % step
    return first, (u - first * dil) // stride, r % g == 0


@triton.jit
def _slot(ok, j_rest, first, o_first, exists, slots, kernel, step, dq, shape_out):
    """One spatial axis at one slot: the slot's index along the axis from the slot's remaining index
    (innermost axis first), its kernel position first + j*step and output o_first - j*dil/gcd,
    whether that position is a kernel position with an output; returns (o, ok, the kernel
    position, the slot index left for the outer axes)."""
    j = j_rest % slots
    kp = first + j * step
    o = o_first - j * dq
    ok = ok & exists & (kp < kernel) & (o >= 0) & (o < shape_out)
    return o, ok, kp, j_rest // slots


@triton.jit(do_not_specialize=_SCALARS)
def conv_out_keys_kernel(indices, out, key, n, slots, cells, bits,
                         o0, o1, o2, o3, k0, k1, k2, k3, s0, s1, s2, s3, p0, p1, p2, p3, d0, d1, d2, d3,
                         j0, j1, j2, j3, t0, t1, t2, t3, v0, v1, v2, v3, g0, g1, g2, g3,
                         NDIM: tl.constexpr, BLOCK: tl.constexpr):
    """A program owns BLOCK whole input rows, all their slots: it writes every output key of its
    rows and each row's offset bitmask (bit k for the first ``bits`` offsets with an output), so no
    write is shared between programs (no atomics, no zero-filled buffer). Per axis: o the output
    extent, k the kernel size, s/p/d stride, padding, dilation, j the slots, t the lattice step,
    v the inverse and g the gcd of fallback.lattice."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = rows < n
    width = NDIM + 1
    # a coordinate is read only where the row exists (masked rows never store)
    c0 = tl.load(indices + rows * width + 1, mask=inside, other=0).to(tl.int64)
    c1 = c0
    c2 = c0
    c3 = c0
    if NDIM > 1:
        c1 = tl.load(indices + rows * width + 2, mask=inside, other=0).to(tl.int64)
    if NDIM > 2:
        c2 = tl.load(indices + rows * width + 3, mask=inside, other=0).to(tl.int64)
    if NDIM > 3:
        c3 = tl.load(indices + rows * width + 4, mask=inside, other=0).to(tl.int64)
    batch = tl.load(indices + rows * width, mask=inside, other=0).to(tl.int64) * cells  # cells: beyond int32
    # each axis's lattice start, once per row (the slots step from it)
    f0, q0, e0 = _lattice_start(c0, p0, s0, d0, t0, v0, g0)
    f1, q1, e1 = _lattice_start(c1, p1, s1, d1, t1, v1, g1)
    f2, q2, e2 = _lattice_start(c2, p2, s2, d2, t2, v2, g2)
    f3, q3, e3 = _lattice_start(c3, p3, s3, d3, t3, v3, g3)
    kind = key.dtype.element_ty
    mask_bits = tl.full((BLOCK,), 0, kind)
    zero = tl.program_id(0).to(tl.int64) * 0     # an int64 scalar: the slot index below is one in any mode
    for j in range(0, slots):
        # axes innermost first (the slot index runs row-major, last axis fastest); the key and the
        # offset index (row-major over the kernel positions) are put together outermost first after
        rest = zero + j
        ok = inside
        a1 = zero
        a2 = zero
        a3 = zero
        k1p = zero
        k2p = zero
        k3p = zero
        if NDIM > 3:
            a3, ok, k3p, rest = _slot(ok, rest, f3, q3, e3, j3, k3, t3, d3 // g3, o3)
        if NDIM > 2:
            a2, ok, k2p, rest = _slot(ok, rest, f2, q2, e2, j2, k2, t2, d2 // g2, o2)
        if NDIM > 1:
            a1, ok, k1p, rest = _slot(ok, rest, f1, q1, e1, j1, k1, t1, d1 // g1, o1)
        a0, ok, k0p, rest = _slot(ok, rest, f0, q0, e0, j0, k0, t0, d0 // g0, o0)
        at = a0
        k = k0p
        if NDIM > 1:
            at = at * o1 + a1
            k = k * k1 + k1p
        if NDIM > 2:
            at = at * o2 + a2
            k = k * k2 + k2p
        if NDIM > 3:
            at = at * o3 + a3
            k = k * k3 + k3p
        tl.store(out + (zero + j) * n + rows, tl.where(ok, batch + at, INT64_MAX), mask=inside)
        # bit k (the pair's kernel offset, per row) where the pair has an output (the shift amount
        # kept below the key's width)
        in_key = k < bits
        mask_bits |= (ok & in_key).to(kind) << tl.where(in_key, k, 0).to(kind)
    tl.store(key + rows, mask_bits, mask=inside)


@triton.jit(do_not_specialize=_SCALARS)
def sorted_key_lookup_kernel(query, sorted_keys, deltas, out, key, order, tpose, s, kvol, c, steps, bits,
                             BLOCK_S: tl.constexpr, BLOCK_K: tl.constexpr, ROWS: tl.constexpr,
                             SCATTER: tl.constexpr, TRANSPOSE: tl.constexpr):
    """A program owns BLOCK_S whole rows (queries), their offsets BLOCK_K at a time: it writes every
    entry of its rows and their bitmask keys, so no write is shared between programs (no atomics,
    no zero-filled buffer) and the keys do not depend on the order of work.

    ROWS (_sorted_key_lookup_rows): a found position p is written as the row order[p] (``order``:
    the sort's permutation, int64); with SCATTER too, query s's entries and key go to row order[s]
    (the queries are the sorted keys themselves: the map's rows in input order). order is a
    permutation: still one writer per row. TRANSPOSE (without SCATTER): each found entry (s, k)
    naming row r also writes s to tpose[r, k] (prefilled with -1 by the host): the map's transpose,
    one writer per cell because a map names each (row, offset) once."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_S + tl.arange(0, BLOCK_S)
    live_r = rows < s
    base = tl.load(query + rows, mask=live_r, other=0)
    target = rows
    if SCATTER:
        target = tl.load(order + rows, mask=live_r, other=0)
    kind = key.dtype.element_ty
    mask_bits = tl.full((BLOCK_S,), 0, kind)
    for k0 in range(0, kvol, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        live_k = ks < kvol
        inside = live_r[:, None] & live_k[None, :]
        q = base[:, None] + tl.load(deltas + ks, mask=live_k, other=0)[None, :]
        # the first position whose key is >= q: [lo, hi) halves ``steps`` = bit_length(c) times
        lo = tl.full((BLOCK_S, BLOCK_K), 0, tl.int64)   # tl.full, not tl.zeros: see plan_kernels.py
        hi = tl.full((BLOCK_S, BLOCK_K), 0, tl.int64) + c
        for _ in range(steps):
            open_ = lo < hi
            mid = (lo + hi) // 2
            below = tl.load(sorted_keys + mid, mask=open_ & inside, other=0) < q
            lo = tl.where(open_ & below, mid + 1, lo)
            hi = tl.where(open_ & (below == 0), mid, hi)
        hit = inside & (lo < c)
        found = hit & (tl.load(sorted_keys + lo, mask=hit, other=0) == q)
        at = lo
        if ROWS:
            at = tl.load(order + lo, mask=found, other=0)
        tl.store(out + target[:, None] * kvol + ks[None, :], tl.where(found, at, -1).to(tl.int32), mask=inside)
        if TRANSPOSE:
            tl.store(tpose + at * kvol + ks[None, :], (rows[:, None] + ks[None, :] * 0).to(tl.int32), mask=found)
        # bit k for the first ``bits`` offsets found (map_plan.py's row key; the shift amount is
        # kept below the key's width in every lane, masked or not); distinct powers of two: their
        # sum is their OR
        keyed = found & (ks < bits)[None, :]
        shift = tl.where(ks < bits, ks, 0).to(kind)
        mask_bits += tl.reduce(keyed.to(kind) << shift[None, :], 1, _add)
    tl.store(key + target, mask_bits, mask=live_r)


@triton.jit
def _first_of_run(sorted_keys, i, c):
    """1 where position i holds the first of a run of equal keys (sentinels INT64_MAX excluded)."""
    inside = i < c
    key = tl.load(sorted_keys + i, mask=inside, other=INT64_MAX)
    before = tl.load(sorted_keys + i - 1, mask=inside & (i > 0), other=INT64_MAX)
    return ((key != INT64_MAX) & ((i == 0) | (key != before))).to(tl.int32), key


# A tile's state word in unique_runs_kernel's scratch: the state in the high half, its count in the
# low one (counts < 2^31: the host sends larger inputs to the fallback).
_AGGREGATE = tl.constexpr(1 << 32)      # the tile's own count of runs is published
_PREFIX = tl.constexpr(2 << 32)         # the runs up to and including the tile are published
_LOW = tl.constexpr((1 << 32) - 1)


@triton.jit
def _output_axis(rest, query, weight, slot, rows, width, column, extent, stride, query_extent, first):
    """One spatial axis of a run's key (innermost first): its coordinate (rest mod the axis'
    output extent) to column ``column`` of the slot's row, its term o*stride*weight added to the
    query key; returns (rest // extent, query, the weight of the next axis out)."""
    o = rest % extent
    tl.store(rows + slot * width + column, o.to(tl.int32), mask=first)
    return rest // extent, query + o * stride * weight, weight * query_extent


@triton.jit(do_not_specialize=_SCALARS)
def unique_runs_kernel(sorted_keys, unique, count, scratch, rows, query, c,
                       o0, o1, o2, o3, s0, s1, s2, s3, q0, q1, q2, q3,
                       NDIM: tl.constexpr, BLOCK: tl.constexpr):
    """The first key of each run to slot (runs before it), slots from the total on INT64_MAX, the
    total to ``count``: one pass, a decoupled look-back scan over tiles of BLOCK keys.

    With NDIM > 0 (_conv_output_rows) the keys are output voxels on the output grid (extents o):
    each run's key is also unpacked to its slot's row of ``rows`` (int32 [c, 1+NDIM]: batch,
    coordinates) and the row's query key -- the key of (batch, o*s) on the grid of extents q, where
    the strided builder looks its inputs up -- goes to ``query`` [c] (exact int64 arithmetic, as
    the ATen unpack and pack of neighbor_map_orchestration.cpp; rows after the count unwritten):
    four to seven ATen operators per strided map fewer, in the same launch. NDIM = 0
    (_unique_sorted_keys): neither is touched.

    scratch (int64, zeros before the launch, zeros again after it: the program that finishes last
    puts them back, so no launch zero-fills it): [0] the tile ticket, [1] the done ticket, [2 + t]
    tile t's state word (0: nothing published yet).

    Why it is correct whatever the order in which programs run (on a GPU) or in program order (the
    interpreter, which runs one program after another):
    - tiles are numbered by a ticket taken when a program starts, not by program id: tile t's
      predecessors all started before it (are resident or done) and never wait for it, so its
      look-back, which waits only on them, ends (the forward-progress argument of a decoupled
      look-back scan);
    - a tile publishes its own count (AGGREGATE) before looking back, and the count of runs up to
      it (PREFIX) once it knows it; the look-back adds its predecessors' counts from t - 1 down
      until a PREFIX, which already includes everything before it: the exclusive count is exact;
    - every slot has one final writer: a key at position i goes to slot runs-before-it <= i, so the
      keys landing in tile u's index range come from tiles >= u, and tile u writes INT64_MAX over
      its whole range before publishing anything (release; its threads' stores ordered before the
      publication by the barrier; one thread of a program makes each scalar atomic and hands its
      answer to the others through a barrier); a tile writes keys only after its look-back acquired, directly
      or through a later tile's PREFIX, the publication of every tile before it: slots below the
      total end holding their key, the others INT64_MAX;
    - the values are exact integers: the result is the two-launch version's bit for bit, in any
      order of work."""
    tile = tl.atomic_add(scratch, 1, sem="relaxed", scope="gpu")     # tiles in the order programs start
    i = tile.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = i < c
    tl.store(unique + i, tl.full((BLOCK,), INT64_MAX, tl.int64), mask=inside)
    flag, key = _first_of_run(sorted_keys, i, c)
    own = tl.reduce(flag, 0, _add).to(tl.int64)
    state = scratch + 2 + tile
    tl.debug_barrier()      # every thread's INT64_MAX stores before the publication (released with it)
    tl.atomic_xchg(state, own + _AGGREGATE, sem="release", scope="gpu")
    before = own * 0        # the runs before this tile: an int64 scalar (tl.zeros is a library jit function)
    j = tile - 1
    while j >= 0:
        word = tl.atomic_add(scratch + 2 + j, 0, sem="acquire", scope="gpu")
        # 0: not published yet (ask again); AGGREGATE: add it, go on to j - 1; PREFIX: add it, done
        before += tl.where(word != 0, word & _LOW, 0)
        j = tl.where(word >= _PREFIX, -1, tl.where(word != 0, j - 1, j))
    tl.atomic_xchg(state, before + own + _PREFIX, sem="release", scope="gpu")
    slot = before + tl.associative_scan(flag, 0, _add).to(tl.int64) - 1
    first = flag == 1
    tl.store(unique + slot, key, mask=first)
    if NDIM > 0:
        width = NDIM + 1
        rest = key
        q = key * 0
        weight = q + 1
        if NDIM > 3:
            rest, q, weight = _output_axis(rest, q, weight, slot, rows, width, 4, o3, s3, q3, first)
        if NDIM > 2:
            rest, q, weight = _output_axis(rest, q, weight, slot, rows, width, 3, o2, s2, q2, first)
        if NDIM > 1:
            rest, q, weight = _output_axis(rest, q, weight, slot, rows, width, 2, o1, s1, q1, first)
        rest, q, weight = _output_axis(rest, q, weight, slot, rows, width, 1, o0, s0, q0, first)
        tl.store(rows + slot * width, rest.to(tl.int32), mask=first)      # what is left: the batch
        tl.store(query + slot, q + rest * weight, mask=first)
    last = (c + (BLOCK - 1)) // BLOCK - 1     # not tl.cdiv: a library jit function, see plan_kernels.py
    if tile == last:
        tl.store(count, (before + own).to(tl.int32))
    # the last program to finish (every look-back done) puts the scratch back to zeros
    tl.debug_barrier()
    done = tl.atomic_add(scratch + 1, 1, sem="acq_rel", scope="gpu")
    if done == last:
        for t0 in range(0, last + 1, BLOCK):
            t = t0 + tl.arange(0, BLOCK)
            tl.store(scratch + 2 + t, tl.full((BLOCK,), 0, tl.int64), mask=t <= last)
        tl.store(scratch, 0)
        tl.store(scratch + 1, 0)
