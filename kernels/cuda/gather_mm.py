"""The CUDA backend's compute primitives (host side): argument checks, tile choice, launches.

  gather_mm:                 out[m] = sum_k features[nbr[m, k]] @ weight[k]   (per group)
  gather_mm_backprop_filter: dW[k]  = sum_m features[nbr[m, k]]^T (x) grad[m]

The input gradient is gather_mm again (autograd, kernels/ops/autograd.cpp). Neither op syncs
with the host: a map entry outside [-1, rows) is reported by a device-side assertion
(launch.check_map_rows).
"""
import torch

from .. import _contract as op_args
from . import launch, tiles

# CUDA's limit on the second and third grid dimensions (Cout blocks x groups).
MAX_GRID_YZ = 65535


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _check_grid(programs: int, what: str) -> None:
    """A grid dimension other than the first (``what`` names the argument that sets it)."""
    if programs > MAX_GRID_YZ:
        raise ValueError(f"{what} need {programs} programs along a grid dimension; CUDA allows {MAX_GRID_YZ}")


def _check_int32(**sizes) -> None:
    """The kernels take their sizes as int32 scalars (the one compiled variant)."""
    for name, value in sizes.items():
        if value >= 2**31:
            raise ValueError(f"{name}: {value} elements or rows exceed the CUDA kernels' int32 sizes")


def gather_mm(features, weight, nbr, nbr_t, groups, symmetric=False):
    cin_g, cout_g = op_args.gather_mm_shapes(features, weight, nbr, nbr_t, groups)
    features, weight, nbr = launch.aligned(features), launch.aligned(weight), launch.aligned(nbr)
    m, kvol = nbr.shape
    n_in, cin, cout = features.shape[0], features.shape[1], weight.shape[2]
    _check_int32(features=n_in, nbr=m, weight=weight.numel())
    out = features.new_empty((m, cout))
    dtype = launch.operand_type(features.dtype)
    tile = tiles.gather_tile(dtype, kvol, cin_g, cout_g)
    _check_grid(groups, "groups")
    _check_grid(_cdiv(cout_g, tile.block_n), "weight: the output channels per group")
    grid = (_cdiv(m, tile.block_m), _cdiv(cout_g, tile.block_n), groups)
    launch.check_map_rows(nbr, "nbr", n_in)
    launch.run(launch.kernels().gather_mm_kernel, "gather_mm", dtype, tile.name(), grid, (features, weight, nbr, out),
               m, n_in, kvol, cin, cout, cin_g, cout_g,
               BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k,
               num_warps=tile.num_warps, num_stages=tile.num_stages, **launch.dot_constants(features.dtype))
    return out


def gather_mm_backprop_filter(features, grad, nbr, nbr_t, groups, symmetric=False):
    cin_g, cout_g = op_args.backprop_filter_shapes(features, grad, nbr, nbr_t, groups)
    features, grad, nbr = launch.aligned(features), launch.aligned(grad), launch.aligned(nbr)
    m, kvol = nbr.shape
    n_in, cin, cout = features.shape[0], features.shape[1], grad.shape[1]
    _check_int32(features=n_in, nbr=m, grad=kvol * cin_g * cout)   # grad: the size of its dW
    dtype = launch.operand_type(features.dtype)
    tile = tiles.filter_tile(dtype, kvol, cin_g, cout_g)
    blocks_k, blocks_n = _cdiv(kvol * cin_g, tile.block_k), _cdiv(cout_g, tile.block_n)
    _check_grid(groups * blocks_n, "groups x output-channel blocks")
    splits, split_rows = tiles.filter_splits(m, blocks_k, blocks_n, groups, tile.block_m)
    acc = torch.float64 if features.dtype == torch.float64 else torch.float32
    partial = torch.empty((splits, kvol, cin_g, cout), dtype=acc, device=features.device)
    launch.check_map_rows(nbr, "nbr", n_in)
    k = launch.kernels()
    launch.run(k.filter_splits_kernel, "gather_mm_backprop_filter", dtype, tile.name(),
               (blocks_k, groups * blocks_n, splits), (features, grad, nbr, partial),
               m, n_in, kvol, cin, cout, cin_g, cout_g, split_rows, blocks_n,
               BLOCK_M=tile.block_m, BLOCK_N=tile.block_n, BLOCK_K=tile.block_k,
               num_warps=tile.num_warps, num_stages=tile.num_stages, **launch.dot_constants(features.dtype))
    dw = features.new_empty((kvol, cin_g, cout))
    size = dw.numel()
    launch.run(k.sum_splits_kernel, "sum_splits", dtype, f"b{tiles.SUM_SPLITS_BLOCK}",
               (_cdiv(size, tiles.SUM_SPLITS_BLOCK),), (partial, dw), splits, size, BLOCK=tiles.SUM_SPLITS_BLOCK)
    return dw
