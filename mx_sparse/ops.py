"""``mx_sparse.ops``: the documented name of the mmcv.ops surface, which lives in
``mx_sparse.compat.mmcv``. This module replaces itself with that package (and its submodules,
``mx_sparse.ops.sparse_conv`` etc., with the compat ones), so both names give the same objects
and a model pickled with the old class paths still loads. No code of its own."""
import sys

from .compat import mmcv as _surface

for _name in ("sparse_conv", "sparse_modules", "sparse_pool", "sparse_structure", "voxelize"):
    sys.modules[f"{__name__}.{_name}"] = getattr(_surface, _name)
sys.modules[__name__] = _surface
