"""Where the CPU kernels' large tensors live, and how to give that memory back.

Features, gradients and neighbor maps of 256 KiB and more that mx_sparse's CPU kernels
create come from a pool of their own (kernels/cpu/large_tensor_pool.cpp): an address
range reserved for large tensors only, first fit at the lowest address, neighbouring free
ranges merged. In glibc's heap the small objects of Python and autograd land in the holes
freed tensors leave, so a training step's resident memory grew to about twice what it
held at once; in the pool it stays close to that peak. Freed memory stays resident for
the next step (fresh pages cost a page fault each) until more than the keep limit
(256 MiB; ``MXS_CPU_POOL_KEEP_MB``) is waiting; ``release_cached()`` gives it back now.
``MXS_CPU_POOL=0`` in the environment (read once, when a kernel first makes a large
tensor) turns the pool off; it is off anyway outside Linux. Tensors from torch's own ops
never come from the pool.
"""
from typing import Dict

from .. import _C


def stats() -> Dict[str, int]:
    """Bytes of the pool: ``live_bytes`` (tensors now), ``peak_live_bytes`` (the most at once
    since the last ``release_cached()`` or automatic give-back), ``kept_bytes`` (freed, still
    resident, an estimate), ``touched_bytes`` (every page used since the last release),
    ``reserved_bytes`` (address space, not memory), ``segments``, ``keep_limit_bytes``."""
    return dict(_C.cpu_pool_stats())


def release_cached() -> None:
    """Gives the pages of every free range back to the system (like
    ``torch.cuda.empty_cache()``); live tensors are untouched."""
    _C.cpu_pool_release_cached()


def set_keep_limit(num_bytes: int) -> None:
    """Bound on the freed bytes the pool keeps resident; beyond it, the free ranges' pages
    go back to the system. 0 gives them back at every free (slower: page faults)."""
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int) or num_bytes < 0:
        raise ValueError(f"num_bytes: expected a non-negative int, got {num_bytes!r}")
    _C.cpu_pool_set_keep_limit(num_bytes)
