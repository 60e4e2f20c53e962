"""Benchmark workloads: a network (built twice, mx_sparse and spconv, same weights) and a
seeded LiDAR-like input. Inputs come from ``mx_sparse.synthetic`` (ray-cast street scenes,
about 5-8 active 3x3x3 neighbours per voxel); uniform random voxels appear only in the
workload marked ``extra``."""
import math
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np
import torch
from torch import nn

import mx_sparse
from mx_sparse.models import SparseUNet, VoxelBackBone8x, VoxelResBackBone8x
from mx_sparse.synthetic import make_batch, mean_active_neighbors
from mx_sparse.synthetic.lidar_scene import generate_points, voxelize


class SingleSubM(mx_sparse.SparseModule):
    """One SubMConv3d, like mx_driving's own single-layer tests (without bias: spconv's CPU
    inference path cannot add one)."""

    def __init__(self, cin, cout, k=3):
        super().__init__()
        self.conv = mx_sparse.SubMConv3d(cin, cout, k, padding=k // 2, bias=False, indice_key="single")

    def forward(self, x):
        return self.conv(x)


MX_NETS = {"VoxelBackBone8x": VoxelBackBone8x, "VoxelResBackBone8x": VoxelResBackBone8x,
           "SparseUNet": SparseUNet, "SingleSubM": SingleSubM}


@dataclass
class Workload:
    name: str
    net: str                    # key of MX_NETS / spconv_nets.NETS
    net_args: tuple
    make_input: Callable[[], Dict]   # -> dict(features, indices, spatial_shape, batch_size)
    desc: str
    extra: bool = False         # not a realistic LiDAR input (reported separately)
    tags: List[str] = field(default_factory=list)   # "target" rows of the issue, "quick", ...

    def build_mx(self, seed: int = 0) -> nn.Module:
        torch.manual_seed(seed)
        net = MX_NETS[self.net](*self.net_args)
        _randomize_batchnorm(net, seed)
        return net


def _randomize_batchnorm(net, seed):
    """Non-trivial BatchNorm statistics and affine parameters so that eval-mode outputs
    exercise them (both libraries get the same values through the weight copy)."""
    g = torch.Generator().manual_seed(seed + 1)
    for m in net.modules():
        if isinstance(m, nn.BatchNorm1d):
            c = m.num_features
            m.weight.data = 0.5 + torch.rand(c, generator=g)
            m.bias.data = 0.1 * torch.randn(c, generator=g)
            m.running_mean = 0.1 * torch.randn(c, generator=g)
            m.running_var = 0.5 + torch.rand(c, generator=g)


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------
def scene(preset: str, batch_size: int, seed: int = 0):
    return lambda: make_batch(preset, batch_size, seed)


def _nearest(coords_yx, n, centre_yx):
    """Rows of the n voxels nearest the sensor in the ground plane, in their original order
    (keeps surfaces intact, unlike random thinning)."""
    d = ((coords_yx - np.asarray(centre_yx)) ** 2).sum(1)
    keep = np.sort(np.argsort(d, kind="stable")[:n])
    return keep


def lidar_xyz_grid(n, point_cloud_range, voxel_size, seed=0, **overrides):
    """``n`` LiDAR voxels (nuScenes-like sensor) in an (x, y, z)-ordered grid, the axis order
    of mx_driving's single-layer tests (e.g. spatial_shape [1440, 1440, 41])."""

    def make():
        pts = generate_points("nuscenes", seed, **overrides)
        feats, zyx, shape = voxelize(pts, point_cloud_range, voxel_size)
        if len(zyx) < n:
            raise RuntimeError(f"scene has {len(zyx)} voxels, fewer than the {n} requested")
        keep = _nearest(zyx[:, 1:], n, [shape[1] // 2, shape[2] // 2])
        xyz = zyx[keep][:, ::-1]
        order = np.lexsort((xyz[:, 2], xyz[:, 1], xyz[:, 0]))
        xyz = np.ascontiguousarray(xyz[order])
        inds = np.concatenate([np.zeros((n, 1), np.int32), xyz], 1).astype(np.int32)
        return dict(features=torch.from_numpy(feats[keep][order][:, :4].copy()), indices=torch.from_numpy(inds),
                    spatial_shape=shape[::-1], batch_size=1)

    return make


def nearest_of_scene(preset, n, seed=0):
    """The ``n`` voxels of a scene nearest the sensor (small-scale workloads)."""

    def make():
        b = make_batch(preset, 1, seed)
        yx = b["indices"][:, 2:].numpy()
        keep = torch.from_numpy(_nearest(yx, n, [b["spatial_shape"][1] // 2, 0]))   # KITTI sensor: x = 0
        return dict(features=b["features"][keep].contiguous(), indices=b["indices"][keep].contiguous(),
                    spatial_shape=b["spatial_shape"], batch_size=1)

    return make


def uniform_random(n, spatial_shape, channels, seed=0):
    """mx_driving's test generator: uniform random unique voxels (almost no neighbours)."""

    def make():
        rng = np.random.default_rng(seed)
        c = np.stack([rng.integers(0, s, 2 * n) for s in spatial_shape], 1)
        c = np.unique(c, axis=0)
        c = c[np.sort(rng.permutation(len(c))[:n])]
        inds = np.concatenate([np.zeros((n, 1), np.int64), c], 1).astype(np.int32)
        feats = rng.uniform(0, 5, (n, channels)).astype(np.float32)
        return dict(features=torch.from_numpy(feats), indices=torch.from_numpy(inds),
                    spatial_shape=list(spatial_shape), batch_size=1)

    return make


def with_channels(make, channels, seed=0):
    """Widen the 4 LiDAR channels to ``channels`` (deterministic random projection), for
    single-layer cases whose first layer takes more than 4 channels."""

    def wrapped():
        d = make()
        f = d["features"]
        if f.shape[1] != channels:
            g = torch.Generator().manual_seed(seed)
            proj = torch.randn(f.shape[1], channels, generator=g) / math.sqrt(f.shape[1])
            d["features"] = (f @ proj).contiguous()
        return d

    return wrapped


NUSC_075 = dict(point_cloud_range=[-54.0, -54.0, -5.0, 54.0, 54.0, 3.0], voxel_size=[0.075, 0.075, 0.2])
STRIP = dict(point_cloud_range=[-59.0, -9.0, -5.0, 59.0, 9.0, 3.0], voxel_size=[0.1, 0.1, 2.0])

WORKLOADS = [
    Workload("second_kitti_b1", "VoxelBackBone8x", (4,), scene("kitti", 1),
             "VoxelBackBone8x (SECOND), KITTI-like scene, batch 1", tags=["target", "bf16", "f64"]),
    Workload("second_kitti_b4", "VoxelBackBone8x", (4,), scene("kitti", 4),
             "VoxelBackBone8x (SECOND), KITTI-like scenes, batch 4", tags=["target"]),
    Workload("second_nusc_b1", "VoxelBackBone8x", (5,), scene("nuscenes", 1),
             "VoxelBackBone8x (SECOND), nuScenes-like 10-sweep scene, batch 1", tags=["target"]),
    Workload("centerpoint_nusc_b1", "VoxelResBackBone8x", (5,), scene("nuscenes", 1),
             "VoxelResBackBone8x (CenterPoint), nuScenes-like scene, batch 1"),
    Workload("unet_kitti_b1", "SparseUNet", (4,), scene("kitti", 1),
             "SparseUNet with inverse convs, KITTI-like scene, batch 1"),
    Workload("second_kitti_8k", "VoxelBackBone8x", (4,), nearest_of_scene("kitti", 8000),
             "VoxelBackBone8x, 8 000 voxels of a KITTI-like scene (nearest the sensor), batch 1",
             tags=["quick", "f64"]),
    Workload("subm_61557", "SingleSubM", (16, 32), with_channels(lidar_xyz_grid(61557, **NUSC_075), 16),
             "SubMConv3d 16->32 k3, 61 557 LiDAR voxels in [1440,1440,41] (mx_driving test shape)",
             tags=["quick"]),
    Workload("subm_38153", "SingleSubM", (128, 256),
             with_channels(lidar_xyz_grid(38153, **STRIP, num_sweeps=20), 128),
             "SubMConv3d 128->256 k3, 38 153 LiDAR voxels in [1180,180,5] (mx_driving test shape)"),
    Workload("subm_61557_uniform", "SingleSubM", (16, 32), uniform_random(61557, [1440, 1440, 41], 16),
             "extra: SubMConv3d 16->32 k3, 61 557 UNIFORM RANDOM voxels in [1440,1440,41]", extra=True),
    Workload("second_kitti_1k", "VoxelBackBone8x", (4,), nearest_of_scene("kitti", 1000),
             "small scale: VoxelBackBone8x, 1 000 voxels (nearest the sensor), batch 1",
             tags=["small", "quick", "bf16", "f64"]),
]

BY_NAME = {w.name: w for w in WORKLOADS}


def describe_input(inp) -> Dict:
    inds = inp["indices"].numpy()
    return dict(voxels=int(len(inds)), batch_size=int(inp["batch_size"]), spatial_shape=list(inp["spatial_shape"]),
                channels=int(inp["features"].shape[1]), mean_active_neighbors=round(mean_active_neighbors(inds), 2))


def tiny_input(n=10, channels=4, seed=0):
    """``n`` voxels on a short ground line, for the per-call overhead measurement."""
    g = torch.Generator().manual_seed(seed)
    x = torch.arange(n, dtype=torch.int32) + 700
    inds = torch.stack([torch.zeros_like(x), torch.full_like(x, 10), torch.full_like(x, 800), x], 1)
    return dict(features=torch.rand(n, channels, generator=g), indices=inds.contiguous(),
                spatial_shape=[41, 1600, 1408], batch_size=1)


def select(names: Optional[str], quick: bool) -> List[Workload]:
    if names:
        unknown = [n for n in names.split(",") if n not in BY_NAME]
        if unknown:
            raise SystemExit(f"unknown workload(s) {unknown}; choose from {list(BY_NAME)}")
        return [BY_NAME[n] for n in names.split(",")]
    return [w for w in WORKLOADS if "quick" in w.tags] if quick else list(WORKLOADS)
