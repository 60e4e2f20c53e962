"""A CenterPoint-style 3-D detector on the SECOND encoder.

voxels -> VoxelBackBone8x -> BEV map (the height axis folded into channels) -> a small
2-D conv neck (output stride 8 voxels: 0.4 m cells on KITTI's 0.05 m grid, optionally
up-sampled 2x to stride 4) -> two 1x1 heads on every BEV cell:
a heatmap per class (where object centres are) and an 8-channel box regression (sub-cell
centre offset, z, log l, log w, log h, sin yaw, cos yaw). Training targets are Gaussian peaks at the ground-truth
centres (CornerNet's radius rule) scored with the CenterNet focal loss, and an L1 loss
on the regression at the centre cells. Decoding keeps heatmap peaks that are the
maximum of their 3x3 neighbourhood (max-pool NMS) and reads the box at each.

Boxes everywhere are (x, y, z, l, w, h, yaw) in the lidar frame, z at the box centre.
"""
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from mx_sparse.models import VoxelBackBone8x

REG_CHANNELS = 8          # dx, dy, z, log l, log w, log h, sin yaw, cos yaw
OUT_STRIDE = 8            # heads' cell, in voxels: the encoder's 8x stride


def encoder_depth(sparse_depth: int) -> int:
    """Height cells of VoxelBackBone8x's output for an input of ``sparse_depth`` z cells."""
    d = (sparse_depth + 2 - 3) // 2 + 1      # conv2: k3 s2 p1
    d = (d + 2 - 3) // 2 + 1                 # conv3: k3 s2 p1
    d = (d - 3) // 2 + 1                     # conv4: k3 s2, no padding along z
    return (d - 3) // 2 + 1                  # conv_out: k3 s2 along z


class BevGrid:
    """Where the heads' cells lie: origin and size of one cell in metres, and their count.
    The encoder's three stride-2 convs (padding 1) give ceil(n / 8) cells along an axis of n
    voxels; the neck doubles that."""

    def __init__(self, point_cloud_range, voxel_size, stride: int = OUT_STRIDE):
        up = 8 // stride
        self.x0, self.y0 = float(point_cloud_range[0]), float(point_cloud_range[1])
        self.cell_x, self.cell_y = voxel_size[0] * stride, voxel_size[1] * stride
        nx = round((point_cloud_range[3] - point_cloud_range[0]) / voxel_size[0])
        ny = round((point_cloud_range[4] - point_cloud_range[1]) / voxel_size[1])
        self.width, self.height = -(-nx // 8) * up, -(-ny // 8) * up


class CenterPoint(nn.Module):
    """VoxelBackBone8x + BEV neck + heatmap/regression heads (see the module docstring).

    Args:
        in_channels: voxel feature channels.
        sparse_depth: z cells of the sparse input (grid z + 1, SECOND's convention).
        num_classes: heatmap channels.
        neck_channels: width of the 2-D neck and heads.
        upsample: heads at stride 4 (the neck up-samples 2x) instead of the encoder's 8.
    """

    def __init__(self, in_channels: int, sparse_depth: int, num_classes: int = 3, neck_channels: int = 64,
                 upsample: bool = False):
        super().__init__()
        self.out_stride = 4 if upsample else 8
        self.encoder = VoxelBackBone8x(in_channels)
        bev_channels = self.encoder.out_channels * encoder_depth(sparse_depth)
        c = neck_channels
        # The dense BEV part costs more than the sparse encoder at KITTI's 200 x 176 cells: a 1x1
        # conv first folds the 256 height-stacked channels to c (a 3x3 on 256 channels would be
        # 4x the work), then two 3x3 convs add context; the heads are 1x1 convs on the neck.
        layers = [nn.Conv2d(bev_channels, c, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                  nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(),
                  nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
        if upsample:
            layers += [nn.ConvTranspose2d(c, c, 2, stride=2, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
        self.neck = nn.Sequential(*layers)
        self.heatmap = nn.Conv2d(c, num_classes, 1)
        self.regression = nn.Conv2d(c, REG_CHANNELS, 1)
        # Start every heatmap near probability 0.1 so the focal loss is not swamped by
        # the background at step 0 (CenterNet's bias initialisation).
        nn.init.constant_(self.heatmap.bias, -math.log((1 - 0.1) / 0.1))

    def forward(self, x):
        """dict(heatmap=[B, C, H, W] logits, regression=[B, 8, H, W]) of a SparseConvTensor."""
        bev = self.neck(bev_map(self.encoder(x)))
        return dict(heatmap=self.heatmap(bev), regression=self.regression(bev))


def bev_map(x) -> torch.Tensor:
    """``x.dense()`` with the height folded into the channels, ``[B, C * D, H, W]``, written
    straight into that layout: ``dense()`` scatters channels-last and then copies the whole
    grid (72 MB a batch of two at KITTI's scale) to channels-first, which cost more than the
    scatter. Same values, bit for bit."""
    c = x.features.shape[1]
    out = x.features.new_zeros([x.batch_size, c] + list(x.spatial_shape))
    idx = x.indices.long()
    out.movedim(1, -1)[tuple(idx[:, d] for d in range(idx.shape[1]))] = x.features
    return out.flatten(1, 2)


def gaussian_radius(length_cells: float, width_cells: float, min_overlap: float = 0.1) -> float:
    """Largest centre shift (in cells) at which a box of this footprint still overlaps the
    true one by ``min_overlap`` IoU, the smallest of CornerNet's three cases."""
    h, w = length_cells, width_cells
    r1 = (h + w + math.sqrt((h + w) ** 2 - 4 * h * w * (1 - min_overlap) / (1 + min_overlap))) / 2
    b2 = 2 * (h + w)
    r2 = (b2 + math.sqrt(b2 ** 2 - 16 * (1 - min_overlap) * h * w)) / 2
    a3 = 4 * min_overlap
    b3 = -2 * min_overlap * (h + w)
    r3 = (b3 + math.sqrt(b3 ** 2 - 4 * a3 * (min_overlap - 1) * h * w)) / 2
    return min(r1, r2, r3)


def draw_gaussian(heatmap: np.ndarray, cx: int, cy: int, radius: int):
    """Raise ``heatmap`` [H, W] to a Gaussian peak of 1 at (cx, cy), sigma = (2r + 1) / 6."""
    sigma = (2 * radius + 1) / 6
    ys, xs = np.ogrid[-radius:radius + 1, -radius:radius + 1]
    g = np.exp(-(xs * xs + ys * ys) / (2 * sigma * sigma))
    h, w = heatmap.shape
    x0, x1 = max(0, cx - radius), min(w, cx + radius + 1)
    y0, y1 = max(0, cy - radius), min(h, cy + radius + 1)
    patch = g[y0 - cy + radius:y1 - cy + radius, x0 - cx + radius:x1 - cx + radius]
    np.maximum(heatmap[y0:y1, x0:x1], patch, out=heatmap[y0:y1, x0:x1])


def encode_targets(boxes, classes, grid: BevGrid, num_classes: int, min_radius: int = 2):
    """Training targets of one frame: heatmap [C, H, W], regression [K, 8], flat cell
    index [K] of each box's centre; boxes whose centre lies outside the grid are left out."""
    heatmap = np.zeros((num_classes, grid.height, grid.width), np.float32)
    reg, index = [], []
    for box, cls in zip(np.asarray(boxes, np.float64).reshape(-1, 7), np.asarray(classes)):
        fx, fy = (box[0] - grid.x0) / grid.cell_x, (box[1] - grid.y0) / grid.cell_y
        cx, cy = int(math.floor(fx)), int(math.floor(fy))
        if not (0 <= cx < grid.width and 0 <= cy < grid.height):
            continue
        radius = max(min_radius, int(gaussian_radius(box[3] / grid.cell_x, box[4] / grid.cell_y)))
        draw_gaussian(heatmap[int(cls)], cx, cy, radius)
        reg.append([fx - cx, fy - cy, box[2], math.log(box[3]), math.log(box[4]), math.log(box[5]),
                    math.sin(box[6]), math.cos(box[6])])
        index.append(cy * grid.width + cx)
    return heatmap, np.asarray(reg, np.float32).reshape(-1, REG_CHANNELS), np.asarray(index, np.int64)


def focal_loss(logits, target):
    """CenterNet's penalty-reduced focal loss, summed and divided by the number of peaks."""
    p = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    pos = target.eq(1).float()
    pos_loss = -(torch.log(p) * (1 - p) ** 2 * pos).sum()
    neg_loss = -(torch.log(1 - p) * p ** 2 * (1 - target) ** 4 * (1 - pos)).sum()
    return (pos_loss + neg_loss) / pos.sum().clamp(min=1)


def regression_loss(regression, targets):
    """L1 between the regression map at each box's centre cell and its target, per box."""
    preds, goals = [], []
    for b, (reg, index) in enumerate(targets):
        if len(index):
            preds.append(regression[b].flatten(1)[:, index].t())
            goals.append(reg)
    if not preds:
        return regression.sum() * 0
    pred, goal = torch.cat(preds), torch.cat(goals)
    return F.l1_loss(pred, goal, reduction="sum") / len(pred)


@torch.no_grad()
def decode(outputs, grid: BevGrid, max_boxes: int = 60, score_threshold: float = 0.05):
    """Per frame dict(boxes [N, 7], scores [N], classes [N]) (numpy) of the heatmap peaks."""
    heat = torch.sigmoid(outputs["heatmap"])
    peaks = heat * (F.max_pool2d(heat, 3, stride=1, padding=1) == heat)    # max-pool NMS
    b, c, h, w = heat.shape
    frames = []
    for i in range(b):
        scores, flat = peaks[i].flatten().topk(min(max_boxes, c * h * w))
        keep = scores >= score_threshold
        scores, flat = scores[keep], flat[keep]
        cls, cell = flat // (h * w), flat % (h * w)
        cy, cx = cell // w, cell % w
        r = outputs["regression"][i].flatten(1)[:, cell].t().double()
        x = grid.x0 + (cx.double() + r[:, 0]) * grid.cell_x
        y = grid.y0 + (cy.double() + r[:, 1]) * grid.cell_y
        size = r[:, 3:6].clamp(max=4.0).exp()
        yaw = torch.atan2(r[:, 6], r[:, 7])
        boxes = torch.stack([x, y, r[:, 2], size[:, 0], size[:, 1], size[:, 2], yaw], 1)
        frames.append(dict(boxes=boxes.cpu().numpy(), scores=scores.double().cpu().numpy(),
                           classes=cls.cpu().numpy().astype(np.int64)))
    return frames
