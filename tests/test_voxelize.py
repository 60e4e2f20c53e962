"""The voxelization ops (voxelize_hard / voxelize_dynamic) and mx_sparse.PointToVoxel against
the plain sequential reference of tests/voxel_reference.py: identical voxels, coordinates,
counts, point order within a voxel and point-to-voxel index, for the CPU kernel and for the
torch-operator implementation that CUDA and NPU tensors run (executed here on CPU tensors)."""
import numpy as np
import pytest
import torch

import mx_sparse
import voxel_reference as ref
from mx_sparse._core.op_registration import kernel_for_key, ops

VS, PCR = [0.2, 0.2, 0.4], [-8.0, -8.0, -2.0, 8.0, 8.0, 2.0]


def run(impl, points, batch, vs, pcr, max_points=None, max_voxels=None):
    """(voxels or None, coords, num_points, point_voxel) from the CPU op or the generic code (the
    op's CUDA kernel, which PrivateUse1 shares, called on CPU tensors)."""
    if impl == "cpu":
        if max_points is None:
            return (None,) + tuple(ops.voxelize_dynamic(points, batch, vs, pcr))
        return tuple(ops.voxelize_hard(points, batch, vs, pcr, max_points, -1 if max_voxels is None else max_voxels))
    if max_points is None:
        return (None,) + tuple(kernel_for_key("voxelize_dynamic", "CUDA")(points, batch, vs, pcr))
    return tuple(kernel_for_key("voxelize_hard", "CUDA")(points, batch, vs, pcr, max_points,
                                                   -1 if max_voxels is None else max_voxels))


def assert_same(got, expected, dtype=None):
    voxels, coords, num, pv = got
    e_vox, e_coords, e_num, e_pv = expected
    assert torch.equal(coords, torch.from_numpy(e_coords)), "coordinates / voxel order differ"
    assert torch.equal(num, torch.from_numpy(e_num)), "point counts differ"
    assert torch.equal(pv, torch.from_numpy(e_pv)), "point_voxel differs"
    if e_vox is None:
        assert voxels is None
    else:
        assert voxels.dtype == (dtype or voxels.dtype)
        assert torch.equal(voxels.float(), torch.from_numpy(e_vox).float()), "voxel contents differ"


@pytest.mark.parametrize("impl", ["cpu", "generic"])
@pytest.mark.parametrize("caps", [(None, None), (5, None), (3, 400), (1, 1), (40, 100000)])
def test_matches_reference(impl, caps):
    pts = ref.scene_points(seed=1)
    expected = ref.voxelize(pts, VS, PCR, *caps)
    assert_same(run(impl, torch.from_numpy(pts), None, VS, PCR, *caps), expected)
    if caps[0] is not None:   # the scene exercises every cap and the boundaries
        assert (expected[3] == -1).any() and expected[2].max() == min(caps[0], expected[2].max())


@pytest.mark.parametrize("impl", ["cpu", "generic"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_other_dtypes(impl, dtype):
    """float64 points are computed in double, float16/bfloat16 widened exactly to float32."""
    pts = torch.from_numpy(ref.scene_points(seed=2, n=4000, dtype=np.float64)).to(dtype)
    host = pts.double().numpy() if dtype == torch.float64 else pts.float().numpy()
    expected = ref.voxelize(host, VS, PCR, 4, 300)
    assert_same(run(impl, pts, None, VS, PCR, 4, 300), expected, dtype)
    assert_same(run(impl, pts, None, VS, PCR), ref.voxelize(host, VS, PCR))


@pytest.mark.parametrize("impl", ["cpu", "generic"])
@pytest.mark.parametrize("ndim", [1, 2, 4])
def test_other_ranks(impl, ndim):
    vs = [0.5, 0.25, 1.0, 0.3][:ndim]
    pcr = [-3.0, -2.0, 0.0, -1.0][:ndim] + [3.0, 2.0, 4.0, 1.0][:ndim]
    pts = ref.scene_points(seed=3, n=3000, voxel_size=vs, point_cloud_range=pcr, channels=ndim + 1)
    assert_same(run(impl, torch.from_numpy(pts), None, vs, pcr, 3, 50), ref.voxelize(pts, vs, pcr, 3, 50))


@pytest.mark.parametrize("impl", ["cpu", "generic"])
def test_batched_equals_samples_concatenated(impl):
    """Interleaved samples: voxels per sample in ascending batch, max_voxels per sample."""
    pts = torch.from_numpy(ref.scene_points(seed=4, n=6000))
    batch = torch.from_numpy(np.random.default_rng(0).integers(0, 3, pts.shape[0]))
    got = run(impl, pts, batch, VS, PCR, 4, 250)
    assert_same(got, ref.voxelize(pts.numpy(), VS, PCR, 4, 250, batch=batch.numpy()))
    parts = [run(impl, pts[batch == b], None, VS, PCR, 4, 250) for b in range(3)]
    coords = torch.cat([torch.cat([torch.full((p[1].shape[0], 1), b, dtype=torch.int32), p[1][:, 1:]], 1)
                        for b, p in enumerate(parts)])
    assert torch.equal(got[1], coords) and torch.equal(got[0], torch.cat([p[0] for p in parts]))


def test_generic_equals_cpu_kernel_on_a_lidar_scene():
    from mx_sparse.synthetic import PRESETS, generate_points
    cfg = PRESETS["kitti"]
    pts = torch.from_numpy(generate_points("kitti", seed=5))
    for caps in [(5, 16000), (None, None)]:
        a = run("cpu", pts, None, cfg["voxel_size"], cfg["point_cloud_range"], *caps)
        b = run("generic", pts, None, cfg["voxel_size"], cfg["point_cloud_range"], *caps)
        for x, y in zip(a, b):
            assert (x is None and y is None) or torch.equal(x, y)


def test_same_result_for_any_thread_count():
    pts = torch.from_numpy(ref.scene_points(seed=6, n=60000))   # > one 8192-point block per thread
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run("cpu", pts, None, VS, PCR, 5, 2000)
        torch.set_num_threads(max(2, n))
        many = run("cpu", pts, None, VS, PCR, 5, 2000)
    finally:
        torch.set_num_threads(n)
    assert all(torch.equal(x, y) for x, y in zip(one, many))


def test_huge_grid_needs_no_grid_memory_and_keys_are_int64():
    """A 1e6 x 1e6 x 2e3 grid (2e15 cells) with 100 samples: keys beyond 2^50, no dense table."""
    vs, pcr = [1e-3, 1e-3, 1e-3], [-500.0, -500.0, -1.0, 500.0, 500.0, 1.0]
    assert ref.extents(vs, pcr) == mx_sparse.PointToVoxel(vs, pcr).grid_size == [1000000, 1000000, 2000]
    pts = torch.tensor([[-499.9995, 499.9995, 0.9995, 1.0], [3.0, -4.0, 0.0, 2.0], [-499.9995, 499.9995, 0.9995, 3.0]])
    batch = torch.tensor([99, 7, 99])
    for impl in ("cpu", "generic"):
        got = run(impl, pts, batch, vs, pcr, 2, 10)
        assert_same(got, ref.voxelize(pts.numpy(), vs, pcr, 2, 10, batch=batch.numpy()))
        assert got[1][-1, 0] == 99 and got[1][-1, 2] >= 999990 and got[1][-1, 1] >= 1990  # (b, z, y, x)


BAD = [
    ("points: row 3 column 1 is nan", lambda p: (p.index_put((torch.tensor([3]), torch.tensor([1])),
                                                            torch.tensor(float("nan"))),), {}),
    ("points: row 0 column 3 is inf", lambda p: (p.index_put((torch.tensor([0]), torch.tensor([3])),
                                                            torch.tensor(float("inf"))),), {}),
    ("points: expected shape [N, C] with C >= 3", lambda p: (p[:, :2],), {}),
    ("points: expected shape [N, C]", lambda p: (p[0],), {}),
    ("points: expected a float32", lambda p: (p.int(),), {}),
    ("points: the point cloud is empty", lambda p: (p[:0],), {}),
    ("voxel_size: expected finite values > 0", lambda p: (p,), {"vs": [0.2, 0.0, 0.4]}),
    ("voxel_size: expected 1 to 4 values", lambda p: (p,), {"vs": [], "pcr": []}),
    ("point_cloud_range: expected 6 values", lambda p: (p,), {"pcr": [0.0, 0.0, 0.0, 1.0, 1.0]}),
    ("point_cloud_range: expected finite float32 values with max > min", lambda p: (p,),
     {"pcr": [0.0, 0.0, 0.0, 1.0, -1.0, 1.0]}),
    ("point_cloud_range: expected finite", lambda p: (p,), {"pcr": [0.0, 0.0, 0.0, 1.0, 1e39, 1.0]}),
    ("axis 2 has no cell", lambda p: (p,), {"pcr": [0.0, 0.0, 0.0, 1.0, 1.0, 0.1]}),
    ("more than 2147483647", lambda p: (p,), {"vs": [1e-12, 0.2, 0.4]}),
    ("more cells than an int64 key can number", lambda p: (p,), {"vs": [1e-5, 1e-5, 1e-5],
                                                                  "pcr": [-1e4, -1e4, -1e4, 1e4, 1e4, 1e4]}),
    ("batch: expected sample indices >= 0", lambda p: (p, -torch.ones(p.shape[0], dtype=torch.long)), {}),
    ("batch: expected shape [", lambda p: (p, torch.zeros(3, dtype=torch.long)), {}),
    ("batch: expected an int64 or int32 tensor", lambda p: (p, torch.zeros(p.shape[0])), {}),
    ("batch: sample index 4611686018427387903 makes", lambda p: (p, torch.full((p.shape[0],), 2**62 - 1)), {}),
    # the largest int64 index: its sample count would wrap (its points used to vanish silently)
    ("batch: sample index 9223372036854775807 makes", lambda p: (p, torch.full((p.shape[0],), 2**63 - 1)), {}),
    ("max_points: expected >= 1", lambda p: (p,), {"max_points": 0}),
    ("max_voxels: expected >= 1", lambda p: (p,), {"max_voxels": 0}),
    ("max_points: the voxels tensor", lambda p: (p,), {"max_points": 2**40}),
]


@pytest.mark.parametrize("impl", ["cpu", "generic"])
@pytest.mark.parametrize("message,make,kw", BAD, ids=[b[0][:40] for b in BAD])
def test_bad_input_is_named(impl, message, make, kw):
    pts = torch.from_numpy(ref.scene_points(seed=7, n=200))
    args = make(pts)
    points, batch = args[0], args[1] if len(args) > 1 else None
    vs, pcr = kw.get("vs", VS), kw.get("pcr", PCR)
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        run(impl, points, batch, vs, pcr, kw.get("max_points", 4), kw.get("max_voxels", 10))
    if "max_" not in message:   # the dynamic op checks the same
        with pytest.raises(ValueError, match=message.replace("[", r"\[")):
            run(impl, points, batch, vs, pcr)


def test_points_outside_are_dropped_and_counted():
    pts = torch.from_numpy(ref.scene_points(seed=8, n=8000))
    v = mx_sparse.voxelize(pts, VS, PCR, 3, 200)
    _, _, num, pv = ref.voxelize(pts.numpy(), VS, PCR, 3, 200)
    per_voxel = np.bincount(pv[pv >= 0], minlength=len(num))
    assert v.dropped == {"out_of_range": int((pv == -1).sum()), "max_voxels": int((pv == -2).sum()),
                         "max_points": int((per_voxel - num).sum())}
    assert all(count > 0 for count in v.dropped.values())
    assert mx_sparse.voxelize(pts, VS, PCR).dropped["max_points"] == 0


def test_point_to_voxel_module_feeds_a_sparse_conv():
    clouds = [torch.from_numpy(ref.scene_points(seed=s, n=3000)) for s in (9, 10)]
    p2v = mx_sparse.PointToVoxel(VS, PCR, max_points_per_voxel=4, max_voxels=500)
    assert p2v.grid_size == [80, 80, 10] and p2v.spatial_shape == [10, 80, 80]
    v = p2v(clouds)
    assert v.coordinates[:, 0].unique().tolist() == [0, 1] and (v.coordinates[:, 0] == 0).sum() == 500
    x = mx_sparse.SparseConvTensor(v.mean(), v.coordinates, p2v.spatial_shape, batch_size=2)
    y = mx_sparse.SubMConv3d(4, 8, 3)(x)
    assert y.features.shape == (v.coordinates.shape[0], 8)
    # mean(): of the stored points (hard), of all points (given the points)
    cat = torch.cat(clouds)
    first = v.voxels[0, :v.num_points[0]].mean(0)
    assert torch.allclose(v.mean()[0], first)
    dyn = mx_sparse.PointToVoxel(VS, PCR)(clouds)
    assert dyn.voxels is None and torch.allclose(dyn.mean(cat)[0], cat[dyn.point_voxel == 0].mean(0), atol=1e-6)
    coords = dyn.point_coordinates()
    keep = dyn.point_voxel >= 0
    assert torch.equal(coords[keep], dyn.coordinates[dyn.point_voxel[keep], 1:]) and (coords[~keep] == -1).all()


def test_point_to_voxel_argument_errors():
    with pytest.raises(ValueError, match="max_voxels: only a hard voxelization"):
        mx_sparse.PointToVoxel(VS, PCR, max_voxels=10)
    with pytest.raises(ValueError, match="max_points_per_voxel: expected >= 1"):
        mx_sparse.PointToVoxel(VS, PCR, max_points_per_voxel=0)
    with pytest.raises(ValueError, match="voxel_size: expected finite values > 0"):
        mx_sparse.PointToVoxel([0.1, -1, 0.1], PCR)
    with pytest.raises(ValueError, match="points: expected a tensor"):
        mx_sparse.PointToVoxel(VS, PCR)([])


def test_fake_kernels_and_opcheck():
    opcheck = getattr(torch.library, "opcheck", None)
    if opcheck is None:
        pytest.skip("torch.library.opcheck needs torch >= 2.4")
    pts = torch.from_numpy(ref.scene_points(seed=11, n=500)).requires_grad_()
    batch = torch.zeros(pts.shape[0], dtype=torch.long)
    assert not ops.voxelize_hard(pts, batch, VS, PCR, 3, 40)[0].requires_grad   # not differentiable
    for op, args in ((ops.voxelize_hard, (pts, batch, VS, PCR, 3, 40)), (ops.voxelize_dynamic, (pts, None, VS, PCR))):
        result = opcheck(op, args)
        assert all(v == "SUCCESS" for v in result.values()), (op, result)
