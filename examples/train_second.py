"""Main job: train a SECOND sparse encoder (VoxelBackBone8x) on generated LiDAR
scenes, on the best device present (NPU, CUDA, else CPU).

The task is bird's-eye-view occupancy: a 1x1 head on the encoder's BEV map
predicts which 8x-downsampled ground cells hold any voxel, a real target that
the loss can learn. Prints a tqdm progress bar and a final line with steps/s and
voxels/s.

    python examples/train_second.py [--steps 30] [--batch-size 1] [--preset kitti]
"""
import argparse
import time

import torch
from torch import nn
from tqdm import tqdm

import mx_sparse
from mx_sparse.models import VoxelBackBone8x
from mx_sparse.synthetic import make_batch


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
    parser.add_argument("--device", default=None, help="default: best device present")
    args = parser.parse_args()

    device = torch.device(args.device) if args.device else mx_sparse.best_device()
    torch.manual_seed(0)
    scenes = [make_batch(args.preset, batch_size=args.batch_size, seed=1000 * s, device=device)
              for s in range(args.scenes)]
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
