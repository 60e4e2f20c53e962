"""Shared set-up of the compatibility tests: the real spconv 2.3.8 as the oracle, our
spconv-2.x surface, small inputs and comparison helpers.

Facts about spconv 2.3.8's CPU wheel that the set-up works around:
- its backward asks ``torch.cuda`` for the current stream and fails on a CPU-only torch:
  ``spconv.pytorch.ops.get_current_stream`` is replaced by ``lambda: 0``;
- with more than one torch thread its CPU scatter-add races and returns wrong forward
  results: every oracle call runs under ``torch.set_num_threads(1)`` (``oracle()``).
"""
import contextlib

import pytest
import torch

real = pytest.importorskip("spconv.pytorch")   # imported before any test patches sys.modules
import spconv.pytorch.ops as _real_ops  # noqa: E402



def _is_our_surface(module) -> bool:
    """True when ``module`` is mx_sparse's spconv surface (``patch_spconv()`` put it in
    sys.modules) rather than the installed spconv. Decided by identity: the module's name
    and the package it was loaded from, never by searching its file path for "mx_sparse"
    (a clone folder named mx_sparse puts that text in every path of its .venv)."""
    import mx_sparse.compat.spconv2.pytorch as surface
    return module is surface or getattr(module, "__name__", "").startswith("mx_sparse.") or \
        (getattr(module, "__spec__", None) is not None and module.__spec__.name.startswith("mx_sparse."))


if _is_our_surface(real):
    raise RuntimeError("tests/compat: the real spconv must be importable (it is the oracle); "
                       "spconv.pytorch resolved to mx_sparse's surface")
_real_ops.get_current_stream = lambda: 0
for _mod in ("spconv.pytorch.functional", "spconv.pytorch.pool", "spconv.pytorch.conv"):
    _m = __import__(_mod, fromlist=["x"])
    if hasattr(_m, "get_current_stream"):
        _m.get_current_stream = lambda: 0

from mx_sparse.compat.spconv2 import pytorch as ours  # noqa: E402


@contextlib.contextmanager
def oracle():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def random_input(api, spatial_shape, batch_size=2, channels=4, density=0.3, seed=0, positive=False):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for b in range(batch_size):
        grid = torch.stack(torch.meshgrid(*[torch.arange(s) for s in spatial_shape], indexing="ij"), -1)
        grid = grid.reshape(-1, len(spatial_shape))
        keep = torch.rand(grid.shape[0], generator=g) < density
        rows.append(torch.cat([torch.full((int(keep.sum()), 1), b), grid[keep]], 1))
    idx = torch.cat(rows).int()
    idx = idx[torch.randperm(idx.shape[0], generator=g)]
    f = torch.randn(idx.shape[0], channels, generator=g)
    if positive:
        f = f.abs()
    return idx, f


def scene(crop=(41, 120, 140), batch_size=2):
    """A cropped synthetic KITTI scene: (indices int32, features float32, spatial_shape)."""
    from mx_sparse.synthetic import make_batch
    b = make_batch("kitti", batch_size, seed=0)
    idx, f = b["indices"], b["features"]
    y0, x0 = 720, 0
    keep = (idx[:, 2] >= y0) & (idx[:, 2] < y0 + crop[1]) & (idx[:, 3] >= x0) & (idx[:, 3] < x0 + crop[2]) & \
        (idx[:, 1] < crop[0])
    idx = idx[keep].clone()
    idx[:, 2] -= y0
    idx[:, 3] -= x0
    return idx, f[keep].clone(), list(crop)


def make_tensor(api, idx, f, shape, batch_size, requires_grad=True, dtype=None):
    f = f.clone().to(dtype or f.dtype).requires_grad_(requires_grad)
    return api.SparseConvTensor(f, idx.clone(), shape, batch_size), f


def keyed(indices, shape):
    key = indices[:, 0].long()
    for d, s in enumerate(shape):
        key = key * s + indices[:, d + 1].long()
    return key


def sorted_rows(t):
    order = torch.argsort(keyed(t.indices, t.spatial_shape))
    return t.indices[order], t.features[order]


def rel_err(a, b, floor=1e-6):
    """max |a - b| / max |b|; a reference below ``floor`` (e.g. the gradient of a conv bias
    that a BatchNorm cancels, mathematically zero) is compared absolutely against floor."""
    a, b = a.detach().double(), b.detach().double()
    scale = b.abs().max().clamp(min=floor)
    return float((a - b).abs().max() / scale) if a.numel() else 0.0


def coord_grad(t, seed=7):
    """A gradient for t's features that depends only on each voxel's coordinates, so two
    tensors holding the same voxels in different orders get the same gradient."""
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn([t.batch_size] + list(t.spatial_shape) + [t.features.shape[1]], generator=g,
                        dtype=torch.float64).to(t.features.dtype)
    idx = t.indices.long()
    return dense[tuple(idx[:, d] for d in range(idx.shape[1]))]


def compare_outputs(out_ours, out_real, tol=1e-4):
    """Same voxel set and same features per voxel; returns the relative error."""
    assert out_ours.spatial_shape == list(out_real.spatial_shape)
    i_o, f_o = sorted_rows(out_ours)
    i_r, f_r = sorted_rows(out_real)
    assert torch.equal(i_o.long(), i_r.long()), "output voxel sets differ"
    err = rel_err(f_o, f_r)
    assert err <= tol, f"features: relative error {err:.3g}"
    return err


PARITY = {}   # name -> max relative error seen (printed by test_zz_report)


def record(name, *errs):
    PARITY[name] = max([PARITY.get(name, 0.0)] + list(errs))


def pytest_terminal_summary(terminalreporter):
    if PARITY:
        terminalreporter.write_sep("-", "mx_sparse vs spconv 2.3.8: max relative error (outputs, input and weight grads)")
        for name, err in sorted(PARITY.items()):
            terminalreporter.write_line(f"{err:9.2e}  {name}")
