"""The Triton kernels of the CUDA backend (this module imports triton; launch.py imports it
only when a kernel is first needed).

  gather_mm_kernel:        out[m] = sum_k features[nbr[m, k]] @ weight[k]          (one group)
  filter_splits_kernel:    partial[s, k] = sum over the rows m of split s of
                           features[nbr[m, k]]^T (x) grad[m]                       (one group)
  sum_splits_kernel:       dW = partial[0] + partial[1] + ... in split order

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
MMA/FMA order, fixed for a given tile. Results repeat bit for bit run to run.

Addresses are computed in int64: rows x channels exceeds 2^31 on large scenes. A map entry
outside [-1, rows of features) is never read (masked); the host side rejects such maps.

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


# Scalar arguments are not specialised (Triton would otherwise compile another variant for each
# value 1 and each multiple of 16 it meets): every launch runs one of the variants that
# cubins.py compiles and checks. Pointers are 16-byte aligned (launch.run ensures it).
_SCALARS = ["m", "n_in", "kvol", "cin", "cout", "split_rows", "blocks_n", "splits", "size"]


@triton.jit
def _count_step(counter, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                COUNT: tl.constexpr):
    # executed-step counter (tests only, COUNT=False compiles to nothing): multiply-adds of one tl.dot
    if COUNT:
        tl.atomic_add(counter, BLOCK_M * BLOCK_N * BLOCK_K)


@triton.jit(do_not_specialize=_SCALARS[:5])
def gather_mm_kernel(features, weight, nbr, order, counts, offsets, out, counter,
                     m, n_in, kvol, cin, cout,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     PRECISION: tl.constexpr, WIDEN: tl.constexpr, ACC: tl.constexpr, COUNT: tl.constexpr,
                     ALIGNED: tl.constexpr):
    # program (tile of sorted map rows, block of output channels)
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
            w = tl.load(weight + ((k * cin + c)[:, None] * cout + w_cols), mask=w_live, other=0.0)
        else:
            r = r0 + steps                      # pair r: the tile's (r // cin)-th present offset, channel r % cin
            j = r // cin
            r_live = r < pairs
            k = tl.load(tile_offsets + j, mask=r_live, other=0)
            c = r - j * cin
            src = tl.load(nbr + (map_rows + k[None, :]), mask=row_live[:, None] & r_live[None, :], other=-1)
            present = (src >= 0) & (src < n_in)
            a = tl.load(features + (src.to(tl.int64) * cin + c[None, :]), mask=present, other=0.0)
            w = tl.load(weight + ((k * cin + c)[:, None] * cout + w_cols), mask=r_live[:, None] & w_live, other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, w, acc, input_precision=PRECISION, out_dtype=ACC)
        _count_step(counter, BLOCK_M, BLOCK_N, BLOCK_K, COUNT)
    tl.store(out + (rows[:, None] * cout + w_cols), acc.to(out.dtype.element_ty), mask=row_live[:, None] & w_live)


@triton.jit(do_not_specialize=_SCALARS[:7])
def filter_splits_kernel(features, grad, nbr, order, present_tiles, partial, counter,
                         m, n_in, kvol, cin, cout, split_rows, blocks_n,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         PRECISION: tl.constexpr, WIDEN: tl.constexpr, ACC: tl.constexpr, COUNT: tl.constexpr,
                         ALIGNED: tl.constexpr):
    # program (block of (offset, input channel) pairs, Cout block, split of sorted map rows);
    # split_rows is a multiple of BLOCK_M, so the row steps are the map plan's tiles
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
    in_cols = (r - k * cin)[:, None]
    first = split.to(tl.int64) * split_rows
    last = tl.minimum(first + split_rows, m)
    steps = tl.arange(0, BLOCK_M)
    acc = tl.full((BLOCK_K, BLOCK_N), 0, dtype=ACC)
    for p0 in range(first, last, BLOCK_M):
        # skip a tile in which none of this program's offsets is present
        tile = p0 // BLOCK_M
        if ALIGNED:
            used = tl.load(present_tiles + (tile * kvol + pid_r * BLOCK_K // cin))
        else:
            used = tl.max(tl.load(present_tiles + (tile * kvol + k), mask=r_live, other=0))
        if used != 0:
            pos = p0 + steps
            pos_live = pos < last
            rows = tl.load(order + pos, mask=pos_live, other=0).to(tl.int64)
            if ALIGNED:
                # one map entry per row; each row's BLOCK_K channels contiguous (coalesced), then transposed
                k0 = pid_r * BLOCK_K // cin
                c = (pid_r * BLOCK_K - k0 * cin) // BLOCK_K * BLOCK_K + tl.arange(0, BLOCK_K)
                src = tl.load(nbr + (rows * kvol + k0), mask=pos_live, other=-1)
                present = (src >= 0) & (src < n_in)
                a = tl.trans(tl.load(features + (src.to(tl.int64) * cin)[:, None] + c[None, :],
                                     mask=present[:, None], other=0.0))
            else:
                src = tl.load(nbr + (rows[None, :] * kvol + k[:, None]), mask=r_live[:, None] & pos_live[None, :],
                              other=-1)                                                   # [BLOCK_K, BLOCK_M]
                present = (src >= 0) & (src < n_in)
                a = tl.load(features + (src.to(tl.int64) * cin + in_cols), mask=present, other=0.0)
            g = tl.load(grad + (rows[:, None] * cout + co[None, :]),
                        mask=pos_live[:, None] & co_live[None, :], other=0.0)     # [BLOCK_M, BLOCK_N]
            if WIDEN:
                a = a.to(tl.float32)
                g = g.to(tl.float32)
            acc = tl.dot(a, g, acc, input_precision=PRECISION, out_dtype=ACC)
            _count_step(counter, BLOCK_M, BLOCK_N, BLOCK_K, COUNT)
    dst = (split.to(tl.int64) * kvol * cin + r[:, None]) * cout + co[None, :]
    tl.store(partial + dst, acc, mask=r_live[:, None] & co_live[None, :])


@triton.jit(do_not_specialize=_SCALARS[9:])
def sum_splits_kernel(partial, out, splits, size, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = offs < size
    acc = tl.load(partial + offs, mask=live, other=0.0)
    for s in range(1, splits):
        acc += tl.load(partial + (s * size + offs), mask=live, other=0.0)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=live)
