"""Which dispatch key gets which implementation of the mx_sparse ops (schema:
kernels/schema/schema.cpp). Autograd (C++, Autograd key), autocast and the fake kernels
(mx_sparse/_core/op_registration.py) are shared by every backend and not registered here.

- ORCHESTRATION (this package, device-neutral) for CUDA, and for PrivateUse1 where the NPU
  binding is loaded (it supplies the NPU primitives).
- The five primitives: the torch-operator fallbacks (fallback.py) under
  CompositeExplicitAutograd, i.e. for every device without a kernel of its own; the two Triton
  gathers and two Triton map primitives (mx_sparse._cuda: _conv_out_keys, _sorted_key_lookup)
  for CUDA; the AscendC kernels for PrivateUse1 (registered by the C++ binding,
  kernels/ascend/binding/mx_sparse_npu.cpp).
- The optional input-gradient primitive _gather_mm_transposed (the layer's weight read
  transposed; OPTIONAL_PRIMITIVE_NAMES): CUDA (mx_sparse._cuda.gather_mm), and the NPU, whose
  AscendC GatherMm reads the weight transposed too (registered for PrivateUse1 by the C++
  binding; under MXS_NPU_ON_CPU=1 the emulator's for the CPU key). No fallback: autograd
  (kernels/schema/autograd.cpp) asks whether the tensors' device has a kernel for it and
  otherwise makes the transposed weight and calls gather_mm.
- The optional map primitives _conv_output_rows (a strided map's output rows and query keys in
  _unique_sorted_keys' launch) and _sorted_key_lookup_rows (the lookup writing rows, not
  positions): CUDA only (mx_sparse._cuda.map_primitives), no fallback; the builders
  (kernels/orchestration/neighbor_map_orchestration.cpp) ask the same and otherwise do that work
  with ATen operators.
- The fused BatchNorm+ReLU's implementation, chosen inside the orchestration by device type
  (batch_norm_relu.use_kernels): the Triton kernels (mx_sparse._cuda.batch_norm_relu) for CUDA
  tensors; for every other device a few torch operators (batch_norm_operators.py). The NPU's
  are those operators too (no AscendC BatchNorm kernel exists, each operator is one aclnn call),
  whose common case is C++ (kernels/orchestration/batch_norm_operators.cpp), registered straight
  under PrivateUse1 (NPU_NATIVE_OPS: no Python per call); it calls batch_norm_operators.py's
  general route for the other cases.
- ``MXS_CUDA_ON_CPU=1`` (read at import): the orchestration, the Triton gathers and the Triton
  BatchNorm kernels for the CPU key too (and voxelization's C++ torch-operator version),
  replacing the C++ CPU kernels: every op on CPU tensors then runs the code CUDA tensors run, the
  Triton kernels under Triton's interpreter.
- ``MXS_NPU_ON_CPU=1`` (read at import): the orchestration, the NPU's C++ BatchNorm and the
  AscendC emulator's primitives (``mx_sparse.runtime.ascend.emulator_primitives()``) for the CPU
  key: every op on CPU tensors runs the code NPU tensors run, the AscendC kernels in the CPU
  emulator.

Both switches are for checking on machines without the device, not for work (slow).
"""
import os
import warnings

import torch

from . import (batch_norm_operators, batch_norm_relu, conv_map_at, conv_transpose_map, fallback, gather_mm, neighbor_map,
               packed_map, sparse_pool)

ORCHESTRATION = {
    "build_subm_map": neighbor_map.build_subm_map,
    "build_conv_map": neighbor_map.build_conv_map,
    "build_conv_transpose_map": conv_transpose_map.build_conv_transpose_map,
    "build_conv_map_at": conv_map_at.build_conv_map_at,
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
PRIMITIVE_NAMES = tuple(fallback.PRIMITIVES)
# Primitives a device may have and the others need not (no fallback: see the module docstring);
# registered for a key where its implementation supplies them.
OPTIONAL_PRIMITIVE_NAMES = ("_gather_mm_transposed", "_conv_output_rows", "_sorted_key_lookup_rows")
# The ops whose NPU kernels are C++ (mx_sparse._C.batch_norm_operators: the common case
# batch_norm_operators.py describes, over ATen operators, registered by ``register`` for PrivateUse1, and for
# the CPU key under MXS_NPU_ON_CPU=1); the NPU's Python tables leave them out.
NPU_NATIVE_OPS = ("batch_norm_relu_forward", "scale_shift_relu", "batch_norm_relu_backward")

# Whether a training step holds the maps no layer is using packed (mx_sparse/nn/packed_map.py: the
# layer's HeldMap, autograd's saved maps), per dispatch key this orchestration serves; a choice of
# the orchestration, since pack_map / unpack_map are the same code on every device (and stay
# registered for callers of pack_map on either).
# CUDA: no. Packing needs the number of present entries on the host (a host read: the size of
# `values`) and unpacking checks block_starts (another), about 50 small kernels and 2 syncs per
# round trip, ~600 kernels and 20 of the 32 host reads of a KITTI training step; what it saves
# is about two thirds of the maps' bytes (a few MB a layer), next to a GPU's tens of GB. Dense
# maps also keep one identity per map, so the data cached with a map (its transpose, the Triton
# kernels' schedule) is found again by every layer and backward pass that uses it.
# NPU: no, measured (python -m bench.ascend_map_memory; the same maps and tensors the NPU path
# holds): a VoxelBackBone8x training step's maps are 14.3 MiB dense / 5.3 packed at KITTI b1,
# 61.9 / 22.4 at b4; packing lowers the step's peak from 55.3 to 47.6 MiB (b1) and from 234.9
# to 195.6 MiB (b4), where an Atlas A2 card has 32-64 GB of HBM (the b4 peak is 0.8% of 32 GB).
# What it costs: 352 of the NPU path's torch operators per step (each a torch_npu dispatch and
# an aclnn call) and 8 of its 13 host reads (python -m bench.ascend_host_ops --path npu-on-cpu).
PACKS_MAPS = {"CUDA": False, "PrivateUse1": False}
_KEYS = {"cuda": "CUDA", "npu": "PrivateUse1", "privateuseone": "PrivateUse1"}
_cpu_served_as = []   # the key whose orchestration serves CPU tensors (a switch), empty for the C++ kernels


def packs_maps(device_type: str) -> bool:
    """True where unused maps are held packed on ``device_type`` ('cpu', 'cuda', 'npu', ...): the
    orchestration's choice above for the devices it serves (CPU tensors under MXS_CUDA_ON_CPU=1
    or MXS_NPU_ON_CPU=1 take the CUDA or NPU choice), true elsewhere (the CPU kernels pack)."""
    key = _cpu_served_as[-1] if device_type == "cpu" and _cpu_served_as else _KEYS.get(device_type)
    return PACKS_MAPS.get(key, True)


def orchestration_serves(device_type: str) -> bool:
    """True where this package's orchestration serves ``device_type``'s tensors: CUDA, NPU, and the
    CPU under MXS_CUDA_ON_CPU=1 or MXS_NPU_ON_CPU=1 (elsewhere the C++ CPU kernels)."""
    return device_type != "cpu" or bool(_cpu_served_as)


CUDA_ON_CPU_ENV = "MXS_CUDA_ON_CPU"
NPU_ON_CPU_ENV = "MXS_NPU_ON_CPU"
_libraries = []  # registrations last as long as their Library object


def _switch(name: str) -> bool:
    from .. import _C   # the one switch parser (kernels/cpu/env_switch.h): "false" or "off" is off
    return _C.env_switch(name, False)


def cuda_on_cpu_requested() -> bool:
    return _switch(CUDA_ON_CPU_ENV)


def npu_on_cpu_requested() -> bool:
    return _switch(NPU_ON_CPU_ENV)


def _cuda_primitives() -> dict:
    """The primitives CUDA has Triton kernels for (the others: the fallbacks)."""
    from .._cuda import gather_mm, map_primitives   # import no triton (launch does, on first use)
    return {**map_primitives.PRIMITIVES, **gather_mm.PRIMITIVES}


def _cuda_batch_norm_kernels():
    from .._cuda import batch_norm_relu as cuda_batch_norm_relu   # imports no triton (a launch does)
    return cuda_batch_norm_relu


def batch_norm_kernels(cuda_on_cpu: bool, npu_on_cpu: bool = False) -> dict:
    """{device type: fused BatchNorm+ReLU implementation} of this package's registrations: the
    Triton kernels for CUDA; every other device, the NPU's included, runs the torch operators
    (batch_norm_relu.kernels_for's default), CPU tensors too unless a switch says otherwise."""
    table = {"cuda": _cuda_batch_norm_kernels()}
    if cuda_on_cpu:
        table["cpu"] = table["cuda"]
    if npu_on_cpu:
        table["cpu"] = batch_norm_operators
    return table


def _voxelize_cuda_path():
    """Voxelization's CUDA and NPU implementation is C++ with torch's operators (registered under CUDA
    and PrivateUse1 by kernels/generic/voxelize_generic.cpp); for CPU tensors the CUDA key's kernel is
    called directly (redispatch, mx_sparse._core.op_registration.kernel_for_key)."""
    from .._core.op_registration import kernel_for_key   # defined before op_registration registers this package
    return {name: kernel_for_key(name, "CUDA") for name in ("voxelize_hard", "voxelize_dynamic")}


def _npu_emulator_primitives() -> dict:
    """The AscendC kernels run by the CPU emulator, as CPU-tensor functions with the primitives'
    schema signatures (mx_sparse/runtime/ascend.py)."""
    try:
        from ..runtime import ascend
    except ImportError as e:
        raise RuntimeError(f"{NPU_ON_CPU_ENV}=1: this build has no AscendC emulator entry (mx_sparse.runtime.ascend: {e})") from e
    if not ascend.emulator_available():
        raise RuntimeError(f"{NPU_ON_CPU_ENV}=1: the AscendC emulator cannot be built here (a C++ compiler and the "
                           f"kernel sources under kernels/ascend are needed)")
    return ascend.emulator_primitives()


def _prepare_interpreter():
    """CPU tensors can run Triton kernels only in Triton's interpreter, which must be chosen
    before triton is imported (triton.language's own helpers are compiled at import)."""
    value = os.environ.setdefault("TRITON_INTERPRET", "1")
    if value.strip().lower() in ("", "0", "false", "off", "no"):
        warnings.warn(f"{CUDA_ON_CPU_ENV}=1 needs Triton's interpreter, but TRITON_INTERPRET={value!r} turns it off: "
                      f"every Triton kernel on a CPU tensor will fail; unset TRITON_INTERPRET or set it to 1",
                      RuntimeWarning, stacklevel=2)
    import sys
    if "triton" in sys.modules:
        from triton import knobs
        if not knobs.runtime.interpret:
            raise RuntimeError(f"{CUDA_ON_CPU_ENV}=1: triton was imported before mx_sparse without TRITON_INTERPRET=1; "
                               f"set TRITON_INTERPRET=1 before importing triton")


def plan(cuda_on_cpu: bool, npu_on_cpu: bool, npu_binding: bool, npu_primitives=None) -> dict:
    """{dispatch key: {op name: implementation}} of this package's registrations.
    ``npu_primitives`` (MXS_NPU_ON_CPU: the emulator's) is read only with ``npu_on_cpu``."""
    if cuda_on_cpu and npu_on_cpu:
        raise RuntimeError(f"{CUDA_ON_CPU_ENV}=1 and {NPU_ON_CPU_ENV}=1 both ask to serve CPU tensors; set one")
    table = {"CompositeExplicitAutograd": dict(fallback.PRIMITIVES),
             "CUDA": {**ORCHESTRATION, **_cuda_primitives()}}
    npu_orchestration = {name: fn for name, fn in ORCHESTRATION.items() if name not in NPU_NATIVE_OPS}
    if npu_binding:
        table["PrivateUse1"] = dict(npu_orchestration)
    if cuda_on_cpu:
        table["CPU"] = {**ORCHESTRATION, **_cuda_primitives(), **_voxelize_cuda_path()}
    if npu_on_cpu:
        missing = set(PRIMITIVE_NAMES) - set(npu_primitives)
        if missing:
            raise RuntimeError(f"{NPU_ON_CPU_ENV}=1: the emulator supplies no {sorted(missing)}")
        supplied = PRIMITIVE_NAMES + tuple(name for name in OPTIONAL_PRIMITIVE_NAMES if name in npu_primitives)
        table["CPU"] = {**npu_orchestration, **{name: npu_primitives[name] for name in supplied},
                        **_voxelize_cuda_path()}
    return table


def npu_native_keys(npu_on_cpu: bool, npu_binding: bool) -> list:
    """The dispatch keys whose NPU_NATIVE_OPS get the C++ kernels (``register``)."""
    return (["PrivateUse1"] if npu_binding else []) + (["CPU"] if npu_on_cpu else [])


def _register_npu_native(keys) -> None:
    from .. import _C
    # (importing batch_norm_operators, above, handed the C++ kernels its general route)
    for key in keys:
        _C.batch_norm_operators.register(key)


def register(npu_binding: bool = False) -> None:
    """Registers ``plan`` for this process's switches (see the module docstring)."""
    cuda_on_cpu, npu_on_cpu = cuda_on_cpu_requested(), npu_on_cpu_requested()
    if cuda_on_cpu:
        _prepare_interpreter()
    table = plan(cuda_on_cpu, npu_on_cpu, npu_binding, _npu_emulator_primitives() if npu_on_cpu else None)
    if cuda_on_cpu or npu_on_cpu:
        _cpu_served_as.append("CUDA" if cuda_on_cpu else "PrivateUse1")
    lib = torch.library.Library("mx_sparse", "IMPL")
    with warnings.catch_warnings():
        # replacing the C++ CPU kernels is the point of the switches; torch warns about it
        warnings.filterwarnings("ignore", message="(?s).*Overriding a previously registered kernel")
        for key, impls in table.items():
            for name, fn in impls.items():
                lib.impl(name, fn, key)
    _libraries.append(lib)
    _register_npu_native(npu_native_keys(npu_on_cpu, npu_binding))
    for device_type, kernels in batch_norm_kernels(cuda_on_cpu, npu_on_cpu).items():
        batch_norm_relu.use_kernels(device_type, kernels)
