"""Modelled counters of mx_driving's sparse-convolution kernels (DrivingSDK), for bench/ascend_step.py.

The algorithm is modelled from reading DrivingSDK's AscendC sources (facts only, no code): for every
layer we count what its kernels would issue per AI core -- DMAs, bytes, scalar reads and loop
iterations, Cube FLOPs and Matmul calls -- and return launch records in the emulator's
ASCEND_SIM_STATS format, so that they go through the same cost model (bench/ascend_cost.py) as our
kernels' measured counters. THESE ARE MODELLED COUNTS OF A READ ALGORITHM, NOT MEASUREMENTS.

What is modelled (DrivingSDK kernels/, op_host/ tiling and mx_driving/ops/sparse_functional.py):

* Submanifold map (SubMConvFunction.forward without indices_offset, `generate_map`): a dense int32
  volume over the padded grid (B*D*H*W entries, torch.full) with the voxel rows scattered into it
  (index_put), then, inside subm_sparse_conv3d_v3 (ComputeIndicesOffset), per voxel k0 strided
  DataCopyPad of k1 rows of k2 map entries, and per tile a vector Gather to transpose the [tile, K]
  entries plus one DMA of the offsets. Charged once per indice_key.
* Submanifold forward (subm_sparse_conv3d_v3): the centre offset as one Matmul over the core's
  rows; for each of the (K-1)/2 offsets above the centre and each of the core's 4 row tiles
  (stage2SingleLoopTask = rows / 4): one DMA of the offset column + CompareScalar; per valid pair
  two row DMAs (the neighbour's and the voxel's feature row, each pair serves k and its mirror),
  a scalar loop iteration over the bitmap (ScalarGetSFFValue, GetValue, buffer bookkeeping), two
  Matmul calls (mm0/mm1) per tile, then per valid pair two atomic-add row DMAs of the results.
* Submanifold backward (subm_sparse_conv3d_grad_v2): centre feature and weight Matmuls; for each
  non-centre offset: per valid pair two gather DMAs (grad row, feature row) and a scalar iteration,
  copies of the gathered batch, two Matmuls (weight and feature gradient) per batch, then per valid
  pair one atomic-add DMA of the feature gradient.
* Strided-conv map (sparse_conv3d kernel + unique_voxel): per input voxel a scalar loop over the
  output positions each axis reaches (SetValue of the output index and the 4-int pair), the
  [N, K] outputs written by two DMAs per tile; then a sort of the N*K keys and their unique (the
  same modelled torch sort as ours).
* Strided-conv forward (sparse_matmul): per output row k0*k1 zero-fill DMAs of its img2col row, per
  valid pair one gather DMA into UB and one DMA into the img2col row; a dense [rows, K*Cin] @ W
  Matmul per tile of rows.
* Strided-conv backward (sparse_conv3d_grad): per valid pair two gather DMAs and scalar reads of
  the sorted pair lists, two Matmuls per offset and core, per valid pair one atomic-add DMA.

Scalar work per loop iteration is counted the way the emulator counts ours (basic blocks: one per
branch/loop test, ~one per API call issued, MX_SCALAR below); those per-iteration numbers are
estimates from the loop bodies (labelled assumptions, not measured).
"""
import math

import torch

# Scalar work per loop iteration (basic blocks, UB scalar reads), estimated from the loop bodies.
MX_SCALAR = {
    "map_voxel_blocks": 14,      # ComputeValidPositionOneMap: per voxel 2 GetValue, k0 iterations of a DataCopyPad call
    "map_voxel_ub_reads": 2,
    "gather_pair_blocks": 8,     # GatherFeature: SFF scan, GetValue, 2 DataCopyPad, modulo bookkeeping, loop test
    "gather_pair_ub_reads": 1,
    "scatter_pair_blocks": 9,    # ScatterAdd: SFF scan, GetValue, SetAtomicAdd, 2 DataCopyPad, SetAtomicNone, bookkeeping
    "scatter_pair_ub_reads": 1,
    "bwd_pair_blocks": 7,        # grad v2 getSparseIndices: GetValue, branch, 2 DataCopyPad, batch bookkeeping
    "bwd_pair_ub_reads": 1,
    "bwd_scatter_blocks": 5,     # scatterAddSparseFeatures: GetValue, SetAtomicAdd, DataCopyPad, SetAtomicNone, loop
    "conv_map_voxel_blocks": 12, # sparse_conv3d: 4 GetValue, range arithmetic per axis
    "conv_map_pair_blocks": 8,   # per reached output: index arithmetic, 5 SetValue
    "conv_fwd_pair_blocks": 7,   # sparse_matmul CopyFeatures: GetValue, div/mod, 2 DataCopyPad, buffer index
    "conv_fwd_pair_ub_reads": 2,
    "conv_bwd_pair_blocks": 9,   # sparse_conv3d_grad: start/end/sorted reads, 2 DataCopyPad, bookkeeping
    "conv_bwd_pair_ub_reads": 3,
    "tile_blocks": 30,           # per tile and offset: copies, flags, CompareScalar, Matmul set-up
}
MATMUL_ROWS_PER_TILE = 64        # sparse_matmul: output rows per img2col Matmul (matmulTaskPerIter, assumption)
BWD_BATCH = 1024                 # grad kernels: pairs gathered per Matmul batch (ubMaxTaskNum, assumption)


def _empty(core):
    return {"core": core, "gm_to_ub_bytes": 0, "ub_to_gm_bytes": 0, "ub_to_ub_bytes": 0, "dma_calls": 0,
            "vector_instr": 0, "vector_elems": 0, "cube_flops": 0, "matmul_calls": 0, "scalar_gm_get": 0,
            "scalar_gm_set": 0, "scalar_ub_get": 0, "scalar_ub_set": 0, "atomic_bytes": 0, "sync_all": 0,
            "scalar_blocks": 0, "vector_gather_instr": 0, "matmul_gm_bytes": 0}


def _record(kernel, cores, soc, mix):
    total = _empty(-1)
    del total["core"]
    for c in cores:
        for k, v in c.items():
            if k != "core":
                total[k] += v
    n_aic = (len(cores) + 1) // 2 if mix else len(cores)
    return {"kernel": kernel, "block_dim": n_aic, "mode": "MIX_AIC_1_2" if mix else "AIV_ONLY", "soc": soc,
            "total": total, "cores": cores}


def _split(n, parts):
    """Big/small contiguous split (DrivingSDK's bigCoreCount/coreTaskCount): [(begin, end)]."""
    base, extra = divmod(n, parts)
    out, b = [], 0
    for p in range(parts):
        e = b + base + (1 if p < extra else 0)
        out.append((b, e))
        b = e
    return out


def _row_pairs(nbr, cols):
    """Valid entries per row among the given map columns (int64 [M])."""
    if len(cols) == 0 or nbr.shape[0] == 0:
        return torch.zeros(nbr.shape[0], dtype=torch.int64)
    return (nbr[:, cols] >= 0).sum(1).to(torch.int64)


def dense_map_bytes(spatial_shape, kernel, batch):
    """torch.full of the padded dense volume (int32), written once."""
    vol = batch
    for s, k in zip(spatial_shape, kernel):
        vol *= s + 2 * (k // 2)
    return 4 * vol


def subm_map(layer, soc, aiv):
    """Per-voxel dense-volume lookups of subm_sparse_conv3d_v3 stage 1 (the torch full/index_put
    part is returned separately by dense_map_bytes)."""
    n, K = layer["n_out"], layer["K"]
    k0 = layer["kernel"][0]
    k1, k2 = layer["kernel"][1], layer["kernel"][2]
    cores = []
    tile = 128
    for c, (b, e) in enumerate(_split(n, aiv)):
        r = e - b
        s = _empty(c)
        tiles = math.ceil(r / tile) if r else 0
        s["dma_calls"] = tiles * 2 + r * k0
        s["gm_to_ub_bytes"] = r * 16 + r * k0 * k1 * k2 * 4
        s["ub_to_gm_bytes"] = r * K * 4
        s["vector_instr"] = tiles * (4 + 4 + math.ceil(K * tile * 4 / 256) * 2)
        s["vector_gather_instr"] = tiles * math.ceil(K * tile * 4 / 256)
        s["scalar_ub_get"] = r * MX_SCALAR["map_voxel_ub_reads"]
        s["scalar_blocks"] = r * MX_SCALAR["map_voxel_blocks"] + tiles * MX_SCALAR["tile_blocks"]
        cores.append(s)
    return _record("mx_subm_map", cores, soc, False)


def subm_forward(layer, soc, aiv, esz):
    nbr, K, cin, cout = layer["nbr"], layer["K"], layer["cin"], layer["cout"]
    n = nbr.shape[0]
    centre = K // 2
    upper = _row_pairs(nbr, list(range(centre + 1, K)))
    cores = []
    for c, (b, e) in enumerate(_split(n, aiv)):
        r, u = e - b, int(upper[b:e].sum())
        s = _empty(c)
        tiles = 4 if r else 0
        ks = K - centre - 1
        s["cube_flops"] = 2 * r * cin * cout + 2 * 2 * u * cin * cout
        s["matmul_calls"] = (1 if r else 0) + ks * tiles * 2
        s["matmul_gm_bytes"] = r * (cin + 2 * cout) * esz + 2 * u * (cin + cout) * esz + (ks + 1) * cin * cout * esz
        s["dma_calls"] = ks * tiles * (1 + 2 + 2) + 2 * u + 2 * u
        s["gm_to_ub_bytes"] = ks * r * 4 + 2 * u * cin * esz + 2 * u * cout * esz
        s["ub_to_gm_bytes"] = 2 * u * cin * esz + 2 * u * cout * esz
        s["atomic_bytes"] = 2 * u * cout * esz
        s["vector_instr"] = ks * tiles * max(1, math.ceil(r / tiles * 4 / 256)) if r else 0
        s["scalar_ub_get"] = u * (MX_SCALAR["gather_pair_ub_reads"] + MX_SCALAR["scatter_pair_ub_reads"]) + ks * math.ceil(r / 64) * 2
        s["scalar_blocks"] = u * (MX_SCALAR["gather_pair_blocks"] + MX_SCALAR["scatter_pair_blocks"]) + ks * tiles * MX_SCALAR["tile_blocks"]
        cores.append(s)
    return _record("mx_subm_forward", cores, soc, True)


def _pair_backward(kernel, layer, soc, aiv, esz, pair_blocks, pair_reads, centre_rows):
    """Backward of both conv kinds: per non-centre offset, pairs gathered (grad row + feature row),
    two Matmuls per batch, one atomic-add DMA of the feature gradient per pair."""
    nbr, K, cin, cout = layer["nbr"], layer["K"], layer["cin"], layer["cout"]
    n = nbr.shape[0]
    cols = [k for k in range(K) if not (centre_rows and k == K // 2)]
    per_row = [(nbr[:, k] >= 0).to(torch.int64) for k in cols]
    cores = []
    for c, (b, e) in enumerate(_split(n, aiv)):
        r = e - b
        s = _empty(c)
        pairs_k = [int(v[b:e].sum()) for v in per_row]
        p = sum(pairs_k)
        batches = sum(math.ceil(x / BWD_BATCH) for x in pairs_k)
        if centre_rows and r:
            s["cube_flops"] += 2 * 2 * r * cin * cout
            s["matmul_calls"] += 2
            s["matmul_gm_bytes"] += r * (cin + cout) * esz * 2
        s["cube_flops"] += 2 * 2 * p * cin * cout
        s["matmul_calls"] += 2 * batches
        s["matmul_gm_bytes"] += 2 * p * (cin + cout) * esz + p * cin * esz
        s["dma_calls"] += len(cols) * math.ceil(r / 1024) + 2 * p + 3 * batches + p + 2 * batches
        s["gm_to_ub_bytes"] += len(cols) * r * 4 + p * (cin + cout) * esz + p * cin * esz
        s["ub_to_gm_bytes"] += p * (cin + cout) * esz + p * 4 + p * cin * esz
        s["atomic_bytes"] += p * cin * esz
        s["scalar_ub_get"] += p * (pair_reads + 1)
        s["scalar_blocks"] += p * (pair_blocks + MX_SCALAR["bwd_scatter_blocks"]) + len(cols) * MX_SCALAR["tile_blocks"]
        cores.append(s)
    return _record(kernel, cores, soc, True)


def subm_backward(layer, soc, aiv, esz):
    return _pair_backward("mx_subm_backward", layer, soc, aiv, esz, MX_SCALAR["bwd_pair_blocks"],
                          MX_SCALAR["bwd_pair_ub_reads"], True)


def conv_map(layer, soc, aiv):
    """sparse_conv3d: per input voxel, the output positions each axis reaches (scalar loops)."""
    nbr_t = layer["nbr_t"]       # [N_in, K]: valid entries = (input, offset) pairs reaching an output
    n_in, K = nbr_t.shape
    reach = _row_pairs(nbr_t, list(range(K)))
    cores = []
    tile = 128
    for c, (b, e) in enumerate(_split(n_in, aiv)):
        r, p = e - b, int(reach[b:e].sum())
        s = _empty(c)
        tiles = math.ceil(r / tile) if r else 0
        s["dma_calls"] = 3 * tiles
        s["gm_to_ub_bytes"] = r * 16
        s["ub_to_gm_bytes"] = r * K * 4 * 5
        s["vector_instr"] = tiles * math.ceil(tile * K * 4 * 5 / 256)
        s["scalar_ub_get"] = 4 * r
        s["scalar_ub_set"] = 5 * p
        s["scalar_blocks"] = r * MX_SCALAR["conv_map_voxel_blocks"] + p * MX_SCALAR["conv_map_pair_blocks"]
        cores.append(s)
    return _record("mx_conv_map", cores, soc, False)


def conv_forward(layer, soc, aiv, esz):
    nbr, K, cin, cout = layer["nbr"], layer["K"], layer["cin"], layer["cout"]
    k0, k1 = layer["kernel"][0], layer["kernel"][1]
    m = nbr.shape[0]
    pairs = _row_pairs(nbr, list(range(K)))
    cores = []
    for c, (b, e) in enumerate(_split(m, aiv)):
        r, p = e - b, int(pairs[b:e].sum())
        s = _empty(c)
        tiles = math.ceil(r / MATMUL_ROWS_PER_TILE) if r else 0
        s["dma_calls"] = r * k0 * k1 + 2 * p + 2 * tiles
        s["gm_to_ub_bytes"] = p * cin * esz + tiles * MATMUL_ROWS_PER_TILE * 8
        s["ub_to_gm_bytes"] = r * K * cin * esz + p * cin * esz
        s["cube_flops"] = 2 * r * K * cin * cout
        s["matmul_calls"] = tiles
        s["matmul_gm_bytes"] = r * K * cin * esz + K * cin * cout * esz * tiles + r * cout * esz
        s["scalar_ub_get"] = p * MX_SCALAR["conv_fwd_pair_ub_reads"] + 2 * r
        s["scalar_blocks"] = p * MX_SCALAR["conv_fwd_pair_blocks"] + r * (k0 * k1 + 4)
        cores.append(s)
    return _record("mx_conv_forward", cores, soc, True)


def conv_backward(layer, soc, aiv, esz):
    return _pair_backward("mx_conv_backward", layer, soc, aiv, esz, MX_SCALAR["conv_bwd_pair_blocks"],
                          MX_SCALAR["conv_bwd_pair_ub_reads"], False)
