"""Every import path a user had before the compat surfaces moved into ``mx_sparse/compat``
still resolves, to the very objects of the new location: ``mx_sparse.ops`` (the mmcv.ops
surface, now ``mx_sparse.compat.mmcv``) with its submodules, ``mx_sparse.spconv`` (the
mx_driving.spconv surface, now ``mx_sparse.compat.mx_driving.spconv``), and class paths in
pickles written before the move. The orchestration and CUDA modules moved in the tree
(kernels/accelerator -> mx_sparse/_accelerator, kernels/cuda -> mx_sparse/_cuda) under the import
names they always had: each still imports by that name, from the file its name says, and class
paths into them still unpickle. The package's top level was then grouped into nn/, functional/,
runtime/ and _core/ (mx_sparse/_core/old_paths.py): every module's name from before the grouping
still imports, as the very module of its new name, also as an attribute of a plain ``import
mx_sparse``, and checkpoints written before the grouping (tests/compat/data, made at 4c5e4f5 with
the old class paths) load, under ``weights_only=True`` too. Checked in a fresh interpreter, where
the old path is the first thing imported (in this process the new modules are already loaded)."""
import importlib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The modules whose files moved (issue 34 item 1), listed from the tree: mx_sparse/<part>/<name>.py.
MOVED = sorted("mx_sparse.%s.%s" % (part, f[:-3]) for part in ("_accelerator", "_cuda")
               for f in os.listdir(os.path.join(ROOT, "mx_sparse", part)) if f.endswith(".py") and f != "__init__.py")

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# the modules moved by the grouping, old name -> new name, as the tree lists them (not from the table
# under test): every .py of the groups, under the name it had at the top level
GROUPED = {"mx_sparse." + f[:-3]: "mx_sparse.%s.%s" % (group, f[:-3]) for group in ("nn", "functional", "runtime")
           for f in os.listdir(os.path.join(ROOT, "mx_sparse", group)) if f.endswith(".py") and f != "__init__.py"}
GROUPED.update({"mx_sparse._op_registration": "mx_sparse._core.op_registration", "mx_sparse._contract": "mx_sparse._core.contract"})

SUBMODULES = ("sparse_conv", "sparse_modules", "sparse_pool", "sparse_structure", "voxelize")

FRESH_CHECK = r"""
import importlib, os, pickle, sys

# a module's name from before the grouping, first thing in this interpreter
import mx_sparse.sparse_tensor as old_tensor_module
import mx_sparse.nn.sparse_tensor
assert old_tensor_module is mx_sparse.nn.sparse_tensor
assert old_tensor_module.SparseConvTensor is mx_sparse.SparseConvTensor
for old, new in %(grouped)r.items():
    module = importlib.import_module(old)
    assert module is importlib.import_module(new), (old, module)
    assert module.__name__ == new and module.__spec__.name == new, (old, module.__spec__)
    assert module.__file__.endswith(os.path.join(*new.split(".")) + ".py"), module.__file__
    assert sys.modules[old] is module, old
    last = old.rpartition(".")[2]
    if last != "voxelize":   # mx_sparse.voxelize is the function (mx_sparse/__init__.py), as before
        assert getattr(mx_sparse, last) is module, old
assert callable(mx_sparse.voxelize) and mx_sparse.voxelize is mx_sparse.functional.voxelize.voxelize
from mx_sparse import conv, modules, _contract
assert conv is mx_sparse.nn.conv and modules is mx_sparse.nn.modules and _contract is mx_sparse._core.contract
import mx_sparse.conv as c
assert c is mx_sparse.nn.conv and isinstance(c.SubMConv3d(2, 2, 3), mx_sparse.nn.conv.SparseConvolution)
assert pickle.loads(b"cmx_sparse.conv\nSubMConv3d\n.") is mx_sparse.SubMConv3d

# the moved modules first, by their import names: each from the file its name says
for name in %(moved)r:
    module = importlib.import_module(name)
    want = os.path.join(*name.split(".")) + ".py"
    assert module.__file__.endswith(want), (name, module.__file__)
kernels_cls = pickle.loads(b"cmx_sparse._cuda.tiles\nTile\n.")
assert kernels_cls is sys.modules["mx_sparse._cuda.tiles"].Tile

# the old class path comes first: a whole-model pickle (torch.save) written before the move
cls = pickle.loads(b"cmx_sparse.ops.sparse_conv\nSubMConv3d\n.")
import mx_sparse.compat.mmcv.sparse_conv as new_conv
assert cls is new_conv.SubMConv3d, cls

import mx_sparse, mx_sparse.ops
from mx_sparse.compat import mmcv as new_mmcv
assert mx_sparse.ops is new_mmcv
for name in new_mmcv.SPARSE_NAMES + ["register_conv_layers", "SparseMaxPool"]:
    old = getattr(importlib.import_module("mx_sparse.ops"), name)
    assert old is getattr(new_mmcv, name), name
for sub in %(submodules)r:
    old = importlib.import_module("mx_sparse.ops." + sub)
    new = importlib.import_module("mx_sparse.compat.mmcv." + sub)
    assert old is new, sub
    assert all(getattr(old, n) is getattr(new, n) for n in dir(new)), sub
from mx_sparse.ops import SparseConv3d, SubMConv3d, SparseConvTensor, Voxelization, voxelization, scatter_nd
from mx_sparse.ops.sparse_conv import SparseConvTranspose3d
assert SparseConvTranspose3d is new_conv.SparseConvTranspose3d and SubMConv3d is new_conv.SubMConv3d

import mx_sparse.spconv as old_spconv
from mx_sparse.compat.mx_driving import spconv as new_spconv
assert old_spconv is new_spconv is mx_sparse.spconv
from mx_sparse.spconv import SubMConv3d as s, SparseConvTensor as t
assert s is mx_sparse.SubMConv3d and t is mx_sparse.SparseConvTensor
for name in new_spconv.__all__:
    assert getattr(old_spconv, name) is getattr(mx_sparse, name), name

mx_sparse.patch_mx_driving()
import mx_driving, mx_driving.spconv
assert mx_driving.spconv is new_spconv
print("old paths OK")
""" % {"submodules": SUBMODULES, "moved": MOVED, "grouped": GROUPED}

# Checkpoints from before the grouping, loaded in a fresh interpreter: the whole model (weights_only=False)
# before anything of mx_sparse is imported (unpickling imports mx_sparse.modules, an old name), the
# tensor with its map cache under weights_only=True (mx_sparse imported: it allows its classes).
CHECKPOINT_CHECK = r"""
import sys, torch
saved = torch.load(%(model)r, weights_only=False)
import mx_sparse
net, x = saved["net"], saved["input"]
assert type(net) is mx_sparse.SparseSequential and type(net[0]) is mx_sparse.SubMConv3d
assert type(x) is mx_sparse.SparseConvTensor
y = net(x)
assert torch.equal(y.features, saved["output"]), (y.features - saved["output"]).abs().max()
tensor = torch.load(%(tensor)r, weights_only=True)
assert type(tensor) is mx_sparse.SparseConvTensor
assert torch.equal(tensor.features, saved["output"])
cached = tensor.indice_dict["s1"]
assert type(cached) is mx_sparse.nn.indice_data.IndiceData
fresh = net(saved["input"]).indice_dict["s1"]
assert torch.equal(cached.nbr, fresh.nbr)
print("checkpoints OK")
""" % {"model": os.path.join(DATA, "old_paths_model.pt"), "tensor": os.path.join(DATA, "old_paths_tensor.pt")}


def test_checkpoints_with_pre_grouping_class_paths_load():
    for name in ("old_paths_model.pt", "old_paths_tensor.pt"):   # written with the old paths (make_old_path_pickles.py)
        assert b"mx_sparse.sparse_tensor" in open(os.path.join(DATA, name), "rb").read(), name
    proc = subprocess.run([sys.executable, "-c", CHECKPOINT_CHECK], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "checkpoints OK" in proc.stdout


def test_old_import_paths_resolve_to_the_moved_objects():
    assert len(GROUPED) == 25 and GROUPED["mx_sparse.conv"] == "mx_sparse.nn.conv"
    assert len(MOVED) > 20 and "mx_sparse._cuda.launch" in MOVED and "mx_sparse._accelerator.registration" in MOVED
    proc = subprocess.run([sys.executable, "-c", FRESH_CHECK], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "old paths OK" in proc.stdout


def test_old_paths_in_this_process():
    import mx_sparse
    import mx_sparse.ops
    import mx_sparse.spconv
    from mx_sparse.compat import mmcv
    from mx_sparse.compat.mx_driving import spconv
    assert mx_sparse.ops is mmcv and mx_sparse.spconv is spconv
    for sub in SUBMODULES:
        assert importlib.import_module("mx_sparse.ops." + sub) is getattr(mmcv, sub)
        assert sys.modules["mx_sparse.ops." + sub] is getattr(mmcv, sub)
