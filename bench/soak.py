"""Soak: a long training run that must hold steady. Every step's resident memory (VmRSS),
the sizes of mx_sparse's module-level registries (maps held packed, fused-BatchNorm
recipes), the input's indice_dict and the CPU large-tensor pool's statistics are recorded;
the run passes when, after a warm-up, the mean RSS of the last 100 steps is within the
bound of that of the first 100, and no registry, cache or pool figure grows.

    python -m bench.soak                      # 1,000 steps, VoxelBackBone8x on 128x128-cell KITTI crops (~8k voxels)
    python -m bench.soak --steps 3000 --crop 0 --json out.json   # full scenes

The scenes: four generated KITTI samples cropped to a square window in front of the
sensor, and at every step a different random 80-100 % of the voxels of one of them (so
every step has a new voxel count, as real data does). The model: VoxelBackBone8x and a loss
on its densified output, AdamW.
"""
import argparse
import gc
import json
import os
import sys
import time

import torch

import mx_sparse
from mx_sparse.nn import batch_norm_relu, packed_map
from mx_sparse.models import VoxelBackBone8x
from mx_sparse.synthetic import make_batch

WARMUP = 50
WINDOW = 100
RSS_BOUND_MB = 8.0   # last-100 mean minus first-100 mean; see bound_reason
POOL_FIGURES = ("live_bytes", "kept_bytes", "reserved_bytes", "segments")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def scenes(crop, count=4):
    out = []
    for s in range(count):
        b = make_batch("kitti", batch_size=1, seed=100 + s)
        idx, feats, shape = b["indices"], b["features"], b["spatial_shape"]
        if crop:
            y0 = shape[1] // 2 - crop // 2
            keep = (idx[:, 2] >= y0) & (idx[:, 2] < y0 + crop) & (idx[:, 3] < crop)
            idx = idx[keep] - torch.tensor([0, 0, y0, 0], dtype=torch.int32)
            feats, shape = feats[keep], [shape[0], crop, crop]
        out.append((feats, idx, shape))
    return out


def soak(steps=1000, crop=128, seed=0, log_every=100):
    """Runs the soak; returns per-step records and the summary."""
    data = scenes(crop)
    torch.manual_seed(seed)
    model = VoxelBackBone8x(4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed)
    records = []
    start = time.perf_counter()
    for step in range(steps):
        feats, idx, shape = data[step % len(data)]
        keep = torch.rand(idx.shape[0], generator=g) < 0.8 + 0.2 * torch.rand(1, generator=g)
        x = mx_sparse.SparseConvTensor(feats[keep], idx[keep], shape, 1)
        y = model(x)
        loss = y.dense().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        cached = len(x.indice_dict)
        del x, y, loss
        pool = mx_sparse.cpu_memory.stats()
        records.append(dict(step=step, voxels=int(keep.sum()), rss_mb=rss_mb(), holders=len(packed_map._HOLDERS),
                            recipes=len(batch_norm_relu._RECIPES), indice_dict=cached,
                            **{k: pool[k] for k in POOL_FIGURES}))
        if log_every and (step + 1) % log_every == 0:
            r = records[-1]
            print(f"[soak] step {step + 1}/{steps}: {r['voxels']} voxels, RSS {r['rss_mb']:.1f} MB, "
                  f"pool live {r['live_bytes'] / 2**20:.1f} MB kept {r['kept_bytes'] / 2**20:.1f} MB, "
                  f"registries {r['holders']}/{r['recipes']}, {time.perf_counter() - start:.0f} s",
                  file=sys.stderr, flush=True)
    gc.collect()
    return records, summarize(records, time.perf_counter() - start)


def mean(values):
    return sum(values) / len(values)


def summarize(records, seconds):
    first = records[WARMUP:WARMUP + WINDOW]
    last = records[-WINDOW:]
    rss_first, rss_last = mean([r["rss_mb"] for r in first]), mean([r["rss_mb"] for r in last])
    growth = {k: max(r[k] for r in last) - max(r[k] for r in first)
              for k in ("holders", "recipes", "indice_dict") + POOL_FIGURES}
    return dict(steps=len(records), seconds=seconds, voxels=(min(r["voxels"] for r in records),
                                                             max(r["voxels"] for r in records)),
                rss_first_mb=rss_first, rss_last_mb=rss_last, rss_growth_mb=rss_last - rss_first,
                rss_max_mb=max(r["rss_mb"] for r in records[WARMUP:]), rss_bound_mb=RSS_BOUND_MB,
                max_in_last_window=dict((k, max(r[k] for r in last)) for k in growth), growth=growth,
                steady=rss_last - rss_first <= RSS_BOUND_MB and all(v <= 0 for v in growth.values()))


def bound_reason():
    return (f"RSS: the last {WINDOW} steps' mean within {RSS_BOUND_MB:.0f} MB of the first {WINDOW} after a "
            f"{WARMUP}-step warm-up (a leak of one map or activation per step, ~0.1-1 MB, would add 100-1000 MB "
            f"over 1,000 steps); registries, indice_dict and pool: the largest value of the last window no larger "
            f"than that of the first")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=1000, help="training steps (default 1000)")
    p.add_argument("--crop", type=int, default=128, help="square window of the KITTI grid (0: whole scene)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--json", default=None, help="write every step's record and the summary here")
    args = p.parse_args(argv)
    if args.steps < WARMUP + 2 * WINDOW:
        p.error(f"--steps: at least {WARMUP + 2 * WINDOW} (warm-up and two windows of {WINDOW})")
    torch.set_num_threads(args.threads)
    records, summary = soak(args.steps, args.crop)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(summary=summary, records=records), f, indent=1)
    print(json.dumps(summary, indent=1))
    print(bound_reason())
    print("steady" if summary["steady"] else "NOT steady")
    return 0 if summary["steady"] else 1


if __name__ == "__main__":
    sys.exit(main())
