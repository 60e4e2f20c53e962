"""Voxelization against spconv 2.3.8's own Point2VoxelCPU{1,2,3,4}d and PointToVoxel (the
oracle): identical voxels (bit for bit), coordinates, counts, voxel order and point order on
generated LiDAR scenes and on points placed on cell boundaries; the spconv surface after
patch_spconv() with spconv's signatures; OpenPCDet's DataProcessor unmodified on it (needs
an OpenPCDet checkout in MXS_OPENPCDET)."""
import importlib.util
import os
import sys
import types

import numpy as np
import pytest
import torch

import mx_sparse
import spconv.utils as real_utils            # imported before any test patches sys.modules
import spconv.pytorch.utils as real_torch_utils
from cumm import tensorview as tv

import voxel_reference as ref
from .conftest import record

KITTI = dict(vsize_xyz=[0.05, 0.05, 0.1], coors_range_xyz=[0.0, -40.0, -3.0, 70.4, 40.0, 1.0])
NUSCENES = dict(vsize_xyz=[0.1, 0.1, 0.2], coors_range_xyz=[-51.2, -51.2, -5.0, 51.2, 51.2, 3.0])


@pytest.fixture(scope="module")
def scenes():
    from mx_sparse.synthetic import generate_points
    return {"kitti": generate_points("kitti", seed=3), "nuscenes": generate_points("nuscenes", seed=4, azimuth_steps=400)}


@pytest.fixture
def spconv_surface():
    mx_sparse.patch_spconv()
    import spconv.utils as ours_utils
    import spconv.pytorch.utils as ours_torch_utils
    try:
        yield ours_utils, ours_torch_utils
    finally:
        mx_sparse.unpatch_spconv()


def assert_identical(ours, real, what):
    for name, a, b in zip(("voxels", "indices", "num_per_voxel"), ours, real):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (what, name, a.dtype, b.dtype, a.shape, b.shape)
        assert np.array_equal(a, b), (what, name)


CASES = [("kitti", KITTI, 5, 16000), ("kitti", KITTI, 5, 40000), ("kitti", KITTI, 1, 100),
         ("nuscenes", NUSCENES, 10, 60000), ("nuscenes", NUSCENES, 3, 5000)]


@pytest.mark.parametrize("scene,geometry,max_points,max_voxels", CASES)
def test_point2voxel_cpu3d_identical_to_spconv(spconv_surface, scenes, scene, geometry, max_points, max_voxels):
    pts = scenes[scene]
    ours_utils, _ = spconv_surface
    args = (geometry["vsize_xyz"], geometry["coors_range_xyz"], pts.shape[1], max_voxels, max_points)
    real = real_utils.Point2VoxelCPU3d(*args).point_to_voxel(tv.from_numpy(pts))
    ours = ours_utils.Point2VoxelCPU3d(*args).point_to_voxel(tv.from_numpy(pts))
    assert all(type(o).__name__ == "Tensor" and hasattr(o, "numpy") for o in ours)
    assert_identical([o.numpy() for o in ours], [r.numpy() for r in real], scene)
    record(f"voxelize vs Point2VoxelCPU3d: {scene} {pts.shape[0]} points -> {real[0].shape[0]} voxels "
           f"(max {max_points}/voxel, {max_voxels} voxels): identical", 0.0)


def test_boundary_points_and_float64_identical_to_spconv(spconv_surface):
    ours_utils, _ = spconv_surface
    vs, pcr = [0.2, 0.2, 0.4], [-8.0, -8.0, -2.0, 8.0, 8.0, 2.0]
    for dtype in (np.float32, np.float64):
        pts = ref.scene_points(seed=12, n=40000, dtype=dtype)
        for caps in [(3, 500), (50, 100000)]:
            args = (vs, pcr, 4, caps[1], caps[0])
            real = real_utils.Point2VoxelCPU3d(*args).point_to_voxel(tv.from_numpy(pts))
            ours = ours_utils.Point2VoxelCPU3d(*args).point_to_voxel(tv.from_numpy(pts))
            assert_identical([o.numpy() for o in ours], [r.numpy() for r in real], (dtype, caps))
        record(f"voxelize vs Point2VoxelCPU3d: {pts.shape[0]} boundary-stress points ({np.dtype(dtype).name}): "
               f"identical", 0.0)


@pytest.mark.parametrize("ndim", [1, 2, 4])
def test_other_ranks_identical_to_spconv(spconv_surface, ndim):
    ours_utils, _ = spconv_surface
    vs = [0.5, 0.25, 1.0, 0.3][:ndim]
    pcr = [-3.0, -2.0, 0.0, -1.0][:ndim] + [3.0, 2.0, 4.0, 1.0][:ndim]
    pts = ref.scene_points(seed=13, n=5000, voxel_size=vs, point_cloud_range=pcr, channels=ndim + 1)
    args = (vs, pcr, ndim + 1, 200, 3)
    real = getattr(real_utils, f"Point2VoxelCPU{ndim}d")(*args).point_to_voxel(tv.from_numpy(pts))
    ours = getattr(ours_utils, f"Point2VoxelCPU{ndim}d")(*args).point_to_voxel(tv.from_numpy(pts))
    assert_identical([o.numpy() for o in ours], [r.numpy() for r in real], ndim)


def test_meta_data_and_attributes_match_spconv(spconv_surface):
    ours_utils, _ = spconv_surface
    for geometry in (KITTI, NUSCENES, dict(vsize_xyz=[0.4, 0.3, 0.45], coors_range_xyz=[0, 0, 0, 1, 1, 1])):
        real = real_utils.Point2VoxelCPU3d.calc_meta_data(geometry["vsize_xyz"], geometry["coors_range_xyz"])
        ours = ours_utils.Point2VoxelCPU3d.calc_meta_data(geometry["vsize_xyz"], geometry["coors_range_xyz"])
        assert [list(x) for x in ours] == [list(x) for x in real]
        args = (geometry["vsize_xyz"], geometry["coors_range_xyz"], 4, 7, 3)
        r, o = real_utils.Point2VoxelCPU3d(*args), ours_utils.Point2VoxelCPU3d(*args)
        assert list(o.grid_size) == list(r.grid_size)
    # the attributes hold the last results (spconv's: its buffers, whose first rows they are)
    pts = ref.scene_points(seed=17, n=3000)
    results = o.point_to_voxel(tv.from_numpy(pts))
    r.point_to_voxel(tv.from_numpy(pts))
    for name, res in zip(("voxels", "indices", "num_per_voxel"), results):
        mine = getattr(o, name).numpy()
        assert np.array_equal(mine, res.numpy()) and np.array_equal(mine, getattr(r, name).numpy()[:len(mine)]), name


def test_pytorch_point_to_voxel_identical_to_spconv(spconv_surface, scenes):
    _, ours_torch_utils = spconv_surface
    pts = torch.from_numpy(scenes["kitti"])
    args = (KITTI["vsize_xyz"], KITTI["coors_range_xyz"], 4, 12000, 5)
    real = real_torch_utils.PointToVoxel(*args).generate_voxel_with_id(pts)
    ours = ours_torch_utils.PointToVoxel(*args).generate_voxel_with_id(pts)
    for a, b in zip(ours, real):
        assert a.dtype == b.dtype and torch.equal(a, b)
    assert (real[3] == -1).sum() > 0
    for a, b in zip(ours_torch_utils.PointToVoxel(*args)(pts), real_torch_utils.PointToVoxel(*args)(pts)):
        assert torch.equal(a, b)
    for name in ("vsize", "grid_size", "grid_stride", "coors_range", "ndim", "max_num_voxels"):
        assert getattr(ours_torch_utils.PointToVoxel(*args), name) == getattr(real_torch_utils.PointToVoxel(*args),
                                                                              name), name
    feats = torch.randn(real[0].shape[0], 3)
    assert torch.equal(ours_torch_utils.gather_features_by_pc_voxel_id(feats, real[3], -7.0),
                       real_torch_utils.gather_features_by_pc_voxel_id(feats, real[3], -7.0))
    record(f"voxelize vs spconv.pytorch.utils.PointToVoxel: kitti {pts.shape[0]} points, pc_voxel_id too: identical",
           0.0)


def test_empty_mean_is_the_true_mean(spconv_surface):
    """spconv 2.3.8's empty_mean adds the previous voxel's mean into each later voxel's sum
    (its mean buffer is cleared with vector::clear, which keeps the values); the surface fills
    with the true mean. The first voxel, which spconv computes from a zeroed buffer, agrees."""
    ours_utils, _ = spconv_surface
    pts = np.array([[0.5, 0.5, 0.5, 1], [1.5, 0.5, 0.5, 10], [2.5, 0.5, 0.5, 100], [2.6, 0.5, 0.5, 200]], np.float32)
    args = ([1.0, 1.0, 1.0], [0, 0, 0, 4, 4, 4], 4, 10, 3)
    real = real_utils.Point2VoxelCPU3d(*args).point_to_voxel_empty_mean(tv.from_numpy(pts))[0].numpy()
    ours = ours_utils.Point2VoxelCPU3d(*args).point_to_voxel_empty_mean(tv.from_numpy(pts))[0].numpy()
    assert ours[:, :, 3].tolist() == [[1, 1, 1], [10, 10, 10], [100, 200, 150]]
    assert np.array_equal(ours[0], real[0])
    assert real[1, 1, 3] == 10 + 1 and real[2, 2, 3] == (100 + 200 + 11) / 2   # spconv's carried-over sums
    big = ref.scene_points(seed=14, n=5000)
    args = ([0.2, 0.2, 0.4], [-8.0, -8.0, -2.0, 8.0, 8.0, 2.0], 4, 1000, 6)
    _, ours_torch_utils = spconv_surface
    v, _, n = ours_torch_utils.PointToVoxel(*args)(torch.from_numpy(big), empty_mean=True)
    plain = ours_torch_utils.PointToVoxel(*args)(torch.from_numpy(big))[0]
    for i in range(v.shape[0]):
        k = int(n[i])
        mean = plain[i, :k].sum(0) / k
        assert torch.allclose(v[i, k:], mean.expand(v.shape[1] - k, -1), atol=1e-5)
        assert torch.equal(v[i, :k], plain[i, :k])


def test_surface_signatures_and_inputs(spconv_surface):
    ours_utils, ours_torch_utils = spconv_surface
    import spconv.utils
    assert spconv.utils is ours_utils and spconv.utils.Point2VoxelCPU3d.__module__.startswith("mx_sparse")
    pts = ref.scene_points(seed=15, n=2000)
    gen = ours_utils.Point2VoxelCPU3d([0.2, 0.2, 0.4], [-8, -8, -2, 8, 8, 2], 4, 300, 4)
    a = [x.numpy() for x in gen.point_to_voxel(tv.from_numpy(pts))]
    b = gen.point_to_voxel(pts)                          # NumPy in, NumPy out
    c = gen.point_to_voxel(torch.from_numpy(pts))        # torch in, torch out
    assert all(np.array_equal(x, y) and np.array_equal(x, z.numpy()) for x, y, z in zip(a, b, c))
    h = ours_utils.Point2VoxelGPU3d([0.2, 0.2, 0.4], [-8, -8, -2, 8, 8, 2], 4, 300, 4)
    assert all(np.array_equal(x, y.numpy()) for x, y in zip(a, h.point_to_voxel_hash(torch.from_numpy(pts))))
    with pytest.raises(ValueError, match=r"points: expected \[N, 4\]"):
        gen.point_to_voxel(pts[:, :3])
    with pytest.raises(ValueError, match="voxel_size: expected finite values > 0"):
        ours_utils.Point2VoxelCPU3d([0.2, 0, 0.4], [-8, -8, -2, 8, 8, 2], 4, 300, 4)
    with pytest.raises(ValueError, match="points: row 0 column 2 is nan"):
        bad = pts.copy()
        bad[0, 2] = np.nan
        gen.point_to_voxel(bad)
    empty = gen.point_to_voxel(tv.from_numpy(pts[:0]))   # spconv returns no voxels for no points
    assert [e.shape[0] for e in empty] == [0, 0, 0]
    with pytest.raises(ValueError, match="pc: expected a torch tensor on cpu"):
        ours_torch_utils.PointToVoxel([0.2, 0.2, 0.4], [-8, -8, -2, 8, 8, 2], 4, 300, 4)(pts)
    with pytest.raises(AttributeError, match="spconv.utils.rbbox_iou is not provided by mx_sparse"):
        spconv.utils.rbbox_iou


def test_tensorview_stand_in_without_cumm():
    """Without cumm, patch_spconv() installs a minimal cumm.tensorview for OpenPCDet-style code."""
    saved = {n: m for n, m in sys.modules.items() if n == "cumm" or n.startswith("cumm.")}
    for name in saved:
        del sys.modules[name]
    sys.modules["cumm"] = None        # import cumm now fails, as on a machine without it
    try:
        mx_sparse.patch_spconv()
        import cumm.tensorview as stand_in
        import spconv.utils
        assert stand_in.__name__ == "mx_sparse.compat.cumm_tensorview"
        pts = ref.scene_points(seed=16, n=1000)
        gen = spconv.utils.Point2VoxelCPU3d([0.2, 0.2, 0.4], [-8, -8, -2, 8, 8, 2], 4, 300, 4)
        out = gen.point_to_voxel(stand_in.from_numpy(pts))
        assert isinstance(out[0], stand_in.Tensor) and out[1].numpy().shape[1] == 3
        assert np.array_equal(out[0].numpy(), gen.point_to_voxel(pts)[0])
    finally:
        mx_sparse.unpatch_spconv()
        del sys.modules["cumm"]
        sys.modules.update(saved)
    import cumm.tensorview
    assert cumm.tensorview is tv


# --- OpenPCDet's DataProcessor, unmodified, on the drop-in --------------------------------

OPENPCDET = os.environ.get("MXS_OPENPCDET")


class _Config(dict):
    """The EasyDict-style config OpenPCDet passes (attribute access and .get)."""
    __getattr__ = dict.__getitem__


def _load_data_processor(root):
    """pcdet/datasets/processor/data_processor.py from the checkout, as its package module.
    The modules it imports but transform_points_to_voxels never uses (skimage, torchvision,
    pcdet.utils' box/common utils, which need OpenPCDet's compiled ops) are empty stand-ins."""
    for name in ("skimage", "torchvision"):
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            mod = types.ModuleType(name)
            mod.transform = types.ModuleType(name + ".transform")
            sys.modules[name] = mod
    for name in ("pcdet", "pcdet.utils", "pcdet.datasets", "pcdet.datasets.processor"):
        pkg = types.ModuleType(name)
        pkg.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = pkg
    for name in ("box_utils", "common_utils"):
        sys.modules["pcdet.utils." + name] = types.ModuleType("pcdet.utils." + name)
        setattr(sys.modules["pcdet.utils"], name, sys.modules["pcdet.utils." + name])
    path = os.path.join(root, "pcdet", "datasets", "processor", "data_processor.py")
    spec = importlib.util.spec_from_file_location("pcdet.datasets.processor.data_processor", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _openpcdet_voxels(root, points, training):
    dp = _load_data_processor(root)
    cfg = _Config(NAME="transform_points_to_voxels", VOXEL_SIZE=KITTI["vsize_xyz"], MAX_POINTS_PER_VOXEL=5,
                  MAX_NUMBER_OF_VOXELS=_Config(train=16000, test=40000))
    processor = dp.DataProcessor([cfg], np.array(KITTI["coors_range_xyz"], np.float32), training, 4)
    out = processor.forward({"points": points, "use_lead_xyz": True})
    return out["voxels"], out["voxel_coords"], out["voxel_num_points"]


@pytest.mark.skipif(not OPENPCDET, reason="set MXS_OPENPCDET to an OpenPCDet checkout (e.g. git archive of "
                                          "open-mmlab/OpenPCDet) to run its DataProcessor on the drop-in")
def test_openpcdet_data_processor_runs_unmodified(scenes):
    """With cumm present (its tensorview feeds the drop-in) and without it (the stand-in)."""
    mine = ("pcdet", "skimage", "torchvision", "cumm")
    saved = {n: m for n, m in sys.modules.items() if n.split(".")[0] in mine}
    try:
        pts = scenes["kitti"]
        for training in (True, False):
            real = _openpcdet_voxels(OPENPCDET, pts, training)     # spconv 2.3.8 itself
            for cumm in ("cumm", "no cumm"):
                if cumm == "no cumm":
                    for name in [n for n in sys.modules if n.split(".")[0] == "cumm"]:
                        del sys.modules[name]
                    sys.modules["cumm"] = None                      # import cumm fails
                mx_sparse.patch_spconv()
                try:
                    stand_in = sys.modules["cumm.tensorview"].__name__ == "mx_sparse.compat.cumm_tensorview"
                    assert stand_in == (cumm == "no cumm")
                    ours = _openpcdet_voxels(OPENPCDET, pts, training)
                finally:
                    mx_sparse.unpatch_spconv()
                    sys.modules.update({n: m for n, m in saved.items() if n.split(".")[0] == "cumm"})
                assert_identical(ours, real, (training, cumm))
            record(f"OpenPCDet DataProcessor.transform_points_to_voxels ({'train' if training else 'test'}, with and "
                   f"without cumm): {real[0].shape[0]} voxels identical to spconv 2.3.8", 0.0)
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] in mine]:
            del sys.modules[name]
        sys.modules.update(saved)
