"""spconv 2.x top-level package as seen by client code (``import spconv``), served by
mx_sparse. Installed into ``sys.modules`` by ``mx_sparse.patch_spconv()``."""
from . import constants
from .core import AlgoHint, ConvAlgo

__version__ = "2.3.8"
SPCONV_VERSION_NUMBERS = [2, 3, 8]
__mx_sparse__ = True   # marks the mx_sparse implementation

from . import pytorch  # noqa: E402  (after the names pytorch imports from here)
