"""What an ``indice_key`` caches: the neighbor map of one layer and everything
needed to reuse it (submanifold layers) or to invert it (SparseInverseConv)."""
from typing import List, Optional, Sequence, Tuple

import torch

from .. import functional as F
from .compile_support import is_compiling
from .packed_map import HeldMap


class IndiceData:
    """One cached map: ``kind`` "subm" or "conv"; the voxels it reads from (``in_indices``) and
    writes to (``out_indices``, the same tensor for subm); ``nbr [M, K]`` int32, output row ->
    input row per offset; the geometry it was built with. The map and its transpose are
    ``HeldMap``s: while a training step runs, only the map in use stays dense (``release``)."""

    # True for a map evaluated at output voxels the caller gave (given_outputs.py): reused only
    # for those voxels. A class default, so maps saved before it existed read False.
    given_outputs = False

    def __init__(self, kind: str, in_indices: torch.Tensor, out_indices: torch.Tensor, nbr: torch.Tensor,
                 in_spatial_shape: List[int], out_spatial_shape: List[int], kernel_size: Tuple[int, ...],
                 stride: Tuple[int, ...], padding: Tuple[int, ...], dilation: Tuple[int, ...],
                 pads_end: Optional[Tuple[int, ...]] = None, transposed: bool = False,
                 output_padding: Optional[Tuple[int, ...]] = None):
        self.kind, self.in_indices, self.out_indices = kind, in_indices, out_indices
        self.in_spatial_shape, self.out_spatial_shape = list(in_spatial_shape), list(out_spatial_shape)
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        # padding is pads_begin; pads_end the padding above (asymmetric when they differ).
        # transposed: a generative (transposed) conv's map, kind "conv" so that a SparseInverseConv
        # with its key returns to its input voxels.
        self.pads_end = tuple(padding) if pads_end is None else tuple(pads_end)
        self.transposed = transposed
        self.output_padding = (0,) * len(kernel_size) if output_padding is None else tuple(output_padding)
        self._nbr = HeldMap(nbr)
        self._nbr_t: Optional[HeldMap] = None
        # what the map was built from, to refuse reusing it for anything else (check_reusable)
        self.batch_size: Optional[int] = None
        self._in_token, self._out_token = contents_token(in_indices), contents_token(out_indices)

    def __setstate__(self, state: dict) -> None:
        """A copy (pickle, deepcopy, torch.load) holds new index tensors whose version counters
        start afresh: its tokens are taken from them, as when the map was built."""
        self.__dict__.update(state)
        if self.__dict__.get("_in_token") is not None:
            self._in_token = contents_token(self.in_indices)
        if self.__dict__.get("_out_token") is not None:
            self._out_token = contents_token(self.out_indices)

    @property
    def nbr(self) -> torch.Tensor:
        return self._nbr.dense()

    @nbr.setter
    def nbr(self, nbr: torch.Tensor) -> None:
        self._nbr, self._nbr_t = HeldMap(nbr), None   # a transpose of the old map no longer applies

    @property
    def symmetric(self) -> bool:
        """Submanifold map of an odd kernel: offset K-1-k is the negation of offset k, so the
        transpose is the map with its columns reversed. The ops then take ``symmetric=True`` and
        run the input gradient on ``nbr`` itself (no second map in memory)."""
        return self.kind == "subm" and all(k % 2 for k in self.kernel_size)

    @property
    def has_transpose(self) -> bool:
        return self._nbr_t is not None

    @property
    def nbr_t(self) -> torch.Tensor:
        """[N, K] int32, the transpose: built on first use, because only the input gradient
        of non-symmetric maps and SparseInverseConv read it (inference never does)."""
        if self._nbr_t is None:
            if self.symmetric:
                self._nbr_t = HeldMap(self.nbr.flip(1))
            else:
                self._nbr_t = HeldMap(F.transpose_map(self.nbr, self.in_indices.shape[0]))
        return self._nbr_t.dense()

    def gradient_map(self) -> Optional[torch.Tensor]:
        """What the ops take as ``nbr_t`` for autograd: the transpose if this key already holds it
        (an inverse conv built it), else None: backward derives it (see ``symmetric``) and drops it
        after use, so a training step keeps no transposed map through the forward pass."""
        return self.nbr_t if self.has_transpose and not self.symmetric else None

    def release(self) -> None:
        """Hold the map (and its transpose) packed until a layer asks for it again."""
        self._nbr.release()
        if self._nbr_t is not None:
            self._nbr_t.release()

    def check_reusable(self, key, indices: torch.Tensor, batch_size: int, side: str = "in") -> None:
        """ValueError unless ``indices`` (already the same voxels as this map's ``side`` indices:
        same tensor or equal values) still holds what the map was built from, and ``batch_size``
        covers its batch indices. Cheap: a version counter compare (an in-place write to the
        indices bumps it), no pass over the indices on the usual path."""
        token = self._in_token if side == "in" else self._out_token
        if token is not None and token != contents_token(indices):
            raise ValueError(f"indice_key {key!r}: the indices were modified in place after the cached map was built "
                             f"from them; build a new SparseConvTensor from the new indices (its maps are built "
                             f"again), or use another indice_key")
        if self.batch_size is not None and batch_size < self.batch_size and indices.shape[0] > 0 \
                and not is_compiling():
            highest = int(indices[:, 0].max())
            if highest >= batch_size:
                raise ValueError(f"batch_size: expected more than {highest} (the highest batch index of the indices, "
                                 f"with which the map of indice_key {key!r} was built for batch_size "
                                 f"{self.batch_size}), got {batch_size}")

    def describe(self) -> str:
        pads = f"padding={self.padding}" if self.pads_end == tuple(self.padding) else \
            f"pads_begin={self.padding}, pads_end={self.pads_end}"
        kind = "transposed conv" if self.transposed else self.kind
        extra = f", output_padding={self.output_padding}" if self.transposed else ""
        return (f"{kind} map (kernel_size={self.kernel_size}, stride={self.stride}, {pads}, "
                f"dilation={self.dilation}{extra}, spatial_shape={self.in_spatial_shape})")


def contents_token(indices: torch.Tensor):
    """A cheap stand-in for the current values of ``indices``: its version counter, which every
    in-place write bumps (views share it). Inference tensors have none (they can be written in
    place only inside inference_mode): there, on the CPU, a position-weighted checksum of the
    values, one pass over the int32 rows; on an accelerator None (a checksum would wait for the
    device at every layer). None while compiling (the compiled graph does not mutate its inputs'
    indices, and fake tensors have no values to check)."""
    if is_compiling():
        return None
    if not indices.is_inference():
        return ("version", indices._version)
    if indices.device.type != "cpu":
        return None
    flat = indices.reshape(-1).long()
    weights = torch.arange(1, flat.numel() + 1, device=flat.device, dtype=torch.long)
    return ("checksum", tuple(indices.shape), int((flat * weights).sum()), int(flat.sum()))


def same_voxels(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Cheap identity test first (layers pass one indices tensor along), exact compare otherwise."""
    if a is b or (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()):
        return True
    return a.shape == b.shape and torch.equal(a, b)


def build_subm_data(indices: torch.Tensor, spatial_shape: Sequence[int], batch_size: int,
                    kernel_size: Tuple[int, ...], dilation: Tuple[int, ...]) -> IndiceData:
    """Map of a submanifold layer (what SubMConv layers cache); its transpose on demand."""
    nbr = F.build_subm_map(indices, spatial_shape, batch_size, kernel_size, dilation)
    ndim = len(spatial_shape)
    data = IndiceData("subm", indices, indices, nbr, list(spatial_shape), list(spatial_shape),
                      tuple(kernel_size), (1,) * ndim, (0,) * ndim, tuple(dilation))
    data.batch_size = batch_size
    return data


def build_conv_data(indices: torch.Tensor, spatial_shape: Sequence[int], batch_size: int,
                    kernel_size: Tuple[int, ...], stride: Tuple[int, ...], padding: Tuple[int, ...],
                    dilation: Tuple[int, ...], pads_end: Optional[Tuple[int, ...]] = None) -> IndiceData:
    """Output voxels and map of a strided layer (what SparseConv layers cache); its transpose on demand.
    ``padding`` pads below each axis, ``pads_end`` (default: ``padding``) above."""
    if pads_end is not None and tuple(pads_end) == tuple(padding):
        pads_end = None   # symmetric: the op's default
    out_indices, nbr, out_shape = F.build_conv_map_and_shape(indices, spatial_shape, batch_size, kernel_size, stride,
                                                             padding, dilation, pads_end)
    data = IndiceData("conv", indices, out_indices, nbr, list(spatial_shape), out_shape,
                      tuple(kernel_size), tuple(stride), tuple(padding), tuple(dilation), pads_end=pads_end)
    data.batch_size = batch_size
    return data


def build_conv_transpose_data(indices: torch.Tensor, spatial_shape: Sequence[int], batch_size: int,
                              kernel_size: Tuple[int, ...], stride: Tuple[int, ...], pads_begin: Tuple[int, ...],
                              pads_end: Tuple[int, ...], dilation: Tuple[int, ...],
                              output_padding: Tuple[int, ...]) -> IndiceData:
    """Generated voxels and map of a transposed (generative) layer; its transpose on demand."""
    out_indices, nbr, out_shape = F.build_conv_transpose_map_and_shape(
        indices, spatial_shape, batch_size, kernel_size, stride, pads_begin, pads_end, dilation, output_padding)
    data = IndiceData("conv", indices, out_indices, nbr, list(spatial_shape), out_shape, tuple(kernel_size),
                      tuple(stride), tuple(pads_begin), tuple(dilation), pads_end=tuple(pads_end), transposed=True,
                      output_padding=tuple(output_padding))
    data.batch_size = batch_size
    return data
