"""Strided-conv output keys on the AscendC side (emulator, strict): ConvOutKeys (candidate key of every
(input, slot) pair: the slot layout of _conv_out_keys), torch sort, UniqueSortedKeys (dense sorted
unique keys), then the existing lookup kernel. Each kernel is compared with an independent torch
formulation, and the final output coordinates and map with the CPU backend's build_conv_map, exactly."""
import itertools

import pytest
import torch

import ascend_ops as ao
import mx_sparse.functional as F
from ascend_ops import CORE_CONFIGS

SENTINEL = torch.iinfo(torch.int64).max
UB = 196608


def _axis_slots(c, k, s, p, dl, extent):
    """Brute force along one axis: the j-th kernel position kp (ascending) with c + p - kp*dl a
    multiple of s is slot j. Returns (o [N, J_d], valid [N, J_d]) for J_d = ao.axis_slot_count."""
    j_d = ao.axis_slot_count(k, s, dl)
    o = torch.zeros(c.shape[0], j_d, dtype=torch.int64)
    valid = torch.zeros(c.shape[0], j_d, dtype=torch.bool)
    for n, ci in enumerate(c.tolist()):
        hits = [kp for kp in range(k) if (ci + p - kp * dl) % s == 0]
        assert len(hits) <= j_d
        for j, kp in enumerate(hits):
            o[n, j] = (ci + p - kp * dl) // s
            valid[n, j] = 0 <= o[n, j] < extent
    return o, valid


def reference_candidates(ind, shape, ks, st, pd, dl):
    """Slot-major [J * N] output keys (row-major on the output grid) or SENTINEL, slot j = the
    row-major multi-index of the axis slots (last axis fastest), in plain torch int64."""
    nd = len(shape)
    out = [ao.conv_out_extent(shape[d], ks[d], st[d], pd[d], dl[d]) for d in range(nd)]
    idx = ind.long()
    axes = [_axis_slots(idx[:, 1 + d], ks[d], st[d], pd[d], dl[d], out[d]) for d in range(nd)]
    columns = []
    for js in itertools.product(*[range(o.shape[1]) for o, _ in axes]):
        key, ok = idx[:, 0].clone(), torch.ones(idx.shape[0], dtype=torch.bool)
        for d, j in enumerate(js):
            key = key * out[d] + axes[d][0][:, j]
            ok &= axes[d][1][:, j]
        columns.append(torch.where(ok, key, torch.full_like(key, SENTINEL)))
    return torch.stack(columns).reshape(-1) if columns else torch.zeros(0, dtype=torch.int64)


def reference_k_major(ind, shape, ks, st, pd, dl):
    """The k-major [K * N] layout (entry [k, n]: through kernel offset k), which the slot layout equals
    at stride 1."""
    nd = len(shape)
    out = [ao.conv_out_extent(shape[d], ks[d], st[d], pd[d], dl[d]) for d in range(nd)]
    idx = ind.long()
    kp = torch.stack(torch.meshgrid(*[torch.arange(k) for k in ks], indexing="ij"), -1).reshape(-1, nd)
    num = idx[:, None, 1:] + torch.tensor(pd) - kp[None] * torch.tensor(dl)  # [N, K, nd]
    s = torch.tensor(st)
    o = torch.div(num, s, rounding_mode="floor")
    ok = ((num >= 0) & (num % s == 0) & (o < torch.tensor(out))).all(-1)
    key = idx[:, None, 0].expand(-1, kp.shape[0])
    for d in range(nd):
        key = key * out[d] + o[..., d]
    return torch.where(ok, key, torch.full_like(key, SENTINEL)).t().reshape(-1)


def reference_unique(sorted_keys):
    return torch.unique(sorted_keys[sorted_keys != SENTINEL])


def check_pipeline(ops_bin, ind, shape, batch, geo, tmp_path, env):
    """conv_map runs ConvOutKeys -> torch sort -> UniqueSortedKeys -> lookup; each stage is checked."""
    ks, st, pd, dl = geo
    go, gn, info = ao.conv_map(ops_bin, ind, shape, batch, ks, st, pd, dl, tmp_path, env)
    cinfo, uinfo = info["cand"], info["unique"]
    ref_cand = reference_candidates(ind, shape, ks, st, pd, dl)
    assert torch.equal(cinfo["keys"], ref_cand)
    assert torch.equal(uinfo["keys"], reference_unique(ref_cand))
    ro, rn = F.build_conv_map(ind, shape, batch, ks, st, pd, dl)
    assert torch.equal(go, ro) and torch.equal(gn, rn)
    assert max(cinfo["ub_bytes"], uinfo["ub_bytes"], info["ub_bytes"]) <= UB
    return cinfo, uinfo


# test_conv_map.py runs the same pipeline with k3 s2 p1 and other geometries; these add to them
GEO_S2 = ([3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
GEO_S211 = ([3, 3, 3], [2, 1, 1], [1, 0, 1], [1, 2, 1])
GEO_K2_S2_P1 = ([2, 2, 2], [2, 2, 2], [1, 1, 1], [1, 1, 1])


@pytest.mark.parametrize("cores", list(CORE_CONFIGS))
@pytest.mark.parametrize("scene,geo", [("kitti_crop", GEO_S211), ("random_b2", GEO_K2_S2_P1)], ids=["kitti-s211", "rnd-k2s2"])
def test_pipeline_equals_cpu(ops_bin, scenes, tmp_path, cores, scene, geo):
    ind, shape, batch = scenes[scene]
    ind = ind[torch.randperm(ind.shape[0], generator=torch.Generator().manual_seed(11))].contiguous()
    check_pipeline(ops_bin, ind, shape, batch, geo, tmp_path, ao.sim_env(**CORE_CONFIGS[cores]))


@pytest.mark.parametrize("geo", [([3, 3, 3], [1, 1, 1], [1, 1, 1], [2, 2, 2]),
                                 ([3, 3, 3], [2, 2, 2], [0, 0, 0], [2, 2, 2]),
                                 ([2, 2, 2], [1, 2, 2], [1, 0, 0], [1, 1, 1]),
                                 ([3, 2, 3], [1, 2, 2], [1, 1, 1], [2, 1, 1])],
                         ids=["k3s1p1d2", "k3s2p0d2", "k2s122", "k323s122d2"])
def test_geometries(ops_bin, scenes, tmp_path, geo):
    ind, shape, batch = scenes["random_b2"]
    check_pipeline(ops_bin, ind, shape, batch, geo, tmp_path, ao.sim_env(aic=3, seed=5))


# gcd(s, dil) > 1 and residue classes that need the candidate search (dil > 1, s/gcd > 1):
# k5 s4 d2 (step 2, 3 slots), k3 s3 d3 (step 1: every position or none), k4 s2 d1 (2 slots);
# k3 s2 d3 (step 2, odd dilation), k5 s4 d2 again, k3 s3 d2 (step 3: one slot)
@pytest.mark.parametrize("geo", [([5, 3, 4], [4, 3, 2], [2, 1, 1], [2, 3, 1]),
                                 ([3, 5, 3], [2, 4, 3], [1, 2, 1], [3, 2, 2])],
                         ids=["k534s432d231", "k353s243d322"])
def test_slot_classes(ops_bin, scenes, tmp_path, geo):
    ind, shape, batch = scenes["random_b2"]
    cinfo, _ = check_pipeline(ops_bin, ind, shape, batch, geo, tmp_path, ao.sim_env(aic=3, seed=7))
    _check_pairs(cinfo["keys"], ind, shape, geo)


def _check_pairs(keys, ind, shape, geo):
    """Every (input, kernel offset) pair that reaches an output appears exactly once, nothing else:
    the valid keys equal those of the k-major layout as multisets."""
    km = reference_k_major(ind, shape, *geo)
    assert torch.equal(torch.sort(keys[keys != SENTINEL]).values, torch.sort(km[km != SENTINEL]).values)


def _random_rows(shape, batch, n, seed):
    g = torch.Generator().manual_seed(seed)
    rows = torch.stack([torch.randint(0, batch, (n,), generator=g)] +
                       [torch.randint(0, e, (n,), generator=g) for e in shape], 1)
    rows = torch.unique(rows, dim=0)
    return rows[torch.randperm(rows.shape[0], generator=g)]


@pytest.mark.parametrize("shape,batch,geo", [
    ([1000], 2, ([5], [4], [2], [2])),
    ([90, 70], 3, ([3, 4], [2, 2], [1, 1], [3, 1])),
    ([90, 70], 2, ([2, 3], [5, 6], [1, 2], [2, 4])),   # s/gcd > k: most coordinates have no slot
    ([9, 11, 13, 7], 2, ([3, 2, 3, 3], [2, 2, 3, 1], [1, 0, 2, 1], [1, 1, 2, 2])),
    ([9, 11, 13, 7], 1, ([2, 3, 2, 3], [1, 1, 1, 1], [0, 1, 1, 2], [1, 2, 1, 2])),
], ids=["1d-k5s4d2", "2d-k34s22d31", "2d-k23s56d24", "4d-mixed", "4d-stride1"])
def test_dims(ops_bin, tmp_path, shape, batch, geo):
    """1, 2 and 4 spatial axes (the kernel alone: the lookup kernel is 3d only)."""
    ind = _random_rows(shape, batch, 700, len(shape)).int().contiguous()
    keys, _ = ao.conv_out_keys(ops_bin, ind, shape, batch, *geo, tmp_path, ao.sim_env(aic=3))
    assert torch.equal(keys, reference_candidates(ind, shape, *geo))
    _check_pairs(keys, ind, shape, geo)


def test_stride1_is_k_major(ops_bin, scenes, tmp_path):
    """At stride 1 slot j is kernel offset j: the layout is the k-major one exactly."""
    ind, shape, batch = scenes["random_b2"]
    geo = ([3, 2, 3], [1, 1, 1], [1, 0, 2], [1, 1, 2])
    keys, _ = ao.conv_out_keys(ops_bin, ind, shape, batch, *geo, tmp_path, ao.sim_env(aic=1))
    assert torch.equal(keys, reference_k_major(ind, shape, *geo))


def test_float_quotient_correction(ops_bin, scenes, tmp_path):
    """float(41) * float(1/41) and float(47) * float(1/47) round below 1: the floor of the float
    quotient of an exact multiple is one too small and the kernel's integer correction must fix it
    (the "one too large" direction needs coordinates >= 2^23: test_int64_keys[2^60])."""
    ind, shape, batch = scenes["kitti_crop"]
    check_pipeline(ops_bin, ind, shape, batch, ([3, 3, 3], [1, 41, 47], [1, 1, 1], [1, 1, 1]), tmp_path,
                   ao.sim_env(aic=3))


def _sparse_big(seed, shape, batch, n=300):
    """n random voxels of a huge grid plus their +1 neighbours along the last axis (real overlaps)."""
    g = torch.Generator().manual_seed(seed)
    c = torch.stack([torch.randint(0, batch, (n,), generator=g)] +
                    [torch.randint(0, s, (n,), generator=g) for s in shape], 1)
    c2 = c.clone()
    c2[:, -1] = (c2[:, -1] + 1).clamp(max=shape[-1] - 1)
    ind = torch.unique(torch.cat([c, c2]), dim=0)
    return ind[torch.randperm(ind.shape[0], generator=g)].int().contiguous()


@pytest.mark.parametrize("shape,batch,geo,wide", [
    ([900, 90000, 90000], 3, GEO_S2, 1),                                    # keys ~2^41
    ([1024, 2048, 1536], 1, ([3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1]), 0),  # 2^31 < volume < 2^32: low word >= 2^31
    # keys up to ~2^60; stride 3 on coordinates up to 1.6e7, where float(c) * float(1/3) rounds up to
    # the next integer for some c (quotient estimate one too large)
    ([16000000, 4000000, 30000], 3, ([3, 2, 3], [3, 2, 1], [1, 0, 1], [1, 1, 2]), 1),
    ([900, 90000, 90000], 3, ([5, 3, 4], [4, 3, 2], [2, 1, 1], [2, 3, 1]), 1),   # keys ~2^41, gcd(s, d) > 1
], ids=["2^41", "2^32", "2^60", "2^41-gcd"])
def test_int64_keys(ops_bin, tmp_path, shape, batch, geo, wide):
    ind = _sparse_big(len(shape) + batch, shape, batch)
    cinfo, _ = check_pipeline(ops_bin, ind, shape, batch, geo, tmp_path, ao.sim_env(aic=1))  # 2 AIV: tiles > 256 rows
    assert cinfo["wide"] == wide


def test_small_and_empty(ops_bin, tmp_path):
    env = ao.sim_env(soc="Ascend910B2")
    ind = torch.tensor([[0, 1, 1, 1], [0, 1, 1, 2], [1, 3, 3, 3]], dtype=torch.int32)
    cinfo, uinfo = check_pipeline(ops_bin, ind, [4, 4, 4], 2, GEO_S2, tmp_path / "s", env)
    # k3 s2: 2 slots per axis, 3 rows x 8 slots = 24 keys (not 3 x 27): one 64-key tile
    assert cinfo["keys"].shape == (24,) and cinfo["used_aiv"] == 1 and uinfo["used_aiv"] == 1
    empty = torch.zeros(0, 4, dtype=torch.int32)
    go, gn, _ = ao.conv_map(ops_bin, empty, [4, 4, 4], 1, *GEO_S2, tmp_path / "e", env)
    assert go.shape == (0, 4) and gn.shape == (0, 27)


def _crafted_keys(seed):
    """Sorted keys built to hit the two-word comparisons: neighbours that differ only in the high
    word or only in the low word (incl. low words 0x7fffffff / 0x80000000 / 0xffffffff and the
    sentinel's neighbour), runs of duplicates of every length across tile and core boundaries,
    trailing sentinels. The random keys stay below 2^40, the crafted ones above, so the crafted
    neighbours stay adjacent after sorting."""
    g = torch.Generator().manual_seed(seed)
    hi_only = [(1 << 41) + 5, (1 << 41) + (1 << 32) + 5, (1 << 41) + (2 << 32) + 5]
    lo_only = [(1 << 45) + 0x7fffffff, (1 << 45) + 0x80000000, (1 << 45) + 0xffffffff, (1 << 46)]
    vals = torch.cat([torch.tensor([0, 1, 0xffffffff, 1 << 32] + hi_only + lo_only + [SENTINEL - 1], dtype=torch.int64),
                      torch.randint(0, 1 << 40, (600,), generator=g)])
    reps = torch.randint(1, 40, (vals.shape[0],), generator=g)
    keys = torch.sort(torch.repeat_interleave(vals, reps)).values
    return torch.cat([keys, torch.full((137,), SENTINEL, dtype=torch.int64)])


@pytest.mark.parametrize("cores", list(CORE_CONFIGS))
def test_unique_kernel_edge_cases(ops_bin, tmp_path, cores):
    env = ao.sim_env(**CORE_CONFIGS[cores])
    keys = _crafted_keys(3)
    cases = {"crafted": keys, "no_sentinel": keys[keys != SENTINEL][:1000], "odd_length": keys[:777],
             "all_sentinel": torch.full((300,), SENTINEL, dtype=torch.int64), "one": keys[:1],
             "all_equal": torch.full((5000,), 42, dtype=torch.int64), "empty": keys[:0]}
    for name, k in cases.items():
        got, info = ao.unique_sorted_keys(ops_bin, k, tmp_path / name, env)
        assert torch.equal(got, reference_unique(k)), name
        assert info["ub_bytes"] <= UB
