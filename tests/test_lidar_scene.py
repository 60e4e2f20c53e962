"""Tests for the synthetic LiDAR scene generator (mx_sparse.synthetic.lidar_scene)."""
import itertools
import pathlib
import sys

import numpy as np
import pytest

# Allow running plain `pytest` from a checkout without installing the package.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mx_sparse.synthetic import lidar_scene as ls  # noqa: E402

KITTI = ls.PRESETS["kitti"]
NUSC = ls.PRESETS["nuscenes"]


# ---------------------------------------------------------------- determinism
def test_same_seed_same_points():
    a = ls.generate_points("kitti", seed=3, azimuth_steps=400)
    b = ls.generate_points("kitti", seed=3, azimuth_steps=400)
    assert a.dtype == np.float32 and a.shape[1] == 4
    np.testing.assert_array_equal(a, b)


def test_different_seed_different_points():
    a = ls.generate_points("kitti", seed=3, azimuth_steps=400)
    b = ls.generate_points("kitti", seed=4, azimuth_steps=400)
    assert a.shape != b.shape or not np.array_equal(a, b)


def test_nuscenes_sweeps_carry_time_lag():
    pts = ls.generate_points("nuscenes", seed=0, num_sweeps=3, azimuth_steps=300)
    assert pts.shape[1] == 5
    np.testing.assert_allclose(np.unique(pts[:, 4]), [0.0, 0.05, 0.1], atol=1e-6)


def test_unknown_override_rejected():
    with pytest.raises(TypeError):
        ls.generate_points("kitti", seed=0, beams=3)


# ---------------------------------------------------------------- voxelize
def test_spatial_shapes_match_second_convention():
    _, _, shape_k = ls.voxelize(np.zeros((0, 4)), KITTI["point_cloud_range"], KITTI["voxel_size"])
    _, _, shape_n = ls.voxelize(np.zeros((0, 5)), NUSC["point_cloud_range"], NUSC["voxel_size"])
    assert shape_k == [41, 1600, 1408]
    assert shape_n == [41, 1024, 1024]


def test_voxel_coords_valid_unique_sorted():
    pts = ls.generate_points("kitti", seed=1, azimuth_steps=600)
    feats, coords, shape = ls.voxelize(pts, KITTI["point_cloud_range"], KITTI["voxel_size"])
    assert feats.dtype == np.float32 and coords.dtype == np.int32
    assert feats.shape == (len(coords), 4)
    assert (coords >= 0).all() and (coords < np.array(shape)).all()
    assert len(np.unique(coords, axis=0)) == len(coords)
    order = np.lexsort(coords.T[::-1])             # primary key z, then y, then x
    np.testing.assert_array_equal(order, np.arange(len(coords)))


def test_voxel_features_are_point_means():
    pcr, vs = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5]
    pts = np.array([
        [0.10, 0.10, 0.10, 1.0],    # voxel (z,y,x) = (0,0,0)
        [0.40, 0.20, 0.30, 3.0],    # same voxel
        [0.60, 0.10, 0.10, 5.0],    # (0,0,1)
        [0.10, 0.10, 0.90, 7.0],    # (1,0,0)
        [0.90, 0.90, 0.90, 2.0],    # (1,1,1)
        [1.00, 0.50, 0.50, 9.0],    # on the upper x bound -> outside
        [-0.01, 0.5, 0.5, 9.0],     # below range -> outside
    ])
    # Independent reference: group by integer voxel with a plain dict.
    groups = {}
    for p in pts:
        ijk = np.floor(p[:3] / 0.5).astype(int)
        if ((ijk >= 0) & (ijk < 2)).all():
            groups.setdefault((ijk[2], ijk[1], ijk[0]), []).append(p)
    feats, coords, shape = ls.voxelize(pts, pcr, vs)
    assert shape == [3, 2, 2]
    assert [tuple(c) for c in coords] == sorted(groups)
    for c, f in zip(coords, feats):
        np.testing.assert_allclose(f, np.mean(groups[tuple(c)], axis=0), rtol=1e-6)


# ---------------------------------------------------------------- ray casting
def _ray(*d):
    d = np.asarray([d], np.float64)
    return d / np.linalg.norm(d)


def test_ray_straight_down_hits_ground_at_height():
    ground = ls.Ground(gx=0.0, gy=0.0, reflectivity=0.1)
    t = ls.ray_ground(np.array([3.0, -2.0, 1.73]), _ray(0, 0, -1), ground)
    np.testing.assert_allclose(t, [1.73])


def test_ray_on_sloped_ground():
    # Plane z = 0.1 x; ray from (0,0,1) along +x meets it at x = 10.
    ground = ls.Ground(gx=0.1, gy=0.0, reflectivity=0.1)
    np.testing.assert_allclose(ls.ray_ground(np.array([0, 0, 1.0]), _ray(1, 0, 0), ground), [10.0])
    # Rays going up from above a flat ground never hit it.
    flat = ls.Ground(0.0, 0.0, 0.1)
    assert np.isinf(ls.ray_ground(np.array([0, 0, 1.0]), _ray(1, 0, 0.1), flat)).all()


def test_ray_box_axis_aligned_and_rotated():
    origin = np.array([0.0, 0.0, 1.0])
    center, half = np.array([[10.0, 0.0, 1.0]]), np.array([[1.0, 1.0, 1.0]])
    t = ls.ray_boxes(origin, _ray(1, 0, 0), center, half, np.array([0.0]))
    np.testing.assert_allclose(t, [[9.0]])
    # Rotated 45 deg, the near corner points at the sensor: 10 - sqrt(2).
    t = ls.ray_boxes(origin, _ray(1, 0, 0), center, half, np.array([np.pi / 4]))
    np.testing.assert_allclose(t, [[10.0 - np.sqrt(2.0)]])
    # Ray passing above the box misses.
    assert np.isinf(ls.ray_boxes(origin, _ray(1, 0, 0.3), center, half, np.array([0.0]))).all()


def test_ray_cylinder_and_ellipsoid():
    origin = np.array([0.0, 0.0, 1.0])
    t = ls.ray_cylinders(origin, _ray(1, 0, 0), np.array([[5.0, 0.0]]), np.array([0.5]),
                         np.array([[0.0, 3.0]]))
    np.testing.assert_allclose(t, [[4.5]])
    short = ls.ray_cylinders(origin, _ray(1, 0, 0), np.array([[5.0, 0.0]]), np.array([0.5]),
                             np.array([[0.0, 0.5]]))
    assert np.isinf(short).all()
    t = ls.ray_ellipsoids(origin, _ray(1, 0, 0), np.array([[10.0, 0.0, 1.0]]),
                          np.array([[2.0, 1.0, 1.0]]))
    np.testing.assert_allclose(t, [[8.0]])


def test_cast_rays_returns_nearest_surface():
    sb = ls._SceneBuilder(ls.Ground(0.0, 0.0, 0.1), np.random.default_rng(0))
    sb.box_on_ground(10.0, 0.0, 2.0, 2.0, 2.0, 0.0, "car")        # x in [9, 11]
    sb.box_on_ground(-6.0, 0.0, 2.0, 2.0, 2.0, 0.0, "building")   # behind the sensor
    scene = sb.build()
    origin = np.array([0.0, 0.0, 1.0])
    dirs = np.concatenate([_ray(1, 0, 0), _ray(-1, 0, 0), _ray(0, 1, -1), _ray(0, 1, 1)])
    t, refl, is_ground = ls.cast_rays(scene, origin, dirs)
    np.testing.assert_allclose(t[:3], [9.0, 5.0, np.sqrt(2.0)])
    assert np.isinf(t[3])
    np.testing.assert_array_equal(is_ground[:3], [False, False, True])
    np.testing.assert_allclose(refl[2], 0.1)


# ---------------------------------------------------------------- neighbours
def _brute_force_neighbors(coords):
    s = {tuple(c) for c in coords}
    offs = [o for o in itertools.product((-1, 0, 1), repeat=3) if o != (0, 0, 0)]
    return np.mean([sum((c[0], c[1] + a, c[2] + b, c[3] + d) in s for a, b, d in offs)
                    for c in s])


def test_neighbors_full_block():
    block = np.array(list(itertools.product(range(3), repeat=3))) + 5
    # centre 26, 6 face centres 17, 12 edges 11, 8 corners 7.
    expected = (26 + 6 * 17 + 12 * 11 + 8 * 7) / 27
    assert ls.mean_active_neighbors(block) == pytest.approx(expected)
    assert ls.mean_active_neighbors(np.array([[0, 0, 0], [0, 1, 1]])) == 1.0


def test_neighbors_do_not_wrap_rows_or_cross_batches():
    # Last x of one row and first x of the next would be adjacent in a naive packing.
    assert ls.mean_active_neighbors(np.array([[0, 0, 9], [0, 1, 0], [0, 5, 5]])) == 0.0
    two = np.array([[0, 1, 1, 1], [1, 1, 1, 2]])
    assert ls.mean_active_neighbors(two) == 0.0


def test_neighbors_match_brute_force():
    rng = np.random.default_rng(0)
    coords = np.unique(np.concatenate([rng.integers(0, 2, (300, 1)),
                                       rng.integers(0, 6, (300, 3))], 1), axis=0)
    assert ls.mean_active_neighbors(coords) == pytest.approx(_brute_force_neighbors(coords))


def test_kitti_scene_is_surface_like():
    pts = ls.generate_points("kitti", seed=0)
    _, coords, _ = ls.voxelize(pts, KITTI["point_cloud_range"], KITTI["voxel_size"])
    assert 15_000 <= len(coords) <= 45_000
    assert ls.mean_active_neighbors(coords) >= 4.0
    # Control: the same number of uniform random voxels is almost isolated.
    rng = np.random.default_rng(0)
    uniform = np.unique(rng.integers(0, [40, 1600, 1408], (len(coords), 3)), axis=0)
    assert ls.mean_active_neighbors(uniform) < 0.1


# ---------------------------------------------------------------- batch
def test_make_batch_layout():
    torch = pytest.importorskip("torch")
    batch = ls.make_batch("kitti", batch_size=2, seed=5)
    feats, idx = batch["features"], batch["indices"]
    assert feats.dtype == torch.float32 and idx.dtype == torch.int32
    assert feats.shape == (idx.shape[0], 4) and idx.shape[1] == 4
    assert batch["spatial_shape"] == [41, 1600, 1408] and batch["batch_size"] == 2
    idx = idx.numpy()
    assert set(np.unique(idx[:, 0])) == {0, 1}
    np.testing.assert_array_equal(np.lexsort(idx.T[::-1]), np.arange(len(idx)))
    # Sample b uses seed + b.
    _, c1, _ = ls.voxelize(ls.generate_points("kitti", 6), KITTI["point_cloud_range"],
                           KITTI["voxel_size"])
    np.testing.assert_array_equal(idx[idx[:, 0] == 1, 1:], c1)


def test_azimuth_culling_does_not_change_hits():
    # Shuffled rays defeat the per-chunk azimuth culling; results must agree.
    scene = ls.build_scene(np.random.default_rng(2))
    dirs = ls.beam_directions(16, 2.0, -24.8, 360)
    origin = np.array([0.0, 0.0, 1.73])
    t_sorted, refl_sorted, _ = ls.cast_rays(scene, origin, dirs, chunk=256)
    perm = np.random.default_rng(0).permutation(len(dirs))
    t_shuf, refl_shuf, _ = ls.cast_rays(scene, origin, dirs[perm], chunk=256)
    np.testing.assert_array_equal(t_shuf, t_sorted[perm])
    np.testing.assert_array_equal(refl_shuf, refl_sorted[perm])


# ---------------------------------------------------------------- labelled frames
def _inside(points, b, margin):
    d = points[:, :2] - b[:2]
    c, s = np.cos(b[6]), np.sin(b[6])
    along, across = d[:, 0] * c + d[:, 1] * s, -d[:, 0] * s + d[:, 1] * c
    return ((np.abs(along) <= b[3] / 2 + margin) & (np.abs(across) <= b[4] / 2 + margin)
            & (np.abs(points[:, 2] - b[2]) <= b[5] / 2 + margin))


def test_labeled_frame_boxes_contain_their_points():
    f = ls.generate_labeled_frame("kitti", seed=3, azimuth_steps=720)
    assert f.boxes.shape == (len(f.classes), 7) and f.points.shape[1] == 4
    assert set(np.unique(f.classes)) == {0, 1, 2}            # cars, pedestrians, cyclists
    np.testing.assert_array_equal(f.num_points, np.bincount(f.point_owner[f.point_owner >= 0],
                                                            minlength=len(f.boxes)))
    assert (f.num_points > 0).sum() >= 10
    for k in np.nonzero(f.num_points)[0]:
        # 0.1 m: 5 sigma of the kitti preset's range noise.
        own = f.points[f.point_owner == k, :3]
        assert _inside(own, f.boxes[k], 0.1).all(), (k, ls.CLASSES[f.classes[k]])
    # Sizes are KITTI-like per class (l, w, h in metres).
    for c, (lo, hi) in enumerate([((3.8, 1.6, 1.3), (5.7, 2.2, 2.7)), ((0.5, 0.4, 1.5), (1.0, 0.8, 2.0)),
                                  ((1.5, 0.4, 1.5), (2.0, 0.8, 1.9))]):
        size = f.boxes[f.classes == c, 3:6]
        assert np.all((size >= lo) & (size <= hi)), c


def test_labeled_frame_is_deterministic_and_keeps_the_street():
    a = ls.generate_labeled_frame("kitti", seed=5, azimuth_steps=360)
    b = ls.generate_labeled_frame("kitti", seed=5, azimuth_steps=360)
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.boxes, b.boxes)
    c = ls.generate_labeled_frame("kitti", seed=6, azimuth_steps=360)
    assert not np.array_equal(a.boxes[:3], c.boxes[:3])
    # The cars are the ones generate_points' street holds: the scene without people has
    # exactly the labelled vehicles' primitives.
    street = ls.build_scene(np.random.default_rng(5))
    people = ls.build_scene(np.random.default_rng(5), people_rng=np.random.default_rng([5, 1]))
    cars = people.labels[people.labels[:, 7] == 0]
    np.testing.assert_array_equal(street.labels, cars)
    np.testing.assert_array_equal(street.boxes["center"], people.boxes["center"][:len(street.boxes["center"])])


def test_people_keep_apart():
    scene = ls.build_scene(np.random.default_rng(1), people_rng=np.random.default_rng([1, 1]))
    people = scene.labels[scene.labels[:, 7] > 0]
    assert len(people) > 5
    iou_free = 0
    for i, p in enumerate(people):
        others = np.delete(people, i, 0)
        gap = np.hypot(others[:, 0] - p[0], others[:, 1] - p[1])
        iou_free += np.all(gap > 0.6)
    assert iou_free == len(people)
