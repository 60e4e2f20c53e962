"""``mx_driving.modules.sparse_modules``: the containers (mx_sparse's own objects), ToDense,
RemoveGrid and the helpers mx_driving defines beside them."""
from typing import List, Union

from ....compat.spconv2.pytorch import RemoveGrid  # noqa: F401
from ....compat.spconv2.pytorch.modules import is_sparse_conv, is_spconv_module  # noqa: F401
from ....nn.modules import SparseModule, SparseSequential, ToDense  # noqa: F401
from ....nn.sparse_tensor import SparseConvTensor  # noqa: F401


def _mean_update(vals: Union[float, List[float]], m_vals: Union[float, List[float]], t: float):
    """Running mean after step ``t``: ``m * t / (t + 1) + v / (t + 1)`` per element (a list,
    or one value when one was given); an empty list for ``t == -1``."""
    vals = vals if isinstance(vals, list) else [vals]
    m_vals = m_vals if isinstance(m_vals, list) else [m_vals]
    if t + 1 == 0:
        return []
    out = [m * (t / (t + 1)) + v / float(t + 1) for v, m in zip(vals, m_vals)]
    return out[0] if len(out) == 1 else out
