"""Strided-conv neighbour map: host torch ops (output candidates, unique/sort of int64 output keys)
+ the AscendC sorted-key lookup kernel (emulator, strict). Output coordinates and map must equal
the CPU backend's exactly."""
import pytest
import torch

import ascend_ops as ao
import mx_sparse.functional as F
from ascend_ops import CORE_CONFIGS


def _check(ops_bin, ind, shape, batch, ks, st, pd, dl, tmp_path, env):
    ro, rn = F.build_conv_map(ind, shape, batch, ks, st, pd, dl)
    go, gn, info = ao.conv_map(ops_bin, ind, shape, batch, ks, st, pd, dl, tmp_path, env)
    assert info["ub_bytes"] <= 196608
    assert torch.equal(go, ro)
    assert torch.equal(gn, rn)


@pytest.mark.parametrize("cores", list(CORE_CONFIGS))
@pytest.mark.parametrize("scene", ["kitti_crop", "random_b2"])
def test_conv_map_equals_cpu(ops_bin, scenes, tmp_path, cores, scene):
    ind, shape, batch = scenes[scene]
    ind = ind[torch.randperm(ind.shape[0], generator=torch.Generator().manual_seed(5))].contiguous()
    _check(ops_bin, ind, shape, batch, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], tmp_path,
           ao.sim_env(**CORE_CONFIGS[cores]))


@pytest.mark.parametrize("ks,st,pd,dl", [([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1]),
                                         ([3, 3, 3], [1, 1, 1], [0, 0, 0], [1, 1, 1]),
                                         ([3, 1, 5], [2, 1, 3], [1, 0, 2], [1, 1, 2]),
                                         ([3, 3, 3], [3, 3, 3], [2, 2, 2], [2, 2, 2]),
                                         ([5, 5, 5], [2, 2, 2], [2, 2, 2], [1, 1, 1])])
def test_conv_map_geometries(ops_bin, scenes, tmp_path, ks, st, pd, dl):
    ind, shape, batch = scenes["random_b2"]
    _check(ops_bin, ind, shape, batch, ks, st, pd, dl, tmp_path, ao.sim_env(aic=3))


def test_conv_map_int64_keys(ops_bin, tmp_path):
    """Input keys beyond 2^31 (3 x 900 x 90000 x 90000 grid): exact."""
    g = torch.Generator().manual_seed(2)
    n = 300
    c = torch.stack([torch.randint(0, 3, (n,), generator=g), torch.randint(0, 900, (n,), generator=g),
                     torch.randint(0, 90000, (n,), generator=g), torch.randint(0, 90000, (n,), generator=g)], 1)
    c2 = c.clone()
    c2[:, 3] = (c2[:, 3] + 1).clamp(max=89999)
    ind = torch.unique(torch.cat([c, c2]), dim=0)
    ind = ind[torch.randperm(ind.shape[0], generator=g)].int().contiguous()
    _check(ops_bin, ind, [900, 90000, 90000], 3, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], tmp_path,
           ao.sim_env(aic=3))
