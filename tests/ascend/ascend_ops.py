"""Build and run the emulated mx_sparse AscendC kernels (tests/ascend).

One CLI program (harness/ops_cli.cpp + the kernel and op_host sources) is built once per test
session with the emulator's stable entry point ``kernels/ascend/sim/cpu_debug_build.sh``; each
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
BUILD_SCRIPT = ASC / "sim" / "cpu_debug_build.sh"
OUT_DIR = ASC / "sim" / "build" / "ascend_tests"

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


def subm_map_prepare(indices, spatial_shape, kernel_size, dilation):
    """Host part of the NPU subm map (torch ops only, as the PrivateUse1 binding does with torch_npu):
    int64 keys on the grid padded by kernel//2*dilation, stable sort. Returns (sorted keys, perm, padded shape)."""
    ndim = len(spatial_shape)
    pad = [(k // 2) * d for k, d in zip(kernel_size, dilation)]
    padded = [s + 2 * p for s, p in zip(spatial_shape, pad)]
    idx = indices.to(torch.int64)
    key = idx[:, 0].clone()
    for d in range(ndim):
        key = key * padded[d] + (idx[:, 1 + d] + pad[d])
    keys, perm = torch.sort(key, stable=True)
    return keys.contiguous(), perm, padded


def subm_map_finish(nbrs, perm):
    """nbr[perm[s], k] = perm[nbrS[s, k]] (or -1): the un-permutation, two torch index ops."""
    perm32 = perm.to(torch.int32)
    mapped = torch.where(nbrs >= 0, perm32[nbrs.clamp(min=0).long()], torch.full_like(nbrs, -1))
    out = torch.empty_like(mapped)
    out[perm] = mapped
    return out


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


def subm_map(binary, indices, spatial_shape, batch_size, kernel_size, workdir, env, dilation=None):
    """Emulated submanifold map: host prepare (torch) -> AscendC kernel -> host finish (torch)."""
    del batch_size  # the batch is the leading key digit; keys are unbounded int64
    dilation = dilation or [1] * len(spatial_shape)
    keys, perm, padded = subm_map_prepare(indices, spatial_shape, kernel_size, dilation)
    nbrs, info = _lookup(binary, keys, keys, padded, kernel_size, dilation, True, workdir, env)
    return subm_map_finish(nbrs, perm), info


def conv_out_extent(n, k, s, p, d):
    span = n + 2 * p - d * (k - 1) - 1
    return (span // s) + 1  # python floor division is right for negative spans too


def conv_out_keys(binary, indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, workdir, env):
    """Emulated ConvOutKeys: int64 output key of every (kernel offset k, input row n), k-major [K * N];
    INT64_MAX where the offset reaches no output voxel."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    n, ndim = indices.shape[0], len(spatial_shape)
    kvol = 1
    for k in kernel_size:
        kvol *= k
    (workdir / "params.txt").write_text(" ".join(str(v) for v in [n, batch_size, ndim, *spatial_shape, *kernel_size,
                                                                    *stride, *padding, *dilation]) + "\n")
    (workdir / "indices.bin").write_bytes(_raw(indices.to(torch.int32)))
    info, _ = run(binary, "conv_out_keys", workdir, env)
    keys = torch.from_numpy(np.fromfile(workdir / "keys.bin", dtype=np.int64).copy())
    assert keys.shape[0] == n * kvol
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


def conv_map(binary, indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation, workdir, env):
    """Emulated strided-conv map, step for step as the PrivateUse1 binding: AscendC ConvOutKeys (output
    key of every (input, k) pair or INT64_MAX) -> torch sort (torch_npu on the NPU) -> AscendC
    UniqueSortedKeys (canonical (batch, *spatial) output order) -> torch unpacking into coordinates and
    query base keys pack_in(o * s) on the input grid padded by p below and by the kernel reach above,
    stable sort of the input keys -> the AscendC lookup kernel of the submanifold map -> finish
    nbr[m, k] = perm[nbrS[m, k]]. info = the lookup's tiling, with the other two kernels' tilings and
    results under "cand" (candidate keys) and "unique" (unique keys)."""
    workdir = Path(workdir)
    ndim = len(spatial_shape)
    out_shape = [conv_out_extent(spatial_shape[d], kernel_size[d], stride[d], padding[d], dilation[d]) for d in range(ndim)]
    idx = indices.to(torch.int64)
    cand, cinfo = conv_out_keys(binary, indices, spatial_shape, batch_size, kernel_size, stride, padding, dilation,
                                workdir / "cand", env)
    okey, uinfo = unique_sorted_keys(binary, torch.sort(cand).values, workdir / "unique", env)
    m = okey.shape[0]
    oc = torch.empty(m, ndim + 1, dtype=torch.int64)
    rem = okey.clone()
    for d in range(ndim - 1, -1, -1):
        oc[:, 1 + d] = rem % out_shape[d]
        rem = rem // out_shape[d]
    oc[:, 0] = rem
    # --- padded input grid: i + p in [0, n + p + hi)
    hi_pad = [max(0, (out_shape[d] - 1) * stride[d] - padding[d] + (kernel_size[d] - 1) * dilation[d]
                  - (spatial_shape[d] - 1)) for d in range(ndim)]
    padded = [spatial_shape[d] + padding[d] + hi_pad[d] for d in range(ndim)]
    ckey = idx[:, 0].clone()
    qkey = oc[:, 0].clone()
    for d in range(ndim):
        ckey = ckey * padded[d] + idx[:, 1 + d] + padding[d]
        qkey = qkey * padded[d] + oc[:, 1 + d] * stride[d]
    ckeys, perm = torch.sort(ckey, stable=True)
    nbrs, info = _lookup(binary, qkey, ckeys, padded, kernel_size, dilation, False, workdir, env)
    perm32 = perm.to(torch.int32)
    nbr = torch.where(nbrs >= 0, perm32[nbrs.clamp(min=0).long()], torch.full_like(nbrs, -1))
    return oc.to(torch.int32), nbr, dict(info, cand=dict(cinfo, keys=cand), unique=dict(uinfo, keys=okey))
