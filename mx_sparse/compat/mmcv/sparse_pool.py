"""``mmcv.ops.sparse_pool``: SparseMaxPool (mmcv's signatures)."""
from ..layers import SparsePool


class SparseMaxPool(SparsePool):
    def __init__(self, ndim, kernel_size, stride=1, padding=0, dilation=1, subm=False):
        super().__init__(ndim, kernel_size, stride, padding, dilation, subm=subm, mode="max")


class SparseMaxPool2d(SparseMaxPool):
    def __init__(self, kernel_size, stride=1, padding=0, dilation=1):
        super().__init__(2, kernel_size, stride, padding, dilation)


class SparseMaxPool3d(SparseMaxPool):
    def __init__(self, kernel_size, stride=1, padding=0, dilation=1):
        super().__init__(3, kernel_size, stride, padding, dilation)
