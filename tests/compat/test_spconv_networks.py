"""Whole networks written against the ``spconv.pytorch`` API, run once on spconv 2.3.8 and
once on mx_sparse's spconv-2.x surface with the same state_dict and the same input (a
cropped synthetic KITTI scene, two samples). Outputs (per voxel), output voxel sets, and
the gradients of the input features and of every parameter agree within 1e-4 relative.

Gradients are compared in float64 (spconv's CPU wheel runs float64): in float32 the
last-bit differences of any two correct implementations flip a few ReLU gates whose input
is within ~1e-7 of zero, and a flipped gate changes that voxel's gradient entirely (we
measured 1.4e-2 relative on VoxelBackBone8x between spconv and a float64 dense reference,
and the same between mx_sparse run with 1 vs 2 OpenMP threads and that reference). The
float32 forward is compared too (test_network_forward_float32)."""
from functools import partial

import pytest
import torch
from torch import nn

from .conftest import compare_outputs, coord_grad, make_tensor, oracle, ours, real, record, rel_err, scene

TOL = 1e-4


def voxel_backbone_8x(spconv, cin=4):
    """SECOND / PV-RCNN encoder (OpenPCDet VoxelBackBone8x), channels as published."""
    BN = partial(nn.BatchNorm1d, eps=1e-3, momentum=0.01)

    def block(ci, co, k, key, stride=1, padding=0, kind="subm"):
        if kind == "subm":
            conv = spconv.SubMConv3d(ci, co, k, bias=False, indice_key=key)
        else:
            conv = spconv.SparseConv3d(ci, co, k, stride=stride, padding=padding, bias=False, indice_key=key)
        return spconv.SparseSequential(conv, BN(co), nn.ReLU())

    class Net(spconv.SparseModule):
        def __init__(self):
            super().__init__()
            self.conv_input = spconv.SparseSequential(
                spconv.SubMConv3d(cin, 16, 3, padding=1, bias=False, indice_key="subm1"), BN(16), nn.ReLU())
            self.conv1 = spconv.SparseSequential(block(16, 16, 3, "subm1"))
            self.conv2 = spconv.SparseSequential(block(16, 32, 3, "spconv2", 2, 1, "spconv"),
                                                 block(32, 32, 3, "subm2"), block(32, 32, 3, "subm2"))
            self.conv3 = spconv.SparseSequential(block(32, 64, 3, "spconv3", 2, 1, "spconv"),
                                                 block(64, 64, 3, "subm3"), block(64, 64, 3, "subm3"))
            self.conv4 = spconv.SparseSequential(block(64, 64, 3, "spconv4", 2, (0, 1, 1), "spconv"),
                                                 block(64, 64, 3, "subm4"), block(64, 64, 3, "subm4"))
            self.conv_out = spconv.SparseSequential(
                spconv.SparseConv3d(64, 128, (3, 1, 1), stride=(2, 1, 1), padding=0, bias=False,
                                    indice_key="spconv_down2"), BN(128), nn.ReLU())

        def forward(self, x):
            x = self.conv_input(x)
            for stage in (self.conv1, self.conv2, self.conv3, self.conv4, self.conv_out):
                x = stage(x)
            return x
    return Net()


def voxel_res_backbone_8x(spconv, cin=4):
    """CenterPoint-style encoder: residual SparseBasicBlocks using replace_feature, with the
    stride passed positionally (as CenterPoint's conv3x3 helper does)."""
    BN = partial(nn.BatchNorm1d, eps=1e-3, momentum=0.01)

    class SparseBasicBlock(spconv.SparseModule):
        def __init__(self, c, key):
            super().__init__()
            self.conv1 = spconv.SubMConv3d(c, c, 3, 1, 1, bias=True, indice_key=key)
            self.bn1 = BN(c)
            self.relu = nn.ReLU()
            self.conv2 = spconv.SubMConv3d(c, c, 3, 1, 1, bias=True, indice_key=key)
            self.bn2 = BN(c)

        def forward(self, x):
            identity = x
            out = self.conv1(x)
            out = out.replace_feature(self.relu(self.bn1(out.features)))
            out = self.conv2(out)
            out = out.replace_feature(self.bn2(out.features))
            out = out.replace_feature(out.features + identity.features)
            return out.replace_feature(self.relu(out.features))

    def down(ci, co, key, padding=1):
        return spconv.SparseSequential(spconv.SparseConv3d(ci, co, 3, 2, padding, bias=False, indice_key=key),
                                       BN(co), nn.ReLU())

    return spconv.SparseSequential(
        spconv.SubMConv3d(cin, 16, 3, 1, 1, bias=False, indice_key="res0"), BN(16), nn.ReLU(),
        SparseBasicBlock(16, "res0"), SparseBasicBlock(16, "res0"),
        down(16, 32, "spconv2"), SparseBasicBlock(32, "res1"), SparseBasicBlock(32, "res1"),
        down(32, 64, "spconv3"), SparseBasicBlock(64, "res2"),
        down(64, 64, "spconv4", padding=(0, 1, 1)), SparseBasicBlock(64, "res3"),
        spconv.SparseConv3d(64, 128, (3, 1, 1), (2, 1, 1), bias=False), BN(128), nn.ReLU())


def sparse_unet(spconv, cin=4, head_key="subm1"):
    """Segmentation-style U-Net: strided convs down, SparseInverseConv3d back onto the skip
    voxels, skip features concatenated (OpenPCDet UNetV2's lateral + merge pattern)."""
    BN = partial(nn.BatchNorm1d, eps=1e-3, momentum=0.01)

    def subm(ci, co, key):
        return spconv.SparseSequential(spconv.SubMConv3d(ci, co, 3, padding=1, bias=False, indice_key=key),
                                       BN(co), nn.ReLU())

    class UNet(spconv.SparseModule):
        def __init__(self):
            super().__init__()
            self.inp = subm(cin, 16, "subm1")
            self.down1 = spconv.SparseSequential(
                spconv.SparseConv3d(16, 32, 3, 2, 1, bias=False, indice_key="spconv2"), BN(32), nn.ReLU())
            self.enc2 = subm(32, 32, "subm2")
            self.down2 = spconv.SparseSequential(
                spconv.SparseConv3d(32, 64, 3, 2, 1, bias=False, indice_key="spconv3"), BN(64), nn.ReLU())
            self.enc3 = subm(64, 64, "subm3")
            self.up3 = spconv.SparseSequential(
                spconv.SparseInverseConv3d(64, 32, 3, indice_key="spconv3", bias=False), BN(32), nn.ReLU())
            self.merge2 = subm(64, 32, "subm2")
            self.up2 = spconv.SparseSequential(
                spconv.SparseInverseConv3d(32, 16, 3, indice_key="spconv2", bias=False), BN(16), nn.ReLU())
            self.merge1 = subm(32, 16, "subm1")
            self.head = spconv.SubMConv3d(16, 5, 1, bias=True, indice_key=head_key)

        def forward(self, x):
            x1 = self.inp(x)
            x2 = self.enc2(self.down1(x1))
            x3 = self.enc3(self.down2(x2))
            u2 = self.up3(x3)
            u2 = self.merge2(u2.replace_feature(torch.cat([u2.features, x2.features], 1)))
            u1 = self.up2(u2)
            u1 = self.merge1(u1.replace_feature(torch.cat([u1.features, x1.features], 1)))
            return self.head(u1)
    return UNet()


NETWORKS = {"VoxelBackBone8x": voxel_backbone_8x, "VoxelResBackBone8x": voxel_res_backbone_8x,
            "SparseUNet": sparse_unet}


@pytest.fixture(scope="module")
def scene_input():
    return scene()


@pytest.mark.parametrize("name", list(NETWORKS))
def test_network_parity(name, scene_input):
    idx, f, shape = scene_input
    torch.manual_seed(0)
    net_r = NETWORKS[name](real).double()
    net_o = NETWORKS[name](ours).double()
    sd = net_r.state_dict()
    net_o.load_state_dict(sd, strict=True)
    x_r, leaf_r = make_tensor(real, idx, f, shape, 2, dtype=torch.float64)
    x_o, leaf_o = make_tensor(ours, idx, f, shape, 2, dtype=torch.float64)
    with oracle():
        y_r = net_r(x_r)
        y_r.features.backward(coord_grad(y_r))
    y_o = net_o(x_o)
    y_o.features.backward(coord_grad(y_o))
    errs = [compare_outputs(y_o, y_r, TOL)]
    errs.append(rel_err(leaf_o.grad, leaf_r.grad))
    assert errs[-1] <= TOL, f"input grad: {errs[-1]:.3g}"
    params_r = dict(net_r.named_parameters())
    worst = ("", 0.0)
    for k, p in net_o.named_parameters():
        e = rel_err(p.grad, params_r[k].grad)
        worst = max(worst, (k, e), key=lambda t: t[1])
        errs.append(e)
    assert worst[1] <= TOL, f"{worst[0]}.grad: {worst[1]:.3g}"
    # running statistics updated identically
    for k, v in net_o.state_dict().items():
        if "running" in k:
            assert rel_err(v, net_r.state_dict()[k]) <= TOL, k
    record(f"network {name} float64 fwd+grads ({idx.shape[0]} voxels -> {y_o.indices.shape[0]})", *errs)


@pytest.mark.parametrize("name", list(NETWORKS))
def test_network_forward_float32(name, scene_input):
    idx, f, shape = scene_input
    torch.manual_seed(0)
    net_r = NETWORKS[name](real)
    net_o = NETWORKS[name](ours)
    net_o.load_state_dict(net_r.state_dict(), strict=True)
    with torch.no_grad():
        with oracle():
            y_r = net_r(real.SparseConvTensor(f, idx, shape, 2))
        y_o = net_o(ours.SparseConvTensor(f, idx, shape, 2))
    record(f"network {name} float32 forward", compare_outputs(y_o, y_r, TOL))
