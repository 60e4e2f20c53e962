"""Fixtures of the AscendC kernel tests (emulator): one CLI binary per session, shared scenes."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ascend_ops  # noqa: E402



@pytest.fixture(scope="session")
def ops_bin():
    return ascend_ops.build("ops_cli", ascend_ops.OPS_SOURCES)


def _crop_kitti():
    from mx_sparse import synthetic
    b = synthetic.make_batch("kitti")
    ind = b["indices"]
    # a 41 x 80 x 80 window of the scene near the sensor: 2839 voxels (road, car, pole)
    y0, x0 = 750, 20
    keep = (ind[:, 2] >= y0) & (ind[:, 2] < y0 + 80) & (ind[:, 3] >= x0) & (ind[:, 3] < x0 + 80)
    ind = ind[keep].clone()
    ind[:, 2] -= y0
    ind[:, 3] -= x0
    return ind.contiguous(), [41, 80, 80]


def _random_scene(n, shape, batch, seed):
    g = torch.Generator().manual_seed(seed)
    cells = batch * shape[0] * shape[1] * shape[2]
    keys = torch.randperm(cells, generator=g)[:n].sort().values
    x = keys % shape[2]
    y = (keys // shape[2]) % shape[1]
    z = (keys // (shape[2] * shape[1])) % shape[0]
    b = keys // (shape[2] * shape[1] * shape[0])
    return torch.stack([b, z, y, x], 1).int().contiguous(), shape


@pytest.fixture(scope="session")
def scenes():
    """name -> (indices [N,4] int32, spatial_shape, batch_size)."""
    kitti, kshape = _crop_kitti()
    rnd, rshape = _random_scene(1200, [24, 40, 40], 2, 3)
    return {"kitti_crop": (kitti, kshape, 1), "random_b2": (rnd, rshape, 2)}
