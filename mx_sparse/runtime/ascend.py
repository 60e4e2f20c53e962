"""The AscendC kernels of the NPU backend, run in-process on CPU tensors by the CPU emulator.

The five AscendC kernels (SubmMap, ConvOutKeys, UniqueSortedKeys, GatherMm, GatherMmBackpropFilter)
are compiled from their sources in ``kernels/ascend`` against the AscendC emulator
(``tools/ascend_emulator``, Atlas A2 rules, strict mode) into one shared library,
``tools/ascend_emulator/emulator_entry.cpp`` being its C entry: one function per accelerator
primitive, each doing what the NPU binding's aclnn call does (limits check, the op's host tiling,
workspace, launch). Under ``MXS_NPU_ON_CPU=1`` the device-neutral orchestration serves
``torch.ops.mx_sparse.*`` on CPU tensors with these primitives, i.e. through the code that ships
for the NPU.

The library is built on first use with ``tools/ascend_emulator/cpu_debug_build.sh --shared`` and
cached in ``build/ascend_emulator/<hash of sources, flags and compiler>/`` of the source checkout
(rebuilt only when a source changes). It therefore needs a source checkout (or editable install)
and a C++ compiler; an installed wheel has neither the kernel sources nor the emulator.

A violated emulator rule (a kernel bug) is not an exception: the emulator prints the rule and
ends the process with exit code 86, exactly as its command-line harnesses do.
"""
import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from .._core import contract

# AscendC kernel names, in the order of the library's launch counters (mxs_emu_kernel_name).
KERNELS = ("SubmMap", "ConvOutKeys", "UniqueSortedKeys", "GatherMm", "GatherMmBackpropFilter")

_ROOT = Path(__file__).resolve().parents[2]   # the checkout (this file is mx_sparse/runtime/ascend.py)
_ASCEND = _ROOT / "kernels" / "ascend"
_EMULATOR = _ROOT / "tools" / "ascend_emulator"   # a verification tool: not in the wheel
_BUILD_SCRIPT = _EMULATOR / "cpu_debug_build.sh"
_ENTRY = _EMULATOR / "emulator_entry.cpp"
_OPS = ("subm_map", "conv_out_keys", "unique_sorted_keys", "gather_mm", "gather_mm_backprop_filter")
_LIB_NAME = "libmxs_ascend_emulator.so"
# flags after the build script's own (-std=c++17 -O1 -g -pthread -fPIC): the op folders' includes
_EXTRA_FLAGS = ("-I", str(_ASCEND))

_OK, _INVALID, _FAILED = 0, 1, 2
_load_lock = threading.Lock()
_lib = None


def _compiler() -> str:
    return os.environ.get("CXX", "g++")


def _linked_sources() -> List[Path]:
    """The translation units of the library: the entry, each op's kernel and host tiling."""
    units = [_ENTRY, _ASCEND / "common" / "op_host" / "window_gather_tiling.cpp"]
    for op in _OPS:
        units.append(_ASCEND / op / "op_kernel" / f"{op}.cpp")
        units.append(_ASCEND / op / "op_host" / f"{op}_tiling.cpp")
    return units


def _hashed_files() -> List[Path]:
    """Everything the library is built from: emulator sources and headers, the build script, the
    kernels' and host tilings' sources and headers, the entry."""
    files = {_BUILD_SCRIPT, _ENTRY}
    for folder in [_EMULATOR / "src", _EMULATOR / "include", _ASCEND / "common"] + [_ASCEND / op for op in _OPS]:
        files.update(p for p in folder.rglob("*") if p.suffix in (".h", ".cpp") and p.is_file())
    return sorted(files)


def _missing() -> List[str]:
    """What an emulator build needs and this installation lacks (empty: it can build)."""
    missing = [str(p) for p in [_BUILD_SCRIPT, _ENTRY, *_linked_sources()] if not p.is_file()]
    if shutil.which(_compiler()) is None:
        missing.append(f"a C++ compiler ({_compiler()}; set CXX to use another)")
    if shutil.which("bash") is None:
        missing.append("bash")
    return missing


def emulator_available() -> bool:
    """True when the kernel and emulator sources are present and a C++ compiler is found, i.e. when
    emulator_primitives() can build (or load the cached) library."""
    return not _missing()


def _build_key() -> str:
    h = hashlib.sha256()
    for path in _hashed_files():
        h.update(str(path.relative_to(_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    version = subprocess.run([_compiler(), "--version"], capture_output=True, text=True).stdout
    h.update(" ".join(_EXTRA_FLAGS).encode() + b"\0" + version.encode())
    return h.hexdigest()[:16]


def library_path() -> Path:
    """Where the library for the current sources lives (built or not)."""
    return _ROOT / "build" / "ascend_emulator" / _build_key() / _LIB_NAME


def _build(out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent processes build once
        if out.is_file():
            return
        cmd = ["bash", str(_BUILD_SCRIPT), "--shared", str(out), *map(str, _linked_sources()), "--", *_EXTRA_FLAGS]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=_ROOT)
        if proc.returncode != 0:
            raise RuntimeError(f"building the AscendC emulator library failed ({' '.join(cmd)}):\n"
                               f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


def _declare(lib) -> None:
    i64, i32, p = ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p
    signatures = {
        "mxs_emu_last_error": ([], ctypes.c_char_p),
        "mxs_emu_strict": ([], i32),
        "mxs_emu_num_kernels": ([], i32),
        "mxs_emu_kernel_name": ([i32], ctypes.c_char_p),
        "mxs_emu_launches": ([i32], i64),
        "mxs_emu_sorted_key_lookup": ([p, i64, p, i64, p, i64, i64, i64, p], ctypes.c_int),
        "mxs_emu_conv_out_keys": ([p, i64, i32, p, i64, p, p, p, p, p], ctypes.c_int),
        "mxs_emu_unique_sorted_keys": ([p, i64, p, p], ctypes.c_int),
        "mxs_emu_gather_mm": ([p, i64, i64, p, i64, p, i64, i64, i64, ctypes.c_char_p, p], ctypes.c_int),
        "mxs_emu_gather_mm_backprop_filter": ([p, i64, i64, p, i64, p, i64, i64, ctypes.c_char_p, p], ctypes.c_int),
    }
    for name, (args, res) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    names = tuple(lib.mxs_emu_kernel_name(k).decode() for k in range(lib.mxs_emu_num_kernels()))
    if names != KERNELS or lib.mxs_emu_strict() != 1:
        raise RuntimeError(f"AscendC emulator library: kernels {names} (expected {KERNELS}), "
                           f"strict mode {lib.mxs_emu_strict()}")


def _library():
    """The loaded library (built on first use)."""
    global _lib
    with _load_lock:
        if _lib is None:
            missing = _missing()
            if missing:
                raise RuntimeError("the AscendC emulator (MXS_NPU_ON_CPU=1, mx_sparse.runtime.ascend.emulator_primitives) "
                                   "needs a source checkout of mx_sparse (kernels/ascend, tools/ascend_emulator; "
                                   "an editable install works, a wheel does not ship them) and a C++ compiler; "
                                   "missing: " + "; ".join(missing))
            out = library_path()
            if not out.is_file():
                _build(out)
            lib = ctypes.CDLL(str(out))
            _declare(lib)
            _lib = lib
    return _lib


def emulator_stats() -> Dict[str, int]:
    """{AscendC kernel name: kernel launches through the emulator since import}; all five names,
    0 for a kernel never launched (and for all before the library is first used)."""
    if _lib is None:
        return {name: 0 for name in KERNELS}
    return {name: int(_lib.mxs_emu_launches(k)) for k, name in enumerate(KERNELS)}


# ---------------------------------------------------------------------------------------------
# Primitives (CPU tensors in and out; signatures of the internal schema ops)


# A launch is what the NPU binding's aclnn call is: one C call. The wrappers below keep their own
# host work to the checks the library cannot make (tensor type, device, dtype, rank) and pass
# addresses as plain ints (ctypes converts them through the declared argtypes).


def _call(fn_name: str, *args) -> None:
    """One kernel launch through the library (the function that the host-cost benches count)."""
    lib = _lib if _lib is not None else _library()
    status = getattr(lib, fn_name)(*args)
    if status == _OK:
        return
    message = lib.mxs_emu_last_error().decode()
    raise (ValueError if status == _INVALID else RuntimeError)(message)


def _operand(name: str, t: torch.Tensor, dtypes: Sequence[torch.dtype], dim: int) -> torch.Tensor:
    """t checked (CPU, dtype, rank) and made contiguous (itself when it is): the library reads raw
    memory. No detach: a primitive runs below autograd, and the library only reads the address."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a tensor, got {type(t).__name__}")
    if not t.is_cpu:
        raise ValueError(f"{name}: the AscendC emulator runs on CPU tensors, got a tensor on {t.device}")
    if t.dtype not in dtypes:
        allowed = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise ValueError(f"{name}: expected dtype {allowed}, got {str(t.dtype).replace('torch.', '')}")
    if t.dim() != dim:
        raise ValueError(f"{name}: expected {dim} dimensions, got shape {list(t.shape)}")
    return t if t.is_contiguous() else t.contiguous()


_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)  # float64: rejected with the kernels' message
_DTYPE_NAMES = {d: str(d).replace("torch.", "").encode() for d in _FLOATS}


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


_I64_ARRAY_TYPES = {}   # ctypes array type per length: making the type is most of the cost of an array


def _i64_array(values: Sequence[int]):
    n = len(values)
    kind = _I64_ARRAY_TYPES.get(n)
    if kind is None:
        kind = _I64_ARRAY_TYPES[n] = ctypes.c_int64 * n
    return kind(*values)


def sorted_key_lookup(query_keys: torch.Tensor, sorted_keys: torch.Tensor, key_deltas: torch.Tensor, group: int,
                      key_bound: int) -> torch.Tensor:
    """AscendC SubmMap: out[s, k] = p where sorted_keys[p] == query_keys[s] + key_deltas[k], else -1
    (int32 [S, K]). sorted_keys ascending and unique (not checked, as on the NPU)."""
    q = _operand("query_keys", query_keys, (torch.int64,), 1)
    c = _operand("sorted_keys", sorted_keys, (torch.int64,), 1)
    d = _operand("key_deltas", key_deltas, (torch.int64,), 1)
    out = torch.empty((q.shape[0], d.shape[0]), dtype=torch.int32)
    _call("mxs_emu_sorted_key_lookup", _ptr(q), q.shape[0], _ptr(c), c.shape[0], _ptr(d), d.shape[0], int(group),
          int(key_bound), _ptr(out))
    return out


def conv_out_keys(indices: torch.Tensor, spatial_shape: List[int], batch_size: int, kernel_size: List[int],
                  stride: List[int], padding: List[int], dilation: List[int]) -> torch.Tensor:
    """AscendC ConvOutKeys: int64 [J*N], slot-major, the output-grid key each input row reaches through
    slot j, INT64_MAX if none. Per axis only the kernel positions of the row's residue class modulo
    s / gcd(s, dilation) reach an output; the axis' j-th of them is its slot j and the row's slot is
    the row-major multi-index of the axis slots, J = contract.conv_out_slot_volume(...) (the
    kernel volume K at stride 1, where slot j is kernel offset j)."""
    nd = len(spatial_shape)
    if isinstance(indices, torch.Tensor) and indices.dtype != torch.int32:
        # the kernel's limits first, as the binding checks them (mx_sparse_npu.cpp): int64 coordinates come
        # from a grid the builder grew past int32 (an asymmetric padding, kernels/orchestration), far past
        # the limits' 2^24, whose message names it. No rows: the library checks and reads nothing.
        _call("mxs_emu_conv_out_keys", None, 0, nd, _i64_array(spatial_shape), int(batch_size),
              _i64_array(kernel_size), _i64_array(stride), _i64_array(padding), _i64_array(dilation), None)
    idx = _operand("indices", indices, (torch.int32,), 2)
    if idx.shape[1] != 1 + nd:
        raise ValueError(f"indices: expected shape [N, {1 + nd}] (batch + {nd} coordinates), got {list(idx.shape)}")
    for name, values in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding),
                         ("dilation", dilation)):
        if len(values) != nd:
            raise ValueError(f"{name}: expected {nd} values (one per spatial axis), got {list(values)}")
    slots = contract.conv_out_slot_volume(kernel_size, stride, dilation)
    out = torch.empty(slots * idx.shape[0], dtype=torch.int64)
    _call("mxs_emu_conv_out_keys", _ptr(idx), idx.shape[0], nd, _i64_array(spatial_shape), int(batch_size),
          _i64_array(kernel_size), _i64_array(stride), _i64_array(padding), _i64_array(dilation), _ptr(out))
    return out


def unique_sorted_keys(sorted_keys: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """AscendC UniqueSortedKeys: (unique_keys int64 [C] whose first `count` entries are the distinct
    non-sentinel keys ascending -- the rest INT64_MAX here, undefined on the NPU --, count int32 [1])."""
    keys = _operand("sorted_keys", sorted_keys, (torch.int64,), 1)
    ukeys = torch.empty_like(keys)
    count = torch.zeros(1, dtype=torch.int32)
    _call("mxs_emu_unique_sorted_keys", _ptr(keys), keys.shape[0], _ptr(ukeys), _ptr(count))
    return ukeys, count


def _dtype_name(t: torch.Tensor) -> bytes:
    return _DTYPE_NAMES[t.dtype]


def _same_dtype(name: str, t: torch.Tensor, features: torch.Tensor) -> None:
    if t.dtype != features.dtype:
        raise ValueError(f"{name}: expected dtype {features.dtype} like features, got {t.dtype}")


# GatherMm's weight_layout attribute (kernels/ascend/gather_mm/op_host/gather_mm_weight_layout.h):
# weight [K, Cin, Cout] as is; a layer's [K, Cout, Cin] read transposed, offsets in order or reversed.
_WEIGHT_AS_IS, _WEIGHT_T, _WEIGHT_T_REVERSED = 0, 1, 2


def gather_mm_one_group(features: torch.Tensor, weight: torch.Tensor, nbr: torch.Tensor) -> torch.Tensor:
    """AscendC GatherMm: out[m] = sum_k features[nbr[m, k]] @ weight[k] ([M, Cout]; -1 = no neighbour)."""
    f = _operand("features", features, _FLOATS, 2)
    w = _operand("weight", weight, _FLOATS, 3)
    n = _operand("nbr", nbr, (torch.int32,), 2)
    _same_dtype("weight", w, f)
    if w.shape[0] != n.shape[1] or w.shape[1] != f.shape[1]:
        raise ValueError(f"weight: expected [K={n.shape[1]}, Cin={f.shape[1]}, Cout], got {list(w.shape)}")
    out = torch.empty((n.shape[0], w.shape[2]), dtype=f.dtype)
    _call("mxs_emu_gather_mm", _ptr(f), f.shape[0], f.shape[1], _ptr(w), w.shape[2], _ptr(n), n.shape[0],
          n.shape[1], _WEIGHT_AS_IS, _dtype_name(f), _ptr(out))
    return out


def gather_mm_transposed(features: torch.Tensor, weight: torch.Tensor, nbr: torch.Tensor,
                         reverse_offsets: bool) -> torch.Tensor:
    """AscendC GatherMm reading the weight transposed: out[m] = sum_k features[nbr[m, k]] @ weight[k']^T
    ([M, Cout]; -1 = no neighbour), k' = K-1-k with ``reverse_offsets``, else k, for a layer's weight
    [K, Cout, Cin] (this op's Cout and Cin; read where it lies, no transposed copy): the input gradient
    of a convolution (kernels/schema/autograd.cpp)."""
    f = _operand("features", features, _FLOATS, 2)
    w = _operand("weight", weight, _FLOATS, 3)
    n = _operand("nbr", nbr, (torch.int32,), 2)
    _same_dtype("weight", w, f)
    if w.shape[0] != n.shape[1] or w.shape[2] != f.shape[1]:
        raise ValueError(f"weight: expected [K={n.shape[1]}, Cout, Cin={f.shape[1]}] (read transposed), "
                         f"got {list(w.shape)}")
    out = torch.empty((n.shape[0], w.shape[1]), dtype=f.dtype)
    _call("mxs_emu_gather_mm", _ptr(f), f.shape[0], f.shape[1], _ptr(w), w.shape[1], _ptr(n), n.shape[0],
          n.shape[1], _WEIGHT_T_REVERSED if reverse_offsets else _WEIGHT_T, _dtype_name(f), _ptr(out))
    return out


def gather_mm_backprop_filter_one_group(features: torch.Tensor, grad: torch.Tensor, nbr: torch.Tensor,
                                        scale: Optional[torch.Tensor] = None,
                                        shift: Optional[torch.Tensor] = None) -> torch.Tensor:
    """AscendC GatherMmBackpropFilter: dW[k] = sum_m a[nbr[m, k]]^T grad[m] ([K, Cin, Cout]), a = features,
    or with scale and shift relu(features * scale + shift), made first by the scale_shift_relu op (as the
    NPU binding does)."""
    if scale is not None:
        features = torch.ops.mx_sparse.scale_shift_relu(features, scale, shift)
    f = _operand("features", features, _FLOATS, 2)
    g = _operand("grad", grad, _FLOATS, 2)
    n = _operand("nbr", nbr, (torch.int32,), 2)
    _same_dtype("grad", g, f)
    if g.shape[0] != n.shape[0]:
        raise ValueError(f"grad: expected [M={n.shape[0]}, Cout], got {list(g.shape)}")
    dw = torch.empty((n.shape[1], f.shape[1], g.shape[1]), dtype=f.dtype)
    _call("mxs_emu_gather_mm_backprop_filter", _ptr(f), f.shape[0], f.shape[1], _ptr(g), g.shape[1], _ptr(n),
          n.shape[0], n.shape[1], _dtype_name(f), _ptr(dw))
    return dw


def emulator_primitives() -> Dict[str, Callable]:
    """{accelerator primitive op name: function on CPU tensors with that op's schema signature}: the
    five primitives and the optional input-gradient primitive _gather_mm_transposed.
    Builds (or loads the cached) emulator library on the first call; raises RuntimeError naming
    what is missing where it cannot (no source checkout, no C++ compiler)."""
    _library()
    return {
        "_sorted_key_lookup": sorted_key_lookup,
        "_conv_out_keys": conv_out_keys,
        "_unique_sorted_keys": unique_sorted_keys,
        "_gather_mm_one_group": gather_mm_one_group,
        "_gather_mm_backprop_filter_one_group": gather_mm_backprop_filter_one_group,
        # optional (no fallback; autograd copies the weight where a device lacks it)
        "_gather_mm_transposed": gather_mm_transposed,
    }
