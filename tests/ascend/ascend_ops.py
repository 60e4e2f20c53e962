"""Build and run the emulated mx_sparse AscendC kernels (tests/ascend).

One CLI program (harness/ops_cli.cpp + the kernel and op_host sources) is built once per test
session with the emulator's stable entry point ``tools/ascend_emulator/cpu_debug_build.sh``; each
case writes raw arrays into a temporary directory, runs the program under the requested core
count (``ASCEND_SIM_AIC_NUM`` / ``ASCEND_SIM_SOC``) and reads the result back."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ASC = REPO / "kernels" / "ascend"
EMULATOR = REPO / "tools" / "ascend_emulator"
BUILD_SCRIPT = EMULATOR / "cpu_debug_build.sh"
OUT_DIR = EMULATOR / "build" / "ascend_tests"

# Core counts every kernel is launched with: (label, env kwargs) -> AIC / AIV. (Here rather than in
# conftest.py: tests/ascend_sim has a conftest.py too, and "from conftest import" would pick
# whichever folder pytest collected first.)
CORE_CONFIGS = {
    "1c": dict(aic=1),                  # 1 AIC / 2 AIV
    "3c": dict(aic=3, seed=7),          # 3 / 6, shuffled core start order
    "B4": dict(soc="Ascend910B4"),      # 20 / 40
    "B2": dict(soc="Ascend910B2"),      # 24 / 48
}

DTYPE_KEY = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}

OPS_SOURCES = [
    HERE / "harness" / "ops_cli.cpp",
    HERE / "harness" / "subm_map_harness.cpp",
    ASC / "gather_mm" / "op_kernel" / "gather_mm.cpp",
    ASC / "gather_mm" / "op_host" / "gather_mm_tiling.cpp",
    ASC / "common" / "op_host" / "window_gather_tiling.cpp",
    ASC / "gather_mm_backprop_filter" / "op_kernel" / "gather_mm_backprop_filter.cpp",
    ASC / "gather_mm_backprop_filter" / "op_host" / "gather_mm_backprop_filter_tiling.cpp",
    ASC / "subm_map" / "op_kernel" / "subm_map.cpp",
    ASC / "subm_map" / "op_host" / "subm_map_tiling.cpp",
    HERE / "harness" / "conv_out_keys_harness.cpp",
    ASC / "conv_out_keys" / "op_kernel" / "conv_out_keys.cpp",
    ASC / "conv_out_keys" / "op_host" / "conv_out_keys_tiling.cpp",
    ASC / "unique_sorted_keys" / "op_kernel" / "unique_sorted_keys.cpp",
    ASC / "unique_sorted_keys" / "op_host" / "unique_sorted_keys_tiling.cpp",
]

TILING_SOURCES = [s for s in OPS_SOURCES if "op_host" in str(s)]
# The op sources include each other by file name (CANN's op build copies them into flat op_host /
# op_kernel folders); builds outside cpu_debug_build.sh (which adds these itself) pass these folders.
OP_INCLUDE_FLAGS = [f for d in [ASC / "common" / "op_kernel", ASC.parent / "common", *sorted(ASC.glob("*/op_host"))]
                    for f in ("-I", str(d))]


def build(name, sources, extra=()):
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = OUT_DIR / name
    cmd = ["bash", str(BUILD_SCRIPT), str(out), *[str(s) for s in sources], "--", "-I", str(ASC), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"building {name} failed:\n{proc.stdout}\n{proc.stderr}")
    return out


def sim_env(aic=None, soc=None, stats=None, seed=None):
    env = dict(os.environ)
    for k in ("ASCEND_SIM_SOC", "ASCEND_SIM_AIC_NUM", "ASCEND_SIM_SEED", "ASCEND_SIM_STATS", "ASCEND_SIM_STRICT",
              "ASCEND_SIM_SERIAL", "ASCEND_SIM_HAZARDS"):
        env.pop(k, None)
    env["ASCEND_SIM_STRICT"] = "1"
    if aic is not None:
        env["ASCEND_SIM_AIC_NUM"] = str(aic)
    if soc is not None:
        env["ASCEND_SIM_SOC"] = soc
    if stats is not None:
        env["ASCEND_SIM_STATS"] = str(stats)
    if seed is not None:
        env["ASCEND_SIM_SEED"] = str(seed)
    return env


def _raw(t):
    t = t.contiguous().cpu()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def _from_raw(path, dtype, shape):
    data = np.fromfile(path, dtype={torch.float32: np.float32, torch.float16: np.int16, torch.bfloat16: np.int16,
                                    torch.int32: np.int32}[dtype])
    t = torch.from_numpy(data.copy())
    if dtype in (torch.float16, torch.bfloat16):
        t = t.view(dtype)
    return t.reshape(shape)


def run(binary, op, workdir, env):
    proc = subprocess.run([str(binary), op, str(workdir)], capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"{op} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    return info, proc


def gather_mm(binary, features, weight, nbr, workdir, env):
    """Emulated gather_mm: out[m] = sum_k features[nbr[m,k]] @ weight[k]."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    M, K = nbr.shape
    Nin, Cin = features.shape
    Cout = weight.shape[2]
    (workdir / "params.txt").write_text(f"{M} {Nin} {K} {Cin} {Cout} {DTYPE_KEY[features.dtype]}\n")
    (workdir / "feat.bin").write_bytes(_raw(features))
    (workdir / "weight.bin").write_bytes(_raw(weight))
    (workdir / "nbr.bin").write_bytes(_raw(nbr.to(torch.int32)))
    info, _ = run(binary, "gather_mm", workdir, env)
    return _from_raw(workdir / "out.bin", features.dtype, (M, Cout)), info


def gather_mm_backprop_input(binary, grad, weight, nbr_t, workdir, env):
    """Input gradient = gather_mm with the transposed map and W[k]^T (transposed once on the host)."""
    return gather_mm(binary, grad, weight.transpose(1, 2).contiguous(), nbr_t, workdir, env)


def gather_mm_backprop_filter(binary, features, grad, nbr, workdir, env):
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    M, K = nbr.shape
    Nin, Cin = features.shape
    Cout = grad.shape[1]
    (workdir / "params.txt").write_text(f"{M} {Nin} {K} {Cin} {Cout} {DTYPE_KEY[features.dtype]}\n")
    (workdir / "feat.bin").write_bytes(_raw(features))
    (workdir / "grad.bin").write_bytes(_raw(grad))
    (workdir / "nbr.bin").write_bytes(_raw(nbr.to(torch.int32)))
    info, _ = run(binary, "bpf", workdir, env)
    return _from_raw(workdir / "dw.bin", features.dtype, (K, Cin, Cout)), info


def _lookup(binary, qkeys, ckeys, padded, kernel_size, dilation, centered, workdir, env):
    """Run the sorted-key lookup kernel: positions in ckeys of qkeys + delta_k (or -1)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    m, n = qkeys.shape[0], ckeys.shape[0]
    kvol = 1
    for k in kernel_size:
        kvol *= k
    (workdir / "params.txt").write_text(" ".join(str(v) for v in [m, n, int(centered), len(padded), *padded,
                                                                    *kernel_size, *dilation]) + "\n")
    (workdir / "qkeys.bin").write_bytes(qkeys.contiguous().numpy().tobytes())
    (workdir / "ckeys.bin").write_bytes(ckeys.contiguous().numpy().tobytes())
    info, _ = run(binary, "subm_map", workdir, env)
    nbrs = torch.from_numpy(np.fromfile(workdir / "nbrs.bin", dtype=np.int32).copy()).reshape(m, kvol)
    return nbrs, info


def conv_out_extent(n, k, s, p, d):
    span = n + 2 * p - d * (k - 1) - 1
    return (span // s) + 1  # python floor division is right for negative spans too


def axis_slot_count(k, s, dl):
    """The most kernel positions kp < k through which one coordinate reaches an output along an axis
    (kp*dl congruent to the coordinate + padding modulo s), counted over every residue."""
    return max(sum((u - kp * dl) % s == 0 for kp in range(k)) for u in range(s))


def conv_out_keys(binary, indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, workdir, env):
    """Emulated ConvOutKeys: int64 output key of every (slot j, input row n), slot-major [J * N]
    (J = prod of axis_slot_count); INT64_MAX where the slot reaches no output voxel."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    n, ndim = indices.shape[0], len(spatial_shape)
    slots = 1
    for d in range(ndim):
        slots *= axis_slot_count(kernel_size[d], stride[d], dilation[d])
    (workdir / "params.txt").write_text(" ".join(str(v) for v in [n, batch_size, ndim, *spatial_shape, *kernel_size,
                                                                    *stride, *padding, *dilation]) + "\n")
    (workdir / "indices.bin").write_bytes(_raw(indices.to(torch.int32)))
    info, _ = run(binary, "conv_out_keys", workdir, env)
    keys = torch.from_numpy(np.fromfile(workdir / "keys.bin", dtype=np.int64).copy())
    assert keys.shape[0] == n * slots
    return keys, info


def unique_sorted_keys(binary, keys, workdir, env):
    """Emulated UniqueSortedKeys: the distinct non-sentinel keys of a sorted int64 array, in order."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "params.txt").write_text(f"{keys.shape[0]}\n")
    (workdir / "keys.bin").write_bytes(keys.contiguous().numpy().tobytes())
    info, _ = run(binary, "unique_keys", workdir, env)
    ukeys = torch.from_numpy(np.fromfile(workdir / "ukeys.bin", dtype=np.int64).copy())
    assert ukeys.shape[0] == info["count"]
    return ukeys, info


class EmulatedMapPrimitives:
    """The three map primitives with the schema's signatures (kernels/schema/schema.cpp), run by the
    emulated AscendC kernels, for one map build whose geometry is known: the CLI harness takes
    the lookup's geometry (padded grid, kernel, dilation, centred) and derives the key deltas
    itself (SubmMapDeltas of the tiling), so each call checks that they are the deltas the
    orchestration passed. ``infos`` keeps each call's tiling info (and the keys)."""

    def __init__(self, binary, workdir, env, kernel_size, dilation, padded, centered):
        self.binary, self.workdir, self.env = binary, Path(workdir), env
        self.kernel_size, self.dilation, self.padded, self.centered = kernel_size, dilation, padded, centered
        self.infos = {}

    def _sorted_key_lookup(self, query_keys, sorted_keys, key_deltas, group, key_bound):
        from mx_sparse._accelerator import voxel_keys
        expected = voxel_keys.deltas(self.kernel_size, self.dilation, self.padded, self.centered, key_deltas.device)
        assert torch.equal(key_deltas, expected) and group == self.kernel_size[-1]
        nbrs, info = _lookup(self.binary, query_keys, sorted_keys, self.padded, self.kernel_size, self.dilation,
                             self.centered, self.workdir, self.env)
        self.infos["lookup"] = info
        return nbrs

    def _conv_out_keys(self, indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation):
        keys, info = conv_out_keys(self.binary, indices, spatial_shape, batch_size, kernel_size, stride, padding,
                                   dilation, self.workdir / "cand", self.env)
        self.infos["cand"] = dict(info, keys=keys)
        return keys

    def _unique_sorted_keys(self, sorted_keys):
        unique, info = unique_sorted_keys(self.binary, sorted_keys, self.workdir / "unique", self.env)
        self.infos["unique"] = dict(info, keys=unique)
        padded = torch.full_like(sorted_keys, torch.iinfo(torch.int64).max)
        padded[:unique.shape[0]] = unique
        return padded, torch.tensor([unique.shape[0]], dtype=torch.int32)


def _run_orchestration(builder, primitives, *args):
    """mx_sparse's accelerator map builder (the code NPU tensors run) with the emulated kernels
    as its primitives: the builder's C++ stages call the primitives through the dispatcher
    (kernels/orchestration/map_primitives.h), so a dispatch mode hands those three calls to
    ``primitives`` and lets every other operator run as it is."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from mx_sparse._accelerator import neighbor_map
    names = ("_sorted_key_lookup", "_conv_out_keys", "_unique_sorted_keys")
    routed = {getattr(torch.ops.mx_sparse, name).default: getattr(primitives, name) for name in names}

    class EmulatedPrimitives(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return routed.get(func, func)(*args, **(kwargs or {}))

    with EmulatedPrimitives():
        return getattr(neighbor_map, builder)(*args)


def subm_map(binary, indices, spatial_shape, batch_size, kernel_size, workdir, env, dilation=None):
    """Emulated submanifold map: the accelerator orchestration's build_subm_map around the emulated
    SubmMap kernel. info = the lookup's tiling (None when no kernel ran: no voxels)."""
    dilation = dilation or [1] * len(spatial_shape)
    # the grid padded by the kernel's reach, k//2 * dilation cells on each side
    padded = [s + 2 * (k // 2) * d for s, k, d in zip(spatial_shape, kernel_size, dilation)]
    prims = EmulatedMapPrimitives(binary, workdir, env, kernel_size, dilation, padded, True)
    nbr = _run_orchestration("build_subm_map", prims, indices, spatial_shape, batch_size, kernel_size, dilation)
    return nbr, prims.infos.get("lookup")


def conv_map(binary, indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, workdir, env):
    """Emulated strided-conv map: the accelerator orchestration's build_conv_map (ConvOutKeys -> sort ->
    UniqueSortedKeys -> output coordinates and query keys on the padded input grid -> the SubmMap lookup
    -> un-permutation) around the emulated kernels. info = the lookup's tiling, with the other two
    kernels' tilings and results under "cand" (candidate keys) and "unique" (unique keys)."""
    from mx_sparse._accelerator import voxel_keys
    out_shape = [conv_out_extent(spatial_shape[d], kernel_size[d], stride[d], padding[d], dilation[d])
                 for d in range(len(spatial_shape))]
    _, padded = voxel_keys.conv_padding(spatial_shape, out_shape, kernel_size, stride, padding, dilation)
    prims = EmulatedMapPrimitives(binary, workdir, env, kernel_size, dilation, padded, False)
    out, nbr, built_shape = _run_orchestration("build_conv_map", prims, indices, spatial_shape, batch_size,
                                                kernel_size, stride, padding, dilation)
    assert list(built_shape) == out_shape, (built_shape, out_shape)
    info = dict(prims.infos.get("lookup") or {}, cand=prims.infos.get("cand"), unique=prims.infos.get("unique"))
    return out, nbr, info
