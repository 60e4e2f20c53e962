"""Milliseconds per call of the five AscendC kernels in the CPU emulator: launched in-process through
mx_sparse.runtime.ascend (the MXS_NPU_ON_CPU=1 path) and through the file-driven CLI harness of tests/ascend
(one process per call), on the same inputs and the same emulated platform (ASCEND_SIM_SOC, default
Ascend910B2: 24 AIC / 48 AIV), strict rules in both.

    python -m bench.ascend_emulator [--voxels 3000] [--channels 16] [--repeat 3] [--no-cli]
    python -m bench.ascend_emulator --step 3000    # the kernel launches of one VoxelBackBone8x training step

Scene: the N voxels of the synthetic KITTI scene nearest the sensor; submanifold 3x3x3 map (K = 27)
for the lookup and the gathers, the k3 s2 p1 strided conv for the output keys and their unique.
Build times are printed apart (the library is cached by source hash; the CLI binary per session).

--step N: one VoxelBackBone8x forward + backward on the N voxels runs on the CPU backend while a
dispatch mode records its map builders and gathers; their AscendC launches (lookup; output keys,
sort, unique, lookup; one GatherMm / GatherMmBackpropFilter per gather, groups = 1) are then
replayed in-process and timed per kernel -- the emulator time of one MXS_NPU_ON_CPU=1 step
(without the host torch ops around the launches)."""
import argparse
import importlib
import itertools
import math
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from mx_sparse.runtime import ascend

from torch.utils._python_dispatch import TorchDispatchMode

from .workloads import nearest_of_scene

ROOT = Path(__file__).resolve().parent.parent


def _cpu_seconds():
    """CPU time of this process and its finished children (the CLI runs as a child)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(fn, repeat):
    """(median wall ms, median CPU ms) per call. On a shared machine the CPU time is the steadier
    figure: the emulator runs one thread per emulated core and waits for none of them."""
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), _cpu_seconds()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((_cpu_seconds() - c0) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def _cases(voxels, channels):
    b = nearest_of_scene("kitti", voxels)()
    ind, shape = b["indices"], b["spatial_shape"]
    pad = [1, 1, 1]
    padded = [s + 2 for s in shape]
    key = ind[:, 0].long()
    for d in range(3):
        key = key * padded[d] + ind[:, 1 + d].long() + pad[d]
    keys = torch.sort(key).values
    strides = [padded[1] * padded[2], padded[2], 1]
    deltas = torch.tensor([(a - 1) * strides[0] + (b_ - 1) * strides[1] + (c - 1)
                           for a in range(3) for b_ in range(3) for c in range(3)], dtype=torch.int64)
    bound = padded[0] * padded[1] * padded[2]
    nbr = torch.ops.mx_sparse.build_subm_map(ind, shape, 1, [3, 3, 3], [1, 1, 1])
    g = torch.Generator().manual_seed(0)
    f = torch.randn(ind.shape[0], channels, generator=g)
    w = torch.randn(27, channels, channels, generator=g) / (27 * channels) ** 0.5
    grad = torch.randn(ind.shape[0], channels, generator=g)
    geo = ([3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1])
    return dict(ind=ind, shape=shape, keys=keys, deltas=deltas, bound=bound, padded=padded, nbr=nbr, f=f, w=w,
                grad=grad, geo=geo)


def in_process(c, repeat):
    t0 = time.perf_counter()
    p = ascend.emulator_primitives()
    load = time.perf_counter() - t0
    cand = p["_conv_out_keys"](c["ind"], c["shape"], 1, *c["geo"])
    sorted_cand = torch.sort(cand).values
    calls = {
        "SubmMap": lambda: p["_sorted_key_lookup"](c["keys"], c["keys"], c["deltas"], 3, c["bound"]),
        "ConvOutKeys": lambda: p["_conv_out_keys"](c["ind"], c["shape"], 1, *c["geo"]),
        "UniqueSortedKeys": lambda: p["_unique_sorted_keys"](sorted_cand),
        "GatherMm": lambda: p["_gather_mm_one_group"](c["f"], c["w"], c["nbr"]),
        "GatherMmBackpropFilter": lambda: p["_gather_mm_backprop_filter_one_group"](c["f"], c["grad"], c["nbr"]),
    }
    return load, {name: _timed(fn, repeat) for name, fn in calls.items()}, sorted_cand


def cli(c, repeat, sorted_cand):
    sys.path.insert(0, str(ROOT / "tests" / "ascend"))
    try:
        ao = importlib.import_module("ascend_ops")
    finally:
        sys.path.pop(0)
    t0 = time.perf_counter()
    binary = ao.build("ops_cli", ao.OPS_SOURCES)
    build = time.perf_counter() - t0
    env = ao.sim_env()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        calls = {
            "SubmMap": lambda: ao._lookup(binary, c["keys"], c["keys"], c["padded"], [3, 3, 3], [1, 1, 1], True,
                                          d / "l", env),
            "ConvOutKeys": lambda: ao.conv_out_keys(binary, c["ind"], c["shape"], 1, *c["geo"], d / "c", env),
            "UniqueSortedKeys": lambda: ao.unique_sorted_keys(binary, sorted_cand, d / "u", env),
            "GatherMm": lambda: ao.gather_mm(binary, c["f"], c["w"], c["nbr"], d / "g", env),
            "GatherMmBackpropFilter": lambda: ao.gather_mm_backprop_filter(binary, c["f"], c["grad"], c["nbr"],
                                                                           d / "b", env),
        }
        return build, {name: _timed(fn, repeat) for name, fn in calls.items()}


class _Recorder(TorchDispatchMode):
    """The mx_sparse map builders and gathers a step calls, with their arguments and results."""

    OPS = ("build_subm_map", "build_conv_map", "gather_mm", "gather_mm_backprop_filter")

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.namespace == "mx_sparse" and func.__name__.split(".")[0] in self.OPS:
            self.calls.append((func.__name__.split(".")[0], args, out))
        return out


def _pack(coords, shape, shift, scale):
    key = coords[:, 0].long()
    for d, size in enumerate(shape):
        key = key * size + coords[:, 1 + d].long() * scale[d] + shift[d]
    return key


def _deltas(ks, dl, padded, centered):
    strides = [padded[1] * padded[2], padded[2], 1]
    return torch.tensor([sum((kp - (k // 2 if centered else 0)) * d * st for kp, k, d, st in zip(kpos, ks, dl, strides))
                         for kpos in itertools.product(*[range(k) for k in ks])], dtype=torch.int64)


def _replay(p, name, args, result):
    """The primitive launches of one recorded op."""
    if name == "build_subm_map":
        ind, shape, batch, ks, dl = args
        shift = [(k // 2) * d for k, d in zip(ks, dl)]
        padded = [n + 2 * s for n, s in zip(shape, shift)]
        keys = torch.sort(_pack(ind, padded, shift, [1, 1, 1])).values
        p["_sorted_key_lookup"](keys, keys, _deltas(ks, dl, padded, True), ks[-1], batch * math.prod(padded))
    elif name == "build_conv_map":
        ind, shape, batch, ks, st, pd, dl = args
        ukeys, count = p["_unique_sorted_keys"](torch.sort(p["_conv_out_keys"](ind, shape, batch, ks, st, pd, dl)).values)
        out_shape = list(result[2])     # the builder's output grid (its third result)
        rem, coords = ukeys[: int(count)], []
        for size in reversed(out_shape):
            coords.append(rem % size)
            rem = rem // size
        out = torch.stack([rem] + coords[::-1], 1)
        hi = [max(0, (o - 1) * s - q + (k - 1) * d - (n - 1)) for o, s, q, k, d, n in zip(out_shape, st, pd, ks, dl, shape)]
        padded = [n + q + h for n, q, h in zip(shape, pd, hi)]
        ckeys = torch.sort(_pack(ind, padded, pd, [1, 1, 1])).values
        p["_sorted_key_lookup"](_pack(out, padded, [0, 0, 0], st), ckeys, _deltas(ks, dl, padded, False), ks[-1],
                                batch * math.prod(padded))
    elif name == "gather_mm":
        p["_gather_mm_one_group"](args[0], args[1], args[2])
    else:
        # (the AscendC kernel's work: a call with an activation runs scale_shift_relu before it, not timed here)
        p["_gather_mm_backprop_filter_one_group"](args[0], args[1], args[2])


def step(voxels):
    import mx_sparse
    from mx_sparse.models import VoxelBackBone8x

    b = nearest_of_scene("kitti", voxels)()
    x = mx_sparse.SparseConvTensor(b["features"].requires_grad_(), b["indices"], b["spatial_shape"], 1)
    torch.manual_seed(0)
    model = VoxelBackBone8x(4)
    rec = _Recorder()
    with rec:
        model(x).features.square().sum().backward()
    p = ascend.emulator_primitives()
    before = ascend.emulator_stats()
    cpu = {}
    t0 = time.perf_counter()
    for name, args, result in rec.calls:
        c0 = _cpu_seconds()
        _replay(p, name, args, result)
        cpu[name] = cpu.get(name, 0.0) + _cpu_seconds() - c0
    wall = time.perf_counter() - t0
    launches = {k: v - before[k] for k, v in ascend.emulator_stats().items()}
    print(f"VoxelBackBone8x training step, {voxels} voxels: {wall:.1f} s wall, {sum(cpu.values()):.1f} s CPU in the "
          f"emulator; launches {launches}")
    for name, sec in cpu.items():
        print(f"  {name:<28}{sum(1 for n, _, _ in rec.calls if n == name):>4} calls {sec:>7.1f} s CPU")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voxels", type=int, default=3000)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true", help="time the in-process library only")
    ap.add_argument("--step", type=int, metavar="N", help="replay one VoxelBackBone8x training step on N voxels")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.step:
        step(args.step)
        return
    c = _cases(args.voxels, args.channels)
    load, ours, sorted_cand = in_process(c, args.repeat)
    print(f"{c['ind'].shape[0]} voxels, {args.channels}->{args.channels} channels, K = 27; "
          f"library load (build if sources changed): {load:.1f} s")
    theirs = None
    if not args.no_cli:
        build, theirs = cli(c, args.repeat, sorted_cand)
        print(f"CLI binary build (cached when unchanged): {build:.1f} s")
    print("ms per call, wall / CPU (median of --repeat)")
    print(f"{'kernel':<24}{'in-process':>18}" + (f"{'CLI':>18}" if theirs else ""))
    for name, (wall, cpu) in ours.items():
        row = f"{name:<24}{wall:>10.1f} / {cpu:>5.0f}"
        if theirs:
            row += f"{theirs[name][0]:>10.1f} / {theirs[name][1]:>5.0f}"
        print(row)


if __name__ == "__main__":
    main()
