"""``spconv.pytorch.pool``: max / average pooling and global pooling (spconv 2.x
signatures; ``algo``, ``record_voxel_count``, ``name`` accepted and ignored)."""
from ...layers import SparseGlobalPool, SparsePool


class SparseMaxPool(SparsePool):
    def __init__(self, ndim, kernel_size=3, stride=1, padding=0, dilation=1, indice_key=None, subm=False,
                 algo=None, record_voxel_count=False, name=None):
        super().__init__(ndim, kernel_size, stride, padding, dilation, indice_key, subm, mode="max")
        self.name, self.algo = name, algo


class SparseAvgPool(SparsePool):
    def __init__(self, ndim, kernel_size=3, stride=1, padding=0, dilation=1, indice_key=None, subm=False,
                 algo=None, record_voxel_count=False, name=None):
        super().__init__(ndim, kernel_size, stride, padding, dilation, indice_key, subm, mode="avg")
        self.name, self.algo = name, algo


def _named(base, ndim):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, indice_key=None, algo=None,
                 record_voxel_count=False, name=None):
        base.__init__(self, ndim, kernel_size, stride, padding, dilation, indice_key=indice_key, algo=algo,
                      record_voxel_count=record_voxel_count, name=name)
    return type(f"{base.__name__}{ndim}d", (base,), {"__init__": __init__, "__module__": __name__})


SparseMaxPool1d, SparseMaxPool2d, SparseMaxPool3d, SparseMaxPool4d = (_named(SparseMaxPool, d) for d in (1, 2, 3, 4))
SparseAvgPool1d, SparseAvgPool2d, SparseAvgPool3d = (_named(SparseAvgPool, d) for d in (1, 2, 3))


class SparseGlobalMaxPool(SparseGlobalPool):
    def __init__(self, name=None):
        super().__init__(is_mean=False)
        self.name = name


class SparseGlobalAvgPool(SparseGlobalPool):
    """Per-sample mean, ``[batch_size, C]``. (spconv 2.3.8 returns only channel 0 of the
    mean, ``[batch_size]``, through a stray ``[0]``; mx_sparse returns all channels.)"""

    def __init__(self, name=None):
        super().__init__(is_mean=True)
        self.name = name
