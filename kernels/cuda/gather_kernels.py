"""The Triton kernels of the CUDA backend (this module imports triton; launch.py imports it
only when a kernel is first needed).

  gather_mm_kernel:        out[m] = sum_k features[nbr[m, k]] @ weight[k]          (per group)
  filter_splits_kernel:    partial[s, k] = sum over the rows m of split s of
                           features[nbr[m, k]]^T (x) grad[m]                       (per group)
  sum_splits_kernel:       dW = partial[0] + partial[1] + ... in split order

Both GEMMs are implicit: their reduction runs over the (offset k, input channel c) pairs of a
group, r = k * Cin/groups + c, which is also the row order of the weight [K, Cin/groups, Cout].
A step of BLOCK_K pairs gathers features[nbr[m, k], c] for each of them, so a layer with few
input channels (a network's first layer: 3 or 4) fills its dot with several offsets at once
instead of padding every offset to 16 channels.

Output-stationary: a program owns its block of outputs and its accumulator, so there are no
atomics and every sum runs in a fixed order: (offset, channel) pairs in ascending steps,
rows in ascending steps (filter), splits in ascending order; inside one tl.dot the GPU's
MMA/FMA order, fixed for a given tile.

Addresses are computed in int64: rows x channels exceeds 2^31 on large scenes. A map entry
outside [-1, rows of features) is never read (masked); the host side rejects such maps.

Absent neighbours are masked, not skipped: a step's loads of them touch no memory, and a
branch on a tile-wide reduction would save little on LiDAR maps (a 64-row tile of sorted
voxels uses nearly every offset).

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
_SCALARS = ["m", "n_in", "kvol", "cin", "cout", "cin_g", "cout_g", "split_rows", "blocks_n", "splits", "size"]


@triton.jit(do_not_specialize=_SCALARS[:7])
def gather_mm_kernel(features, weight, nbr, out,
                     m, n_in, kvol, cin, cout, cin_g, cout_g,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     PRECISION: tl.constexpr, WIDEN: tl.constexpr, ACC: tl.constexpr):
    # program (block of output rows, block of the group's output channels, group)
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    group = tl.program_id(2)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_live = rows < m
    out_cols = group * cout_g + cols
    w_cols = out_cols[None, :]
    w_live = (cols < cout_g)[None, :]
    map_rows = (rows * kvol)[:, None]
    in_col0 = group * cin_g
    steps = tl.arange(0, BLOCK_K)
    acc = tl.full((BLOCK_M, BLOCK_N), 0, dtype=ACC)
    for r0 in range(0, kvol * cin_g, BLOCK_K):
        r = r0 + steps                      # reduction index: offset k = r // cin_g, channel r % cin_g
        k = r // cin_g
        r_live = r < kvol * cin_g
        src = tl.load(nbr + (map_rows + k[None, :]), mask=row_live[:, None] & r_live[None, :], other=-1)
        present = (src >= 0) & (src < n_in)
        a = tl.load(features + (src.to(tl.int64) * cin + (in_col0 + r - k * cin_g)[None, :]), mask=present, other=0.0)
        w = tl.load(weight + (r[:, None] * cout + w_cols), mask=r_live[:, None] & w_live, other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, w, acc, input_precision=PRECISION, out_dtype=ACC)
    tl.store(out + (rows[:, None] * cout + w_cols), acc.to(out.dtype.element_ty), mask=row_live[:, None] & w_live)


@triton.jit(do_not_specialize=_SCALARS[:9])
def filter_splits_kernel(features, grad, nbr, partial,
                         m, n_in, kvol, cin, cout, cin_g, cout_g, split_rows, blocks_n,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         PRECISION: tl.constexpr, WIDEN: tl.constexpr, ACC: tl.constexpr):
    # program (block of (offset, input channel) pairs, group * blocks_n + Cout block, split)
    pid_r = tl.program_id(0)
    pid_gn = tl.program_id(1)
    split = tl.program_id(2)
    group = pid_gn // blocks_n
    r = pid_r * BLOCK_K + tl.arange(0, BLOCK_K)
    k = r // cin_g
    r_live = r < kvol * cin_g
    co = (pid_gn % blocks_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    co_live = co < cout_g
    out_cols = group * cout_g + co
    in_cols = (group * cin_g + r - k * cin_g)[:, None]
    first = split.to(tl.int64) * split_rows
    last = tl.minimum(first + split_rows, m)
    steps = tl.arange(0, BLOCK_M)
    acc = tl.full((BLOCK_K, BLOCK_N), 0, dtype=ACC)
    for r0 in range(first, last, BLOCK_M):
        rows = r0 + steps
        row_live = rows < last
        src = tl.load(nbr + (rows[None, :] * kvol + k[:, None]), mask=r_live[:, None] & row_live[None, :],
                      other=-1)                                                   # [BLOCK_K, BLOCK_M]
        present = (src >= 0) & (src < n_in)
        a = tl.load(features + (src.to(tl.int64) * cin + in_cols), mask=present, other=0.0)
        g = tl.load(grad + (rows[:, None] * cout + out_cols[None, :]),
                    mask=row_live[:, None] & co_live[None, :], other=0.0)        # [BLOCK_M, BLOCK_N]
        if WIDEN:
            a = a.to(tl.float32)
            g = g.to(tl.float32)
        acc = tl.dot(a, g, acc, input_precision=PRECISION, out_dtype=ACC)
    dst = (split.to(tl.int64) * kvol * cin_g + r[:, None]) * cout + out_cols[None, :]
    tl.store(partial + dst, acc, mask=r_live[:, None] & co_live[None, :])


@triton.jit(do_not_specialize=_SCALARS[9:])
def sum_splits_kernel(partial, out, splits, size, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = offs < size
    acc = tl.load(partial + offs, mask=live, other=0.0)
    for s in range(1, splits):
        acc += tl.load(partial + (s * size + offs), mask=live, other=0.0)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=live)
