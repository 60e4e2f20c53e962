"""``spconv.core``: the algorithm enums. mx_sparse accepts and ignores ``algo``: every
layer runs the neighbor-map ``gather_mm`` of mx_sparse."""
from enum import Enum


class ConvAlgo(Enum):
    Native = 0
    MaskImplicitGemm = 1
    MaskSplitImplicitGemm = 2


class AlgoHint(Enum):
    NoHint = 0b000
    Fowrard = 0b001
    BackwardInput = 0b010
    BackwardWeight = 0b100
