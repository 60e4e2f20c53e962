"""``mx_sparse.spconv``: the documented name of the mx_driving.spconv surface, which lives in
``mx_sparse.compat.mx_driving.spconv``. This module replaces itself with that one, so both names
give the same objects. No code of its own."""
import sys

from .compat.mx_driving import spconv as _surface

sys.modules[__name__] = _surface
