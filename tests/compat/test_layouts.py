"""mx_sparse.convert_weight and the layout rules applied when loading checkpoints."""
import itertools
import warnings

import pytest
import torch

import mx_sparse
from mx_sparse.nn import layouts
from mx_sparse.compat.spconv2 import pytorch as sp2
from mx_sparse import ops as mmcv_ops

from .conftest import oracle, random_input, real


def test_convert_weight_round_trips_and_semantics():
    w = torch.randn(3, 2, 5, 4, 6)                       # RSCK: k=(3,2,5), Cin=4, Cout=6
    krsc = mx_sparse.convert_weight(w, "RSCK", "KRSC")
    assert krsc.shape == (6, 3, 2, 5, 4) and torch.equal(krsc[1, 2, 0, 3, 2], w[2, 0, 3, 2, 1])
    flat = mx_sparse.convert_weight(w, "RSCK", "FLAT")
    assert flat.shape == (30, 4, 6) and torch.equal(flat[7], w[0, 1, 2])
    rskc = mx_sparse.convert_weight(w, "RSCK", "RSKC")
    assert rskc.shape == (3, 2, 5, 6, 4)
    for a, b in itertools.permutations(["RSCK", "KRSC", "RSKC", "FLAT"], 2):
        src = mx_sparse.convert_weight(w, "RSCK", a)
        back = mx_sparse.convert_weight(mx_sparse.convert_weight(src, a, b, kernel_size=(3, 2, 5)), b, "RSCK",
                                        kernel_size=(3, 2, 5))
        assert torch.equal(back, w), (a, b)
    with pytest.raises(ValueError, match="kernel_size"):
        mx_sparse.convert_weight(flat, "FLAT", "KRSC")
    with pytest.raises(ValueError, match="src"):
        mx_sparse.convert_weight(w, "HWIO", "KRSC")


def test_convert_weight_spconv_1x1_quirk():
    w = torch.randn(5, 1, 1, 1, 3)                       # spconv KRSC, Cout=5, Cin=3
    plain = mx_sparse.convert_weight(w, "KRSC", "RSCK")
    quirk = mx_sparse.convert_weight(w, "KRSC", "RSCK", spconv_1x1=True)
    assert torch.equal(quirk.reshape(3, 5), w.reshape(3, 5))  # spconv's view(Cin, Cout)
    assert torch.equal(plain.reshape(3, 5), w.reshape(5, 3).t())
    assert torch.equal(mx_sparse.convert_weight(quirk, "RSCK", "KRSC", spconv_1x1=True), w)


def test_load_detects_each_layout():
    conv = mx_sparse.SubMConv3d(4, 6, 3, bias=False)
    ref = torch.randn(3, 3, 3, 4, 6)
    for lay in ("RSCK", "KRSC", "FLAT"):
        sd = {"weight": mx_sparse.convert_weight(ref, "RSCK", lay)}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            conv.load_state_dict(sd)
        assert torch.equal(conv.weight.detach(), ref), lay
        # only one layout fits this shape: converted without a warning (nothing is ambiguous)
        assert not [w for w in caught if "mx_sparse" in str(w.message)], lay
    # the spconv surface (own layout KRSC) takes an RSCK checkpoint the same way
    s = sp2.SubMConv3d(4, 6, 3, bias=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s.load_state_dict({"weight": ref})
    assert torch.equal(s.weight.detach(), mx_sparse.convert_weight(ref, "RSCK", "KRSC"))


def test_ambiguous_shape_raises_unless_layout_given():
    conv = mx_sparse.SubMConv3d(3, 3, 3, bias=False)          # RSCK and KRSC are both [3,3,3,3,3]
    w = torch.randn(3, 3, 3, 3, 3)
    with pytest.raises(ValueError, match="several layouts"):
        conv.load_state_dict({"weight": w})
    with layouts.checkpoint_layout("KRSC"):
        conv.load_state_dict({"weight": w})
    assert torch.equal(conv.weight.detach(), mx_sparse.convert_weight(w, "KRSC", "RSCK"))
    layouts.load_state_dict(conv, {"weight": w}, layout="RSCK")
    assert torch.equal(conv.weight.detach(), w)
    # state dicts written by mx_sparse record their layout: round trips never guess
    other = sp2.SubMConv3d(3, 3, 3, bias=False)
    other.load_state_dict(conv.state_dict())
    assert torch.equal(other.weight.detach(), mx_sparse.convert_weight(w, "RSCK", "KRSC"))
    conv2 = mx_sparse.SubMConv3d(3, 3, 3, bias=False)
    conv2.load_state_dict(other.state_dict())
    assert torch.equal(conv2.weight.detach(), w)


def test_mmdet3d_version_convention():
    """mmdet3d marks spconv-2.x weights with SparseModule._version == 2 in the metadata;
    other versions mean mmcv's [*k, Cin, Cout]. Decides even cube-shaped weights."""
    w = torch.randn(3, 3, 3, 3, 3)
    for version, expect in ((2, mx_sparse.convert_weight(w, "KRSC", "RSCK")), (1, w), (None, w)):
        conv = mmcv_ops.SubMConv3d(3, 3, 3, bias=False)
        sd = {"conv.weight": w.clone()}
        sd = type(conv.state_dict())(sd)
        sd._metadata = {"conv": {} if version is None else {"version": version}}
        holder = torch.nn.Module()
        holder.conv = conv
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            holder.load_state_dict(sd)
        assert torch.equal(conv.weight.detach(), expect), version
        # a cube fits RSCK and KRSC with different results: where the convention makes loading
        # convert (version 2), it says so; otherwise the weight loads as mmcv loads it
        msgs = [str(w.message) for w in caught if "mx_sparse" in str(w.message)]
        assert len(msgs) == (version == 2) and all("mmdet3d's version mark chose" in m for m in msgs), msgs
        # stated by the user: trusted, no warning
        conv2 = mmcv_ops.SubMConv3d(3, 3, 3, bias=False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with mx_sparse.nn.layouts.checkpoint_layout("KRSC"):
                conv2.load_state_dict({"weight": w.clone()})
        assert torch.equal(conv2.weight.detach(), mx_sparse.convert_weight(w, "KRSC", "RSCK"))
        assert not [x for x in caught if "mx_sparse" in str(x.message)]


def test_spconv_checkpoint_into_mmcv_surface():
    """spconv 2.x checkpoint -> mmcv-surface layer: same numbers (including a 1x1 layer)."""
    for make_r, make_o in ((lambda: real.SubMConv3d(4, 6, 3, indice_key="a"), lambda: mmcv_ops.SubMConv3d(4, 6, 3)),
                           (lambda: real.SubMConv3d(4, 6, 1), lambda: mmcv_ops.SubMConv3d(4, 6, 1)),
                           (lambda: real.SparseConv3d(4, 6, 3, 2, 1), lambda: mmcv_ops.SparseConv3d(4, 6, 3, 2, 1))):
        r, o = make_r(), make_o()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            o.load_state_dict(r.state_dict())
        idx, f = random_input(real, [6, 7, 8], channels=4)
        with torch.no_grad():
            with oracle():
                y_r = r(real.SparseConvTensor(f, idx, [6, 7, 8], 2))
            y_o = o(mmcv_ops.SparseConvTensor(f, idx, [6, 7, 8], 2))
        from .conftest import compare_outputs
        compare_outputs(y_o, y_r, 1e-5)


def test_fused_batchnorm_in_every_layout():
    """SparseSequential.fused() folds BatchNorm into the conv weight along the output-channel
    axis of the layer's own layout (KRSC for the spconv surface, incl. its 1x1 path)."""
    from torch import nn
    for api in (mx_sparse, sp2, mmcv_ops):
        torch.manual_seed(0)
        net = api.SparseSequential(api.SubMConv3d(4, 6, 3, bias=False), nn.BatchNorm1d(6), nn.ReLU(),
                                   api.SubMConv3d(6, 5, 1), nn.BatchNorm1d(5))
        for m in net.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.data.uniform_(0.5, 2)
        net.eval()
        idx, f = random_input(real, [6, 7, 8], channels=4)
        x = api.SparseConvTensor(f, idx, [6, 7, 8], 2)
        with torch.no_grad():
            assert torch.allclose(net(x).features, net.fused()(x).features, atol=1e-5), api.__name__
