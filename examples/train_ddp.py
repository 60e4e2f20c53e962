"""Data-parallel training of VoxelBackBone8x with a bird's-eye-view occupancy head (a 1x1 conv
predicting which 8x-downsampled ground cells hold any voxel) with torch.distributed's
DistributedDataParallel: one process per device, each on its own generated scenes, gradients
averaged by the process group. (The main job, examples/train_second.py, trains a full
CenterPoint detector; this example keeps the smallest model that exercises DDP.)

    torchrun --standalone --nproc_per_node 2 examples/train_ddp.py            # CPU, gloo
    torchrun --standalone --nproc_per_node 8 examples/train_ddp.py --sync-bn  # 8 NPUs (HCCL) or GPUs (NCCL)

The backend follows the device: hccl on Ascend NPUs, nccl on CUDA GPUs, gloo on CPU. On
several nodes use torchrun's --nnodes/--node_rank/--rdzv-endpoint as usual. Rank 0 prints a
progress bar and a final line with the throughput and whether all replicas hold identical
parameters.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

import mx_sparse
from mx_sparse.models import VoxelBackBone8x
from mx_sparse.synthetic import make_batch

BACKENDS = {"npu": "hccl", "cuda": "nccl", "cpu": "gloo"}


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


def local_device(local_rank: int) -> torch.device:
    """This process's device: NPU or GPU number LOCAL_RANK where present, else the CPU."""
    kind = mx_sparse.best_device().type
    if kind == "npu":
        torch.npu.set_device(local_rank)
    elif kind == "cuda":
        torch.cuda.set_device(local_rank)
    return torch.device(kind, local_rank) if kind != "cpu" else torch.device("cpu")


def crop(scene, width):
    """The ``width`` x ``width`` ground window in front of the sensor (quick runs)."""
    idx, feats = scene["indices"], scene["features"]
    y0 = scene["spatial_shape"][1] // 2 - width // 2
    keep = (idx[:, 2] >= y0) & (idx[:, 2] < y0 + width) & (idx[:, 3] < width)
    shift = torch.tensor([0, 0, y0, 0], dtype=idx.dtype, device=idx.device)
    return dict(scene, indices=idx[keep] - shift, features=feats[keep],
                spatial_shape=[scene["spatial_shape"][0], width, width])


# Finished collectives whose tensors Python created, kept until the interpreter exits. Otherwise a
# gloo worker thread may drop the last reference to one and free its tensors, which takes the GIL,
# while the main thread tears the process group down holding the GIL and joining those very
# threads: the process then never exits (seen with torch 2.13's CPU build, rank 0 hanging after
# its last line). Held here, the worker only lets go of its reference.
_FINISHED_COLLECTIVES = []


def replicas_identical(model: nn.Module) -> bool:
    """All processes hold the same parameters (what DDP guarantees after every step)."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    work = dist.all_gather(gathered, flat, async_op=True)
    work.wait()
    _FINISHED_COLLECTIVES.append(work)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=1, help="samples per process and step")
    parser.add_argument("--preset", default="kitti", choices=["kitti", "nuscenes"])
    parser.add_argument("--scenes", type=int, default=4, help="distinct generated scenes per process")
    parser.add_argument("--crop", type=int, default=0, help="crop scenes to a square ground window (0: off)")
    parser.add_argument("--sync-bn", action="store_true",
                        help="torch.nn.SyncBatchNorm (batch statistics over all processes; GPU/NPU only)")
    args = parser.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = local_device(local_rank)
    dist.init_process_group(BACKENDS[device.type])
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.sync_bn and device.type == "cpu":
        parser.error("--sync-bn: torch's SyncBatchNorm runs on GPUs and NPUs only")

    # every process its own scenes (what a DistributedSampler does with a dataset)
    scenes = [make_batch(args.preset, batch_size=args.batch_size, seed=1000 * s + 100 * rank, device=device)
              for s in range(args.scenes)]
    if args.crop:
        scenes = [crop(s, args.crop) for s in scenes]
    spatial_shape = scenes[0]["spatial_shape"]
    out_d = (((spatial_shape[0] - 1) // 2 - 1) // 2 - 1) // 2 + 1   # after the three s2 stages
    out_d = (out_d - 3) // 2 + 1
    torch.manual_seed(0)   # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = BevOccupancyModel(scenes[0]["features"].shape[1], 128 * out_d)
    if args.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.to(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if device.type != "cpu" else None)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=2e-3 * world)   # linear scaling with the global batch
    loss_fn = nn.BCEWithLogitsLoss()

    start = time.perf_counter()
    bar = tqdm(range(args.steps), desc=f"DDP x{world} ({BACKENDS[device.type]}, {device.type})", disable=rank != 0)
    for step in bar:
        s = scenes[step % len(scenes)]
        x = mx_sparse.SparseConvTensor(s["features"], s["indices"], s["spatial_shape"], s["batch_size"])
        logits = ddp(x)
        loss = loss_fn(logits, bev_target(s["indices"], s["batch_size"], logits.shape[1:], spatial_shape))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        bar.set_postfix(loss=f"{loss.item():.4f}")
    elapsed = time.perf_counter() - start
    same = replicas_identical(model)
    if rank == 0:
        print(f"done: {args.steps} steps x {world} processes ({BACKENDS[device.type]}, {device.type}), "
              f"final loss {loss.item():.4f}, {args.steps / elapsed:.2f} steps/s, replicas identical: {same}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
