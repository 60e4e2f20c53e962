"""Every import path a user had before the compat surfaces moved into ``mx_sparse/compat``
still resolves, to the very objects of the new location: ``mx_sparse.ops`` (the mmcv.ops
surface, now ``mx_sparse.compat.mmcv``) with its submodules, ``mx_sparse.spconv`` (the
mx_driving.spconv surface, now ``mx_sparse.compat.mx_driving.spconv``), and class paths in
pickles written before the move. The orchestration and CUDA modules moved in the tree
(kernels/accelerator -> mx_sparse/_accelerator, kernels/cuda -> mx_sparse/_cuda) under the import
names they always had: each still imports by that name, from the file its name says, and class
paths into them still unpickle. Checked in a fresh interpreter, where the old path is the
first thing imported (in this process the new modules are already loaded)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The modules whose files moved (issue 34 item 1), listed from the tree: mx_sparse/<part>/<name>.py.
MOVED = sorted("mx_sparse.%s.%s" % (part, f[:-3]) for part in ("_accelerator", "_cuda")
               for f in os.listdir(os.path.join(ROOT, "mx_sparse", part)) if f.endswith(".py") and f != "__init__.py")

SUBMODULES = ("sparse_conv", "sparse_modules", "sparse_pool", "sparse_structure", "voxelize")

FRESH_CHECK = r"""
import importlib, os, pickle, sys

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
""" % {"submodules": SUBMODULES, "moved": MOVED}


def test_old_import_paths_resolve_to_the_moved_objects():
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
        assert sys.modules["mx_sparse.ops." + sub] is getattr(mmcv, sub)
