"""The training-step cost model of bench/ascend_step.py and the modelled mx_driving counters
(bench/ascend_mx_driving.py), on hand-built maps and records whose counts are computed by hand."""
import sys

import pytest
import torch

import ascend_ops as ao

sys.path.insert(0, str(ao.REPO))
from bench import ascend_mx_driving as mx  # noqa: E402
from bench.ascend_cost import MODEL, model_launch  # noqa: E402
from bench.ascend_step import BACKBONE, TORCH_OPS, breakdown, layer_times, step_time  # noqa: E402


def _subm_layer():
    # 4 voxels on a line along x, kernel 1x1x3: row i has i-1 (k=0), itself (k=1) and i+1 (k=2)
    nbr = torch.tensor([[-1, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, -1]], dtype=torch.int32)
    return dict(name="l", kind="subm", cin=16, cout=32, K=3, kernel=(1, 1, 3), nbr=nbr, nbr_t=nbr.flip(1),
                n_in=4, n_out=4, spatial_shape=[1, 1, 4])


def test_mx_driving_subm_forward_counts():
    """One core: centre Matmul + per upper pair 2 gather and 2 scatter DMAs, 2 Matmuls per tile."""
    L = _subm_layer()
    rec = mx.subm_forward(L, "Ascend910B2", aiv=1, esz=2)
    c = rec["cores"][0]
    upper = 3  # pairs (0,2) (1,2) (2,2): valid entries right of the centre
    assert c["dma_calls"] == 1 * 4 * (1 + 2 + 2) + 4 * upper          # (K-1)/2 offsets x 4 tiles x (column + copies)
    assert c["cube_flops"] == 2 * 4 * 16 * 32 + 2 * 2 * upper * 16 * 32
    assert c["matmul_calls"] == 1 + 1 * 4 * 2
    assert c["atomic_bytes"] == 2 * upper * 32 * 2
    assert rec["mode"] == "MIX_AIC_1_2" and rec["total"]["dma_calls"] == c["dma_calls"]


def test_mx_driving_backward_counts_split_over_cores():
    """Directed non-centre pairs: 2 gathers + 1 atomic scatter each; rows split big/small over cores."""
    L = _subm_layer()
    rec = mx.subm_backward(L, "Ascend910B2", aiv=2, esz=4)
    pairs = [1 + 2, 2 + 1]  # rows 0-1: (0,k2) (1,k0) (1,k2); rows 2-3: (2,k0) (2,k2) (3,k0)
    for c, p in zip(rec["cores"], pairs):
        assert c["atomic_bytes"] == p * 16 * 4
        assert c["cube_flops"] == 2 * 2 * 2 * 16 * 32 + 2 * 2 * p * 16 * 32
    assert mx.dense_map_bytes([41, 1600, 1408], (3, 3, 3), 2) == 4 * 2 * 43 * 1602 * 1410


def test_model_and_step_tabulation():
    """A launch record -> modelled time (pipes overlap, the HBM floor), a torch-op record -> bytes at
    full bandwidth plus launch time, and the sums per step / layer / kernel."""
    core = dict(core=0, gm_to_ub_bytes=0, ub_to_gm_bytes=0, ub_to_ub_bytes=0, dma_calls=15000, vector_instr=3000,
                vector_elems=0, cube_flops=0, matmul_calls=0, scalar_gm_get=0, scalar_gm_set=0, scalar_ub_get=0,
                scalar_ub_set=0, atomic_bytes=0, sync_all=0, scalar_blocks=750, vector_gather_instr=1000,
                matmul_gm_bytes=0)
    rec = dict(kernel="k", block_dim=1, mode="AIV_ONLY", soc="Ascend910B2", total=dict(core), cores=[core])
    m = model_launch(rec)
    f = MODEL["clock_hz"]
    assert m["critical_s"]["dma"] == pytest.approx(15000 * MODEL["dma_issue_cycles"] / f)
    assert m["critical_s"]["vector"] == pytest.approx((2000 * 256 / MODEL["vector_bytes_per_cycle"]
                                                       + 1000 * 256 / MODEL["gather_bytes_per_cycle"]) / f)
    assert m["critical_s"]["scalar"] == pytest.approx(750 * MODEL["scalar_block_cycles"] / f)
    assert m["bound_by"] == "dma" and m["time_s"] == m["critical_s"]["dma"]
    big = dict(core, gm_to_ub_bytes=10 ** 9)
    t_big = model_launch(dict(rec, cores=[big]))["time_s"]
    assert t_big == pytest.approx(10 ** 9 / MODEL["hbm_bytes_per_s"] + m["critical_s"]["dma"])  # bytes + issue
    torch_rec = dict(kernel="torch", torch_ops=2, bytes=3.2e6)
    rows = [dict(layer="a", phase="forward", records=[rec], torch=None),
            dict(layer="b", phase="map", records=[], torch=torch_rec)]
    t_torch = 3.2e6 / MODEL["hbm_bytes_per_s"] + 2 * TORCH_OPS["launch_s"]
    assert step_time(rows, "float16", MODEL) == pytest.approx(m["time_s"] + MODEL["kernel_launch_s"] + t_torch)
    assert layer_times(rows, "float16", MODEL)["b"] == pytest.approx(t_torch)
    agg = breakdown(rows, "float16", MODEL)
    assert agg["k"]["dma_calls"] == 15000 and agg["k"]["launches"] == 1 and agg["torch ops"]["time"] == pytest.approx(t_torch)
    assert [b[0] for b in BACKBONE][:2] == ["conv_input", "conv1"] and len(BACKBONE) == 12
