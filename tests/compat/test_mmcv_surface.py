"""The mmcv / mmdet3d surface: ``mx_sparse.ops`` and ``mx_sparse.patch_mmcv()``, the
registration of the conv type names in mmengine's MODELS, and parity with spconv 2.3.8 of
networks written against ``mmcv.ops`` loading spconv checkpoints (mmcv layout
``[*k, Cin, Cout]``, converted on load)."""
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from mx_sparse import ops as mmcv_ops
from mx_sparse.nn.layouts import convert_weight

from .conftest import compare_outputs, coord_grad, make_tensor, oracle, real, record, rel_err, scene
from .test_spconv_networks import voxel_backbone_8x, sparse_unet

CLIENT = textwrap.dedent("""
    import sys, torch, mx_sparse
    mx_sparse.patch_mmcv()
    from mmcv.ops import (SparseConvTensor, SubMConv2d, SubMConv3d, SparseConv2d, SparseConv3d,
                          SparseInverseConv2d, SparseInverseConv3d, SparseConvTranspose2d, SparseConvTranspose3d,
                          SparseMaxPool2d, SparseMaxPool3d, SparseSequential, SparseModule, scatter_nd)
    from mmcv.ops.sparse_conv import SparseConvolution
    from mmcv.ops.sparse_structure import SparseConvTensor as T2
    from mmcv.ops.sparse_modules import SparseSequential as S2
    from mmcv.ops.sparse_pool import SparseMaxPool
    import mmcv.ops
    assert T2 is SparseConvTensor is mx_sparse.SparseConvTensor and S2 is mx_sparse.SparseSequential
    assert issubclass(SubMConv3d, mx_sparse.SparseConvolution)
    idx = torch.tensor([[0, 1, 1, 1], [0, 1, 2, 1], [1, 0, 0, 0]], dtype=torch.int32)
    x = SparseConvTensor(torch.randn(3, 4), idx, [3, 3, 3], 2)
    x.features = x.features * 2                     # mmcv code assigns .features
    conv = SubMConv3d(4, 8, 3, indice_key="subm1")
    assert conv.weight.shape == (3, 3, 3, 4, 8)     # mmcv layout
    y = SparseSequential(conv, torch.nn.BatchNorm1d(8), torch.nn.ReLU())(x)
    y.features = y.features + 1
    d = scatter_nd(idx.long(), torch.ones(3, 2), [2, 3, 3, 3, 2])
    assert d.sum() == 6
    # build_conv_layer as mmcv 2.x does it: the registry of mmengine, scope-less
    from mmengine.registry import MODELS
    def build_conv_layer(cfg, *args, **kwargs):
        cfg = dict(cfg)
        layer_type = cfg.pop("type")
        with MODELS.switch_scope_and_registry(None) as registry:
            conv_layer = registry.get(layer_type)
        return conv_layer(*args, **kwargs, **cfg)
    layer = build_conv_layer(dict(type="SubMConv3d", indice_key="subm1"), 16, 16, 3)
    assert isinstance(layer, SubMConv3d) and layer.indice_key == "subm1" and layer.weight.shape == (3, 3, 3, 16, 16)
    layer = build_conv_layer(dict(type="SparseConv3d", indice_key="spconv2"), 16, 32, 3, stride=2, padding=1)
    assert isinstance(layer, SparseConv3d) and layer.stride == (2, 2, 2)
    for name in ("SparseInverseConv3d", "SparseConvTranspose3d", "SubMConv2d", "SparseConv2d", "SubMConv4d"):
        assert MODELS.get(name).__module__.startswith("mx_sparse"), name
    # an mmdet3d-style child registry finds them through its parent
    from mmengine.registry import Registry
    child = Registry("model", parent=MODELS, scope="mmdet3d_like")
    assert child.get("SubMConv3d") is SubMConv3d
    assert MODELS.build(dict(type="SubMConv3d", in_channels=4, out_channels=4, kernel_size=3)).kernel_size == (3, 3, 3)
    print("OK")
""")


def test_patch_mmcv_and_registry_in_fresh_interpreter():
    pytest.importorskip("mmengine")
    res = subprocess.run([sys.executable, "-c", CLIENT], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]


def test_register_conv_layers_in_process():
    pytest.importorskip("mmengine")
    from mmengine.registry import MODELS
    used = mmcv_ops.register_conv_layers()
    assert "mmengine.MODELS" in used
    layer = MODELS.build(dict(type="SparseInverseConv3d", in_channels=8, out_channels=4, kernel_size=3,
                              indice_key="spconv2"))
    assert isinstance(layer, mmcv_ops.SparseInverseConv3d) and layer.inverse


def test_mmcv_positional_signatures():
    inv = mmcv_ops.SparseInverseConv3d(8, 4, 3, "k", False)      # (in, out, kernel_size, indice_key, bias)
    assert inv.indice_key == "k" and inv.bias is None and inv.inverse
    c = mmcv_ops.SparseConv3d(4, 8, 3, 2, 1, 1, 1, False, "d")
    assert c.stride == (2, 2, 2) and c.padding == (1, 1, 1) and c.bias is None and c.indice_key == "d"
    t = mmcv_ops.SparseConvTranspose3d(4, 8, 3, 2)
    assert t.transposed and t.stride == (2, 2, 2)
    p = mmcv_ops.SparseMaxPool3d(2, 2)
    assert p.kernel_size == (2, 2, 2) and p.stride == (2, 2, 2)
    full = mmcv_ops.SparseConvolution(3, 4, 8, 3, 1, 1, 1, 1, True, True)
    assert full.subm and full.weight.shape == (3, 3, 3, 4, 8)


def test_mmcv_1x1_keeps_voxels_like_mmcv():
    conv = mmcv_ops.SparseConv3d(4, 6, 1, stride=2)
    idx = torch.tensor([[0, 1, 1, 1], [0, 3, 2, 1]], dtype=torch.int32)
    x = mmcv_ops.SparseConvTensor(torch.randn(2, 4), idx, [4, 4, 4], 1)
    y = conv(x)
    assert torch.equal(y.indices, idx) and y.spatial_shape == [4, 4, 4]
    assert torch.allclose(y.features, x.features @ conv.weight.detach().reshape(4, 6) + conv.bias.detach())


@pytest.mark.parametrize("name,make", [("VoxelBackBone8x", voxel_backbone_8x),
                                       ("SparseUNet", sparse_unet)])
def test_mmcv_network_with_spconv_checkpoint(name, make):
    """A network written against mmcv.ops, given a spconv 2.x checkpoint: converted on load,
    spconv's outputs and gradients (float64; weight gradients compared in KRSC)."""
    idx, f, shape = scene()
    torch.manual_seed(0)
    net_r = make(real).double()
    net_o = make(mmcv_ops).double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net_o.load_state_dict(net_r.state_dict(), strict=True)
    x_r, leaf_r = make_tensor(real, idx, f, shape, 2, dtype=torch.float64)
    x_o, leaf_o = make_tensor(mmcv_ops, idx, f, shape, 2, dtype=torch.float64)
    with oracle():
        y_r = net_r(x_r)
        y_r.features.backward(coord_grad(y_r))
    y_o = net_o(x_o)
    y_o.features.backward(coord_grad(y_o))
    errs = [compare_outputs(y_o, y_r, 1e-4), rel_err(leaf_o.grad, leaf_r.grad)]
    assert errs[-1] <= 1e-4
    params_r = dict(net_r.named_parameters())
    for k, p in net_o.named_parameters():
        g = p.grad
        if p.dim() >= 3:
            conv = net_o.get_submodule(k.rsplit(".", 1)[0])
            from mx_sparse.nn.layouts import spconv_1x1_path
            g = convert_weight(g, "RSCK", "KRSC", spconv_1x1=spconv_1x1_path(conv))
        errs.append(rel_err(g, params_r[k].grad))
        assert errs[-1] <= 1e-4, k
    record(f"mmcv surface {name} float64 fwd+grads (spconv checkpoint)", *errs)


FULL_MMCV_CLIENT = textwrap.dedent("""
    # a stand-in for a full mmcv whose mmcv.ops holds other ops too
    import sys, types
    mmcv = types.ModuleType("mmcv"); mmcv.__path__ = []
    ops = types.ModuleType("mmcv.ops"); ops.nms = "real-nms"; ops.SubMConv3d = "real-subm"
    mmcv.ops = ops
    sys.modules["mmcv"] = mmcv; sys.modules["mmcv.ops"] = ops
    import mx_sparse
    assert mx_sparse.patch_mmcv(register=False) is ops
    assert ops.nms == "real-nms" and ops.SubMConv3d is mx_sparse.ops.SubMConv3d   # only sparse names replaced
    from mmcv.ops.sparse_conv import SparseConv3d
    from mmcv.ops import SparseConvTensor
    assert SparseConvTensor is mx_sparse.SparseConvTensor and SparseConv3d is mx_sparse.ops.SparseConv3d
    mx_sparse.unpatch_mmcv()
    assert ops.SubMConv3d == "real-subm" and not hasattr(ops, "SparseConvTensor")
    assert "mmcv.ops.sparse_conv" not in sys.modules
    print("OK")
""")


def test_patch_mmcv_with_a_full_mmcv_keeps_its_other_ops():
    res = subprocess.run([sys.executable, "-c", FULL_MMCV_CLIENT], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]
