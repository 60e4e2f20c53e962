"""Max and average pooling over a neighbor map (contract: kernels/schema/schema.cpp, CPU kernels in
kernels/cpu/sparse_pool_cpu.cpp), from torch's operators, device-neutral: registered for CUDA
(and for CPU tensors under MXS_CUDA_ON_CPU=1).

The window is walked one kernel offset at a time: each step gathers one [M, C] slice and folds
it into the running max (or sum), so memory stays a few [M, C] tensors instead of the [M, K, C]
window tensor a single gather would make. No host synchronisation: rows a map does not have are
routed to a spare row that is dropped, instead of being selected out. The backward's scatter-add
runs in whatever order the device's atomics take (on CUDA not bitwise reproducible between runs,
as torch's own index_add_ is not).
"""
import torch

from . import index_checks, op_args   # the argument checks of the CPU kernels (kernels/contract/pool_args.h)


def _assert_entries(t, lo, hi, name):
    """Every entry of ``t`` in [lo, hi): a device-side assertion (no host read; on CPU tensors it
    raises at once), as the gathers check their maps."""
    if t.numel():
        low, high = torch.aminmax(t)
        torch._assert_async((low >= lo) & (high < hi), f"{name}: expected entries in [{lo}, {hi})")


def _opmath(dtype):
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def sparse_max_pool(features, nbr):
    op_args.pool_operands(features, nbr)
    index_checks.check_pool_map(nbr, features.shape[0])
    m, c = nbr.shape[0], features.shape[1]
    out = features.new_zeros((m, c))
    argmax = torch.full((m, c), -1, dtype=op_args.pool_offset_dtype(nbr.shape[1]), device=features.device)
    if features.shape[0] == 0:   # no inputs: every window is empty (every entry is -1)
        return out, argmax
    for j in range(nbr.shape[1]):
        rows = nbr[:, j]
        valid = (rows >= 0)[:, None]
        cand = features.index_select(0, rows.clamp(min=0).long())
        # the first input of a window, then strictly greater (first on ties), and a NaN over a number
        take = valid & ((argmax < 0) | (cand > out) | (cand.isnan() & ~out.isnan()))
        out = torch.where(take, cand, out)
        argmax = torch.where(take, j, argmax)
    return out, argmax


def sparse_max_pool_backward(grad, argmax, nbr, num_rows):
    op_args.pool_backward_operands(grad, argmax, nbr, num_rows)
    index_checks.check_pool_map(nbr, num_rows)
    _assert_entries(argmax, -1, nbr.shape[1], "argmax")
    c = grad.shape[1]
    rows = nbr.long().gather(1, argmax.long().clamp(min=0))          # [M, C] input row of each max
    if rows.numel():   # an offset whose map entry is absent names no input row
        torch._assert_async(((argmax < 0) | (rows >= 0)).all(), "argmax: an offset names an absent neighbour")
    target = torch.where((argmax >= 0) & (rows >= 0), rows, num_rows)  # else the spare row num_rows
    dx = grad.new_zeros((num_rows + 1, c))
    dx.scatter_add_(0, target, grad)
    return dx[:num_rows].contiguous()


def sparse_avg_pool(features, nbr):
    op_args.pool_operands(features, nbr)
    index_checks.check_pool_map(nbr, features.shape[0])
    m, c = nbr.shape[0], features.shape[1]
    acc = torch.zeros((m, c), dtype=_opmath(features.dtype), device=features.device)
    for j in range(nbr.shape[1] if features.shape[0] else 0):   # no inputs: every window is empty
        rows = nbr[:, j]
        cand = features.index_select(0, rows.clamp(min=0).long()).to(acc.dtype)
        acc = acc + torch.where((rows >= 0)[:, None], cand, 0)
    count = (nbr >= 0).sum(1, keepdim=True).clamp(min=1).to(acc.dtype)
    return (acc / count).to(features.dtype)


def sparse_avg_pool_backward(grad, nbr, num_rows):
    op_args.pool_backward_operands(grad, None, nbr, num_rows)
    index_checks.check_pool_map(nbr, num_rows)
    count = (nbr >= 0).sum(1, keepdim=True).clamp(min=1)
    share = grad.to(_opmath(grad.dtype)) / count.to(_opmath(grad.dtype))
    dx = torch.zeros((num_rows + 1, grad.shape[1]), dtype=share.dtype, device=grad.device)
    for j in range(nbr.shape[1]):
        rows = nbr[:, j]
        dx.index_add_(0, torch.where(rows >= 0, rows, num_rows).long(), share)
    return dx[:num_rows].to(grad.dtype).contiguous()
