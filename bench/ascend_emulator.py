"""Milliseconds per call of the five AscendC kernels in the CPU emulator: launched in-process through
mx_sparse.ascend (the MXS_NPU_ON_CPU=1 path) and through the file-driven CLI harness of tests/ascend
(one process per call), on the same inputs and the same emulated platform (ASCEND_SIM_SOC, default
Ascend910B2: 24 AIC / 48 AIV), strict rules in both.

    python -m bench.ascend_emulator [--voxels 3000] [--channels 16] [--repeat 3] [--no-cli]

Scene: the N voxels of the synthetic KITTI scene nearest the sensor; submanifold 3x3x3 map (K = 27)
for the lookup and the gathers, the k3 s2 p1 strided conv for the output keys and their unique.
Build times are printed apart (the library is cached by source hash; the CLI binary per session)."""
import argparse
import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from mx_sparse import ascend

from .workloads import nearest_of_scene

ROOT = Path(__file__).resolve().parent.parent


def _timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voxels", type=int, default=3000)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-cli", action="store_true", help="time the in-process library only")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    c = _cases(args.voxels, args.channels)
    load, ours, sorted_cand = in_process(c, args.repeat)
    print(f"{c['ind'].shape[0]} voxels, {args.channels}->{args.channels} channels, K = 27; "
          f"library load (build if sources changed): {load:.1f} s")
    theirs = None
    if not args.no_cli:
        build, theirs = cli(c, args.repeat, sorted_cand)
        print(f"CLI binary build (cached when unchanged): {build:.1f} s")
    print(f"{'kernel':<24}{'in-process ms':>15}" + (f"{'CLI ms':>10}" if theirs else ""))
    for name, ms in ours.items():
        print(f"{name:<24}{ms:>15.1f}" + (f"{theirs[name]:>10.1f}" if theirs else ""))


if __name__ == "__main__":
    main()
