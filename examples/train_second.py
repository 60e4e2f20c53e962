"""Main job: train a SECOND sparse encoder (VoxelBackBone8x) on LiDAR frames -- generated
street scenes by default, or KITTI-style ``.bin`` files (``--points``) -- on the best device
present (NPU, CUDA, else CPU).

Points become voxels with ``mx_sparse.PointToVoxel`` (SECOND's settings: the preset's voxel
size and range, at most ``--max-points-per-voxel`` points per voxel, features = mean point,
as OpenPCDet's MeanVFE). The task is bird's-eye-view occupancy: a 1x1 head on the encoder's
BEV map predicts which 8x-downsampled ground cells hold any voxel, a real target that the
loss can learn. Prints the voxelization, a tqdm progress bar and a final line with steps/s
and voxels/s.

    python examples/train_second.py [--steps 30] [--batch-size 1] [--preset kitti]
                                    [--points FILE.bin | DIR] [--max-voxels N]
"""
import argparse
import glob
import os
import time

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

import mx_sparse
from mx_sparse.models import VoxelBackBone8x
from mx_sparse.synthetic import PRESETS, generate_points


def read_kitti_bin(path: str) -> np.ndarray:
    """A KITTI velodyne frame: float32 (x, y, z, intensity) per point."""
    size = os.path.getsize(path)
    if size == 0 or size % 16:
        raise SystemExit(f"--points: {path} holds {size} bytes; a KITTI .bin frame holds 16 per point "
                         f"(float32 x, y, z, intensity)")
    return np.fromfile(path, dtype=np.float32).reshape(-1, 4)


def load_frames(points_path, preset: str, count: int):
    """(frames, description): the .bin frames of a file or a folder (sorted by name), or
    ``count`` generated frames."""
    if points_path is None:
        return [generate_points(preset, seed=1000 * s) for s in range(count)], f"{count} generated {preset} scenes"
    if os.path.isdir(points_path):
        files = sorted(glob.glob(os.path.join(points_path, "*.bin")))
        if not files:
            raise SystemExit(f"--points: no .bin files in {points_path}")
    elif os.path.isfile(points_path):
        files = [points_path]
    else:
        raise SystemExit(f"--points: {points_path} is neither a .bin file nor a folder")
    return [read_kitti_bin(f) for f in files], f"{len(files)} frame(s) from {points_path}"


def voxelized_batches(frames, batch_size: int, voxelizer: mx_sparse.PointToVoxel, device):
    """One SparseConvTensor input per batch of consecutive frames (cycling through them),
    plus the points, voxels and dropped-point counts of all batches."""
    batches, stats = [], dict(points=0, voxels=0, out_of_range=0, max_voxels=0, max_points=0)
    # SECOND's sparse shape has one more z cell than the grid ([41, 1600, 1408] on KITTI).
    shape = [voxelizer.spatial_shape[0] + 1] + voxelizer.spatial_shape[1:]
    for start in range(0, len(frames), batch_size):
        clouds = [torch.from_numpy(frames[(start + i) % len(frames)]).to(device) for i in range(batch_size)]
        v = voxelizer(clouds)
        batches.append(dict(features=v.mean(), indices=v.coordinates, spatial_shape=shape, batch_size=batch_size))
        stats["points"] += sum(c.shape[0] for c in clouds)
        stats["voxels"] += v.coordinates.shape[0]
        for reason, n in v.dropped.items():
            stats[reason] += n
    return batches, stats


class BevOccupancyModel(nn.Module):
    def __init__(self, in_channels: int, bev_channels: int):
        super().__init__()
        self.encoder = VoxelBackBone8x(in_channels)
        self.head = nn.Conv2d(bev_channels, 1, 1)

    def forward(self, x):
        y = self.encoder(x).dense()                 # [B, 128, D', H', W']
        bev = y.flatten(1, 2)                       # [B, 128 * D', H', W']
        return self.head(bev)[:, 0]


def bev_target(indices, batch_size, out_hw, spatial_shape):
    """1 where any input voxel falls into an output BEV cell."""
    target = torch.zeros(batch_size, *out_hw, device=indices.device)
    scale_y = spatial_shape[1] / out_hw[0]
    scale_x = spatial_shape[2] / out_hw[1]
    b = indices[:, 0].long()
    y = (indices[:, 2].float() / scale_y).long().clamp(max=out_hw[0] - 1)
    x = (indices[:, 3].float() / scale_x).long().clamp(max=out_hw[1] - 1)
    target[b, y, x] = 1.0
    return target


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--preset", default="kitti", choices=["kitti", "nuscenes"])
    parser.add_argument("--scenes", type=int, default=4, help="distinct generated scenes to cycle through")
    parser.add_argument("--points", default=None, metavar="PATH",
                        help="KITTI-style .bin frame (float32 x, y, z, intensity) or a folder of them, "
                             "instead of generated scenes")
    parser.add_argument("--max-points-per-voxel", type=int, default=5)
    parser.add_argument("--max-voxels", type=int, default=None, help="per frame (default: no cap)")
    parser.add_argument("--device", default=None, help="default: best device present")
    args = parser.parse_args()

    device = torch.device(args.device) if args.device else mx_sparse.best_device()
    torch.manual_seed(0)
    cfg = PRESETS[args.preset]
    frames, source = load_frames(args.points, args.preset, args.scenes * args.batch_size)
    voxelizer = mx_sparse.PointToVoxel(cfg["voxel_size"], cfg["point_cloud_range"], args.max_points_per_voxel,
                                       args.max_voxels)
    scenes, stats = voxelized_batches(frames, args.batch_size, voxelizer, device)
    print(f"data: {source}; {stats['points']:,} points -> {stats['voxels']:,} voxels in {len(scenes)} batch(es) "
          f"of {args.batch_size} (dropped points: {stats['out_of_range']:,} outside {cfg['point_cloud_range']}, "
          f"{stats['max_points']:,} beyond {args.max_points_per_voxel} per voxel, "
          f"{stats['max_voxels']:,} beyond max_voxels)")
    spatial_shape = scenes[0]["spatial_shape"]
    in_channels = scenes[0]["features"].shape[1]
    out_d = (((spatial_shape[0] - 1) // 2 - 1) // 2 - 1) // 2 + 1  # after the three s2 stages
    out_d = (out_d - 3) // 2 + 1                                   # conv_out: k3 s2 along z
    model = BevOccupancyModel(in_channels, 128 * out_d).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    loss_fn = nn.BCEWithLogitsLoss()

    voxels = 0
    start = time.perf_counter()
    bar = tqdm(range(args.steps), desc=f"train VoxelBackBone8x ({device.type})", unit="step")
    for step in bar:
        s = scenes[step % len(scenes)]
        x = mx_sparse.SparseConvTensor(s["features"], s["indices"], s["spatial_shape"], s["batch_size"])
        logits = model(x)
        target = bev_target(s["indices"], s["batch_size"], logits.shape[1:], spatial_shape)
        loss = loss_fn(logits, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        voxels += s["indices"].shape[0]
        bar.set_postfix(loss=f"{loss.item():.4f}", voxels=s["indices"].shape[0])
    elapsed = time.perf_counter() - start
    print(f"done: {args.steps} steps on {device.type}, final loss {loss.item():.4f}, "
          f"{args.steps / elapsed:.2f} steps/s, {voxels / elapsed:,.0f} voxels/s")


if __name__ == "__main__":
    main()
