"""mode='spconv' reproduces spconv 2.x's initial numbers for the same seed (in our
layout); mode='mmcv' reproduces mmcv's (torch kaiming_uniform_ on the RSCK tensor)."""
import math

import pytest
import torch
from torch.nn import init

import mx_sparse


def test_spconv_mode_matches_spconv_2x():
    spconv = pytest.importorskip("spconv.pytorch")
    torch.manual_seed(123)
    theirs = spconv.SubMConv3d(16, 32, 3, indice_key="a")
    torch.manual_seed(123)
    ours = mx_sparse.SubMConv3d(16, 32, 3, indice_key="a", mode="spconv")
    assert tuple(theirs.weight.shape) == (32, 3, 3, 3, 16)  # spconv 2.x KRSC
    assert torch.equal(ours.weight, theirs.weight.permute(1, 2, 3, 4, 0))
    assert torch.equal(ours.bias, theirs.bias)


def test_mmcv_mode_is_kaiming_on_rsck_layout():
    torch.manual_seed(7)
    ours = mx_sparse.SparseConv3d(8, 4, (3, 1, 1), mode="mmcv")
    torch.manual_seed(7)
    w = torch.empty(3, 1, 1, 8, 4)
    init.kaiming_uniform_(w, a=math.sqrt(5))
    b = torch.empty(4)
    init.uniform_(b, -1 / math.sqrt(8 * 3), 1 / math.sqrt(8 * 3))
    assert torch.equal(ours.weight, w) and torch.equal(ours.bias, b)
