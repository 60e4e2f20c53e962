"""The Triton kernels of the CUDA backend's fused BatchNorm+ReLU (host side: batch_norm_relu.py;
contract: kernels/schema/schema.cpp; CPU kernels: kernels/cpu/batch_norm_relu_cpu.cpp with the row
loops of kernels/cpu/batch_norm_relu_rows.h). This module imports triton.

  row_sums_kernel:            partial[b, j] = sum of x[r, j] over the rows r of block b
  squared_deviations_kernel:  partial[b, j] = sum of (x[r, j] - mean[j])^2 over block b
  mean_kernel:                mean[j] = (partial[0, j] + partial[1, j] + ...) / n
  coefficients_kernel:        var, the running-statistics blend, invstd, scale, shift
  scale_shift_relu_kernel:    y = max(x * scale + shift, 0)
  backward_sums_kernel:       per block: sum g, sum g * (x - mean) * invstd   (g: dy where the ReLU passed)
  backward_coefficients_kernel: dgamma, dbeta and the k_g, k_x, k_0 of dx
  backward_dx_kernel:         dx = k_g * g + k_x * (x - mean) + k_0

The CPU kernels' arithmetic, operation for operation, so that the results are the CPU's bits
(where the CPU's own build does not contract a multiply-add, see below):

- Features of dtype S are computed in T (float32 for float32 and bfloat16, float64 for float64).
- A reduction sums blocks of ROWS = 512 rows (the CPU's kRowBlock) separately, each in T, row
  after row in order; the blocks' totals are added in double in block order. Every program owns
  one block and BLOCK_C channels and adds its rows one at a time: a parallel tree (tl.sum) would
  round differently. The loop is unrolled UNROLL rows at a time so that the loads of a step are
  issued together (they do not depend on the sum); the adds stay in row order. A block's last
  rows are one masked step, where a row past the end adds -0.0, the identity of floating-point
  addition (+0.0 would turn a -0.0 sum into +0.0).
- x * scale + shift before the ReLU is taken in float64 from T operands (exact product plus one
  rounding for float32 and bfloat16), rounded to T, then to S where stored; bfloat16 stores round
  to nearest even, as the CPU does.
- Per-channel arithmetic (mean, var, invstd, blend, k_g, k_x, k_0) in float64 in the CPU's
  evaluation order. The launcher compiles with enable_fp_fusion=False: the CPU's portable build
  does not contract a * b + c into a fused multiply-add, and the GPU compiler otherwise would.
  (The CPU's AVX-512 copy of the row loops may contract; against it the results can differ in the
  last bit.)
- A channel whose float32 statistics are not finite is taken again in float64, serially over all
  rows, as on the CPU (rare: |x| beyond ~1e19, or an Inf/NaN).

Doubles given by the host (momentum, eps) arrive as two int32 halves of their bits: Triton types
a Python float argument as float32, which would round them.

Addresses are int64 (rows x channels exceeds 2^31 on large scenes); row counts are int32 scalars
(the launcher checks). No atomics: every sum runs in a fixed order, results repeat bit for bit.
"""
import triton
import triton.language as tl

from . import interpreter_compat

interpreter_compat.apply()       # triton 3.6's interpreter: loops over scalars (see there)

# Scalar arguments are not specialised (one compiled variant per configuration, the one cubins.py
# checks): Triton would otherwise compile another for each value 1 and each multiple of 16.
_SCALARS = ["n", "c", "nblocks", "momentum_hi", "momentum_lo", "eps_hi", "eps_lo"]

INF = tl.constexpr(float("inf"))


@triton.jit
def _double(hi, lo):
    # the float64 whose bits are (hi << 32) | lo (lo taken as unsigned)
    bits = (hi.to(tl.int64) << 32) | (lo.to(tl.int64) & 0xFFFFFFFF)
    return bits.to(tl.float64, bitcast=True)


@triton.jit
def _finite(v):
    return tl.abs(v) < INF          # false for Inf and NaN


@triton.jit
def _pre_relu(x, scale, shift):
    # x * scale + shift in float64 from T operands (the CPU's pre_relu)
    return x.to(tl.float64) * scale.to(tl.float64) + shift.to(tl.float64)


@triton.jit
def _block_totals(partial, cols, live, nblocks, stride, UNROLL: tl.constexpr, BLOCK_C: tl.constexpr):
    # sum over b of partial[b * stride + cols] in float64, b ascending (the CPU adds its blocks in order)
    total = tl.zeros([BLOCK_C], dtype=tl.float64)
    for b0 in range(0, nblocks, UNROLL):
        for i in tl.static_range(UNROLL):
            b = b0 + i
            total += tl.load(partial + b.to(tl.int64) * stride + cols, mask=live & (b < nblocks), other=-0.0)
    return total


@triton.jit
def _row_sums_step(acc, p, c, live, rows, T: tl.constexpr, UNROLL: tl.constexpr, MASKED: tl.constexpr):
    # UNROLL rows from p on (the first ``rows`` of them where MASKED) added to acc in row order
    for i in tl.static_range(UNROLL):
        mask = live & (i < rows) if MASKED else live
        acc += tl.load(p, mask=mask, other=-0.0).to(T)
        p += c
    return acc, p


@triton.jit(do_not_specialize=_SCALARS[:2])
def row_sums_kernel(x, partial, n, c,
                    T: tl.constexpr, ROWS: tl.constexpr, UNROLL: tl.constexpr, BLOCK_C: tl.constexpr):
    # program (block of ROWS rows, block of channels): partial[block, j] = sum in T, rows in order;
    # whole steps of UNROLL rows, then the block's last rows as one masked step
    blk = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    live = cols < c
    rows = tl.minimum(blk * ROWS + ROWS, n) - blk * ROWS
    whole = rows // UNROLL * UNROLL
    p = x + blk * ROWS * c + cols
    acc = tl.zeros([BLOCK_C], dtype=T)
    for _ in range(0, whole, UNROLL):
        acc, p = _row_sums_step(acc, p, c, live, UNROLL, T, UNROLL, False)
    if whole < rows:
        acc, p = _row_sums_step(acc, p, c, live, rows - whole, T, UNROLL, True)
    tl.store(partial + blk * c + cols, acc.to(tl.float64), mask=live)


@triton.jit(do_not_specialize=_SCALARS[:3])
def mean_kernel(partial, mean, n, c, nblocks, UNROLL: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    live = cols < c
    total = _block_totals(partial, cols, live, nblocks, c, UNROLL, BLOCK_C)
    tl.store(mean + cols, total / n.to(tl.float64), mask=live)


@triton.jit
def _squared_deviations_step(acc, p, c, live, rows, m, T: tl.constexpr, UNROLL: tl.constexpr,
                             MASKED: tl.constexpr):
    for i in tl.static_range(UNROLL):
        if MASKED:
            d = tl.load(p, mask=live & (i < rows), other=0.0).to(T) - m
            acc += tl.where(i < rows, d * d, -0.0)
        else:
            d = tl.load(p, mask=live, other=0.0).to(T) - m
            acc += d * d
        p += c
    return acc, p


@triton.jit(do_not_specialize=_SCALARS[:2])
def squared_deviations_kernel(x, mean, partial, n, c,
                              T: tl.constexpr, ROWS: tl.constexpr, UNROLL: tl.constexpr, BLOCK_C: tl.constexpr):
    # partial[block, j] = sum of (x - mean)^2 in T with mean rounded to T (the CPU's mean_t)
    blk = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    live = cols < c
    m = tl.load(mean + cols, mask=live, other=0.0).to(T)
    rows = tl.minimum(blk * ROWS + ROWS, n) - blk * ROWS
    whole = rows // UNROLL * UNROLL
    p = x + blk * ROWS * c + cols
    acc = tl.zeros([BLOCK_C], dtype=T)
    for _ in range(0, whole, UNROLL):
        acc, p = _squared_deviations_step(acc, p, c, live, UNROLL, m, T, UNROLL, False)
    if whole < rows:
        acc, p = _squared_deviations_step(acc, p, c, live, rows - whole, m, T, UNROLL, True)
    tl.store(partial + blk * c + cols, acc.to(tl.float64), mask=live)


@triton.jit
def _float64_statistics(x, n, c, cols, bad, mean, var, UNROLL: tl.constexpr):
    # the CPU's serial float64 pass for the channels marked bad: mean, then the squared deviations
    row_stride = c.to(tl.int64)
    s = tl.zeros_like(mean)
    for r0 in range(0, n, UNROLL):
        for i in tl.static_range(UNROLL):
            r = r0 + i
            s += tl.load(x + r * row_stride + cols, mask=bad & (r < n), other=-0.0).to(tl.float64)
    m = s / n.to(tl.float64)
    q = tl.zeros_like(mean)
    for r0 in range(0, n, UNROLL):
        for i in tl.static_range(UNROLL):
            r = r0 + i
            d = tl.load(x + r * row_stride + cols, mask=bad & (r < n), other=0.0).to(tl.float64) - m
            q += tl.where(r < n, d * d, -0.0)
    return tl.where(bad, m, mean), tl.where(bad, q / n.to(tl.float64), var)


@triton.jit
def _stored(v, ptr):
    # v (T) as stored into ptr's dtype; bfloat16 rounded to nearest even from float32 by its bits,
    # the CPU's store(), NaN as 0x7FC0 (Triton 3.8's interpreter truncates in .to(tl.bfloat16);
    # the GPU's conversion rounds the same way but keeps a NaN's payload)
    if ptr.dtype.element_ty == tl.bfloat16:
        bits = v.to(tl.float32).to(tl.uint32, bitcast=True)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        rounded = tl.where(v != v, 0x7FC0, rounded)
        return rounded.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return v.to(ptr.dtype.element_ty)


@triton.jit
def _rounded_for(v, ptr):
    # a float64 value stored into ptr's dtype as the CPU's channel_tensor does: float32 and
    # bfloat16 through float32 (bfloat16: rounded twice), float64 as it is
    if ptr.dtype.element_ty == tl.float64:
        return v
    return _stored(v.to(tl.float32), ptr)


@triton.jit
def _blend(running, cols, live, batch, momentum):
    # running <- (1 - momentum) * running + momentum * batch in float64, rounded once per dtype step
    r = tl.load(running + cols, mask=live, other=0.0).to(tl.float64)
    blended = (1 - momentum) * r + momentum * batch
    tl.store(running + cols, _rounded_for(blended, running), mask=live)


@triton.jit(do_not_specialize=_SCALARS)
def coefficients_kernel(x, partial, mean, invstd, scale, shift, weight, bias, running_mean, running_var,
                        n, c, nblocks, momentum_hi, momentum_lo, eps_hi, eps_lo,
                        T: tl.constexpr, BATCH_STATS: tl.constexpr, HAS_WEIGHT: tl.constexpr,
                        HAS_BIAS: tl.constexpr, HAS_RUNNING_MEAN: tl.constexpr, HAS_RUNNING_VAR: tl.constexpr,
                        UNROLL: tl.constexpr, BLOCK_C: tl.constexpr):
    # per channel: the statistics (batch: mean from mean_kernel, var from the squared deviations'
    # partial sums; else the running ones), the running blend, invstd, scale and shift
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    live = cols < c
    if BATCH_STATS:
        m = tl.load(mean + cols, mask=live, other=0.0)
        v = _block_totals(partial, cols, live, nblocks, c, UNROLL, BLOCK_C) / n.to(tl.float64)
        bad = live & ~(_finite(m) & _finite(v))
        if tl.max(bad.to(tl.int32), 0) > 0:
            m, v = _float64_statistics(x, n, c, cols, bad, m, v, UNROLL)
        momentum = _double(momentum_hi, momentum_lo)
        if HAS_RUNNING_MEAN:
            _blend(running_mean, cols, live, m, momentum)
        if HAS_RUNNING_VAR:
            nf = n.to(tl.float64)
            ratio = tl.where(n > 1, nf / (nf - 1), 1.0)
            _blend(running_var, cols, live, v * ratio, momentum)
    else:
        m = tl.load(running_mean + cols, mask=live, other=0.0).to(tl.float64)
        v = tl.load(running_var + cols, mask=live, other=0.0).to(tl.float64)
    if HAS_WEIGHT:
        gamma = tl.load(weight + cols, mask=live, other=1.0).to(tl.float64)
    else:
        gamma = tl.full([BLOCK_C], 1.0, tl.float64)
    if HAS_BIAS:
        beta = tl.load(bias + cols, mask=live, other=0.0).to(tl.float64)
    else:
        beta = tl.zeros([BLOCK_C], dtype=tl.float64)
    inv = 1.0 / tl.sqrt(v + _double(eps_hi, eps_lo))   # float64: sqrt.rn and div.rn, correctly rounded
    s = gamma * inv
    tl.store(mean + cols, m, mask=live)
    tl.store(invstd + cols, inv, mask=live)
    tl.store(scale + cols, s.to(T), mask=live)
    tl.store(shift + cols, (beta - m * s).to(T), mask=live)


@triton.jit(do_not_specialize=_SCALARS[:2])
def scale_shift_relu_kernel(x, scale, shift, y, n, c,
                            T: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_live = cols < c
    live = (rows < n)[:, None] & col_live[None, :]
    at = rows[:, None] * c + cols[None, :]
    s = tl.load(scale + cols, mask=col_live, other=0.0)[None, :]
    b = tl.load(shift + cols, mask=col_live, other=0.0)[None, :]
    z = _pre_relu(tl.load(x + at, mask=live, other=0.0).to(T), s, b).to(T)
    tl.store(y + at, _stored(tl.where(z < 0, 0.0, z), y), mask=live)


@triton.jit
def _backward_sums_step(acc_g, acc_gx, px, pdy, c, live, rows, s, b, m, inv, T: tl.constexpr,
                        UNROLL: tl.constexpr, MASKED: tl.constexpr):
    for i in tl.static_range(UNROLL):
        mask = live & (i < rows) if MASKED else live
        xv = tl.load(px, mask=mask, other=0.0).to(T)
        dyv = tl.load(pdy, mask=mask, other=0.0).to(T)
        g = tl.where(_pre_relu(xv, s, b) > 0, dyv, 0.0)
        gx = g * ((xv - m) * inv)
        if MASKED:
            g = tl.where(i < rows, g, -0.0)
            gx = tl.where(i < rows, gx, -0.0)
        acc_g += g
        acc_gx += gx
        px += c
        pdy += c
    return acc_g, acc_gx, px, pdy


@triton.jit(do_not_specialize=_SCALARS[:2])
def backward_sums_kernel(x, dy, scale, shift, mean, invstd, partial, n, c,
                         T: tl.constexpr, ROWS: tl.constexpr, UNROLL: tl.constexpr, BLOCK_C: tl.constexpr):
    # partial[block, 0, j] = sum g, partial[block, 1, j] = sum g * ((x - mean) * invstd), in T
    blk = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    live = cols < c
    s = tl.load(scale + cols, mask=live, other=0.0).to(tl.float64)
    b = tl.load(shift + cols, mask=live, other=0.0).to(tl.float64)
    m = tl.load(mean + cols, mask=live, other=0.0).to(T)
    inv = tl.load(invstd + cols, mask=live, other=0.0).to(T)
    rows = tl.minimum(blk * ROWS + ROWS, n) - blk * ROWS
    whole = rows // UNROLL * UNROLL
    px = x + blk * ROWS * c + cols
    pdy = dy + blk * ROWS * c + cols
    acc_g = tl.zeros([BLOCK_C], dtype=T)
    acc_gx = tl.zeros([BLOCK_C], dtype=T)
    for _ in range(0, whole, UNROLL):
        acc_g, acc_gx, px, pdy = _backward_sums_step(acc_g, acc_gx, px, pdy, c, live, UNROLL, s, b, m, inv, T,
                                                     UNROLL, False)
    if whole < rows:
        acc_g, acc_gx, px, pdy = _backward_sums_step(acc_g, acc_gx, px, pdy, c, live, rows - whole, s, b, m, inv, T,
                                                     UNROLL, True)
    tl.store(partial + blk * 2 * c + cols, acc_g.to(tl.float64), mask=live)
    tl.store(partial + blk * 2 * c + c + cols, acc_gx.to(tl.float64), mask=live)


@triton.jit(do_not_specialize=_SCALARS[:3])
def backward_coefficients_kernel(partial, invstd, weight, k, dgamma, dbeta, n, c, nblocks,
                                 T: tl.constexpr, BATCH_STATS: tl.constexpr, HAS_WEIGHT: tl.constexpr,
                                 UNROLL: tl.constexpr, BLOCK_C: tl.constexpr):
    # dbeta = sum g, dgamma = sum g * xhat (blocks in order, float64); k[0] = k_g, k[1] = k_x,
    # k[2] = k_0 in T: a = gamma * invstd, k_g = a, k_x = -a * invstd * dgamma / n, k_0 = -a * dbeta / n
    # (0 without batch statistics)
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    live = cols < c
    sum_g = _block_totals(partial, cols, live, nblocks, 2 * c, UNROLL, BLOCK_C)
    sum_gx = _block_totals(partial + c, cols, live, nblocks, 2 * c, UNROLL, BLOCK_C)
    inv = tl.load(invstd + cols, mask=live, other=0.0)
    if HAS_WEIGHT:
        gamma = tl.load(weight + cols, mask=live, other=1.0).to(tl.float64)
    else:
        gamma = tl.full([BLOCK_C], 1.0, tl.float64)
    a = gamma * inv
    nf = n.to(tl.float64)
    if BATCH_STATS:
        k_x = (-a * inv * sum_gx / nf).to(T)
        k_0 = (-a * sum_g / nf).to(T)
    else:
        k_x = tl.zeros([BLOCK_C], dtype=T)
        k_0 = tl.zeros([BLOCK_C], dtype=T)
    tl.store(k + cols, a.to(T), mask=live)
    tl.store(k + c + cols, k_x, mask=live)
    tl.store(k + 2 * c + cols, k_0, mask=live)
    tl.store(dgamma + cols, _rounded_for(sum_gx, dgamma), mask=live)
    tl.store(dbeta + cols, _rounded_for(sum_g, dbeta), mask=live)


@triton.jit(do_not_specialize=_SCALARS[:2])
def backward_dx_kernel(x, dy, scale, shift, mean, k, dx, n, c,
                       T: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_live = cols < c
    live = (rows < n)[:, None] & col_live[None, :]
    at = rows[:, None] * c + cols[None, :]
    s = tl.load(scale + cols, mask=col_live, other=0.0)[None, :]
    b = tl.load(shift + cols, mask=col_live, other=0.0)[None, :]
    m = tl.load(mean + cols, mask=col_live, other=0.0).to(T)[None, :]
    k_g = tl.load(k + cols, mask=col_live, other=0.0)[None, :]
    k_x = tl.load(k + c + cols, mask=col_live, other=0.0)[None, :]
    k_0 = tl.load(k + 2 * c + cols, mask=col_live, other=0.0)[None, :]
    xv = tl.load(x + at, mask=live, other=0.0).to(T)
    g = tl.where(_pre_relu(xv, s, b) > 0, tl.load(dy + at, mask=live, other=0.0).to(T), 0.0)
    # k_x is 0 with running statistics: the term vanishes then even for a NaN input (as on the CPU)
    centred = tl.where(k_x == 0, 0.0, k_x * (xv - m))
    tl.store(dx + at, _stored(k_g * g + centred + k_0, dx), mask=live)
