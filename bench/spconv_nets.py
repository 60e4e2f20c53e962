"""spconv 2.3.8 versions of the networks in ``mx_sparse.models.backbones``, layer for layer
(same channels, indice keys and module names), the weight copy between the two, and the
two patches that spconv's CPU build needs here:

* ``get_current_stream`` calls ``torch.cuda`` unconditionally in the backward pass and
  fails on a CPU-only torch; it is patched to return stream 0.
* With more than one torch thread spconv's CPU scatter-add (``SpconvOps.scatter_add_cpu``,
  called by its gather-mm-scatter loop in ``spconv.pytorch.ops``; the CPU wheel has no C++
  GEMM path, ``GEMM_CPP is None``) races and returns wrong sums. ``scatter_fix(True)``
  replaces that one call with ``Tensor.index_add_``; gathers and torch.mm are unchanged.
  The benchmark reports spconv at 1 thread (its correct shipped configuration, used as the
  numerical oracle), at 2 threads as shipped (fast but wrong) and at 2 threads with this fix.
"""
from functools import partial

import torch
from torch import nn

import spconv
import spconv.pytorch as sp
import spconv.pytorch.ops as sp_ops

from spconv.cppconstants import CPU_ONLY_BUILD  # noqa: E402

if CPU_ONLY_BUILD:
    sp_ops.get_current_stream = lambda: 0   # CPU build: no CUDA stream (the shipped code calls torch.cuda)

VERSION = spconv.__version__


def runs_on(device) -> bool:
    """Whether the installed spconv build can run on ``device`` (its CUDA wheels: also cuda)."""
    return torch.device(device).type == "cpu" or (torch.device(device).type == "cuda" and not CPU_ONLY_BUILD)
_SHIPPED_OPS = sp_ops.SpconvOps


class _RaceFreeOps:
    """SpconvOps with a serial-safe scatter-add (torch ``index_add_``); all else shipped."""

    def __getattr__(self, name):
        return getattr(_SHIPPED_OPS, name)

    @staticmethod
    def scatter_add_cpu(out, buffer, indices):
        n = indices.dim(0)
        out_t = torch.from_numpy(out.numpy_view())
        idx = torch.from_numpy(indices.numpy_view()).long()
        out_t.index_add_(0, idx, torch.from_numpy(buffer.numpy_view())[:n])


def scatter_fix(enabled: bool) -> None:
    """Switch spconv's CPU scatter-add between the shipped (racy) one and ``index_add_``."""
    sp_ops.SpconvOps = _RaceFreeOps() if enabled else _SHIPPED_OPS


BatchNorm = partial(nn.BatchNorm1d, eps=1e-3, momentum=0.01)


def conv_bn_relu(conv):
    return sp.SparseSequential(conv, BatchNorm(conv.out_channels), nn.ReLU())


def subm(cin, cout, key):
    return conv_bn_relu(sp.SubMConv3d(cin, cout, 3, padding=1, bias=False, indice_key=key))


def down(cin, cout, key, padding=1, kernel_size=3, stride=2):
    return conv_bn_relu(sp.SparseConv3d(cin, cout, kernel_size, stride=stride, padding=padding, bias=False,
                                        indice_key=key))


class VoxelBackBone8x(sp.SparseModule):
    def __init__(self, in_channels: int = 4):
        super().__init__()
        self.conv_input = subm(in_channels, 16, "subm1")
        self.conv1 = sp.SparseSequential(subm(16, 16, "subm1"))
        self.conv2 = sp.SparseSequential(down(16, 32, "spconv2"), subm(32, 32, "subm2"), subm(32, 32, "subm2"))
        self.conv3 = sp.SparseSequential(down(32, 64, "spconv3"), subm(64, 64, "subm3"), subm(64, 64, "subm3"))
        self.conv4 = sp.SparseSequential(down(64, 64, "spconv4", padding=(0, 1, 1)), subm(64, 64, "subm4"),
                                         subm(64, 64, "subm4"))
        self.conv_out = down(64, 128, "spconv_down2", padding=0, kernel_size=(3, 1, 1), stride=(2, 1, 1))

    def forward(self, x):
        x = self.conv_input(x)
        for stage in (self.conv1, self.conv2, self.conv3, self.conv4, self.conv_out):
            x = stage(x)
        return x


class SparseBasicBlock(sp.SparseModule):
    def __init__(self, channels: int, key: str):
        super().__init__()
        self.conv1 = sp.SubMConv3d(channels, channels, 3, padding=1, bias=False, indice_key=key)
        self.bn1 = BatchNorm(channels)
        self.conv2 = sp.SubMConv3d(channels, channels, 3, padding=1, bias=False, indice_key=key)
        self.bn2 = BatchNorm(channels)
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.conv1(x)
        out = out.replace_feature(self.relu(self.bn1(out.features)))
        out = self.conv2(out)
        return out.replace_feature(self.relu(self.bn2(out.features) + x.features))


class VoxelResBackBone8x(sp.SparseModule):
    def __init__(self, in_channels: int = 4):
        super().__init__()
        self.conv_input = subm(in_channels, 16, "res1")
        self.conv1 = sp.SparseSequential(SparseBasicBlock(16, "res1"), SparseBasicBlock(16, "res1"))
        self.conv2 = sp.SparseSequential(down(16, 32, "spconv2"), SparseBasicBlock(32, "res2"),
                                         SparseBasicBlock(32, "res2"))
        self.conv3 = sp.SparseSequential(down(32, 64, "spconv3"), SparseBasicBlock(64, "res3"),
                                         SparseBasicBlock(64, "res3"))
        self.conv4 = sp.SparseSequential(down(64, 128, "spconv4", padding=(0, 1, 1)),
                                         SparseBasicBlock(128, "res4"), SparseBasicBlock(128, "res4"))
        self.conv_out = down(128, 128, "spconv_down2", padding=0, kernel_size=(3, 1, 1), stride=(2, 1, 1))

    def forward(self, x):
        x = self.conv_input(x)
        for stage in (self.conv1, self.conv2, self.conv3, self.conv4, self.conv_out):
            x = stage(x)
        return x


class SparseUNet(sp.SparseModule):
    def __init__(self, in_channels: int = 4, channels=(16, 32, 64, 64)):
        super().__init__()
        c = channels
        self.stem = subm(in_channels, c[0], "unet1")
        self.down = nn.ModuleList(
            sp.SparseSequential(down(c[i], c[i + 1], f"unet_down{i + 1}"), subm(c[i + 1], c[i + 1], f"unet{i + 2}"))
            for i in range(3))
        self.up = nn.ModuleList(
            conv_bn_relu(sp.SparseInverseConv3d(c[i + 1], c[i], 3, bias=False, indice_key=f"unet_down{i + 1}"))
            for i in range(3))
        self.fuse = nn.ModuleList(subm(2 * c[i], c[i], f"unet{i + 1}") for i in range(3))

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


class SingleSubM(sp.SparseModule):
    """One SubMConv3d (no bias: spconv's CPU inference path asserts on a fused bias)."""

    def __init__(self, cin, cout, k=3):
        super().__init__()
        self.conv = sp.SubMConv3d(cin, cout, k, padding=k // 2, bias=False, indice_key="single")

    def forward(self, x):
        return self.conv(x)


NETS = {"VoxelBackBone8x": VoxelBackBone8x, "VoxelResBackBone8x": VoxelResBackBone8x,
        "SparseUNet": SparseUNet, "SingleSubM": SingleSubM}


def copy_weights(src_mx: nn.Module, dst_sp: nn.Module) -> None:
    """Make the spconv net compute the same function as the mx_sparse net. Convolution
    weights: ours ``[*k, Cin, Cout]``, spconv's ``[Cout, *k, Cin]``; everything else
    (BatchNorm, biases) has the same name and layout."""
    ours = src_mx.state_dict()
    theirs = dst_sp.state_dict()
    if set(ours) != set(theirs):
        raise RuntimeError(f"state_dict keys differ: {sorted(set(ours) ^ set(theirs))}")
    new = {}
    for name, t in ours.items():
        if t.dim() >= 3:   # conv weight: [*k, Cin, Cout] -> [Cout, *k, Cin]
            nd = t.dim() - 2
            t = t.permute(nd + 1, *range(nd), nd)
        if tuple(t.shape) != tuple(theirs[name].shape):
            raise RuntimeError(f"{name}: shape {tuple(t.shape)} vs spconv {tuple(theirs[name].shape)}")
        new[name] = t.contiguous().clone()
    dst_sp.load_state_dict(new)


def make_input(features, indices, spatial_shape, batch_size):
    return sp.SparseConvTensor(features, indices, spatial_shape, batch_size)


def map_build_calls(out_tensor):
    """Closures rebuilding every neighbor map cached in the spconv output tensor with
    ``spconv.pytorch.ops.get_indice_pairs`` (what spconv's Native algorithm calls inside
    each layer's forward, once per indice_key)."""
    calls = []
    for data in out_tensor.indice_dict.values():
        def call(d=data):
            return sp_ops.get_indice_pairs(d.indices, out_tensor.batch_size, d.spatial_shape, d.algo, d.ksize,
                                           d.stride, d.padding, d.dilation, [0] * len(d.ksize), d.is_subm, False)
        calls.append(call)
    return calls
