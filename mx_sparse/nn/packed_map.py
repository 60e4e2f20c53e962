"""Neighbor maps held packed while no layer is using them.

A map ``[M, K]`` int32 is mostly -1 on LiDAR data: about 7 of the 27 offsets of a
submanifold map are present, 3 to 4 of a strided one. Yet a training step holds
every map from its layer's forward to that layer's backward, on CPU about a
quarter of what the step holds at its peak. ``pack_map`` (kernels/cpu, mx_sparse/_cuda) keeps
only the present entries plus one bit per (row, offset): a third of the bytes or less.

``HeldMap`` is one map in either form: dense while layers use it, packed after
``release()``; ``dense()`` unpacks it again on demand. Packing is lazy (only a
map that is released or saved for backward is packed) and only on devices whose backend
holds maps packed: CPU, not CUDA or the NPU (where a pack costs host reads and torch operators
and saves MBs next to GBs of device memory; the accelerator orchestration's choice, with the
numbers: mx_sparse/_accelerator/registration.py PACKS_MAPS). Who uses
the packed form: a layer that moves on to another map releases the others
(``SparseConvolution``), and autograd saves maps for backward packed
(saved_tensors.py).
"""
import functools
import weakref
from dataclasses import dataclass
from typing import Optional

import torch
from .._core.weak_id_map import WeakIdMap

from .._core.op_registration import has_kernel, ops
from .compile_support import is_compiling

# The HeldMap of each dense map it hands out, keyed by the tensor (weakly, by identity), held
# through a weak reference: a strong one would keep the map alive through its holder (map ->
# holder -> map). Not an attribute of the tensor, which would travel into pickles.
_HOLDERS = WeakIdMap()

@dataclass(frozen=True)
class PackedMap:
    """``pack_map``'s three tensors and the kernel volume: everything ``unpack`` needs."""
    mask: torch.Tensor
    values: torch.Tensor
    block_starts: torch.Tensor
    kvol: int

    @staticmethod
    def of(nbr: torch.Tensor) -> "PackedMap":
        return PackedMap(*ops.pack_map(nbr), nbr.shape[1])

    def unpack(self) -> torch.Tensor:
        return ops.unpack_map(self.mask, self.values, self.block_starts, self.kvol)


@functools.lru_cache(maxsize=None)
def _has_packing_kernels(device_type: str) -> bool:
    """pack_map / unpack_map exist for the device, and its backend holds maps packed (the
    accelerator orchestration chooses per device: not on CUDA, see its registration.PACKS_MAPS)."""
    from .._accelerator import registration
    return (has_kernel(device_type, "pack_map") and has_kernel(device_type, "unpack_map")
            and registration.packs_maps(device_type))


def _packable(nbr: torch.Tensor) -> bool:
    # Under torch.compile maps stay dense: packing is an eager-mode memory saving (the compiled
    # graph's own memory planning holds what its backward needs), and the registry below is
    # not traceable.
    if is_compiling():
        return False
    # the device first: where maps are never packed (CUDA, NPU) that answers alone
    return _has_packing_kernels(nbr.device.type) and nbr.dtype == torch.int32 and nbr.dim() == 2 and nbr.shape[1] > 0


def any_held_dense() -> bool:
    """False when no HeldMap holds a packable map in its dense form: ``release()`` is then a no-op
    for every map (always so where maps are not packed: CUDA, NPU), and callers may skip it.
    True while compiling (the registry is not traceable; callers release as they would)."""
    return is_compiling() or bool(_HOLDERS)


class HeldMap:
    """One neighbor map, dense or packed (see the module docstring)."""

    def __init__(self, dense: torch.Tensor):
        self._dense: Optional[torch.Tensor] = dense
        self._packed: Optional[PackedMap] = None
        self._packed_version = -1
        self._packable = _packable(dense)
        self._register(dense)

    def dense(self) -> torch.Tensor:
        if self._dense is None:
            self._dense = self._packed.unpack()
            # the packed form is still current (an inference tensor, unpacked under inference_mode, has
            # no version counter: packed() then packs it again)
            self._packed_version = -1 if self._dense.is_inference() else self._dense._version
            self._register(self._dense)
        return self._dense

    def packed(self) -> Optional[PackedMap]:
        """The packed form of the current map (None where maps are not packed: not CPU)."""
        if not self._packable:
            return None
        if self._dense is not None and (self._dense.is_inference() or self._dense._version != self._packed_version):
            self._packed, self._packed_version = PackedMap.of(self._dense), self._dense._version
        return self._packed

    def release(self) -> None:
        """Keep only the packed form (no-op where maps are not packed)."""
        if self._dense is not None and self.packed() is not None:
            self._dense = None

    def __setstate__(self, state: dict) -> None:
        """Unpickled or deep-copied: the dense map is a new tensor, registered again (so that
        autograd still saves it packed); its packed form, if any, is repacked when needed."""
        self.__dict__.update(state)
        self._packed_version = -1
        if self._dense is not None:
            self._register(self._dense)

    @property
    def is_dense(self) -> bool:
        return self._dense is not None

    def _register(self, dense: torch.Tensor) -> None:
        if self._packable:
            _HOLDERS[dense] = weakref.ref(self)


def packed_form(t: torch.Tensor) -> Optional[PackedMap]:
    """The packed form of ``t`` if it is the dense form of a live HeldMap, else None."""
    if not _HOLDERS:   # no packable map is held dense (always so on CUDA / NPU): no lookup
        return None
    ref = _HOLDERS.get(t)
    holder = ref() if ref is not None else None
    if holder is None or holder._dense is not t:
        return None
    return holder.packed()
