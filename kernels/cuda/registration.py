"""Registers the CUDA backend's implementations of every mx_sparse op (schema:
kernels/ops/schema.cpp) under the CUDA dispatch key. Autograd (C++, Autograd key) and the
fake kernels (mx_sparse/_ops.py) are shared with the other backends and stay as they are.

``MXS_CUDA_ON_CPU=1`` (read at import) registers the same implementations for the CPU key
too (and voxelization's C++ torch-operator version), replacing the C++ CPU kernels: every op on CPU tensors then runs the code CUDA tensors
run, its Triton kernels under Triton's interpreter. That is how this backend is executed on
machines without a GPU (the test suite runs its dense-reference and property tests this way);
it is slow, and meant for checking, not for work.
"""
import os
import warnings

import torch

from . import batch_norm_relu, gather_mm, neighbor_map, packed_map, sparse_pool

IMPLEMENTATIONS = {
    "build_subm_map": neighbor_map.build_subm_map,
    "build_conv_map": neighbor_map.build_conv_map,
    "transpose_map": neighbor_map.transpose_map,
    "pack_map": packed_map.pack_map,
    "unpack_map": packed_map.unpack_map,
    "gather_mm": gather_mm.gather_mm,
    "gather_mm_backprop_filter": gather_mm.gather_mm_backprop_filter,
    "batch_norm_relu_forward": batch_norm_relu.batch_norm_relu_forward,
    "scale_shift_relu": batch_norm_relu.scale_shift_relu,
    "batch_norm_relu_backward": batch_norm_relu.batch_norm_relu_backward,
    "sparse_max_pool": sparse_pool.sparse_max_pool,
    "sparse_max_pool_backward": sparse_pool.sparse_max_pool_backward,
    "sparse_avg_pool": sparse_pool.sparse_avg_pool,
    "sparse_avg_pool_backward": sparse_pool.sparse_avg_pool_backward,
}

def _voxelize_cuda_path():
    """Voxelization's CUDA implementation is C++ with torch's operators (registered under CUDA by
    kernels/ops/voxelize_generic.cpp); for CPU tensors it is reached through the extension's
    entry points to the same code."""
    from .. import _C
    return {"voxelize_hard": _C.voxelize_hard_generic, "voxelize_dynamic": _C.voxelize_dynamic_generic}


ON_CPU_ENV = "MXS_CUDA_ON_CPU"
_libraries = []  # registrations last as long as their Library object


def on_cpu_requested() -> bool:
    from .. import _C   # the one switch parser (kernels/cpu/env_switch.h): "false" or "off" is off
    return _C.env_switch(ON_CPU_ENV, False)


def _prepare_interpreter():
    """CPU tensors can run Triton kernels only in Triton's interpreter, which must be chosen
    before triton is imported (triton.language's own helpers are compiled at import)."""
    value = os.environ.setdefault("TRITON_INTERPRET", "1")
    if value.strip().lower() in ("", "0", "false", "off", "no"):
        warnings.warn(f"{ON_CPU_ENV}=1 needs Triton's interpreter, but TRITON_INTERPRET={value!r} turns it off: "
                      f"every Triton kernel on a CPU tensor will fail; unset TRITON_INTERPRET or set it to 1",
                      RuntimeWarning, stacklevel=2)
    import sys
    if "triton" in sys.modules:
        from triton import knobs
        if not knobs.runtime.interpret:
            raise RuntimeError(f"{ON_CPU_ENV}=1: triton was imported before mx_sparse without TRITON_INTERPRET=1; "
                               f"set TRITON_INTERPRET=1 before importing triton")


def register(on_cpu: bool) -> None:
    """CUDA key always; the CPU key too when ``on_cpu`` (see the module docstring)."""
    keys = ["CUDA"] + (["CPU"] if on_cpu else [])
    if on_cpu:
        _prepare_interpreter()
    lib = torch.library.Library("mx_sparse", "IMPL")
    with warnings.catch_warnings():
        # replacing the C++ CPU kernels is the point of MXS_CUDA_ON_CPU; torch warns about it
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        for name, fn in IMPLEMENTATIONS.items():
            for key in keys:
                lib.impl(name, fn, key)
        if on_cpu:
            for name, fn in _voxelize_cuda_path().items():
                lib.impl(name, fn, "CPU")
    _libraries.append(lib)
