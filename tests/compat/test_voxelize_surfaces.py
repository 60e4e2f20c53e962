"""Voxelization on the mmcv surface (mmcv.ops.Voxelization / voxelization after patch_mmcv())
and on the mx_driving surface (mx_sparse.Voxelization, mx_driving.* after
patch_mx_driving()), against the plain reference of tests/voxel_reference.py; the rest of the
mx_driving module paths and mx_driving._C.npu_sparse_conv3d_grad against a float64
autograd reference."""
import sys

import numpy as np
import pytest
import torch

import mx_sparse
import voxel_reference as ref

VS, PCR = [0.2, 0.2, 0.4], [-8.0, -8.0, -2.0, 8.0, 8.0, 2.0]


@pytest.fixture
def mmcv_ops():
    ops = mx_sparse.patch_mmcv(register=False)
    try:
        yield ops
    finally:
        mx_sparse.unpatch_mmcv()


@pytest.fixture
def mx_driving():
    module = mx_sparse.patch_mx_driving()
    try:
        yield module
    finally:
        mx_sparse.unpatch_mx_driving()


def test_mmcv_voxelization_hard_and_dynamic(mmcv_ops):
    import mmcv.ops.voxelize as voxelize_module
    from mmcv.ops import Voxelization, voxelization
    assert voxelize_module.Voxelization is Voxelization is mx_sparse.ops.Voxelization
    pts = ref.scene_points(seed=20, n=6000)
    e_vox, e_coords, e_num, e_pv = ref.voxelize(pts, VS, PCR, 4, 300)
    voxels, coors, num = voxelization(torch.from_numpy(pts), VS, PCR, 4, 300)
    assert torch.equal(voxels, torch.from_numpy(e_vox)) and torch.equal(num, torch.from_numpy(e_num))
    assert coors.dtype == torch.int32 and torch.equal(coors, torch.from_numpy(e_coords[:, 1:]))  # (z, y, x)
    _, d_coords, _, d_pv = ref.voxelize(pts, VS, PCR)
    expected = np.where(d_pv[:, None] >= 0, d_coords[np.maximum(d_pv, 0), 1:], -1)
    for dynamic in (voxelization(torch.from_numpy(pts), VS, PCR, -1), voxelization(torch.from_numpy(pts), VS, PCR, 5, -1)):
        assert torch.equal(dynamic, torch.from_numpy(expected.astype(np.int32)))


def test_mmcv_voxelization_module(mmcv_ops):
    from mmcv.ops import Voxelization
    layer = Voxelization([0.05, 0.05, 0.1], [0, -40, -3, 70.4, 40, 1], 5, (120, 400))
    assert layer.grid_size.tolist() == [1408, 1600, 40] and [int(v) for v in layer.pcd_shape] == [1, 1600, 1408]
    pts = torch.from_numpy(ref.scene_points(seed=21, n=20000, voxel_size=(0.05, 0.05, 0.1),
                                            point_cloud_range=(0, -40, -3, 70.4, 40, 1)))
    assert layer.train()(pts)[0].shape[0] == 120 and layer.eval()(pts)[0].shape[0] == 400
    assert "max_voxels=(120, 400)" in repr(layer)
    voxels, coors, num = Voxelization(VS, PCR, 5)(pts[:0])          # mmcv: no points, no voxels
    assert voxels.shape == (0, 5, 4) and coors.shape == (0, 3) and num.shape == (0,)
    assert Voxelization(VS, PCR, -1)(pts[:0]).shape == (0, 3)


def test_patch_mmcv_restores(mmcv_ops):
    import mmcv.ops
    assert mmcv.ops.voxelization is mx_sparse.ops.voxelization


def test_mx_driving_voxelization(mx_driving):
    """mx_driving's contract: hard -> (voxel_num, voxels, coors in `layout` order, num_points);
    dynamic (max_points or max_voxels -1) -> coors [N, 3] (z, y, x), -1 rows outside."""
    import mx_driving.point
    from mx_driving import Voxelization
    assert Voxelization is mx_sparse.Voxelization is mx_driving.point.Voxelization
    pts = ref.scene_points(seed=22, n=6000)
    e_vox, e_coords, e_num, _ = ref.voxelize(pts, VS, PCR, 10, 1000)
    cnt, voxels, coors, num = Voxelization(VS, PCR, 10, 1000)(torch.from_numpy(pts))
    assert cnt == len(e_num) == 1000 and torch.equal(voxels, torch.from_numpy(e_vox))
    assert torch.equal(coors, torch.from_numpy(e_coords[:, :0:-1].copy())) and torch.equal(num, torch.from_numpy(e_num))
    zyx = Voxelization(VS, PCR, 10, 1000, layout="ZYX")(torch.from_numpy(pts))[2]
    assert torch.equal(zyx, torch.from_numpy(e_coords[:, 1:]))
    _, d_coords, _, d_pv = ref.voxelize(pts, VS, PCR)
    expected = np.where(d_pv[:, None] >= 0, d_coords[np.maximum(d_pv, 0), 1:], -1).astype(np.int32)
    assert torch.equal(Voxelization(VS, PCR, -1)(torch.from_numpy(pts)), torch.from_numpy(expected))
    assert torch.equal(mx_sparse.voxelization(torch.from_numpy(pts), VS, PCR), torch.from_numpy(expected))
    with pytest.raises(ValueError, match="layout: expected one of"):
        Voxelization(VS, PCR, 10, 1000, layout="YXZ")(torch.from_numpy(pts))
    with pytest.raises(ValueError, match="points: expected a non-empty tensor"):
        Voxelization(VS, PCR, 10, 1000)(torch.zeros(0, 4))
    cnt2, *_ = mx_driving._C.hard_voxelize(torch.from_numpy(pts), VS, PCR, 10, 1000, "XYZ")
    assert cnt2 == cnt


def test_mx_driving_module_paths(mx_driving):
    import mx_driving.modules.sparse_conv as sparse_conv
    import mx_driving.modules.sparse_modules as sparse_modules
    import mx_driving.modules.sparse_structure as sparse_structure
    import mx_driving.ops.voxelization as voxelization_op
    from mx_driving.spconv import SparseConv3d, SparseConvTensor, SparseSequential, SubMConv3d
    assert mx_driving.__mx_sparse__ and mx_driving.spconv is mx_sparse.spconv
    assert (SparseConv3d, SubMConv3d, SparseConvTensor, SparseSequential) == (
        mx_sparse.SparseConv3d, mx_sparse.SubMConv3d, mx_sparse.SparseConvTensor, mx_sparse.SparseSequential)
    assert mx_driving.SparseInverseConv3d is sparse_conv.SparseInverseConv3d is mx_sparse.SparseInverseConv3d
    assert sparse_structure.SparseConvTensor is SparseConvTensor and voxelization_op.voxelization is mx_driving.voxelization
    # mx_driving's helpers, hand-computed
    assert sparse_conv.get_conv_output_size([10, 11, 12], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]) == [5, 6, 6]
    assert sparse_conv.get_deconv_output_size([5, 6, 6], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1],
                                              [0, 1, 0]) == [9, 12, 11]
    assert sparse_conv.get_inverse_conv_output_size([5, 6, 6], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1],
                                                    [0, 1, 0]) == [9, 12, 11]
    assert sparse_modules._mean_update([10.0, 20.0], [4.0, 8.0], 3) == [5.5, 11.0]
    assert sparse_modules._mean_update(2.0, 1.0, 1) == 1.5 and sparse_modules._mean_update(1, 1, -1) == []
    x = SparseConvTensor(torch.ones(2, 3), torch.tensor([[0, 1, 2, 3], [0, 0, 0, 0]], dtype=torch.int32), [4, 4, 4], 1)
    assert sparse_modules.ToDense()(x).shape == (1, 3, 4, 4, 4)
    x.grid = torch.zeros(1)
    assert sparse_modules.RemoveGrid()(x).grid is None
    conv = SubMConv3d(3, 4, 3, mode="mmcv")
    conv.mode = None          # mx_driving: any mode but "mmcv" initialises like spconv
    conv.reset_parameters()
    with pytest.raises(AttributeError, match="mx_driving.nms3d is not provided by mx_sparse"):
        mx_driving.nms3d
    with pytest.raises(AttributeError, match=r"mx_driving._C.point_to_voxel is not provided by mx_sparse"):
        mx_driving._C.point_to_voxel


def test_unpatch_mx_driving():
    mx_sparse.patch_mx_driving()
    mx_sparse.unpatch_mx_driving()
    assert "mx_driving" not in sys.modules
    with pytest.raises(ImportError):
        import mx_driving  # noqa: F401


def _rulebook(nbr):
    """mx_driving's rulebook of a map: input_row * K + k grouped by output row, and offsets."""
    kvol = nbr.shape[1]
    m, k = torch.nonzero(nbr >= 0, as_tuple=True)     # row-major: grouped by output row
    entries = (nbr[m, k].long() * kvol + k).int()
    counts = torch.bincount(m, minlength=nbr.shape[0])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)]).int()
    return entries, offsets


def test_npu_sparse_conv3d_grad_matches_float64_autograd(mx_driving):
    from helpers import random_voxels
    idx = random_voxels([9, 10, 11], 2, density=0.25, seed=5)
    _, nbr = mx_sparse.functional.build_conv_map(idx, [9, 10, 11], 2, [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    g = torch.Generator().manual_seed(0)
    x = torch.randn(idx.shape[0], 5, generator=g)
    w = torch.randn(3, 3, 3, 5, 6, generator=g)
    grad = torch.randn(nbr.shape[0], 6, generator=g)
    entries, offsets = _rulebook(nbr)
    dx, dw = mx_driving._C.npu_sparse_conv3d_grad(entries, offsets, x, w, grad)
    # reference: out[m] = sum_k x[nbr[m, k]] @ W[k], by plain indexing in float64
    x64, w64 = x.double().requires_grad_(), w.double().reshape(27, 5, 6).requires_grad_()
    gathered = torch.where((nbr >= 0)[..., None], x64[nbr.clamp(min=0).long()], torch.zeros((), dtype=torch.float64))
    out = torch.einsum("mkc,kcd->md", gathered, w64)
    rx, rw = torch.autograd.grad((out * grad.double()).sum(), (x64, w64))
    assert dx.shape == x.shape and dw.shape == w.shape
    torch.testing.assert_close(dx.double(), rx, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dw.double(), rw.reshape(w.shape), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="former_sorted_indices: expected input_row"):
        mx_driving._C.npu_sparse_conv3d_grad(entries + 10**6, offsets, x, w, grad)
    with pytest.raises(ValueError, match=r"grad: expected \["):
        mx_driving._C.npu_sparse_conv3d_grad(entries, offsets, x, w, grad[1:])
