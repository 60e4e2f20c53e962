"""Submanifold neighbor-map AscendC kernel (emulator, strict mode): the map must equal the CPU
backend's exactly, at every core count, for LiDAR scenes, multi-batch random scenes, kernel
sizes 1/3/5 (K <= 125), dilation, unsorted input order and grids whose keys need int64."""
import pytest
import torch

import ascend_ops as ao
import mx_sparse.functional as F
from ascend_ops import CORE_CONFIGS


@pytest.mark.parametrize("cores", list(CORE_CONFIGS))
@pytest.mark.parametrize("scene", ["kitti_crop", "random_b2"])
def test_subm_map_equals_cpu(ops_bin, scenes, tmp_path, cores, scene):
    ind, shape, batch = scenes[scene]
    # shuffled row order: the map is in input order, the kernel works in sorted-key order
    perm = torch.randperm(ind.shape[0], generator=torch.Generator().manual_seed(3))
    ind = ind[perm].contiguous()
    ref = F.build_subm_map(ind, shape, batch, [3, 3, 3], [1, 1, 1])
    got, info = ao.subm_map(ops_bin, ind, shape, batch, [3, 3, 3], tmp_path, ao.sim_env(**CORE_CONFIGS[cores]))
    assert info["ub_bytes"] <= 196608
    assert torch.equal(got, ref)


@pytest.mark.parametrize("ks,dil", [([1, 1, 1], [1, 1, 1]), ([5, 5, 5], [1, 1, 1]), ([3, 1, 5], [2, 1, 3]),
                                    ([3, 3, 3], [2, 2, 2])])
def test_subm_map_kernel_sizes_and_dilation(ops_bin, scenes, tmp_path, ks, dil):
    ind, shape, batch = scenes["random_b2"]
    ref = F.build_subm_map(ind, shape, batch, ks, dil)
    got, _ = ao.subm_map(ops_bin, ind, shape, batch, ks, tmp_path, ao.sim_env(aic=3), dilation=dil)
    assert torch.equal(got, ref)


def test_subm_map_int64_keys(ops_bin, tmp_path):
    """3 x 900 x 90000 x 90000 grid: keys reach 2.2e13 and one tile spans far more than 2^30 keys,
    which forces the kernel's tile bisection down to single queries; still exact."""
    g = torch.Generator().manual_seed(1)
    n = 300
    c = torch.stack([torch.randint(0, 3, (n,), generator=g), torch.randint(0, 900, (n,), generator=g),
                     torch.randint(0, 90000, (n,), generator=g), torch.randint(0, 90000, (n,), generator=g)], 1)
    c2 = c.clone()
    c2[:, 3] = (c2[:, 3] + 1).clamp(max=89999)
    c3 = c.clone()
    c3[:, 1] = (c3[:, 1] + 2).clamp(max=899)
    ind = torch.unique(torch.cat([c, c2, c3]), dim=0)
    ind = ind[torch.randperm(ind.shape[0], generator=g)].int().contiguous()
    shape = [900, 90000, 90000]
    ref = F.build_subm_map(ind, shape, 3, [3, 3, 3], [2, 1, 1])
    assert (ref >= 0).sum() > ind.shape[0]  # real matches besides the centre
    got, _ = ao.subm_map(ops_bin, ind, shape, 3, [3, 3, 3], tmp_path, ao.sim_env(aic=3), dilation=[2, 1, 1])
    assert torch.equal(got, ref)


def test_subm_map_small_and_empty(ops_bin, tmp_path):
    env = ao.sim_env(soc="Ascend910B2")
    ind = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 2], [1, 1, 1, 1], [0, 2, 2, 2]], dtype=torch.int32)
    ref = F.build_subm_map(ind, [4, 4, 4], 2, [3, 3, 3], [1, 1, 1])
    got, info = ao.subm_map(ops_bin, ind, [4, 4, 4], 2, [3, 3, 3], tmp_path / "s", env)
    assert info["used_aiv"] == 1 and torch.equal(got, ref)
    empty = torch.zeros(0, 4, dtype=torch.int32)
    got, _ = ao.subm_map(ops_bin, empty, [4, 4, 4], 1, [3, 3, 3], tmp_path / "e", env)
    assert got.shape == (0, 27)
