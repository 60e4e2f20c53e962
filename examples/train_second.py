"""Main job: train a CenterPoint-style 3-D detector (SECOND's VoxelBackBone8x encoder on
KITTI's [41, 1600, 1408] grid, a BEV neck, heatmap + box-regression heads at stride 8) on
generated LiDAR street scenes with car, pedestrian and cyclist box labels -- or on KITTI
frames and labels -- and report BEV average precision on a held-out split beside a
non-learned baseline.

Each epoch trains over the training scenes, then evaluates the held-out scenes: BEV AP and
recall per class at two IoU thresholds each (Car 0.5/0.7, Pedestrian and Cyclist 0.25/0.5),
printed next to the baseline (class-mean boxes at clusters of above-ground points, see
examples/detection/cluster_baseline.py). The number of epochs is set after the first one by
--time-budget (seconds of training; on CPU counted as the process's CPU time per thread, so
other jobs on a shared machine do not shorten the run), at most --epochs. The checkpoint
(model, optimizer, schedule, history, last evaluation) is written atomically to --out after
every epoch; --resume continues it, --eval-only --checkpoint re-evaluates it. PNGs of loss
and AP per epoch and bird's-eye views of held-out scenes are saved when matplotlib is
installed.

    python examples/train_second.py                      # default run (measured in docs/en/main_job.md)
    python examples/train_second.py --time-budget 1800 --out runs/long
    python examples/train_second.py --resume runs/centerpoint/checkpoint.pt --epochs 16
    python examples/train_second.py --eval-only --checkpoint runs/centerpoint/checkpoint.pt
    python examples/train_second.py --points kitti/velodyne --labels kitti/label_2 --calib kitti/calib
    python examples/train_second.py --config my_config.json   # or .yaml with PyYAML installed
"""
import argparse
import glob
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
from tqdm import tqdm

# The demo beside the library: examples/detection (this checkout's root on the path, as
# `python -m` would put it).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import mx_sparse  # noqa: E402
from examples.detection import (ClusterPriorBaseline, evaluate_detections, parse_kitti_calib,  # noqa: E402
                                parse_kitti_labels, read_kitti_frame)
from examples.detection.bev_picture import save_bev_picture  # noqa: E402
from examples.detection.centerpoint import (BevGrid, CenterPoint, decode, encode_targets,  # noqa: E402
                                            focal_loss, regression_loss)
from examples.detection.checkpoint import check_output_folder, checkpoint_bytes, save_atomic  # noqa: E402
from mx_sparse.synthetic import CLASSES, generate_labeled_frame  # noqa: E402

# Every configurable value, its default and what it means (a config file may set any of them).
DEFAULTS = dict(
    train_scenes=(100, "generated training scenes (seeds seed*100000 + 0..N-1)"),
    val_scenes=(64, "generated held-out scenes (seeds seed*100000 + 50000 + 0..N-1)"),
    epochs=(40, "most passes over the training scenes (--time-budget may stop earlier)"),
    time_budget=(600.0, "seconds of training (evaluation not counted; CPU: process CPU time per thread) "
                        "that set the number of epochs after the first; 0: exactly --epochs"),
    batch_size=(2, "frames per step"),
    lr=(3e-3, "peak AdamW learning rate (warm-up over the first epoch, then cosine decay)"),
    weight_decay=(1e-2, "AdamW weight decay"),
    max_steps=(0, "stop each epoch after this many steps (0: the whole epoch); for smoke tests"),
    seed=(0, "seed of the scene split, shuffling, flips and initialisation"),
    azimuth_steps=(1800, "generated scenes: LiDAR firings per revolution (an HDL-64's 0.2 degrees)"),
    fov_deg=(90.0, "horizontal field of view kept around +x, degrees (KITTI's camera-FOV crop)"),
    point_cloud_range=([0.0, -40.0, -3.0, 70.4, 40.0, 1.0], "x0 y0 z0 x1 y1 z1, metres"),
    voxel_size=([0.05, 0.05, 0.1], "vx vy vz, metres"),
    max_points_per_voxel=(5, "points kept per voxel (features = their mean)"),
    min_points=(5, "a box with fewer points is ignored in the evaluation (neither hit nor miss) and "
                   "not a training target"),
    score_threshold=(0.05, "lowest detection score kept"),
    bev_stride=(8, "stride of the heads in voxels: 8 (the encoder's map) or 4 (the neck up-samples it 2x)"),
    val_fraction=(0.2, "KITTI input: fraction of frames held out (the last ones by name)"),
    pictures=(3, "bird's-eye-view PNGs of the first N held-out scenes written next to the checkpoint"),
)
THRESHOLDS = {"Car": [0.5, 0.7], "Pedestrian": [0.25, 0.5], "Cyclist": [0.25, 0.5]}


# ----------------------------------------------------------------------------- configuration
def parse_args(argv=None):
    intro, details = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(description=intro.replace("\n", " "), epilog=details,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    metavars = dict(point_cloud_range=("X0", "Y0", "Z0", "X1", "Y1", "Z1"), voxel_size=("VX", "VY", "VZ"))
    for key, (default, help_text) in DEFAULTS.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(default, list):
            p.add_argument(flag, type=float, nargs=len(default), default=None, metavar=metavars[key],
                           help=f"{help_text} (default {' '.join(map(str, default))})")
        else:
            p.add_argument(flag, type=type(default), default=None, help=f"{help_text} (default {default})")
    p.add_argument("--config", metavar="FILE", help="JSON (or YAML, with PyYAML installed) file setting any of the "
                                                    "options above by their underscore names; flags override it")
    p.add_argument("--out", default="runs/centerpoint", help="folder for checkpoint.pt, metrics.json, "
                                                            "training.png and bev_*.png (default runs/centerpoint)")
    p.add_argument("--resume", metavar="PATH", help="continue training from this checkpoint up to --epochs")
    p.add_argument("--eval-only", action="store_true", help="evaluate --checkpoint on the held-out split and exit")
    p.add_argument("--checkpoint", metavar="PATH", help="checkpoint for --eval-only")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    p.add_argument("--device", default=None, help="cpu, cuda or npu (default: the best device present)")
    p.add_argument("--points", metavar="DIR", help="KITTI velodyne folder of .bin frames instead of generated scenes")
    p.add_argument("--labels", metavar="DIR", help="KITTI label folder (<frame>.txt) for --points: label_2 files "
                                                   "(camera frame, need --calib) or lidar-frame lines "
                                                   "'Class x y z l w h yaw'")
    p.add_argument("--calib", metavar="DIR", help="KITTI calib folder (<frame>.txt) for camera-frame label_2 files")
    p.add_argument("--no-plot", action="store_true", help="write neither training.png nor the bev_*.png pictures")
    args = p.parse_args(argv)
    if args.eval_only and not args.checkpoint:
        p.error("--eval-only needs --checkpoint PATH")
    if (args.points is None) != (args.labels is None):
        p.error("--points and --labels go together (KITTI frames need their labels to train a detector)")
    return args


def load_config_file(path):
    with open(path) as f:
        text = f.read()
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise SystemExit(f"--config: {path} is YAML but PyYAML is not installed (pip install pyyaml), "
                             f"or write the same keys as JSON")
        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    unknown = set(data) - set(DEFAULTS)
    if unknown:
        raise SystemExit(f"--config: unknown key(s) {sorted(unknown)} in {path}; known: {sorted(DEFAULTS)}")
    return data


def resolve_config(args, saved=None):
    """Defaults, then the saved checkpoint's config, then --config, then flags."""
    cfg = {k: v for k, (v, _) in DEFAULTS.items()}
    cfg.update(saved or {})
    if args.config:
        cfg.update(load_config_file(args.config))
    for key in DEFAULTS:
        value = getattr(args, key)
        if value is not None:
            cfg[key] = list(value) if isinstance(value, list) else value
    return cfg


# ----------------------------------------------------------------------------- data
def in_fov(points, fov_deg):
    """Rows of ``points`` within fov_deg/2 of +x (KITTI's camera-FOV crop)."""
    return np.abs(np.arctan2(points[:, 1], points[:, 0])) <= math.radians(fov_deg) / 2


def frame_record(points, boxes, classes, cfg):
    """What training and evaluation need of one frame: points in range and in the field of
    view, and the labels whose centre is in the BEV range, marked ``ignore`` when fewer than
    min_points fall inside (those are neither training targets nor evaluated)."""
    pcr = np.asarray(cfg["point_cloud_range"])
    pts = points[np.all((points[:, :3] >= pcr[:3]) & (points[:, :3] < pcr[3:]), 1)]
    pts = pts[in_fov(pts, cfg["fov_deg"])]
    boxes = np.asarray(boxes, np.float64).reshape(-1, 7)
    inside = ((boxes[:, 0] >= pcr[0]) & (boxes[:, 0] < pcr[3]) & (boxes[:, 1] >= pcr[1]) & (boxes[:, 1] < pcr[4]))
    boxes, classes = boxes[inside], np.asarray(classes)[inside]
    counts = points_in_boxes(pts, boxes)
    return dict(points=pts, boxes=boxes, classes=classes, ignore=counts < cfg["min_points"])


def points_in_boxes(points, boxes):
    """Number of points inside each box [K] (rotated in BEV, upright)."""
    counts = np.zeros(len(boxes), np.int64)
    for k, b in enumerate(boxes):
        near = np.abs(points[:, 0] - b[0]) + np.abs(points[:, 1] - b[1]) <= b[3] + b[4]   # cheap pre-filter
        p = points[near]
        d = p[:, :2] - b[:2]
        c, s = math.cos(b[6]), math.sin(b[6])
        along, across = d[:, 0] * c + d[:, 1] * s, -d[:, 0] * s + d[:, 1] * c
        counts[k] = np.count_nonzero((np.abs(along) <= b[3] / 2) & (np.abs(across) <= b[4] / 2)
                                     & (np.abs(p[:, 2] - b[2]) <= b[5] / 2))
    return counts


def generated_frames(cfg, splits=("train", "val")):
    """{split: records} of generated scenes; the two seed ranges never overlap."""
    base = int(cfg["seed"]) * 100_000
    plan = dict(train=(0, cfg["train_scenes"]), val=(50_000, cfg["val_scenes"]))
    out = {}
    for name in splits:
        offset, count = plan[name]
        records = []
        for i in tqdm(range(int(count)), desc=f"generate {name} scenes", unit="scene", leave=False):
            f = generate_labeled_frame("kitti", base + offset + i, azimuth_steps=int(cfg["azimuth_steps"]),
                                       hfov_deg=float(cfg["fov_deg"]))
            records.append(frame_record(f.points, f.boxes, f.classes, cfg))
        out[name] = records
    counts = dict(train=f"{cfg['train_scenes']} generated training", val=f"{cfg['val_scenes']} held-out")
    return out, " + ".join(counts[name] for name in splits) + " scenes"


def read_text(path, option, what):
    if not os.path.isfile(path):
        raise SystemExit(f"{option}: {path} is missing (every frame of --points needs its {what} file)")
    with open(path) as f:
        return f.read()


def kitti_frames(args, cfg):
    """{"train", "val"} records of KITTI frames; the last val_fraction of frames (by name) is held out."""
    if not os.path.isdir(args.points):
        raise SystemExit(f"--points: {args.points} is not a folder (expected KITTI's velodyne/ of .bin frames)")
    bins = sorted(glob.glob(os.path.join(args.points, "*.bin")))
    if not bins:
        raise SystemExit(f"--points: no .bin files in {args.points}")
    records = []
    for path in tqdm(bins, desc="read KITTI frames", unit="frame", leave=False):
        name = os.path.splitext(os.path.basename(path))[0]
        label_path = os.path.join(args.labels, name + ".txt")
        label_text = read_text(label_path, "--labels", "label")
        calib = None
        if args.calib:
            calib_path = os.path.join(args.calib, name + ".txt")
            try:
                calib = parse_kitti_calib(read_text(calib_path, "--calib", "calib"))
            except ValueError as e:
                raise SystemExit(f"--calib: {calib_path}: {e}")
        try:
            boxes, classes = parse_kitti_labels(label_text, calib)
        except ValueError as e:
            raise SystemExit(f"--labels: {label_path}: {e}")
        try:
            points = read_kitti_frame(path)
        except ValueError as e:
            raise SystemExit(f"--points: {e}")
        records.append(frame_record(points, boxes, classes, cfg))
    n_val = max(1, int(round(len(records) * cfg["val_fraction"]))) if len(records) > 1 else 0
    train, val = records[:len(records) - n_val], records[len(records) - n_val:]
    if not val:
        val = train
    return dict(train=train, val=val), f"{len(train)} KITTI training + {len(val)} held-out frames from {args.points}"


class Voxelized:
    """Voxels of every frame, computed once; batches are concatenations of frames."""

    def __init__(self, records, cfg, device):
        self.voxelizer = mx_sparse.PointToVoxel(cfg["voxel_size"], cfg["point_cloud_range"],
                                                cfg["max_points_per_voxel"])
        self.device = device
        # SECOND's sparse shape has one more z cell than the grid.
        self.shape = [self.voxelizer.spatial_shape[0] + 1] + self.voxelizer.spatial_shape[1:]
        self.frames = []
        for r in records:
            pts = torch.from_numpy(np.ascontiguousarray(r["points"][:, :4], np.float32))
            v = self.voxelizer([pts])
            self.frames.append((v.mean(), v.coordinates[:, 1:]))
        self.mirror_ok = abs(cfg["point_cloud_range"][1] + cfg["point_cloud_range"][4]) < 1e-6

    def batch(self, ids, flips=None):
        """SparseConvTensor of the frames ``ids``; a frame with flips[i] is mirrored (y -> -y)."""
        feats, coords = [], []
        for b, i in enumerate(ids):
            f, c = self.frames[i]
            if flips is not None and flips[b]:
                f, c = f.clone(), c.clone()
                f[:, 1] = -f[:, 1]
                c[:, 1] = self.shape[1] - 1 - c[:, 1]
            feats.append(f)
            coords.append(torch.cat([torch.full((len(c), 1), b, dtype=c.dtype), c], 1))
        return mx_sparse.SparseConvTensor(torch.cat(feats).to(self.device), torch.cat(coords).to(self.device),
                                          self.shape, len(ids))


def flip_boxes(boxes):
    out = boxes.copy()
    out[:, 1], out[:, 6] = -out[:, 1], -out[:, 6]
    return out


# ----------------------------------------------------------------------------- train / eval
def train_step(model, data, records, grid, optimizer, scheduler, ids, flips):
    """One optimizer step on frames ``ids``; returns (loss, heatmap loss, box loss).
    Targets are the boxes the sensor saw (>= min_points points): an unseen box is no target,
    so the heatmap is never taught to fire on empty space."""
    x = data.batch(ids, flips)
    heat, targets = [], []
    for i, flip in zip(ids, flips):
        r = records[i]
        seen = ~r["ignore"]
        boxes = flip_boxes(r["boxes"][seen]) if flip else r["boxes"][seen]
        h, reg, index = encode_targets(boxes, r["classes"][seen], grid, len(CLASSES), min_radius=1)
        heat.append(torch.from_numpy(h))
        targets.append((torch.from_numpy(reg).to(data.device), torch.from_numpy(index).to(data.device)))
    out = model(x)
    hm_loss = focal_loss(out["heatmap"], torch.stack(heat).to(data.device))
    reg_loss = regression_loss(out["regression"], targets)
    loss = hm_loss + reg_loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    optimizer.step()
    scheduler.step()
    return loss.item(), hm_loss.item(), reg_loss.item()


def epoch_steps(n_records, cfg, rng):
    order = rng.permutation(n_records)
    bs = int(cfg["batch_size"])
    steps = [order[i:i + bs] for i in range(0, len(order) - bs + 1, bs)] or [order]
    return steps[:int(cfg["max_steps"])] if cfg["max_steps"] else steps


def train_epoch(model, data, records, grid, optimizer, scheduler, cfg, epoch, rng):
    model.train()
    losses = []
    bar = tqdm(epoch_steps(len(records), cfg, rng), desc=f"epoch {epoch} train", unit="step", leave=False)
    for ids in bar:
        flips = rng.random(len(ids)) < 0.5 if data.mirror_ok else np.zeros(len(ids), bool)
        loss, hm, box = train_step(model, data, records, grid, optimizer, scheduler, ids, flips)
        losses.append(loss)
        bar.set_postfix(loss=f"{loss:.3f}", heatmap=f"{hm:.3f}", box=f"{box:.3f}")
    return float(np.mean(losses)), len(losses)


@torch.no_grad()
def predict(model, data, grid, cfg):
    """Detections of every frame of ``data``. The batches are built afresh each time: keeping
    them with their neighbour maps (which depend only on the coordinates; packed between
    evaluations) saved about a fifth of an evaluation's CPU time but raised --eval-only's peak
    RSS from about 800 to 1,200 MiB on the default held-out split."""
    model.eval()
    preds = []
    bs = int(cfg["batch_size"])
    for start in tqdm(range(0, len(data.frames), bs), desc="evaluate", unit="batch", leave=False):
        ids = list(range(start, min(start + bs, len(data.frames))))
        preds += decode(model(data.batch(ids)), grid, score_threshold=cfg["score_threshold"])
    return preds


def ground_truths(records):
    return [dict(boxes=r["boxes"], classes=r["classes"], ignore=r["ignore"]) for r in records]


def evaluate(preds, records):
    return evaluate_detections(preds, ground_truths(records), THRESHOLDS, CLASSES)


def fmt(x):
    return "   n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:6.1f}"


def print_table(model_eval, baseline_eval, title):
    """Per class and IoU threshold: AP and recall of the detector beside the baseline."""
    print(f"\n{title}")
    print(f"{'class':<11}{'IoU':>5}{'GT':>5} | {'AP detector':>11} {'AP baseline':>11} | "
          f"{'recall det.':>11} {'recall base':>11}")
    for name in CLASSES:
        for thr in THRESHOLDS[name]:
            m, b = model_eval["per_class"][name][thr], baseline_eval["per_class"][name][thr]
            print(f"{name:<11}{thr:>5.2f}{m['num_gt']:>5} | {fmt(m['ap']):>11} {fmt(b['ap']):>11} | "
                  f"{fmt(m['recall']):>11} {fmt(b['recall']):>11}")
    for level, label in ((0, "Car@0.5 Ped@0.25 Cyc@0.25"), (1, "Car@0.7 Ped@0.5 Cyc@0.5")):
        print(f"{'mAP':<11}{label:>27} | {fmt(model_eval['mean_ap'].get(level)):>5} "
              f"{fmt(baseline_eval['mean_ap'].get(level)):>11}")


def standing(det, base):
    """'above' / 'below' / 'equal to' the baseline (AP compared at 0.1-point resolution)."""
    if det is None or base is None or math.isnan(det) or math.isnan(base):
        return "not comparable to"
    d, b = round(100 * det, 1), round(100 * base, 1)
    return "above" if d > b else "below" if d < b else "equal to"


def verdict(model_eval, baseline_eval):
    """One line: per class (loose threshold) and for the strict mAP, where the detector stands."""
    parts, below = [], []
    for name in CLASSES:
        thr = THRESHOLDS[name][0]
        d, b = model_eval["per_class"][name][thr]["ap"], baseline_eval["per_class"][name][thr]["ap"]
        where = standing(d, b)
        below += [name] if where != "above" else []
        parts.append(f"{name}@{thr:g} {fmt(d).strip()} vs {fmt(b).strip()} ({where})")
    for level, label in ((0, "mAP"), (1, "strict mAP")):
        d, b = model_eval["mean_ap"].get(level), baseline_eval["mean_ap"].get(level)
        where = standing(d, b)
        below += [label] if where != "above" else []
        parts.append(f"{label} {fmt(d).strip()} vs {fmt(b).strip()} ({where})")
    summary = ("above the baseline on every class and on both mAPs" if not below
               else f"NOT above the baseline on: {', '.join(below)}")
    return "; ".join(parts) + f" -- {summary}"


def to_json(ev):
    """An evaluation with string keys (JSON), thresholds as '0.50'."""
    return dict(per_class={n: {f"{t:.2f}": v for t, v in d.items()} for n, d in ev["per_class"].items()},
                mean_ap={str(k): v for k, v in ev["mean_ap"].items()})


def from_json(ev):
    return dict(per_class={n: {float(t): v for t, v in d.items()} for n, d in ev["per_class"].items()},
                mean_ap={int(k): v for k, v in ev["mean_ap"].items()})


def matplotlib_or_none(what):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print(f"plot: matplotlib is not installed, {what} not written (pip install matplotlib)")
        return None


def matplotlib_ticker():
    import matplotlib.ticker
    return matplotlib.ticker


def save_plot(history, baseline_eval, path):
    plt = matplotlib_or_none(path)
    if plt is None:
        return
    epochs = [h["epoch"] for h in history]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(epochs, [h["loss"] for h in history], "o-")
    ax1.set(xlabel="epoch", ylabel="training loss (focal + L1)", title="loss")
    for key, level, colour, label in (("map", 0, "C0", "Car@0.5 Ped@0.25 Cyc@0.25"),
                                      ("map_strict", 1, "C1", "Car@0.7 Ped@0.5 Cyc@0.5")):
        ax2.plot(epochs, [100 * h[key] for h in history], "o-", color=colour, label=f"CenterPoint, {label}")
        ax2.axhline(100 * baseline_eval["mean_ap"].get(level, float("nan")), color=colour, ls="--",
                    label=f"cluster baseline, {label}")
    ax2.set(xlabel="epoch", ylabel="BEV mAP, %", title="held-out BEV mAP")
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(matplotlib_ticker().MaxNLocator(integer=True))
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot: {path}")


def save_pictures(records, preds, cfg, folder):
    if not cfg["pictures"] or matplotlib_or_none("bev_*.png") is None:
        return
    paths = []
    for i in range(min(int(cfg["pictures"]), len(records))):
        path = os.path.join(folder, f"bev_{i:03d}.png")
        save_bev_picture(path, records[i]["points"], ground_truths(records)[i], preds[i], CLASSES,
                         cfg["point_cloud_range"], title=f"held-out scene {i}: ground truth dashed, "
                                                         f"detections solid (score), grey = ignored")
        paths.append(path)
    print(f"pictures: {', '.join(paths)}")


def class_sizes(records):
    """Mean (l, w, h) per class over the training labels (the baseline's prior)."""
    sizes = np.ones((len(CLASSES), 3))
    boxes = np.concatenate([r["boxes"] for r in records]).reshape(-1, 7)
    classes = np.concatenate([r["classes"] for r in records])
    for c in range(len(CLASSES)):
        if np.any(classes == c):
            sizes[c] = boxes[classes == c, 3:6].mean(0)
    return sizes


class Schedule:
    """Learning-rate multiplier: linear warm-up over the first epoch, then a cosine down to
    2% at the end of the planned epochs. The plan is known only after epoch 1 under a time
    budget; warm-up does not depend on it, and a resumed run with more --epochs stretches it."""

    def __init__(self, per_epoch, epochs):
        self.per_epoch, self.epochs = per_epoch, epochs

    def __call__(self, step):
        warm, total = self.per_epoch, self.per_epoch * self.epochs
        if step < warm:
            return 0.1 + 0.9 * step / warm
        t = min(1.0, (step - warm) / max(1, total - warm))
        return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * t))


def training_clock(device):
    """Seconds the time budget counts: on CPU the process's CPU time per torch thread (what an
    otherwise idle machine with that many cores would take; other jobs do not shorten the
    run), on an accelerator wall time."""
    if device.type == "cpu":
        threads = torch.get_num_threads()
        return lambda: time.process_time() / threads
    return time.perf_counter


def plan_epochs(cfg, epoch1_seconds):
    """Epochs that fit the time budget, judged by epoch 1's cost; at most --epochs, at least 1."""
    if not cfg["time_budget"]:
        return int(cfg["epochs"])
    return max(1, min(int(cfg["epochs"]), int(cfg["time_budget"] // max(epoch1_seconds, 1e-9))))


def build(cfg, device):
    pcr, vs = cfg["point_cloud_range"], cfg["voxel_size"]
    if cfg["bev_stride"] not in (4, 8):
        raise SystemExit(f"bev_stride: expected 4 or 8, got {cfg['bev_stride']}")
    grid = BevGrid(pcr, vs, int(cfg["bev_stride"]))
    depth = round((pcr[5] - pcr[2]) / vs[2]) + 1
    torch.manual_seed(int(cfg["seed"]))
    model = CenterPoint(4, depth, len(CLASSES), upsample=cfg["bev_stride"] == 4).to(device)
    # The encoder's BatchNorm keeps OpenPCDet's momentum 0.01, made for 80-epoch schedules: after
    # the few hundred steps of the default run its running statistics would still be mostly their
    # initial values, and evaluation (which uses them) would see a different network.
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.momentum = 0.1
    return model, grid


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024     # Linux: KiB


def pick_device(args):
    device = torch.device(args.device) if args.device else mx_sparse.best_device()
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: this torch build ({torch.__version__}) sees no CUDA device")
    if device.type == "npu" and not (hasattr(torch, "npu") and torch.npu.is_available()):
        raise SystemExit(f"--device {args.device}: no NPU (torch_npu not installed or no device visible)")
    return device


def load_checkpoint(args):
    path = args.checkpoint if args.eval_only else args.resume
    if not path:
        return None
    option = "--checkpoint" if args.eval_only else "--resume"
    if not os.path.isfile(path):
        raise SystemExit(f"{option}: no file {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:        # a truncated or foreign file: say which, not a pickle traceback
        raise SystemExit(f"{option}: {path} is not a readable checkpoint of this job ({type(e).__name__}: {e})")


def load_weights(model, saved, option):
    try:
        model.load_state_dict(saved["model"])
    except RuntimeError as e:
        raise SystemExit(f"{option}: the checkpoint's weights do not fit this job's model (written by another "
                         f"version of the job?): {' '.join(str(e).split())[:300]}")


def held_out_counts(val_rec):
    counts = np.bincount(np.concatenate([r["classes"][~r["ignore"]] for r in val_rec]).astype(np.int64),
                         minlength=len(CLASSES))
    return ", ".join(f"{n} {c}" for n, c in zip(counts, CLASSES))


def main(argv=None):
    t_start = time.perf_counter()
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args)
    saved = load_checkpoint(args)
    cfg = resolve_config(args, saved["config"] if saved else None)
    model, grid = build(cfg, device)
    if not args.eval_only:     # an unwritable or full --out fails now, not after the first epoch
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
        weights = checkpoint_bytes(model.state_dict())
        check_output_folder(args.out, 3 * weights + (1 << 20))   # weights + Adam's two moments + history

    splits = ("val",) if args.eval_only and saved and "class_sizes" in saved and not args.points else ("train", "val")
    records, source = kitti_frames(args, cfg) if args.points else generated_frames(cfg, splits)
    train_rec, val_rec = records.get("train"), records["val"]
    print(f"data: {source}; held-out boxes with >= {cfg['min_points']} points: {held_out_counts(val_rec)}")
    val_data = Voxelized(val_rec, cfg, device)
    train_data = Voxelized(train_rec, cfg, device) if not args.eval_only else None
    print(f"model: CenterPoint (VoxelBackBone8x, sparse shape {val_data.shape}, BEV {grid.height}x{grid.width} "
          f"cells of {grid.cell_x:.2f} m at the heads) on {device.type}, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters")
    sizes = np.asarray(saved["class_sizes"]) if saved and "class_sizes" in saved else class_sizes(train_rec)
    baseline = ClusterPriorBaseline(sizes, cfg["point_cloud_range"])
    baseline_eval = evaluate([baseline(r["points"]) for r in val_rec], val_rec)
    setup_time = time.perf_counter() - t_start
    print(f"set-up: {setup_time:.0f} s (scenes, voxels, baseline)")

    if args.eval_only:
        load_weights(model, saved, "--checkpoint")
        w0, c0 = time.perf_counter(), time.process_time()
        preds = predict(model, val_data, grid, cfg)
        ev = evaluate(preds, val_rec)
        eval_seconds, eval_cpu = time.perf_counter() - w0, time.process_time() - c0
        print_table(ev, baseline_eval, f"held-out BEV AP / recall (%), checkpoint {args.checkpoint} "
                                       f"(epoch {saved['epoch']})")
        print(f"eval-only: mAP {fmt(ev['mean_ap'][0]).strip()}, strict {fmt(ev['mean_ap'].get(1)).strip()} "
              f"(saved with the checkpoint: {fmt(saved['eval']['mean_ap']['0']).strip()}, "
              f"{fmt(saved['eval']['mean_ap'].get('1')).strip()}); "
              f"{'identical' if json.dumps(to_json(ev)) == json.dumps(saved['eval']) else 'DIFFERENT'} to the saved "
              f"evaluation")
        if not args.no_plot:     # next to the checkpoint, as training writes them
            save_pictures(val_rec, preds, cfg, os.path.dirname(os.path.abspath(args.checkpoint)))
        print(f"done: set-up {setup_time:.0f} s, evaluation {eval_seconds:.0f} s wall ({eval_cpu:.0f} s CPU, "
              f"all threads), {time.perf_counter() - t_start:.0f} s in all, "
              f"peak RSS {peak_rss_mib():.0f} MiB")
        print(f"verdict: {verdict(ev, baseline_eval)}")
        return ev

    per_epoch = len(epoch_steps(len(train_rec), cfg, np.random.default_rng(0)))
    schedule = Schedule(per_epoch, int(cfg["epochs"]))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    history, first, planned = [], 1, None
    rng = np.random.default_rng(int(cfg["seed"]) + 1)
    if saved:
        load_weights(model, saved, "--resume")
        optimizer.load_state_dict(saved["optimizer"])
        scheduler.load_state_dict(saved["scheduler"])
        history, first = saved["history"], saved["epoch"] + 1
        rng.bit_generator.state = saved["rng"]
        # The plan made after epoch 1 holds unless --epochs asks for another number.
        planned = args.epochs if args.epochs is not None else saved.get("planned_epochs")
        print(f"resume: {args.resume} at epoch {saved['epoch']}")
    if planned is not None:
        schedule.epochs = int(planned)
    ckpt_out = os.path.join(args.out, "checkpoint.pt")
    clock = training_clock(device)
    steps, train_seconds, eval_seconds, eval_cpu, wall_train = 0, 0.0, 0.0, 0.0, 0.0
    ev, preds, epoch = (saved["eval"] if saved else None), None, first
    while epoch <= schedule.epochs:
        t0, w0 = clock(), time.perf_counter()
        loss, n = train_epoch(model, train_data, train_rec, grid, optimizer, scheduler, cfg, epoch, rng)
        train_seconds += clock() - t0
        wall_train += time.perf_counter() - w0
        steps += n
        if epoch == 1 and planned is None:
            schedule.epochs = planned = plan_epochs(cfg, train_seconds)
            if cfg["time_budget"]:
                tqdm.write(f"plan: epoch 1 took {train_seconds:.0f} s of the {cfg['time_budget']:.0f} s budget "
                           f"({'CPU time per thread' if device.type == 'cpu' else 'wall'}): {planned} epochs "
                           f"of {per_epoch} steps (at most --epochs {cfg['epochs']})")
        w0, c0 = time.perf_counter(), time.process_time()
        preds = predict(model, val_data, grid, cfg)
        ev_raw = evaluate(preds, val_rec)
        eval_seconds += time.perf_counter() - w0
        eval_cpu += time.process_time() - c0
        ev = to_json(ev_raw)
        history.append(dict(epoch=epoch, loss=loss, map=ev_raw["mean_ap"].get(0, float("nan")),
                            map_strict=ev_raw["mean_ap"].get(1, float("nan"))))
        tqdm.write(f"epoch {epoch}/{schedule.epochs}: loss {loss:.3f}, held-out mAP {fmt(history[-1]['map']).strip()} "
                   f"(baseline {fmt(baseline_eval['mean_ap'].get(0)).strip()}), strict "
                   f"{fmt(history[-1]['map_strict']).strip()} ({fmt(baseline_eval['mean_ap'].get(1)).strip()})")
        save_atomic(dict(model=model.state_dict(), optimizer=optimizer.state_dict(),
                         scheduler=scheduler.state_dict(), epoch=epoch, planned_epochs=schedule.epochs, config=cfg,
                         history=history, eval=ev, rng=rng.bit_generator.state,
                         class_sizes=sizes.tolist()), ckpt_out)
        epoch += 1
    if ev is None:
        raise SystemExit(f"nothing to train: the checkpoint is at epoch {first - 1} and the plan is "
                         f"{schedule.epochs} epochs (raise --epochs)")
    final = from_json(ev)
    print_table(final, baseline_eval, f"held-out BEV AP / recall (%) after epoch {history[-1]['epoch']}")
    with open(os.path.join(args.out, "metrics.json"), "w") as f:
        json.dump(dict(config=cfg, history=history, detector=ev, baseline=to_json(baseline_eval)), f, indent=1)
    if not args.no_plot:
        save_plot(history, baseline_eval, os.path.join(args.out, "training.png"))
        if preds is not None:
            save_pictures(val_rec, preds, cfg, args.out)
    last = [round(100 * h["map"], 1) for h in history[-3:]]
    print(f"checkpoint: {ckpt_out}")
    print(f"curve: held-out mAP over the last epochs {last}")
    print(f"done: {steps} steps; set-up {setup_time:.0f} s, training {wall_train:.0f} s wall "
          f"({train_seconds:.0f} s {'CPU per thread' if device.type == 'cpu' else 'wall'} counted by the budget), "
          f"evaluation {eval_seconds:.0f} s wall ({eval_cpu:.0f} s CPU, all threads), "
          f"{time.perf_counter() - t_start:.0f} s in all on {device.type}; "
          f"peak RSS {peak_rss_mib():.0f} MiB")
    print(f"verdict: {verdict(final, baseline_eval)}")
    return final


if __name__ == "__main__":
    main(sys.argv[1:])
