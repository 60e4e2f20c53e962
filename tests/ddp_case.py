"""The training case the DDP test runs twice: in two gloo processes (ddp_worker.py, one sample
each) and in one process on the concatenated batch (test_distributed.py).

VoxelBackBone8x on a cropped generated KITTI scene of batch 2, float64, SGD with momentum.
BatchNorm runs with frozen statistics (eval mode after calibration; affine weights still train): plain
BatchNorm's batch statistics are per process under DDP, which is what SyncBatchNorm exists
for, and torch's SyncBatchNorm runs on GPU/NPU only.
"""
import torch
from torch import nn

import mx_sparse
from mx_sparse.models import VoxelBackBone8x
from mx_sparse.synthetic import make_batch

SHAPE = [41, 96, 96]
STEPS = 3
RECORDED_STEPS = (1, 3)
LR = 0.002   # moves the weights by 5-15 % of their largest value in one step, 13-40 % in three   # parameters are compared after these optimizer steps


def scene():
    """(features float64, indices, batch_size 2): two KITTI samples cropped to SHAPE."""
    batch = make_batch("kitti", batch_size=2, seed=11)
    idx, feats = batch["indices"], batch["features"]
    y0 = 800 - SHAPE[1] // 2   # the sensor sits at y = 800 in the KITTI grid
    keep = (idx[:, 2] >= y0) & (idx[:, 2] < y0 + SHAPE[1]) & (idx[:, 3] < SHAPE[2])
    return feats[keep].double(), idx[keep] - torch.tensor([0, 0, y0, 0], dtype=torch.int32), 2


def shard(features, indices, rank):
    """Sample ``rank`` of the batch as a batch of one."""
    mine = indices[:, 0] == rank
    idx = indices[mine].clone()
    idx[:, 0] = 0
    return features[mine], idx, 1


def model():
    """VoxelBackBone8x with BatchNorm statistics calibrated on the whole scene (one pass in
    training mode with momentum 1), then frozen, as when fine-tuning a pretrained backbone."""
    torch.manual_seed(0)
    net = VoxelBackBone8x(4).double()
    bns = [m for m in net.modules() if isinstance(m, nn.BatchNorm1d)]
    for m in bns:
        m.momentum = 1.0
    features, indices, batch_size = scene()
    with torch.no_grad():
        net(mx_sparse.SparseConvTensor(features, indices, SHAPE, batch_size))
    for m in bns:
        m.eval()
    return net


def loss(net, features, indices, batch_size):
    """Per sample, the mean square of the output features; averaged over the samples, so the
    mean of the two processes' losses is the loss of the concatenated batch."""
    y = net(mx_sparse.SparseConvTensor(features, indices, SHAPE, batch_size))
    sample = y.indices[:, 0].long()
    sums = y.features.new_zeros(batch_size).index_add(0, sample, y.features.square().sum(1))
    counts = torch.bincount(sample, minlength=batch_size) * y.features.shape[1]
    return (sums / counts).mean()


def train(net, features, indices, batch_size, params=None):
    """STEPS optimizer steps; the parameters (of ``params``, default ``net``) after each recorded step."""
    params = net if params is None else params
    opt = torch.optim.SGD(params.parameters(), lr=LR, momentum=0.9)
    recorded = {}
    for step in range(1, STEPS + 1):
        opt.zero_grad()
        loss(net, features, indices, batch_size).backward()
        opt.step()
        if step in RECORDED_STEPS:
            recorded[step] = {n: p.detach().clone() for n, p in params.named_parameters()}
    return recorded
