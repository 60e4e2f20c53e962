"""Initial weights of the two ``mode``s. Both fill the same layout
``[*kernel, Cin/groups, Cout]``; they differ in bounds and in the order the
random numbers are drawn, so a seed reproduces the framework each mode mimics."""
import math

import torch
from torch.nn import init


def fan_in(weight: torch.Tensor) -> int:
    """Input connections of one output: Cin/groups x kernel volume."""
    return weight.shape[-2] * math.prod(weight.shape[:-2])


def init_mmcv(weight: torch.Tensor, bias) -> None:
    """mmcv/mx_driving: torch's kaiming_uniform_ applied to the weight tensor as
    laid out (torch computes its fan from dims 1.. of that layout), bias from the
    true fan-in."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    _init_bias(bias, fan_in(weight))


def init_spconv(weight: torch.Tensor, bias) -> None:
    """spconv 2.x: uniform(+-sqrt(3)*gain/sqrt(fan_in)) drawn in spconv's own layout
    [Cout, *kernel, Cin] and then moved into ours, so the same seed gives the same
    numbers as spconv.pytorch."""
    fan = fan_in(weight)
    bound = math.sqrt(3.0) * init.calculate_gain("leaky_relu", math.sqrt(5)) / math.sqrt(fan)
    ndim = weight.dim() - 2
    krsc = weight.new_empty([weight.shape[-1], *weight.shape[:-2], weight.shape[-2]])
    with torch.no_grad():
        krsc.uniform_(-bound, bound)
        weight.copy_(krsc.permute(*range(1, ndim + 2), 0))
    _init_bias(bias, fan)


def _init_bias(bias, fan: int) -> None:
    if bias is not None:
        bound = 1 / math.sqrt(fan) if fan > 0 else 0
        init.uniform_(bias, -bound, bound)


INITIALIZERS = {"mmcv": init_mmcv, "spconv": init_spconv}
