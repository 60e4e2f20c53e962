"""Padding of the core convolutions as ONNX / oneDNN define it for dense convolution:
explicit per-axis ``pads_begin`` / ``pads_end`` (zero padding below / above each axis), or
``auto_pad``:

- ``"none"``: the explicit pads (``padding`` on both sides when no pads are given);
- ``"valid"``: no padding;
- ``"same_upper"`` / ``"same_lower"``: pads such that the output has ``ceil(in / stride)``
  cells per axis (strided conv) or ``in * stride`` (transposed conv); an odd total goes one
  more to the end (upper) or to the beginning (lower).

Strided conv (ONNX Conv):  total = max(0, (ceil(in/s) - 1)*s + (k-1)*d + 1 - in).
Transposed conv (ONNX ConvTranspose, oneDNN): total = s*(in-1) + output_padding + (k-1)*d + 1 - in*s
= (k-1)*d + 1 + output_padding - s, the same for every input extent; negative totals (a stride
beyond the kernel's extent) would need negative pads, which neither op defines: rejected.
The same_* pads depend on the input's extent, so layers resolve them per call.
"""
from typing import Optional, Sequence, Tuple

from . import validation

AUTO_PAD = ("none", "same_upper", "same_lower", "valid")


def check_auto_pad(auto_pad) -> str:
    if auto_pad not in AUTO_PAD:
        raise ValueError(f"auto_pad: expected one of {', '.join(repr(a) for a in AUTO_PAD)}, got {auto_pad!r}")
    return auto_pad


def explicit_pads(ndim: int, padding, pads_begin, pads_end, auto_pad: str) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """(pads_begin, pads_end) from a layer's arguments, one value per axis, each >= 0. ``padding``
    (symmetric) and ``pads_begin``/``pads_end`` (given together) exclude each other, and with
    an ``auto_pad`` other than "none" no explicit padding may be given (ONNX forbids the mix)."""
    check_auto_pad(auto_pad)
    symmetric = validation.per_axis("padding", padding, ndim, 0)
    if (pads_begin is None) != (pads_end is None):
        given, missing = ("pads_begin", "pads_end") if pads_end is None else ("pads_end", "pads_begin")
        raise ValueError(f"{missing}: expected pads_begin and pads_end together, got {given} alone")
    if pads_begin is not None:
        if any(symmetric):
            raise ValueError(f"padding, pads_begin, pads_end: give the symmetric padding ({padding!r}) or "
                             f"pads_begin/pads_end, not both")
        begin = validation.per_axis("pads_begin", pads_begin, ndim, 0)
        end = validation.per_axis("pads_end", pads_end, ndim, 0)
    else:
        begin = end = symmetric
    if auto_pad != "none" and (any(begin) or any(end)):
        raise ValueError(f"auto_pad: {auto_pad!r} computes the padding itself; explicit padding "
                         f"(pads_begin {list(begin)}, pads_end {list(end)}) cannot be given with it")
    return tuple(begin), tuple(end)


def _split(total: int, auto_pad: str) -> Tuple[int, int]:
    """An odd total's extra cell at the end (same_upper) or at the beginning (same_lower)."""
    half = total // 2
    return (half, total - half) if auto_pad == "same_upper" else (total - half, half)


def resolve(auto_pad: str, explicit: Tuple[Sequence[int], Sequence[int]], spatial_shape: Sequence[int],
            kernel_size: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
            output_padding: Optional[Sequence[int]] = None) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """(pads_begin, pads_end) of one call: the explicit pads, zeros ("valid") or the same_* pads
    for this input extent; ``output_padding`` given: of a transposed conv."""
    if auto_pad == "none":
        return tuple(explicit[0]), tuple(explicit[1])
    ndim = len(spatial_shape)
    if auto_pad == "valid":
        return (0,) * ndim, (0,) * ndim
    begin, end = [], []
    for d, (s, k, st, dl) in enumerate(zip(spatial_shape, kernel_size, stride, dilation)):
        if output_padding is None:
            out = -(-s // st)
            total = max(0, (out - 1) * st + (k - 1) * dl + 1 - s)
        else:
            total = (k - 1) * dl + 1 + output_padding[d] - st
            if total < 0:
                raise ValueError(f"auto_pad: {auto_pad!r} needs a padding of {total} on axis {d} (stride {st} exceeds "
                                 f"the kernel's extent (k-1)*dilation + 1 + output_padding = {st + total}); "
                                 f"negative pads are not defined, give explicit pads_begin/pads_end")
        b, e = _split(total, auto_pad)
        begin.append(b)
        end.append(e)
    return tuple(begin), tuple(end)
