"""Client projects' own published model code, unmodified, run twice with the same weights and
input: on the real spconv 2.3.8 and on mx_sparse dropped in with ``patch_spconv()``; outputs
and the gradients of the input features and of every parameter are compared in float64.

Each family needs a checkout, named by an environment variable, and is skipped without it:
- ``MXS_OPENPCDET``: open-mmlab/OpenPCDet: VoxelNeXt's backbones (3D
  ``VoxelResBackBone8xVoxelNeXt``, 2D ``VoxelResBackBone8xVoxelNeXt2D``) and SECOND's
  ``VoxelBackBone8x`` / ``VoxelResBackBone8x``;
- ``MXS_POINTCEPT``: Pointcept/Pointcept: ``SpUNetBase`` as U-Net and as encoder (``enc_mode``);
- ``MXS_MMDET3D``: open-mmlab/mmdetection3d: the spconv path mmdet3d takes when spconv is
  installed (``mmdet3d.models.layers.spconv``: registering spconv's classes in mmengine's
  ``MODELS``), with ``patch_spconv()`` in place, and layers built through that registry.

The model files are loaded from the checkout as modules of their package; the package-level
modules they import but these models do not use (registries, weight-init helpers, a scatter
from torch_geometric) are minimal stand-ins defined here."""
import importlib.util
import os
import sys
import types

import pytest
import torch

import mx_sparse

from .conftest import coord_grad, oracle, record, rel_err, scene, sorted_rows

OPENPCDET = os.environ.get("MXS_OPENPCDET")
POINTCEPT = os.environ.get("MXS_POINTCEPT")
MMDET3D = os.environ.get("MXS_MMDET3D")
TOL = 1e-4   # the bound of every tests/compat check (docs/en/migration.md); float64 results are ~1e-14 apart


class _Config(dict):
    """The EasyDict-style config OpenPCDet passes (attribute access and .get)."""
    __getattr__ = dict.__getitem__


class _Registry:
    """A stand-in registry: ``register_module()`` returns the class unchanged."""

    def register_module(self, *args, **kwargs):
        return (lambda cls: cls) if not args or not isinstance(args[0], type) else args[0]


def _package(name, root):
    pkg = types.ModuleType(name)
    pkg.__path__ = [os.path.join(root, *name.split("."))]
    sys.modules[name] = pkg
    return pkg


def _load(name, root):
    """The checkout's file for module ``name``, executed as that module (its relative imports
    resolve through the stand-in packages)."""
    path = os.path.join(root, *name.split(".")) + ".py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def client_modules():
    """Restores sys.modules (client packages, spconv) after the test."""
    saved = dict(sys.modules)
    yield
    mx_sparse.unpatch_spconv()
    for name in [n for n in sys.modules if n not in saved]:
        del sys.modules[name]
    sys.modules.update(saved)


def _twice(load_model):
    """(model on the real spconv, model on mx_sparse): load_model() is called once with the
    installed spconv and once after patch_spconv(), with the client's modules reloaded."""
    real_model = load_model()
    mx_sparse.patch_spconv()
    try:
        ours_model = load_model()
    finally:
        mx_sparse.unpatch_spconv()
    ours_model.load_state_dict(real_model.state_dict())
    return real_model.double(), ours_model.double()


def _compare(name, real_model, ours_model, run, make_input):
    """Runs both models (train mode) on the same input, backpropagates the same
    coordinate-keyed gradient, compares outputs and all gradients."""
    inp_r, leaf_r = make_input()
    inp_o, leaf_o = make_input()
    with oracle():
        out_r = run(real_model, inp_r)
        (out_r.features * coord_grad(out_r)).sum().backward()
    out_o = run(ours_model, inp_o)
    (out_o.features * coord_grad(out_o)).sum().backward()
    i_r, f_r = sorted_rows(out_r)
    i_o, f_o = sorted_rows(out_o)
    assert list(out_o.spatial_shape) == list(out_r.spatial_shape)
    assert torch.equal(i_o.long(), i_r.long()), f"{name}: output voxel sets differ"
    errs = [rel_err(f_o, f_r), rel_err(leaf_o.grad, leaf_r.grad)]
    params_r = dict(real_model.named_parameters())
    for k, p in ours_model.named_parameters():
        errs.append(rel_err(p.grad, params_r[k].grad))
        assert errs[-1] <= TOL, f"{name}: {k}.grad differs by {errs[-1]:.3g}"
    assert max(errs) <= TOL, f"{name}: {errs[:2]}"
    record(f"client model {name} float64 fwd+grads", *errs)


# --- OpenPCDet: VoxelNeXt (3D, 2D), SECOND ---------------------------------------------------

def _openpcdet_module(module):
    for name in ("pcdet", "pcdet.utils", "pcdet.models", "pcdet.models.backbones_3d"):
        _package(name, OPENPCDET)
    for name in [n for n in sys.modules if n.startswith("pcdet.") and n.count(".") > 2 or n == "pcdet.utils.spconv_utils"]:
        del sys.modules[name]
    _load("pcdet.utils.spconv_utils", OPENPCDET)
    return _load(f"pcdet.models.backbones_3d.{module}", OPENPCDET)


def _voxel_input(idx, f):
    def make():
        leaf = f.double().clone().requires_grad_(True)
        return {"voxel_features": leaf, "voxel_coords": idx.clone(), "batch_size": 2}, leaf
    return make


@pytest.mark.skipif(not OPENPCDET, reason="set MXS_OPENPCDET to an OpenPCDet checkout "
                                          "(git clone https://github.com/open-mmlab/OpenPCDet DIR)")
@pytest.mark.parametrize("module,cls,out_key", [
    ("spconv_backbone_voxelnext", "VoxelResBackBone8xVoxelNeXt", "encoded_spconv_tensor"),
    ("spconv_backbone", "VoxelBackBone8x", "encoded_spconv_tensor"),
    ("spconv_backbone", "VoxelResBackBone8x", "encoded_spconv_tensor"),
])
def test_openpcdet_3d_backbones(client_modules, module, cls, out_key):
    idx, f, shape = scene()
    grid_size = torch.tensor(shape[::-1]).numpy() - [0, 0, 1]   # OpenPCDet adds [1, 0, 0] to the z size
    cfg = _Config(CHANNELS=[8, 16, 16, 16, 16], OUT_CHANNEL=16)  # small widths: the same code paths, less time

    def load():
        torch.manual_seed(0)
        return getattr(_openpcdet_module(module), cls)(cfg, 4, grid_size)
    real_model, ours_model = _twice(load)
    _compare(f"OpenPCDet {cls}", real_model, ours_model, lambda m, d: m(d)[out_key], _voxel_input(idx, f))


@pytest.mark.skipif(not OPENPCDET, reason="set MXS_OPENPCDET to an OpenPCDet checkout")
def test_openpcdet_voxelnext_2d_backbone(client_modules):
    idx, f, shape = scene()
    pillars, inverse = torch.unique(idx[:, [0, 2, 3]], dim=0, return_inverse=True)
    # its first layer takes 32 pillar features (a pillar VFE's output width), whatever input_channels says
    feats = torch.zeros(pillars.shape[0], f.shape[1]).index_add_(0, inverse, f).repeat(1, 8)
    grid_size = torch.tensor([shape[2], shape[1], 1]).numpy()
    cfg = _Config(CHANNELS=[8, 16, 16, 16, 16], OUT_CHANNEL=16)

    def load():
        torch.manual_seed(0)
        return _openpcdet_module("spconv_backbone_voxelnext2d").VoxelResBackBone8xVoxelNeXt2D(cfg, 32, grid_size)

    def make():
        leaf = feats.double().clone().requires_grad_(True)
        return {"pillar_features": leaf, "pillar_coords": pillars.clone(), "batch_size": 2}, leaf
    real_model, ours_model = _twice(load)
    _compare("OpenPCDet VoxelResBackBone8xVoxelNeXt2D", real_model, ours_model,
             lambda m, d: m(d)["encoded_spconv_tensor"], make)


# --- Pointcept: SpUNet as U-Net and as encoder -----------------------------------------------

def _pointcept_stand_ins():
    """The imports of spconv_unet_v1m1_base.py that are not sparse convolution: the model
    registry, offset2batch, timm's trunc_normal_ and torch_geometric's scatter (mean over a
    batch index, used by the encoder mode)."""
    def offset2batch(offset):
        counts = torch.diff(offset, prepend=offset.new_zeros(1))
        return torch.arange(len(counts), device=offset.device).repeat_interleave(counts)

    def scatter(src, index, reduce="sum", dim=0):
        assert reduce == "mean" and dim == 0
        n = int(index.max()) + 1
        out = src.new_zeros((n,) + src.shape[1:]).index_add_(0, index, src)
        return out / torch.bincount(index, minlength=n).clamp(min=1).to(src.dtype).unsqueeze(1)

    mods = {"pointcept": None, "pointcept.models": None, "pointcept.models.sparse_unet": None,
            "pointcept.models.builder": dict(MODELS=_Registry()),
            "pointcept.models.utils": dict(offset2batch=offset2batch),
            "torch_geometric": None, "torch_geometric.utils": dict(scatter=scatter),
            "timm": None, "timm.layers": dict(trunc_normal_=torch.nn.init.trunc_normal_)}
    for name, attrs in mods.items():
        module = _package(name, POINTCEPT) if attrs is None else types.ModuleType(name)
        module.__dict__.update(attrs or {})
        sys.modules[name] = module


@pytest.mark.skipif(not POINTCEPT, reason="set MXS_POINTCEPT to a Pointcept checkout "
                                          "(git clone https://github.com/Pointcept/Pointcept DIR)")
@pytest.mark.parametrize("enc_mode", [False, True], ids=["unet", "encoder"])
def test_pointcept_spunet(client_modules, enc_mode):
    idx, f, _ = scene(crop=(24, 48, 48))
    order = torch.argsort(idx[:, 0], stable=True)               # Pointcept's batches are contiguous
    idx, f = idx[order], f[order]
    offset = torch.cumsum(torch.bincount(idx[:, 0].long()), 0)

    def load():
        torch.manual_seed(0)
        _pointcept_stand_ins()
        sys.modules.pop("pointcept.models.sparse_unet.spconv_unet_v1m1_base", None)
        module = _load("pointcept.models.sparse_unet.spconv_unet_v1m1_base", POINTCEPT)
        return module.SpUNetBase(4, 5, base_channels=8, channels=(8, 16, 16, 16, 16, 16, 8, 8),
                                 layers=(1, 1, 1, 1, 1, 1, 1, 1), enc_mode=enc_mode)

    def make():
        leaf = f.double().clone().requires_grad_(True)
        return {"grid_coord": idx[:, 1:].long(), "feat": leaf, "offset": offset}, leaf

    class _Out:   # SpUNetBase returns features only: rows are the input voxels (or the batch)
        def __init__(self, feats, rows):
            self.features, self.indices = feats, rows
            self.spatial_shape, self.batch_size = [int(rows[:, 1:].max()) + 1] * (rows.shape[1] - 1), 2

    def run(model, d):
        feats = model(d)
        rows = torch.arange(2).int().unsqueeze(1).repeat(1, 4) if enc_mode else idx
        return _Out(feats, rows)
    real_model, ours_model = _twice(load)
    _compare(f"Pointcept SpUNetBase ({'encoder' if enc_mode else 'U-Net'})", real_model, ours_model, run, make)


# --- mmdetection3d: the path taken when spconv is installed ----------------------------------

@pytest.mark.skipif(not MMDET3D, reason="set MXS_MMDET3D to an mmdetection3d checkout "
                                        "(git clone https://github.com/open-mmlab/mmdetection3d DIR)")
def test_mmdet3d_spconv_path_with_patch_spconv(client_modules):
    """mmdet3d/models/layers/spconv: with spconv installed, mmdet3d imports it and registers
    spconv's conv classes in mmengine's MODELS (register_spconv2), which is what its encoders
    build. After patch_spconv() that registration is mx_sparse's, and a conv built through the
    registry from a config computes what the real spconv layer computes."""
    pytest.importorskip("mmengine")
    from mmengine.registry import MODELS

    def load(cfg):
        for name in ("mmdet3d", "mmdet3d.models", "mmdet3d.models.layers"):
            _package(name, MMDET3D)
        for name in [n for n in sys.modules if n.startswith("mmdet3d.models.layers.spconv")]:
            del sys.modules[name]
        spec = importlib.util.spec_from_file_location(
            "mmdet3d.models.layers.spconv", os.path.join(MMDET3D, "mmdet3d", "models", "layers", "spconv", "__init__.py"),
            submodule_search_locations=[os.path.join(MMDET3D, "mmdet3d", "models", "layers", "spconv")])
        pkg = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = pkg
        spec.loader.exec_module(pkg)
        assert pkg.IS_SPCONV2_AVAILABLE
        torch.manual_seed(0)
        return MODELS.build(cfg)

    idx, f, shape = scene()
    for cfg in (dict(type="SubMConv3d", in_channels=4, out_channels=8, kernel_size=3, indice_key="subm1", bias=False),
                dict(type="SparseConv3d", in_channels=4, out_channels=8, kernel_size=3, stride=2, padding=1,
                     indice_key="spconv2", bias=False)):
        real_layer = load(dict(cfg))
        real_cls = type(real_layer)
        mx_sparse.patch_spconv()
        try:
            ours_layer = load(dict(cfg))
            assert type(ours_layer).__module__.startswith("mx_sparse."), type(ours_layer)
        finally:
            mx_sparse.unpatch_spconv()
        assert real_cls.__module__.startswith("spconv.")
        ours_layer.load_state_dict(real_layer.state_dict())
        seq = lambda layer: torch.nn.Sequential(layer)  # noqa: E731  (named parameters "0.weight")
        real_model, ours_model = seq(real_layer).double(), seq(ours_layer).double()

        def make(api):
            def build():
                leaf = f.double().clone().requires_grad_(True)
                return api.SparseConvTensor(leaf, idx.clone(), shape, 2), leaf
            return build
        from .conftest import ours as ours_api
        from .conftest import real as real_api
        inp_r, leaf_r = make(real_api)()
        inp_o, leaf_o = make(ours_api)()
        with oracle():
            out_r = real_model(inp_r)
            (out_r.features * coord_grad(out_r)).sum().backward()
        out_o = ours_model(inp_o)
        (out_o.features * coord_grad(out_o)).sum().backward()
        i_r, f_r = sorted_rows(out_r)
        i_o, f_o = sorted_rows(out_o)
        assert torch.equal(i_o.long(), i_r.long())
        errs = [rel_err(f_o, f_r), rel_err(leaf_o.grad, leaf_r.grad),
                rel_err(ours_model[0].weight.grad, real_model[0].weight.grad)]
        assert max(errs) <= TOL, errs
        record(f"mmdet3d spconv path, MODELS.build({cfg['type']}) float64 fwd+grads", *errs)

