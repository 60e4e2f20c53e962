"""Scale: forward + backward of CenterPoint's sparse encoder (VoxelResBackBone8x) on a
2,000,000-voxel nuScenes-like batch of 8, with its peak resident memory and time; then the
same voxels in a grid 8x larger along each horizontal axis (64x the volume), to show that
nothing grows with the grid: map building keys voxels by int64 coordinates and sorts them,
nothing is allocated per grid cell.

    python -m bench.scale                       # both grids, ~10 min on 2 cores
    python -m bench.scale --grid-factor 1       # one run

The input: generated nuScenes-like frames (nuScenes' range, 10 sweeps aggregated with ego
motion) from a 128-beam sensor, voxelized at 0.05 x 0.05 x 0.2 m (grid [41, 2048, 2048]):
295,000 to 358,000 voxels a frame, 2,603,179 for the batch of 8; cached in
bench/results/scale_input.pt. Each measurement runs in a fresh process: the peak is
VmHWM minus the RSS before the network is built.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "bench", "results", "scale_input.pt")
VOXEL_SIZE = [0.05, 0.05, 0.2]
SENSOR = dict(num_beams=128, azimuth_steps=2048)   # a 128-beam rotating LiDAR


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def make_input(voxels, batch_size, seed=0):
    """(features [N, 5], indices [N, 4], spatial_shape): batch_size generated frames, N >= voxels."""
    from mx_sparse.synthetic import PRESETS, generate_points, voxelize
    cfg = PRESETS["nuscenes"]
    feats, idx, shape = [], [], None
    for b in range(batch_size):
        f, c, shape = voxelize(generate_points("nuscenes", seed + b, **SENSOR), cfg["point_cloud_range"], VOXEL_SIZE)
        feats.append(torch.from_numpy(f))
        idx.append(torch.from_numpy(np.concatenate([np.full((len(c), 1), b, np.int32), c], 1)))
        print(f"[scale] frame {b}: {len(c):,} voxels", file=sys.stderr, flush=True)
    n = sum(i.shape[0] for i in idx)
    if n < voxels:
        raise SystemExit(f"--voxels: the {batch_size} generated frames hold {n:,} voxels, fewer than {voxels:,}")
    return torch.cat(feats), torch.cat(idx), shape


def load_input(voxels, batch_size):
    if os.path.exists(CACHE):
        saved = torch.load(CACHE, weights_only=True)
        if saved["voxels_asked"] == voxels and saved["batch_size"] == batch_size:
            return saved["features"], saved["indices"], saved["spatial_shape"]
    feats, idx, shape = make_input(voxels, batch_size)
    os.makedirs(os.path.dirname(CACHE), exist_ok=True)
    torch.save(dict(features=feats, indices=idx, spatial_shape=shape, voxels_asked=voxels, batch_size=batch_size),
               CACHE)
    return feats, idx, shape


def measure(voxels, batch_size, grid_factor, threads):
    """In this process: one forward + backward; figures as a dict."""
    import mx_sparse
    from mx_sparse.models import VoxelResBackBone8x
    torch.set_num_threads(threads)
    feats, idx, shape = load_input(voxels, batch_size)
    shape = [shape[0], shape[1] * grid_factor, shape[2] * grid_factor]
    base_kb = status_kb("VmRSS")
    torch.manual_seed(0)
    model = VoxelResBackBone8x(feats.shape[1])
    x = mx_sparse.SparseConvTensor(feats.requires_grad_(), idx, shape, batch_size)
    t0 = time.perf_counter()
    y = model(x)
    t1 = time.perf_counter()
    (y.features.float().square().mean()).backward()
    t2 = time.perf_counter()
    pool = mx_sparse.cpu_memory.stats()
    return dict(voxels=int(idx.shape[0]), batch_size=batch_size, spatial_shape=shape,
                grid_cells=int(np.prod(shape, dtype=np.float64) * batch_size),
                output_voxels=int(y.indices.shape[0]), output_shape=y.spatial_shape,
                forward_s=t1 - t0, backward_s=t2 - t1, peak_extra_gib=(status_kb("VmHWM") - base_kb) / 2 ** 20,
                peak_rss_gib=status_kb("VmHWM") / 2 ** 20, pool_peak_live_gib=pool["peak_live_bytes"] / 2 ** 30,
                weight_grad_finite=bool(all(torch.isfinite(p.grad).all() for p in model.parameters())),
                threads=threads)


def run_child(voxels, batch_size, grid_factor, threads):
    out = subprocess.run([sys.executable, "-m", "bench.scale", "--child", "--voxels", str(voxels), "--batch-size",
                          str(batch_size), "--grid-factor", str(grid_factor), "--threads", str(threads)],
                         capture_output=True, text=True, cwd=ROOT, timeout=7200)
    if out.returncode != 0:
        raise RuntimeError(f"scale run (grid x{grid_factor}) failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--voxels", type=int, default=2_000_000, help="voxels of the batch to keep (default 2,000,000)")
    p.add_argument("--batch-size", type=int, default=8, help="generated frames in the batch (default 8)")
    p.add_argument("--grid-factor", type=int, default=None, help="one run with the grid this much wider (1, 8, ...)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--json", default=None, help="also write the measurements (time, peak memory per run) here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.voxels, args.batch_size, args.grid_factor, args.threads)))
        return 0
    load_input(args.voxels, args.batch_size)   # generate (and cache) once, outside the measured processes
    factors = [args.grid_factor] if args.grid_factor else [1, 8]
    runs = [run_child(args.voxels, args.batch_size, f, args.threads) for f in factors]
    for f, r in zip(factors, runs):
        print(f"grid x{f}: {r['voxels']:,} voxels, batch {r['batch_size']}, spatial_shape {r['spatial_shape']} "
              f"({r['grid_cells']:.3g} cells): forward {r['forward_s']:.1f} s, backward {r['backward_s']:.1f} s, "
              f"peak RSS {r['peak_rss_gib']:.2f} GiB ({r['peak_extra_gib']:.2f} GiB above the start), "
              f"pool peak {r['pool_peak_live_gib']:.2f} GiB")
    if len(runs) == 2:
        print(f"grid x{factors[1]} / x{factors[0]}: peak {runs[1]['peak_extra_gib'] / runs[0]['peak_extra_gib']:.3f}, "
              f"time {(runs[1]['forward_s'] + runs[1]['backward_s']) / (runs[0]['forward_s'] + runs[0]['backward_s']):.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
