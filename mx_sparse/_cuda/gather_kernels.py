"""The Triton kernels of the CUDA backend (this module imports triton; launch.py imports it
only when a kernel is first needed).

  gather_mm_kernel:        out[m] = sum_k features[nbr[m, k]] @ weight[k]          (one group)
  filter_splits_kernel:    partial[s, k] = sum over the rows m of split s of
                           features[nbr[m, k]]^T (x) grad[m]                       (one group)
                           and, by the last split program of each block of dW,
                           dW = partial[0] + partial[1] + ... in split order

Sorted, mask-gated implicit GEMM. Both kernels walk the map's rows in the order of the map's
plan (map_plan.py: rows sorted by neighbour bitmask, in tiles of BLOCK_M rows, with each tile's
present offsets). The reduction runs over (present offset, input channel) pairs:
gather_mm_kernel's tile takes its j-th present offset's channels as pairs r = j * Cin + c, in
steps of BLOCK_K, so an offset no row of the tile has costs nothing, and a layer with few input
channels (a first layer: 3 or 4) still fills its dot with several offsets per step. The filter
kernel's program owns BLOCK_K (offset, channel) rows of dW and skips every tile in which none
of its offsets is present. Inside a tile an absent (row, offset) pair is masked (loaded as 0).

ALIGNED variants (Cin a multiple of BLOCK_K, Cout of 16; tiles.py picks them): a step is
BLOCK_K channels of ONE offset, so each row needs one map entry per step, its channels are
contiguous and 16-byte aligned (vector loads), and the filter kernel loads [rows, channels]
blocks row-contiguous (coalesced) and transposes them in registers.

Output-stationary: a program owns its block of outputs and its accumulator, so there are no
atomics on values and every sum runs in a fixed order: a row's present offsets ascending
(gather), a program's tiles ascending (filter), splits ascending; inside one tl.dot the GPU's
MMA/FMA order, fixed for a given tile. Results repeat bit for bit run to run. The filter's splits
are added by whichever of a block's split programs finishes last (an integer ticket counted
atomically: which program that is varies, the order of the sum it runs does not).

Addresses are computed in int64: rows x channels exceeds 2^31 on large scenes. A map entry
outside [-1, rows of features) is never read (masked); the host side rejects such maps.

STATS (gather_mm_kernel; forward launches whose weight requires grad, gather_mm.py): the
program also writes its tile's per-channel moments of the values it stored -- their sum and
their squared deviations from the tile's mean, float64, tl.sum's fixed tree over the tile's
rows -- which a BatchNorm on that output combines instead of reading it once more
(batch_norm_relu.py: one launch fewer per layer). A fixed order again: the same bits every run.

LISTS (gather_mm_kernel; a training forward on a plan whose tile lists are not built yet,
gather_mm.py): ``gates`` programs past the last tile build the weight-gradient kernel's tile
lists of the plan (plan_kernels.gate_tile_list, as tile_lists_kernel does: one launch fewer per
plan). The gather's own programs are unchanged; the lists depend only on the plan.

ACTIVATION (filter_splits_kernel; the weight gradient of a convolution whose input is a fused
BatchNorm+ReLU output, gather_mm.py): features holds that BatchNorm's input x, and the kernel
reads relu(x * scale + shift) per input channel as it loads each tile, with the recompute's
arithmetic (batch_norm_kernels.py: in float64 from T operands, rounded to T, then to the
features' dtype), so the gradient is the one of the stored output, bit for bit, without a
launch that makes it.

WEIGHT_T (gather_mm_kernel; the input gradient of a convolution, gather_mm.py
gather_mm_transposed): weight is the layer's own [K, Cout, Cin] (this launch's cout and cin the
other way round) and offset k multiplies weight[k_first + k_step * k]^T, read in place: the
transposed weight, offsets reversed for a symmetric map (k_first = K-1, k_step = -1), costs no
copy and no launch (autograd.cpp made one per backward before). Only the weight's addresses
differ: the same products summed in the same order as on the copy, bit for bit. k_first and
k_step are plain scalars (0 and 1 otherwise), so one variant serves both directions.

COUNT (tests and bench only): every tl.dot adds its BLOCK_M x BLOCK_N x BLOCK_K multiply-adds
to an int64 counter (launch.counting_steps); False in every shipped build.

WIDEN (interpreter only): Triton 3.8's interpreter computes tl.dot of two bfloat16 operands
wrongly, so under the interpreter bf16 operands are widened to fp32 before the dot. bf16
values and their pairwise products are exact in fp32, so this is the computation a bf16 MMA
with fp32 accumulation does; the GPU build (WIDEN=False) runs the bf16 dot itself, and that
code is what the cubin compile checks.
"""
import triton
import triton.language as tl

from . import interpreter_compat
from .batch_norm_kernels import _stored
from .plan_kernels import gate_tile_list

interpreter_compat.apply()       # triton 3.6's interpreter: loops over scalars (see there)


# Scalar arguments are not specialised (Triton would otherwise compile another variant for each
# value 1 and each multiple of 16 it meets): every launch runs one of the variants that
# cubins.py compiles and checks. Pointers are 16-byte aligned (launch.run ensures it).
_SCALARS = ["m", "n_in", "kvol", "cin", "cout", "gates", "splits"]
# gather_mm_kernel's weight offset map (WEIGHT_T launches only read them): weight slice k_first + k_step * k
_WEIGHT_OFFSET_SCALARS = ["k_first", "k_step"]


@triton.jit
def _count_step(counter, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                COUNT: tl.constexpr):
    # executed-step counter (tests only, COUNT=False compiles to nothing): multiply-adds of one tl.dot
    if COUNT:
        tl.atomic_add(counter, BLOCK_M * BLOCK_N * BLOCK_K)


@triton.jit
def _weight_at(k, c, cols, cin, cout, k_first, k_step, WEIGHT_T: tl.constexpr):
    """Offsets of the [BLOCK_K, BLOCK_N] weight block of (offset k, channel c) pairs x output
    columns: weight[k][c][col] of a [K, Cin, Cout] weight, or with WEIGHT_T weight[k'][col][c] of
    the layer's [K, Cout, Cin] (k' = k_first + k_step * k). k is a scalar (ALIGNED steps: one
    offset) or a [BLOCK_K, 1] column (one offset per pair); c is [BLOCK_K]."""
    if WEIGHT_T:
        return ((k_first + k_step * k) * cout + cols[None, :]) * cin + c[:, None]
    return (k * cin + c[:, None]) * cout + cols[None, :]


@triton.jit(do_not_specialize=_SCALARS[:6] + ["span"] + _WEIGHT_OFFSET_SCALARS)
def gather_mm_kernel(features, weight, nbr, order, counts, offsets, out, stats, tile_present, lists, list_counts, counter,
                     m, n_in, kvol, cin, cout, gates, span, k_first, k_step,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     PRECISION: tl.constexpr, WIDEN: tl.constexpr, ACC: tl.constexpr, COUNT: tl.constexpr,
                     ALIGNED: tl.constexpr, CHANNELS_FIRST: tl.constexpr, STATS: tl.constexpr,
                     LISTS: tl.constexpr, BLOCK_T: tl.constexpr, WEIGHT_T: tl.constexpr):
    # program (tile of sorted map rows, block of output channels); with LISTS, the programs past
    # the last tile build the weight gradient's tile lists instead (one gate each, channel block 0)
    if LISTS:
        tiles = (m + BLOCK_M - 1) // BLOCK_M
        if tl.program_id(0) >= tiles:
            if tl.program_id(1) == 0:
                gate_tile_list(tile_present, lists, list_counts, tl.program_id(0) - tiles, tiles, kvol, gates, cin,
                               BLOCK_K, span, ALIGNED, BLOCK_T)
            return
    if ALIGNED:
        # the launcher's promise: Cin a multiple of BLOCK_K, Cout of 16. Written as x // b * b (the
        # same value) so that the compiler knows the divisibility and vectorises the row loads:
        # a scalar argument's hint would need a specialised variant per channel count
        cin = cin // BLOCK_K * BLOCK_K
        cout = cout // 16 * 16
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pos = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_live = pos < m
    rows = tl.load(order + pos, mask=row_live, other=0).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    w_cols = cols[None, :]
    w_live = (cols < cout)[None, :]
    map_rows = (rows * kvol)[:, None]
    tile_offsets = offsets + pid_m.to(tl.int64) * kvol
    pairs = tl.load(counts + pid_m) * cin          # (present offset, channel) pairs of this tile
    steps = tl.arange(0, BLOCK_K)
    if CHANNELS_FIRST:
        acc = tl.full((BLOCK_N, BLOCK_M), 0, dtype=ACC)
    else:
        acc = tl.full((BLOCK_M, BLOCK_N), 0, dtype=ACC)
    for r0 in range(0, pairs, BLOCK_K):
        if ALIGNED:
            # a step is BLOCK_K channels of one offset: one map entry per row, contiguous channels
            j = r0 // cin
            k = tl.load(tile_offsets + j)
            c = (r0 - j * cin) // BLOCK_K * BLOCK_K + steps
            src = tl.load(nbr + (rows * kvol + k), mask=row_live, other=-1)
            present = (src >= 0) & (src < n_in)
            a = tl.load(features + (src.to(tl.int64) * cin)[:, None] + c[None, :], mask=present[:, None], other=0.0)
            w = tl.load(weight + _weight_at(k, c, cols, cin, cout, k_first, k_step, WEIGHT_T), mask=w_live,
                        other=0.0)
        else:
            r = r0 + steps                      # pair r: the tile's (r // cin)-th present offset, channel r % cin
            j = r // cin
            r_live = r < pairs
            k = tl.load(tile_offsets + j, mask=r_live, other=0)
            c = r - j * cin
            src = tl.load(nbr + (map_rows + k[None, :]), mask=row_live[:, None] & r_live[None, :], other=-1)
            present = (src >= 0) & (src < n_in)
            a = tl.load(features + (src.to(tl.int64) * cin + c[None, :]), mask=present, other=0.0)
            w = tl.load(weight + _weight_at(k[:, None], c, cols, cin, cout, k_first, k_step, WEIGHT_T),
                        mask=r_live[:, None] & w_live, other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        if CHANNELS_FIRST:
            # out^T = W^T A^T: the output channels are the MMA's M side (Hopper's wgmma needs
            # 64 of them; a tile has 32 rows)
            acc = tl.dot(tl.trans(w), tl.trans(a), acc, input_precision=PRECISION, out_dtype=ACC)
        else:
            acc = tl.dot(a, w, acc, input_precision=PRECISION, out_dtype=ACC)
        _count_step(counter, BLOCK_M, BLOCK_N, BLOCK_K, COUNT)
    if CHANNELS_FIRST:
        result = tl.trans(acc)
    else:
        result = acc
    stored = result.to(out.dtype.element_ty)
    tl.store(out + (rows[:, None] * cout + w_cols), stored, mask=row_live[:, None] & w_live)
    if STATS:
        _tile_stats(stats, stored, pid_m, m, cols, row_live[:, None] & w_live, cout, BLOCK_M)


@triton.jit
def _tile_stats(stats, stored, pid_m, m, cols, live, cout, BLOCK_M: tl.constexpr):
    # stats[tile, 0] = the per-channel sum of the tile's stored outputs, stats[tile, 1] = the sum of
    # their squared deviations from the tile's mean; float64, tl.sum's fixed tree over the tile's
    # rows (the BatchNorm's moments of this output, gather_mm.tile_stats)
    v = tl.where(live, stored.to(tl.float64), 0.0)
    rows = tl.minimum(m - pid_m * BLOCK_M, BLOCK_M).to(tl.float64)
    total = tl.sum(v, axis=0)
    d = tl.where(live, v - (total / rows)[None, :], 0.0)
    at = stats + pid_m.to(tl.int64) * 2 * cout + cols
    tl.store(at, total, mask=cols < cout)
    tl.store(at + cout, tl.sum(d * d, axis=0), mask=cols < cout)


@triton.jit
def _activated(a, present, s, b, features, T: tl.constexpr):
    # relu(a * s + b) as the fused BatchNorm+ReLU stored it (batch_norm_kernels._apply_rows: in
    # float64 from T operands, s and b given in float64), in the features' dtype; 0 where no row
    # was loaded (one select: a NaN and -0.0 pass as the ReLU passes them)
    z = (a.to(T).to(tl.float64) * s + b).to(T)
    return _stored(tl.where(present & ~(z < 0), z, 0.0), features)


@triton.jit(do_not_specialize=_SCALARS[:7])
def filter_splits_kernel(features, scale, shift, grad, nbr, order, tile_lists, tile_counts, partial, dw, tickets,
                         counter, m, n_in, kvol, cin, cout, gates, splits,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         PRECISION: tl.constexpr, WIDEN: tl.constexpr, ACC: tl.constexpr, COUNT: tl.constexpr,
                         ALIGNED: tl.constexpr, CHANNELS_FIRST: tl.constexpr, SUM_SPLITS: tl.constexpr,
                         ACTIVATION: tl.constexpr, T: tl.constexpr):
    # program (block of (offset, input channel) pairs, Cout block, split). The program's gate
    # (ALIGNED: its one offset; else its block of pairs) has a compacted list of the plan's tiles
    # in which it is present (tile_lists.py: column gate of a [tiles, gates] table); split s runs entries s, s + splits, ... of it, so
    # the loop has no branch and its loads pipeline
    if ALIGNED:     # Cin a multiple of BLOCK_K (a program's pairs are one offset's channels), Cout of 16
        cin = cin // BLOCK_K * BLOCK_K
        cout = cout // 16 * 16
    pid_r = tl.program_id(0)
    pid_n = tl.program_id(1)
    split = tl.program_id(2)
    r = pid_r * BLOCK_K + tl.arange(0, BLOCK_K)
    k = r // cin
    r_live = r < kvol * cin
    co = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    co_live = co < cout
    in_cols = (r - k * cin)[None, :]
    if ALIGNED:
        gate = pid_r * BLOCK_K // cin
    else:
        gate = pid_r
    listed = tl.load(tile_counts + gate)
    stride = gates.to(tl.int64)      # the tile table is [tiles, gates]: addresses beyond int32
    steps = tl.arange(0, BLOCK_M)
    if ALIGNED:
        k0 = pid_r * BLOCK_K // cin
        c = (pid_r * BLOCK_K - k0 * cin) // BLOCK_K * BLOCK_K + tl.arange(0, BLOCK_K)
    if ACTIVATION:
        # the program's input channels' scale and shift, loaded once (T values, held in float64)
        if ALIGNED:
            s = tl.load(scale + c)[None, :].to(T).to(tl.float64)
            b = tl.load(shift + c)[None, :].to(T).to(tl.float64)
        else:
            s = tl.load(scale + in_cols, mask=r_live[None, :], other=0.0).to(T).to(tl.float64)
            b = tl.load(shift + in_cols, mask=r_live[None, :], other=0.0).to(T).to(tl.float64)
    if CHANNELS_FIRST:
        acc = tl.full((BLOCK_N, BLOCK_K), 0, dtype=ACC)
    else:
        acc = tl.full((BLOCK_K, BLOCK_N), 0, dtype=ACC)
    for i in range(split, listed, splits):
        pos = tl.load(tile_lists + (i * stride + gate)).to(tl.int64) * BLOCK_M + steps
        pos_live = pos < m
        rows = tl.load(order + pos, mask=pos_live, other=0).to(tl.int64)
        if ALIGNED:
            # one map entry per row; each row's BLOCK_K channels contiguous (coalesced)
            src = tl.load(nbr + (rows * kvol + k0), mask=pos_live, other=-1)
            present = (src >= 0) & (src < n_in)
            a = tl.load(features + (src.to(tl.int64) * cin)[:, None] + c[None, :],
                        mask=present[:, None], other=0.0)                                  # [BLOCK_M, BLOCK_K]
            if ACTIVATION:
                a = _activated(a, present[:, None], s, b, features, T)
        else:
            src = tl.load(nbr + (rows[:, None] * kvol + k[None, :]), mask=pos_live[:, None] & r_live[None, :],
                          other=-1)                                                        # [BLOCK_M, BLOCK_K]
            present = (src >= 0) & (src < n_in)
            a = tl.load(features + (src.to(tl.int64) * cin + in_cols), mask=present, other=0.0)
            if ACTIVATION:
                a = _activated(a, present, s, b, features, T)
        g = tl.load(grad + (rows[:, None] * cout + co[None, :]),
                    mask=pos_live[:, None] & co_live[None, :], other=0.0)     # [BLOCK_M, BLOCK_N]
        if WIDEN:
            a = a.to(tl.float32)
            g = g.to(tl.float32)
        if CHANNELS_FIRST:
            # dW^T = G^T A: the output channels are the MMA's M side (wgmma needs 64 of them)
            acc = tl.dot(tl.trans(g), a, acc, input_precision=PRECISION, out_dtype=ACC)
        else:
            acc = tl.dot(tl.trans(a), g, acc, input_precision=PRECISION, out_dtype=ACC)
        _count_step(counter, BLOCK_M, BLOCK_N, BLOCK_K, COUNT)
    if CHANNELS_FIRST:
        result = tl.trans(acc)
    else:
        result = acc
    size = kvol.to(tl.int64) * cin * cout
    tl.store(partial + (split * size + r[:, None].to(tl.int64) * cout + co[None, :]), result,
             mask=r_live[:, None] & co_live[None, :])
    if SUM_SPLITS:
        # (partial is not dW: several splits, or dW narrower than the accumulator) the block's
        # split programs take a ticket once their partial is stored; the last adds the splits in
        # ascending order into dW and puts the ticket back to 0 for the next launch on the stream
        tl.debug_barrier()          # every thread's stores before the ticket (released with it)
        ticket_of = tickets + (pid_r * tl.num_programs(1) + pid_n)
        ticket = tl.atomic_add(ticket_of, 1, sem="acq_rel", scope="gpu")
        if ticket == splits - 1:
            block = r[:, None].to(tl.int64) * cout + co[None, :]      # this program's entries of one dW
            live = r_live[:, None] & co_live[None, :]
            total = tl.load(partial + block, mask=live, other=0.0, cache_modifier=".cg")
            split_base = partial        # advanced a split at a time (s * size spilled on sm_90)
            for _ in range(1, splits):
                split_base += size
                total += tl.load(split_base + block, mask=live, other=0.0, cache_modifier=".cg")
            tl.store(dw + block, total.to(dw.dtype.element_ty), mask=live)
            tl.atomic_xchg(ticket_of, 0, sem="relaxed", scope="gpu")
