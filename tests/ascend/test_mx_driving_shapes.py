"""mx_driving's own sparse-conv test shapes through the emulated AscendC kernels, scaled to CI time.

mx_driving tests its sparse convolutions with 61 557 voxels in spatial_shape [1440, 1440, 41],
16 -> 32 channels, k3 (SubMConv3d and strided SparseConv3d), and with 38 153 voxels in
[1180, 180, 5], 128 -> 256 channels, k3. Here the grids and channel counts are kept and only the
voxel count is scaled down (the emulator executes every lane of every vector instruction and
every multiply-add of the Cube on the CPU). Voxels come from the bench's generators: the voxels of
a synthetic nuScenes-like sweep nearest the sensor (bench.workloads.lidar_xyz_grid, as in the
bench's subm_61557 / subm_38153 rows) and mx_driving's own uniform random generator.

Maps must equal the CPU backend exactly; gather_mm, its input gradient and the weight gradient
must match the CPU ops within dtype tolerance, fp32 and fp16, on a 910B4 (20 AIC / 40 AIV)."""
import sys

import pytest
import torch

import ascend_ops as ao
import mx_sparse.functional as F
from ascend_ops import CORE_CONFIGS
from test_gather_mm import _check, _inputs

sys.path.insert(0, str(ao.REPO))
from bench.workloads import NUSC_075, STRIP, lidar_xyz_grid, uniform_random  # noqa: E402

ENV = CORE_CONFIGS["B4"]
STRIDED = dict(kernel_size=[3, 3, 3], stride=[2, 2, 2], padding=[1, 1, 1], dilation=[1, 1, 1])

# name -> (generator, spatial shape of the mx_driving test, voxels kept)
SCENES = {
    "lidar_1440x1440x41": (lambda n: lidar_xyz_grid(n, **NUSC_075), [1440, 1440, 41], 3000),
    "uniform_1440x1440x41": (lambda n: uniform_random(n, [1440, 1440, 41], 16), [1440, 1440, 41], 3000),
    "lidar_1180x180x5": (lambda n: lidar_xyz_grid(n, **STRIP, num_sweeps=20), [1180, 180, 5], 500),
}


@pytest.fixture(scope="module")
def mxd_scenes():
    out = {}
    for name, (make, shape, n) in SCENES.items():
        d = make(n)()
        assert list(d["spatial_shape"]) == shape and d["indices"].shape == (n, 4)
        out[name] = (d["indices"], shape)
    return out


@pytest.mark.parametrize("scene", list(SCENES))
def test_subm_map_equals_cpu(ops_bin, mxd_scenes, tmp_path, scene):
    ind, shape = mxd_scenes[scene]
    ref = F.build_subm_map(ind, shape, 1, [3, 3, 3], [1, 1, 1])
    got, _ = ao.subm_map(ops_bin, ind, shape, 1, [3, 3, 3], tmp_path, ao.sim_env(**ENV))
    assert torch.equal(got, ref)


@pytest.mark.parametrize("scene", ["lidar_1440x1440x41", "uniform_1440x1440x41"])
def test_strided_conv_map_equals_cpu(ops_bin, mxd_scenes, tmp_path, scene):
    ind, shape = mxd_scenes[scene]
    s = STRIDED
    ro, rn = F.build_conv_map(ind, shape, 1, s["kernel_size"], s["stride"], s["padding"], s["dilation"])
    go, gn, _ = ao.conv_map(ops_bin, ind, shape, 1, s["kernel_size"], s["stride"], s["padding"], s["dilation"],
                            tmp_path, ao.sim_env(**ENV))
    assert torch.equal(go, ro) and torch.equal(gn, rn)


def _map(ind, shape, strided):
    """(nbr [M, 27], nbr_t [N, 27]) of the CPU backend (the tests above check the NPU maps equal it)."""
    if strided:
        s = STRIDED
        _, nbr = F.build_conv_map(ind, shape, 1, s["kernel_size"], s["stride"], s["padding"], s["dilation"])
    else:
        nbr = F.build_subm_map(ind, shape, 1, [3, 3, 3], [1, 1, 1])
    return nbr, F.transpose_map(nbr, ind.shape[0])


# (scene, strided map, Cin, Cout): the two mx_driving layer shapes, subm and strided
LAYERS = [("lidar_1440x1440x41", False, 16, 32), ("lidar_1440x1440x41", True, 16, 32),
          ("lidar_1180x180x5", False, 128, 256)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("scene,strided,cin,cout", LAYERS, ids=["subm16-32", "strided16-32", "subm128-256"])
def test_gather_mm_forward_backward(ops_bin, mxd_scenes, tmp_path, dtype, scene, strided, cin, cout):
    ind, shape = mxd_scenes[scene]
    nbr, nbr_t = _map(ind, shape, strided)
    assert (nbr >= 0).sum() > nbr.shape[0]   # real neighbours, not only the centre / own output
    f, w, grad = _inputs(ind.shape[0], nbr.shape[0], cin, cout, 27, dtype, seed=cin + strided)
    env = ao.sim_env(**ENV)

    out, _ = ao.gather_mm(ops_bin, f, w, nbr, tmp_path / "fwd", env)
    _check(out, F.gather_mm(f, w, nbr, nbr_t), dtype)

    fr = f.float().clone().requires_grad_(True)
    F.gather_mm(fr, w.float(), nbr, nbr_t).backward(grad.float())
    gin, _ = ao.gather_mm_backprop_input(ops_bin, grad, w, nbr_t, tmp_path / "bpi", env)
    _check(gin, fr.grad, dtype)

    dw, _ = ao.gather_mm_backprop_filter(ops_bin, f, grad, nbr, tmp_path / "bpf", env)
    _check(dw, F.gather_mm_backprop_filter(f, grad, nbr, nbr_t), dtype)
