"""Layer stacks of the sparse encoders used by SECOND/PV-RCNN (VoxelBackBone8x),
CenterPoint (VoxelResBackBone8x) and segmentation-style networks (SparseUNet),
following OpenPCDet's published layer configuration."""
from functools import partial

import torch
from torch import nn

from ..nn.compile_support import check_batch_norm_rows
from ..nn.conv import SparseConv3d, SparseInverseConv3d, SubMConv3d
from ..nn.modules import SparseModule, SparseSequential, bn_relu

BatchNorm = partial(nn.BatchNorm1d, eps=1e-3, momentum=0.01)


def conv_bn_relu(conv) -> SparseSequential:
    return SparseSequential(conv, BatchNorm(conv.out_channels), nn.ReLU())


def subm(cin, cout, key):
    return conv_bn_relu(SubMConv3d(cin, cout, 3, padding=1, bias=False, indice_key=key))


def down(cin, cout, key, padding=1, kernel_size=3, stride=2):
    return conv_bn_relu(SparseConv3d(cin, cout, kernel_size, stride=stride, padding=padding, bias=False,
                                     indice_key=key))


class StagedEncoder(SparseModule):
    """Input layer, four stages and an output layer applied in sequence."""

    def forward(self, x):
        x = self.conv_input(x)
        for stage in (self.conv1, self.conv2, self.conv3, self.conv4, self.conv_out):
            x = stage(x)
        return x


class VoxelBackBone8x(StagedEncoder):
    """SECOND encoder: 1x, 2x, 4x, 8x stages of submanifold convs with strided
    downsampling, then a (3,1,1) stride-(2,1,1) conv that squeezes height."""

    def __init__(self, in_channels: int = 4):
        super().__init__()
        self.conv_input = subm(in_channels, 16, "subm1")
        self.conv1 = SparseSequential(subm(16, 16, "subm1"))
        self.conv2 = SparseSequential(down(16, 32, "spconv2"), subm(32, 32, "subm2"), subm(32, 32, "subm2"))
        self.conv3 = SparseSequential(down(32, 64, "spconv3"), subm(64, 64, "subm3"), subm(64, 64, "subm3"))
        self.conv4 = SparseSequential(down(64, 64, "spconv4", padding=(0, 1, 1)), subm(64, 64, "subm4"),
                                      subm(64, 64, "subm4"))
        self.conv_out = down(64, 128, "spconv_down2", padding=0, kernel_size=(3, 1, 1), stride=(2, 1, 1))
        self.out_channels = 128


class SparseBasicBlock(SparseModule):
    """Residual block of two submanifold convs (CenterPoint), summed on features."""

    def __init__(self, channels: int, key: str):
        super().__init__()
        self.conv1 = SubMConv3d(channels, channels, 3, padding=1, bias=False, indice_key=key)
        self.bn1 = BatchNorm(channels)
        self.conv2 = SubMConv3d(channels, channels, 3, padding=1, bias=False, indice_key=key)
        self.bn2 = BatchNorm(channels)
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.conv1(x)
        out = out.replace_feature(bn_relu(out.features, self.bn1, self.relu))
        out = self.conv2(out)
        check_batch_norm_rows(self.bn2, out.features)
        return out.replace_feature(self.relu(self.bn2(out.features) + x.features))


class VoxelResBackBone8x(StagedEncoder):
    """CenterPoint encoder: VoxelBackBone8x with residual blocks in every stage."""

    def __init__(self, in_channels: int = 4):
        super().__init__()
        self.conv_input = subm(in_channels, 16, "res1")
        self.conv1 = SparseSequential(SparseBasicBlock(16, "res1"), SparseBasicBlock(16, "res1"))
        self.conv2 = SparseSequential(down(16, 32, "spconv2"), SparseBasicBlock(32, "res2"),
                                      SparseBasicBlock(32, "res2"))
        self.conv3 = SparseSequential(down(32, 64, "spconv3"), SparseBasicBlock(64, "res3"),
                                      SparseBasicBlock(64, "res3"))
        self.conv4 = SparseSequential(down(64, 128, "spconv4", padding=(0, 1, 1)), SparseBasicBlock(128, "res4"),
                                      SparseBasicBlock(128, "res4"))
        self.conv_out = down(128, 128, "spconv_down2", padding=0, kernel_size=(3, 1, 1), stride=(2, 1, 1))
        self.out_channels = 128


class SparseUNet(SparseModule):
    """Encoder-decoder: three strided downsamplings, then SparseInverseConv3d back up
    onto the encoder voxels, with skip features concatenated at each level."""

    def __init__(self, in_channels: int = 4, channels=(16, 32, 64, 64)):
        super().__init__()
        c = channels
        self.stem = subm(in_channels, c[0], "unet1")
        self.down = nn.ModuleList(
            SparseSequential(down(c[i], c[i + 1], f"unet_down{i + 1}"), subm(c[i + 1], c[i + 1], f"unet{i + 2}"))
            for i in range(3))
        self.up = nn.ModuleList(
            conv_bn_relu(SparseInverseConv3d(c[i + 1], c[i], 3, bias=False, indice_key=f"unet_down{i + 1}"))
            for i in range(3))
        self.fuse = nn.ModuleList(subm(2 * c[i], c[i], f"unet{i + 1}") for i in range(3))
        self.out_channels = c[0]

    def forward(self, x):
        skips = [self.stem(x)]
        for stage in self.down:
            skips.append(stage(skips[-1]))
        y = skips[-1]
        for i in reversed(range(3)):
            up = self.up[i](y)
            cat = up.replace_feature(torch.cat([up.features, skips[i].features], dim=1))
            y = self.fuse[i](cat)
        return y
