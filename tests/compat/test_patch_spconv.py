"""``mx_sparse.patch_spconv()``: unmodified spconv-2.x client code resolves to mx_sparse even
though the real spconv is installed (checked in a fresh interpreter), and checkpoints move
between the spconv layout and mx_sparse's own layout with the same numbers."""
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from .conftest import compare_outputs, oracle, ours, real, record, scene
from functools import partial

from .test_spconv_networks import NETWORKS, sparse_unet

CLIENT = textwrap.dedent("""
    import importlib.util, torch, mx_sparse
    assert importlib.util.find_spec("spconv") is not None            # the real one is installed
    mx_sparse.patch_spconv()
    import spconv
    import spconv.pytorch as spconv_p
    from spconv.pytorch import SubMConv3d, SparseConvTensor, SparseSequential
    from spconv.pytorch.conv import SparseConvolution
    from spconv.pytorch.modules import SparseModule, is_spconv_module
    from spconv.pytorch.functional import sparse_add
    from spconv.pytorch.core import SparseConvTensor as CoreT
    from spconv.pytorch import ops, functional
    from spconv.core import ConvAlgo
    import spconv.constants
    assert getattr(spconv, "__mx_sparse__", False), spconv.__file__
    assert spconv.__version__.startswith("2.") and spconv.SPCONV_VERSION_NUMBERS[0] == 2
    spconv.constants.SPCONV_USE_DIRECT_TABLE = False
    import spconv.constants as c2
    assert c2.SPCONV_USE_DIRECT_TABLE is False
    assert SparseConvolution.__module__.startswith("mx_sparse") and CoreT is SparseConvTensor
    assert issubclass(SubMConv3d, SparseConvolution) and issubclass(SparseConvolution, mx_sparse.SparseConvolution)
    assert SparseModule is mx_sparse.SparseModule and SparseSequential is mx_sparse.SparseSequential
    names = '''SubMConv1d SubMConv2d SubMConv3d SubMConv4d SparseConv1d SparseConv2d SparseConv3d SparseConv4d
        SparseInverseConv1d SparseInverseConv2d SparseInverseConv3d SparseInverseConv4d SparseConvTranspose2d
        SparseConvTranspose3d SparseMaxPool2d SparseMaxPool3d SparseAvgPool3d SparseGlobalMaxPool
        SparseGlobalAvgPool SparseSequential SparseModule ToDense RemoveGrid SparseBatchNorm SparseReLU
        SparseIdentity SparseConvTensor'''.split()
    missing = [n for n in names if not hasattr(spconv_p, n)]
    assert not missing, missing
    # spconv's positional order (CenterPoint passes stride positionally) and the ignored kwargs
    conv = spconv_p.SparseConv3d(4, 8, 3, 2, 1, 1, 1, False, "k", algo=ConvAlgo.Native, fp32_accum=True,
                                 large_kernel_fast_algo=True, name="down")
    assert conv.stride == (2, 2, 2) and conv.padding == (1, 1, 1) and conv.bias is None and conv.indice_key == "k"
    assert conv.weight.shape == (8, 3, 3, 3, 4)                       # spconv 2.x layout [Cout, *k, Cin]
    sub = SubMConv3d(4, 8, 3, algo=ConvAlgo.MaskImplicitGemm, fp32_accum=False, name="s")
    assert is_spconv_module(sub) and is_spconv_module(spconv_p.SparseReLU())
    idx = torch.tensor([[0, 1, 1, 1], [0, 1, 2, 1], [1, 0, 0, 0]], dtype=torch.int32)
    import numpy as np
    x = SparseConvTensor(torch.randn(3, 4), idx, np.array([3, 3, 3]), 2)
    y = SparseSequential(sub, torch.nn.ReLU(), spconv_p.ToDense())(x)
    assert y.shape == (2, 8, 3, 3, 3)
    assert ops.get_conv_output_size([41, 1600, 1408], [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1]) == [21, 800, 704]
    s = sparse_add(x, x)
    assert torch.allclose(s.features, 2 * x.features[torch.argsort(idx[:, 0] * 100 + idx[:, 2] * 10)])
    mx_sparse.unpatch_spconv()
    import spconv as real_spconv
    assert not getattr(real_spconv, "__mx_sparse__", False)
    print("OK")
""")


def test_patch_spconv_in_fresh_interpreter():
    res = subprocess.run([sys.executable, "-c", CLIENT], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]


def test_patch_and_unpatch_in_process():
    import mx_sparse
    before = sys.modules["spconv.pytorch"]
    try:
        mod = mx_sparse.patch_spconv()
        import spconv.pytorch as p
        assert p is mod is ours
    finally:
        mx_sparse.unpatch_spconv()
    import spconv.pytorch as p2
    assert p2 is before is real


@pytest.mark.parametrize("name", ["SparseUNet", "VoxelResBackBone8x"])
def test_spconv_checkpoint_into_mx_sparse_layout(name):
    """A spconv 2.x state_dict (KRSC, incl. a 1x1 head that spconv runs through its 1x1 path)
    loads into networks built from mx_sparse's own classes (RSCK): converted on load with one
    warning, spconv's numbers."""
    import mx_sparse
    idx, f, shape = scene()
    # spconv's 1x1 path ignores indice_key, so spconv code may give a 1x1 head the key of a 3x3
    # layer; the spconv surface accepts that, mx_sparse's own classes reject a key reused with
    # another kernel size, so here the head gets no key
    make = partial(sparse_unet, head_key=None) if name == "SparseUNet" else NETWORKS[name]
    torch.manual_seed(0)
    net_r = make(real)
    net_m = make(mx_sparse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        net_m.load_state_dict(net_r.state_dict(), strict=True)
    # every shape fits one layout (KRSC): converted without a warning
    assert not [w for w in caught if "mx_sparse" in str(w.message)]
    with torch.no_grad():
        with oracle():
            y_r = net_r(real.SparseConvTensor(f, idx, shape, 2))
        y_m = net_m(mx_sparse.SparseConvTensor(f, idx, shape, 2))
    record(f"spconv checkpoint -> mx_sparse layout, {name} forward", compare_outputs(y_m, y_r, 1e-4))
    # and back: the mx_sparse state dict (RSCK, layout recorded in its metadata) into the spconv surface
    net_o = make(ours)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net_o.load_state_dict(net_m.state_dict(), strict=True)
    for k, v in net_r.state_dict().items():
        if v.dim() >= 3:     # conv weights back in KRSC, bit-exact (BN statistics moved in the forward)
            assert torch.equal(net_o.state_dict()[k], v), k


MMDET3D_CLIENT = textwrap.dedent("""
    import itertools, torch, mx_sparse
    mx_sparse.patch_spconv()
    # what mmdet3d's register_spconv2() does when it finds spconv 2.x (here: mx_sparse's surface)
    from spconv.pytorch import SparseModule, SubMConv3d
    def _mmdet3d_load(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        version = local_metadata.get("version", None)
        local = {k: v.data for k, v in itertools.chain(self._parameters.items(), self._buffers.items())
                 if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key in state_dict:
                p = state_dict[key]
                if version != 2:
                    p = p.permute(p.dim() - 1, *range(p.dim() - 1))
                if p.shape != param.shape:
                    error_msgs.append(f"size mismatch for {key}")
                    continue
                param.copy_(p)
            elif strict:
                missing_keys.append(key)
    SparseModule._version = 2
    SparseModule._load_from_state_dict = _mmdet3d_load
    w_rsck = torch.randn(3, 3, 3, 4, 6)                        # an mmcv / spconv-1 checkpoint
    w_krsc = w_rsck.permute(4, 0, 1, 2, 3).contiguous()        # the same weight saved by spconv 2.x
    for w, version in ((w_rsck, None), (w_krsc, 2)):
        holder = torch.nn.Module()
        holder.conv = SubMConv3d(4, 6, 3, bias=False)
        sd = type(holder.state_dict())({"conv.weight": w})
        sd._metadata = {"conv": {} if version is None else {"version": version}}
        holder.load_state_dict(sd)
        assert torch.equal(holder.conv.weight.detach(), w_krsc), version
    print("OK")
""")


def test_mmdet3d_register_spconv2_on_top_of_patch_spconv():
    """mmdet3d + patch_spconv: mmdet3d's own load hook on SparseModule and our layout rules
    do not convert twice; both mmcv-era and spconv-2 checkpoints load."""
    res = subprocess.run([sys.executable, "-c", MMDET3D_CLIENT], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "OK" in res.stdout, res.stderr[-3000:]
