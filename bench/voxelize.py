"""Voxelization throughput, mx_sparse beside spconv 2.3.8's Point2VoxelCPU3d, in one run:

    python -m bench.voxelize [--repeats 15] [--threads 2] [--json PATH]

Scenes: a generated KITTI frame (HDL-64-like, ~105k points) and a nuScenes-like 10-sweep
cloud, with the SECOND / CenterPoint settings (voxel size, range, max points per voxel, max
voxels). Per scene the configurations run in turn (A B C ... A B C, after one warm-up round)
on the same points; reported: median and min time per call, points/s (median) and the ratios
to spconv (of the medians, and of the minima, which a busy machine disturbs less). ~105k /
~310k points are one generated frame each (KITTI: 64 beams, nuScenes: 10 sweeps).
Configurations:

* ``mx_sparse``: ``mx_sparse.voxelize`` (the CPU kernel) at ``--threads`` threads, and at 1;
* ``mx_sparse torch-ops``: the implementation CUDA / NPU tensors run, here on CPU tensors;
* ``mx_sparse as spconv``: the spconv surface's ``Point2VoxelCPU3d`` (the drop-in,
  cumm tensors in and out);
* ``spconv``: spconv 2.3.8's ``Point2VoxelCPU3d.point_to_voxel`` (sequential C++; its
  constructor fills a dense int32 table over the whole grid, not timed here, whose size is
  reported).

Every configuration's output is checked equal to spconv's before timing."""
import argparse
import json
import statistics
import time

import numpy as np
import torch

import mx_sparse
from mx_sparse._core.op_registration import kernel_for_key
from mx_sparse.synthetic import PRESETS, generate_points

from .__main__ import cpu_snapshot, other_load

SCENES = {
    "KITTI frame (SECOND: 5 points/voxel, 16000 voxels)": ("kitti", 5, 16000),
    "KITTI frame (SECOND test: 5 points/voxel, 40000 voxels)": ("kitti", 5, 40000),
    "nuScenes 10 sweeps (CenterPoint: 10 points/voxel, 60000 voxels)": ("nuscenes", 10, 60000),
}


def configurations(points: np.ndarray, preset: str, max_points: int, max_voxels: int, threads: int):
    """name -> (thread count, callable returning (voxels, coords zyx, num) as NumPy)."""
    import spconv.utils as real
    from cumm import tensorview as tv
    cfg = PRESETS[preset]
    vs, pcr = cfg["voxel_size"], cfg["point_cloud_range"]
    pts_t, pts_tv = torch.from_numpy(points), tv.from_numpy(points)
    spconv_gen = real.Point2VoxelCPU3d(vs, pcr, points.shape[1], max_voxels, max_points)
    mx_sparse.patch_spconv()
    try:
        import spconv.utils as ours
        drop_in = ours.Point2VoxelCPU3d(vs, pcr, points.shape[1], max_voxels, max_points)
    finally:
        mx_sparse.unpatch_spconv()

    def core():
        v = mx_sparse.voxelize(pts_t, vs, pcr, max_points, max_voxels)
        return v.voxels.numpy(), v.coordinates[:, 1:].numpy(), v.num_points.numpy()

    def generic():
        v, c, n, _ = kernel_for_key("voxelize_hard", "CUDA")(pts_t, None, vs, pcr, max_points, max_voxels)
        return v.numpy(), c[:, 1:].numpy(), n.numpy()

    def as_spconv():
        return tuple(t.numpy() for t in drop_in.point_to_voxel(pts_tv))

    def spconv():
        return tuple(t.numpy() for t in spconv_gen.point_to_voxel(pts_tv))

    table_mib = int(np.prod(spconv_gen.grid_size)) * 4 / 2**20
    return {f"mx_sparse ({threads} threads)": (threads, core), "mx_sparse (1 thread)": (1, core),
            f"mx_sparse torch-ops ({threads} threads)": (threads, generic),
            f"mx_sparse as spconv ({threads} threads)": (threads, as_spconv),
            "spconv 2.3.8": (1, spconv)}, table_mib


def measure(points, preset, max_points, max_voxels, threads, repeats):
    confs, table_mib = configurations(points, preset, max_points, max_voxels, threads)
    expected = confs["spconv 2.3.8"][1]()
    for name, (_, fn) in confs.items():
        got = fn()
        assert all(np.array_equal(a, b) for a, b in zip(got, expected)), f"{name}: output differs from spconv"
    times = {name: [] for name in confs}
    saved = torch.get_num_threads()
    try:
        for r in range(repeats + 1):
            for name, (n, fn) in confs.items():
                torch.set_num_threads(n)
                t0 = time.perf_counter()
                fn()
                if r:   # round 0 warms up
                    times[name].append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(saved)
    base, base_min = statistics.median(times["spconv 2.3.8"]), min(times["spconv 2.3.8"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append(dict(config=name, median_ms=med * 1e3, min_ms=min(ts) * 1e3, points_per_s=len(points) / med,
                         vs_spconv=base / med, vs_spconv_min=base_min / min(ts)))
    return dict(points=len(points), voxels=int(expected[0].shape[0]), spconv_table_mib=table_mib, rows=rows)


def main():
    parser = argparse.ArgumentParser(prog="python -m bench.voxelize", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15, help="timed rounds per configuration (default 15)")
    parser.add_argument("--threads", type=int, default=max(1, torch.get_num_threads()),
                        help="torch threads (default: torch's current count)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    frames = {"kitti": generate_points("kitti", seed=0), "nuscenes": generate_points("nuscenes", seed=0)}
    results = {}
    start = cpu_snapshot()
    for title, (preset, max_points, max_voxels) in SCENES.items():
        r = measure(frames[preset], preset, max_points, max_voxels, args.threads, args.repeats)
        results[title] = r
        print(f"\n### {title}: {r['points']:,} points -> {r['voxels']:,} voxels "
              f"(spconv's dense cell table: {r['spconv_table_mib']:.0f} MiB)\n")
        print("| configuration | median ms | min ms | points/s (median) | vs spconv (median) | vs spconv (min) |")
        print("|---|---|---|---|---|---|")
        for row in r["rows"]:
            print(f"| {row['config']} | {row['median_ms']:.2f} | {row['min_ms']:.2f} | "
                  f"{row['points_per_s'] / 1e6:.1f} M | {row['vs_spconv']:.2f}x | {row['vs_spconv_min']:.2f}x |")
    load = other_load(start, cpu_snapshot())
    print(f"\n{args.repeats} alternating rounds after one warm-up; torch {torch.__version__}, "
          f"mx_sparse {mx_sparse.__version__}; other processes used {load:.0%} of the machine's CPU time "
          f"during the run{' (results provisional: the machine was busy)' if load > 0.10 else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(results=results, repeats=args.repeats, threads=args.threads, other_load=load), f, indent=1)


if __name__ == "__main__":
    main()
