"""The Triton kernels of the CUDA backend's fused BatchNorm+ReLU (host side: batch_norm_relu.py;
contract: kernels/schema/schema.cpp; CPU kernels: kernels/cpu/batch_norm_relu_cpu.cpp). This
module imports triton.

Per layer and pass at most two launches:

  forward, batch statistics   moments_kernel, then normalize_relu_kernel (normalize alone where
                              the input's producing gather_mm wrote its per-tile moments:
                              gather_kernels.py STATS, combined here as the blocks' sums are)
  forward, running statistics normalize_relu_kernel
  recompute                   scale_shift_relu_kernel
  backward                    backward_sums_kernel, then backward_dx_kernel

The rows are cut into ``nblocks`` blocks of ``block_rows`` rows (the host picks them from n
alone, at most MAX_BLOCKS of them). A program of the first kernel of a pass owns one block and
BLOCK_C channels and writes its block's per-channel sums; a program of the second owns the same
rows, combines every block's sums for its channels itself (all programs the same way, so they
agree bit for bit) and applies the result to its rows. The program of block 0 also writes the
per-channel outputs (mean, invstd, scale, shift, the running blend; dgamma, dbeta), so no third
launch is needed for them.

Arithmetic:
- Every sum is a fixed-order tree: a tile of TILE_R rows is summed by tl.sum (a tree whose shape
  is fixed by the tile), the tiles of a block in order, the blocks' sums in chunks of CHUNK_B by
  tl.sum, the chunks in order. No atomics: results repeat bit for bit, whatever the grid's timing.
  They are not the CPU kernels' bits (512-row blocks summed row after row); against them the
  statistics agree to ~1e-7 relative (tests/cuda/test_batch_norm_kernels.py).
- Statistics in float64: each block's sum and its squared deviations from its own mean, combined
  across blocks by the parallel-variance formula (Chan et al.): var = (sum_b q_b + n_b (mean_b -
  mean)^2) / n. So float32 (and float16 / bfloat16) data never overflow a square (the CPU kernels
  redo such a channel in float64), and the variance keeps its precision when mean^2 >> var.
- x * scale + shift before the ReLU in float64 from T operands (T: float32 for float32, float16
  and bfloat16 features, float64 for float64), rounded to T, then to the features' dtype where
  stored; the backward takes its ReLU mask from the same sum, so forward, recompute and backward
  agree on it. Per-channel arithmetic (invstd, blend, k_g, k_x, k_0) in float64.
- Compiled with enable_fp_fusion=False: the interpreter that runs these kernels in the test suite
  rounds a * b + c twice; so does the GPU then.

Doubles given by the host (momentum, eps) arrive as two int32 halves of their bits: Triton types
a Python float argument as float32, which would round them. Addresses are int64 (rows x channels
exceeds 2^31 on large scenes); row counts are int32 scalars (the launcher checks).
"""
import triton
import triton.language as tl

from . import interpreter_compat

interpreter_compat.apply()       # triton 3.6's interpreter: loops over scalars (see there)

# Scalars are not specialised (one compiled variant per configuration, the one cubins.py checks):
# Triton would otherwise compile another for each value 1 and each multiple of 16.
_SCALARS = ["n", "c", "nblocks", "block_rows", "momentum_hi", "momentum_lo", "eps_hi", "eps_lo", "stat_rows"]


@triton.jit
def _double(hi, lo):
    # the float64 whose bits are (hi << 32) | lo (lo taken as unsigned)
    bits = (hi.to(tl.int64) << 32) | (lo.to(tl.int64) & 0xFFFFFFFF)
    return bits.to(tl.float64, bitcast=True)


@triton.jit
def _pre_relu(x, scale, shift):
    # x * scale + shift in float64 from T operands
    return x.to(tl.float64) * scale.to(tl.float64) + shift.to(tl.float64)


@triton.jit
def _stored(v, ptr):
    # v (T) as stored into ptr's dtype; bfloat16 rounded to nearest even from float32 by its bits,
    # NaN as 0x7FC0 (Triton 3.8's interpreter truncates in .to(tl.bfloat16); the GPU's conversion
    # rounds the same way but keeps a NaN's payload)
    if ptr.dtype.element_ty == tl.bfloat16:
        bits = v.to(tl.float32).to(tl.uint32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        rounded = tl.where(v != v, 0x7FC0, rounded)
        return rounded.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return v.to(ptr.dtype.element_ty)


@triton.jit
def _rounded_for(v, ptr):
    # a float64 value stored into ptr's dtype: float64 as it is, the others through float32
    if ptr.dtype.element_ty == tl.float64:
        return v
    return _stored(v.to(tl.float32), ptr)


@triton.jit
def _tile(blk, r0, block_rows, n, c, cols, col_live, TILE_R: tl.constexpr):
    # offsets and mask of rows [r0, r0 + TILE_R) of block blk (clipped to the block and to n)
    start = blk * block_rows
    rows = start + r0 + tl.arange(0, TILE_R)
    live = ((rows < n) & (rows < start + block_rows))[:, None] & col_live[None, :]
    return rows[:, None] * c + cols[None, :], live


@triton.jit
def _block_count(b, block_rows, n):
    # rows of block b (float64); 1 past the last block (never used, avoids 0 / 0)
    rows = tl.minimum(b.to(tl.int64) * block_rows + block_rows, n) - b.to(tl.int64) * block_rows
    return tl.where(rows > 0, rows, 1).to(tl.float64)


@triton.jit
def _sum_blocks(partial, plane, cols, col_live, nblocks, c, CHUNK_B: tl.constexpr, BLOCK_C: tl.constexpr):
    # sum over blocks b of partial[b, plane, cols] (layout [nblocks, 2, c], float64): chunks of
    # CHUNK_B blocks by tl.sum, chunks in order
    total = tl.zeros([BLOCK_C], dtype=tl.float64)
    for b0 in range(0, nblocks, CHUNK_B):
        b = b0 + tl.arange(0, CHUNK_B)
        live = (b < nblocks)[:, None] & col_live[None, :]
        at = (b.to(tl.int64) * 2 + plane)[:, None] * c + cols[None, :]
        total += tl.sum(tl.load(partial + at, mask=live, other=0.0), axis=0)
    return total


@triton.jit
def _combined_moments(partial, cols, col_live, n, c, nblocks, block_rows, CHUNK_B: tl.constexpr,
                      BLOCK_C: tl.constexpr):
    # (mean, biased var) from the blocks' (sum, squared deviations from the block's mean)
    nf = n.to(tl.float64)
    mean = _sum_blocks(partial, 0, cols, col_live, nblocks, c, CHUNK_B, BLOCK_C) / nf
    q = tl.zeros([BLOCK_C], dtype=tl.float64)
    for b0 in range(0, nblocks, CHUNK_B):
        b = b0 + tl.arange(0, CHUNK_B)
        live = (b < nblocks)[:, None] & col_live[None, :]
        at = (b.to(tl.int64) * 2)[:, None] * c + cols[None, :]
        count = _block_count(b, block_rows, n)[:, None]
        d = tl.load(partial + at, mask=live, other=0.0) / count - mean[None, :]
        term = tl.load(partial + at + c, mask=live, other=0.0) + count * (d * d)
        q += tl.sum(tl.where(live, term, 0.0), axis=0)
    return mean, q / nf


@triton.jit(do_not_specialize=_SCALARS[:2] + _SCALARS[3:4])
def moments_kernel(x, partial, n, c, block_rows, TILE_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # program (block, channels): partial[block, 0] = sum of x, partial[block, 1] = sum of the squared
    # deviations from the block's mean, float64; the block read twice (the second time from cache)
    blk = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_live = cols < c
    total = tl.zeros([BLOCK_C], dtype=tl.float64)
    for r0 in range(0, block_rows, TILE_R):
        at, live = _tile(blk, r0, block_rows, n, c, cols, col_live, TILE_R)
        total += tl.sum(tl.load(x + at, mask=live, other=0.0).to(tl.float64), axis=0)
    mean = total / _block_count(blk, block_rows, n)
    q = tl.zeros([BLOCK_C], dtype=tl.float64)
    for r0 in range(0, block_rows, TILE_R):
        at, live = _tile(blk, r0, block_rows, n, c, cols, col_live, TILE_R)
        d = tl.where(live, tl.load(x + at, mask=live, other=0.0).to(tl.float64) - mean[None, :], 0.0)
        q += tl.sum(d * d, axis=0)
    out = partial + blk * 2 * c + cols
    tl.store(out, total, mask=col_live)
    tl.store(out + c, q, mask=col_live)


@triton.jit
def _blend(running, cols, live, batch, momentum):
    # running <- (1 - momentum) * running + momentum * batch in float64, rounded once into its dtype
    r = tl.load(running + cols, mask=live, other=0.0).to(tl.float64)
    tl.store(running + cols, _rounded_for((1 - momentum) * r + momentum * batch, running), mask=live)


@triton.jit
def _apply_rows(x, y, scale, shift, blk, n, c, block_rows, cols, col_live, T: tl.constexpr, TILE_R: tl.constexpr):
    # y = max(x * scale + shift, 0) over the rows of block blk
    s = scale.to(T)[None, :]
    b = shift.to(T)[None, :]
    for r0 in range(0, block_rows, TILE_R):
        at, live = _tile(blk, r0, block_rows, n, c, cols, col_live, TILE_R)
        z = _pre_relu(tl.load(x + at, mask=live, other=0.0).to(T), s, b).to(T)
        tl.store(y + at, _stored(tl.where(z < 0, 0.0, z), y), mask=live)


@triton.jit(do_not_specialize=_SCALARS)
def normalize_relu_kernel(x, partial, y, mean, invstd, scale, shift, weight, bias, running_mean, running_var,
                          n, c, nblocks, stat_rows, block_rows, momentum_hi, momentum_lo, eps_hi, eps_lo,
                          T: tl.constexpr, BATCH_STATS: tl.constexpr, HAS_WEIGHT: tl.constexpr,
                          HAS_BIAS: tl.constexpr, HAS_RUNNING_MEAN: tl.constexpr, HAS_RUNNING_VAR: tl.constexpr,
                          TILE_R: tl.constexpr, CHUNK_B: tl.constexpr, BLOCK_C: tl.constexpr):
    # program (block, channels): the statistics (batch: combined from the nblocks partial moments of
    # stat_rows rows each -- moments_kernel's blocks, or the producing gather's tiles; else the
    # running ones), invstd, scale and shift, then y over the block's rows. Block 0 writes the
    # per-channel outputs and blends the running statistics (no other program reads them).
    blk = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_live = cols < c
    if BATCH_STATS:
        m, v = _combined_moments(partial, cols, col_live, n, c, nblocks, stat_rows, CHUNK_B, BLOCK_C)
    else:
        m = tl.load(running_mean + cols, mask=col_live, other=0.0).to(tl.float64)
        v = tl.load(running_var + cols, mask=col_live, other=0.0).to(tl.float64)
    if HAS_WEIGHT:
        gamma = tl.load(weight + cols, mask=col_live, other=1.0).to(tl.float64)
    else:
        gamma = tl.full([BLOCK_C], 1.0, tl.float64)
    if HAS_BIAS:
        beta = tl.load(bias + cols, mask=col_live, other=0.0).to(tl.float64)
    else:
        beta = tl.zeros([BLOCK_C], dtype=tl.float64)
    inv = 1.0 / tl.sqrt(v + _double(eps_hi, eps_lo))   # float64: sqrt.rn and div.rn, correctly rounded
    s = gamma * inv
    b = beta - m * s
    if blk == 0:
        tl.store(mean + cols, m, mask=col_live)
        tl.store(invstd + cols, inv, mask=col_live)
        tl.store(scale + cols, s.to(T), mask=col_live)
        tl.store(shift + cols, b.to(T), mask=col_live)
        if BATCH_STATS:
            momentum = _double(momentum_hi, momentum_lo)
            if HAS_RUNNING_MEAN:
                _blend(running_mean, cols, col_live, m, momentum)
            if HAS_RUNNING_VAR:
                nf = n.to(tl.float64)
                _blend(running_var, cols, col_live, v * tl.where(n > 1, nf / (nf - 1), 1.0), momentum)
    _apply_rows(x, y, s, b, blk, n, c, block_rows, cols, col_live, T, TILE_R)


@triton.jit(do_not_specialize=_SCALARS[:2] + _SCALARS[3:4])
def scale_shift_relu_kernel(x, scale, shift, y, n, c, block_rows,
                            T: tl.constexpr, TILE_R: tl.constexpr, BLOCK_C: tl.constexpr):
    blk = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_live = cols < c
    s = tl.load(scale + cols, mask=col_live, other=0.0)
    b = tl.load(shift + cols, mask=col_live, other=0.0)
    _apply_rows(x, y, s, b, blk, n, c, block_rows, cols, col_live, T, TILE_R)


@triton.jit
def _relu_grad(x, dy, at, live, s, b, T: tl.constexpr):
    # (x in T, g in float64): g = dy where the ReLU passed (the forward's float64 pre-ReLU sum)
    xv = tl.load(x + at, mask=live, other=0.0).to(T)
    g = tl.where(_pre_relu(xv, s, b) > 0, tl.load(dy + at, mask=live, other=0.0).to(tl.float64), 0.0)
    return xv, g


@triton.jit(do_not_specialize=_SCALARS[:2] + _SCALARS[3:4])
def backward_sums_kernel(x, dy, scale, shift, mean, invstd, partial, n, c, block_rows,
                         T: tl.constexpr, TILE_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # partial[block, 0] = sum g, partial[block, 1] = sum g * (x - mean) * invstd, float64
    blk = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_live = cols < c
    s = tl.load(scale + cols, mask=col_live, other=0.0)[None, :]
    b = tl.load(shift + cols, mask=col_live, other=0.0)[None, :]
    m = tl.load(mean + cols, mask=col_live, other=0.0)[None, :]
    inv = tl.load(invstd + cols, mask=col_live, other=0.0)[None, :]
    sum_g = tl.zeros([BLOCK_C], dtype=tl.float64)
    sum_gx = tl.zeros([BLOCK_C], dtype=tl.float64)
    for r0 in range(0, block_rows, TILE_R):
        at, live = _tile(blk, r0, block_rows, n, c, cols, col_live, TILE_R)
        xv, g = _relu_grad(x, dy, at, live, s, b, T)
        sum_g += tl.sum(g, axis=0)
        sum_gx += tl.sum(tl.where(live, g * ((xv.to(tl.float64) - m) * inv), 0.0), axis=0)
    out = partial + blk * 2 * c + cols
    tl.store(out, sum_g, mask=col_live)
    tl.store(out + c, sum_gx, mask=col_live)


@triton.jit
def _store_parameter_grads(partial, dgamma, dbeta, cols, col_live, nblocks, c, CHUNK_B: tl.constexpr,
                           BLOCK_C: tl.constexpr):
    # dbeta = sum g, dgamma = sum g * xhat over the blocks (block 0's program writes them)
    tl.store(dbeta + cols, _rounded_for(_sum_blocks(partial, 0, cols, col_live, nblocks, c, CHUNK_B, BLOCK_C), dbeta),
             mask=col_live)
    tl.store(dgamma + cols, _rounded_for(_sum_blocks(partial, 1, cols, col_live, nblocks, c, CHUNK_B, BLOCK_C),
                                         dgamma), mask=col_live)


@triton.jit(do_not_specialize=_SCALARS[:4])
def backward_dx_kernel(x, dy, scale, shift, mean, invstd, weight, partial, dx, dgamma, dbeta, n, c, nblocks,
                       block_rows, T: tl.constexpr, BATCH_STATS: tl.constexpr, HAS_WEIGHT: tl.constexpr,
                       TILE_R: tl.constexpr, CHUNK_B: tl.constexpr, BLOCK_C: tl.constexpr):
    # dbeta = sum g, dgamma = sum g * xhat (combined from backward_sums_kernel's blocks, float64);
    # a = gamma * invstd, dx = a * (g - k_x * (x - mean) - k_0) with k_x = invstd * dgamma / n,
    # k_0 = dbeta / n with batch statistics (else dx = a * g: a NaN input gives 0). Factored as the
    # contract's formula is: an infinite a times a finite bracket is an infinity, where a * g
    # minus a * (...) expanded would be inf - inf = NaN.
    blk = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_live = cols < c
    if blk == 0:
        _store_parameter_grads(partial, dgamma, dbeta, cols, col_live, nblocks, c, CHUNK_B, BLOCK_C)
    inv = tl.load(invstd + cols, mask=col_live, other=0.0)
    if HAS_WEIGHT:
        gamma = tl.load(weight + cols, mask=col_live, other=1.0).to(tl.float64)
    else:
        gamma = tl.full([BLOCK_C], 1.0, tl.float64)
    a = gamma * inv
    k_g = a.to(T)[None, :]
    s = tl.load(scale + cols, mask=col_live, other=0.0)[None, :]
    b = tl.load(shift + cols, mask=col_live, other=0.0)[None, :]
    if BATCH_STATS:
        sum_g = _sum_blocks(partial, 0, cols, col_live, nblocks, c, CHUNK_B, BLOCK_C)
        sum_gx = _sum_blocks(partial, 1, cols, col_live, nblocks, c, CHUNK_B, BLOCK_C)
        nf = n.to(tl.float64)
        k_x = (inv * sum_gx / nf).to(T)[None, :]
        k_0 = (sum_g / nf).to(T)[None, :]
        m = tl.load(mean + cols, mask=col_live, other=0.0).to(T)[None, :]
        for r0 in range(0, block_rows, TILE_R):
            at, live = _tile(blk, r0, block_rows, n, c, cols, col_live, TILE_R)
            xv, g = _relu_grad(x, dy, at, live, s, b, T)
            tl.store(dx + at, _stored(k_g * (g.to(T) - k_x * (xv - m) - k_0), dx), mask=live)
    else:
        for r0 in range(0, block_rows, TILE_R):
            at, live = _tile(blk, r0, block_rows, n, c, cols, col_live, TILE_R)
            xv, g = _relu_grad(x, dy, at, live, s, b, T)
            tl.store(dx + at, _stored(k_g * g.to(T), dx), mask=live)
