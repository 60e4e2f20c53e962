"""``mx_sparse.spconv`` is the mx_driving surface: the very same objects as the top level."""
import mx_sparse
import mx_sparse.spconv as mxs


def test_same_objects_as_top_level():
    for name in ("SparseConv3d", "SubMConv3d", "SparseInverseConv3d", "SparseConvolution", "SparseConvTensor",
                 "SparseModule", "SparseSequential", "SparseConv2d", "SubMConv2d", "SparseInverseConv2d"):
        assert getattr(mxs, name) is getattr(mx_sparse, name), name


def test_mx_driving_signature_and_modes():
    conv = mxs.SubMConv3d(4, 8, 3, 1, 1, 1, 1, False, "subm1", mode="spconv")
    assert conv.indice_key == "subm1" and conv.bias is None and conv.weight.shape == (3, 3, 3, 4, 8)
    assert mxs.SparseConv3d(4, 8, 3, 2, 1, mode="mmcv").stride == (2, 2, 2)


def test_top_level_exports():
    for name in ("patch_spconv", "unpatch_spconv", "patch_mmcv", "unpatch_mmcv", "convert_weight"):
        assert callable(getattr(mx_sparse, name))


def test_mode_spconv_initialises_like_spconv():
    import torch
    from .conftest import real
    torch.manual_seed(3)
    r = real.SubMConv3d(4, 8, 3)
    torch.manual_seed(3)
    m = mxs.SubMConv3d(4, 8, 3, mode="spconv")
    assert torch.equal(mx_sparse.convert_weight(r.weight.detach(), "KRSC", "RSCK"), m.weight.detach())
    assert torch.equal(r.bias.detach(), m.bias.detach())


def test_spconv_surface_groups():
    """spconv asserts groups == 1; the surface runs grouped convs (checked against the core)."""
    import torch
    from mx_sparse.compat.spconv2 import pytorch as sp2
    from .conftest import random_input
    s = sp2.SubMConv3d(4, 6, 3, groups=2, bias=False)
    c = mx_sparse.SubMConv3d(4, 6, 3, groups=2, bias=False)
    c.load_state_dict(s.state_dict())
    idx, f = random_input(None, [5, 6, 7], channels=4)
    a = s(sp2.SparseConvTensor(f, idx, [5, 6, 7], 2)).features
    b = c(mx_sparse.SparseConvTensor(f, idx, [5, 6, 7], 2)).features
    assert s.weight.shape == (6, 3, 3, 3, 2) and torch.allclose(a, b, atol=1e-6)
