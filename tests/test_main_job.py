"""The README's main job (examples/train_second.py, a CenterPoint detector) on a tiny
config: trains, saves, resumes, re-evaluates a checkpoint to the number saved with it,
survives SIGKILL during an epoch and during a checkpoint write (resumed: bitwise the
uninterrupted run), refuses an unwritable or full --out before training, and reads KITTI
frames, label_2 files and calib files (a clear error for a missing or malformed one)."""
import importlib.util
import json
import math
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_second.py")
# Two tiny scenes, a 16 m x 16 m range at 0.16 m voxels, two steps, no time budget: seconds,
# not minutes (the default is KITTI's grid under a 600 s budget).
TINY = ["--train-scenes", "2", "--val-scenes", "1", "--epochs", "1", "--max-steps", "2", "--batch-size", "1",
        "--azimuth-steps", "256", "--point-cloud-range", "0", "-8", "-3", "16", "8", "1",
        "--voxel-size", "0.16", "0.16", "0.16", "--time-budget", "0", "--no-plot", "--threads", "1"]


def load_job():
    spec = importlib.util.spec_from_file_location("train_second", SCRIPT)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job


def test_train_save_resume_eval_only(tmp_path):
    out = subprocess.run([sys.executable, SCRIPT, *TINY, "--out", str(tmp_path)], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert re.match(r"done: 2 steps; set-up \d+ s, training \d+ s wall .* peak RSS \d+ MiB", lines[-2]), lines[-2]
    check_verdict(lines[-1], json.loads((tmp_path / "metrics.json").read_text()))
    assert any(line.startswith("mAP") for line in lines)                     # the side-by-side table
    ckpt_path = tmp_path / "checkpoint.pt"
    ckpt = torch.load(ckpt_path, weights_only=False)
    assert ckpt["epoch"] == 1 and len(ckpt["history"]) == 1
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["detector"] == json.loads(json.dumps(ckpt["eval"]))

    job = load_job()
    # Resume: epoch 2 only, starting from the saved weights and optimizer state.
    job.main([*TINY, "--epochs", "2", "--resume", str(ckpt_path), "--out", str(tmp_path / "resumed")])
    resumed = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=False)
    assert resumed["epoch"] == 2 and [h["epoch"] for h in resumed["history"]] == [1, 2]
    assert resumed["history"][0] == ckpt["history"][0]
    assert resumed["optimizer"]["state"][0]["step"] == 2 * ckpt["optimizer"]["state"][0]["step"]
    assert any(not torch.equal(resumed["model"][k], ckpt["model"][k]) for k in ckpt["model"])

    # Eval-only: the same numbers as saved with the checkpoint (config comes from it too).
    ev = job.main(["--eval-only", "--checkpoint", str(tmp_path / "resumed" / "checkpoint.pt"), "--threads", "1"])
    assert json.dumps(job.to_json(ev)) == json.dumps(resumed["eval"])


def check_verdict(line, metrics):
    """The final line names every class and both mAPs with the words the numbers warrant."""
    assert line.startswith("verdict: "), line
    det, base = metrics["detector"], metrics["baseline"]
    pairs = [(f"{n}@{t}", det["per_class"][n][f"{float(t):.2f}"]["ap"], base["per_class"][n][f"{float(t):.2f}"]["ap"])
             for n, t in (("Car", "0.5"), ("Pedestrian", "0.25"), ("Cyclist", "0.25"))]
    pairs += [("mAP", det["mean_ap"]["0"], base["mean_ap"]["0"]),
              ("strict mAP", det["mean_ap"]["1"], base["mean_ap"]["1"])]
    not_above = []
    for name, d, b in pairs:
        d, b = round(100 * d, 1), round(100 * b, 1)
        word = "above" if d > b else "below" if d < b else "equal to"
        assert f"{name} {d:.1f} vs {b:.1f} ({word})" in line, (name, line)
        not_above += [name.split("@")[0]] if word != "above" else []
    if not_above:
        assert line.endswith("NOT above the baseline on: " + ", ".join(not_above)), line
    else:
        assert line.endswith("above the baseline on every class and on both mAPs"), line


def test_verdict_says_below_where_the_detector_is_below():
    """Hand-made evaluations: the line says 'below' for the classes below, 'above' for the others."""
    job = load_job()

    def ev(car, ped, cyc, strict):
        per = {n: {t: dict(ap=a, recall=0.0, num_gt=1, num_det=1) for t in job.THRESHOLDS[n]}
               for n, a in (("Car", car), ("Pedestrian", ped), ("Cyclist", cyc))}
        return dict(per_class=per, mean_ap={0: (car + ped + cyc) / 3, 1: strict})

    line = job.verdict(ev(0.9, 0.2, 0.5, 0.2), ev(0.3, 0.4, 0.5, 0.3))
    assert "Car@0.5 90.0 vs 30.0 (above)" in line and "Pedestrian@0.25 20.0 vs 40.0 (below)" in line
    assert "Cyclist@0.25 50.0 vs 50.0 (equal to)" in line and "strict mAP 20.0 vs 30.0 (below)" in line
    assert line.endswith("NOT above the baseline on: Pedestrian, Cyclist, strict mAP")
    line = job.verdict(ev(0.9, 0.6, 0.7, 0.5), ev(0.3, 0.4, 0.5, 0.3))
    assert "(below)" not in line and line.endswith("above the baseline on every class and on both mAPs")


def test_config_file_and_flag_precedence(tmp_path):
    job = load_job()
    (tmp_path / "c.json").write_text(json.dumps({"epochs": 3, "lr": 0.01}))
    cfg = job.resolve_config(job.parse_args(["--config", str(tmp_path / "c.json"), "--lr", "0.02"]))
    assert cfg["epochs"] == 3 and cfg["lr"] == 0.02 and cfg["batch_size"] == job.DEFAULTS["batch_size"][0]
    (tmp_path / "bad.json").write_text(json.dumps({"epoch": 3}))
    with pytest.raises(SystemExit, match="unknown key.*'epoch'"):
        job.resolve_config(job.parse_args(["--config", str(tmp_path / "bad.json")]))


def test_kitti_frames_with_camera_labels_and_calib(tmp_path):
    """Generated frames written as KITTI velodyne/label_2/calib files train and evaluate; the
    boxes read back through the calib equal the generated ones."""
    from mx_sparse.synthetic import CLASSES, generate_labeled_frame
    calib = "R0_rect: 1 0 0 0 1 0 0 0 1\nTr_velo_to_cam: 0 -1 0 0 0 0 -1 0 1 0 0 0\n"
    for d in ("velodyne", "label_2", "calib"):
        (tmp_path / d).mkdir()
    frames = [generate_labeled_frame("kitti", seed=s, azimuth_steps=256) for s in (1, 2, 3)]
    for i, f in enumerate(frames):
        f.points.tofile(str(tmp_path / "velodyne" / f"{i:06d}.bin"))
        (tmp_path / "calib" / f"{i:06d}.txt").write_text(calib)
        lines = []
        for b, c in zip(f.boxes.astype(np.float64), f.classes):
            # lidar (x, y, z centre) -> camera (-y, -(z - h/2), x) bottom centre; ry = -yaw - pi/2.
            x, y, z, l, w, h, yaw = b
            lines.append(f"{CLASSES[c]} 0 0 0 0 0 0 0 {h:.4f} {w:.4f} {l:.4f} {-y:.4f} {-(z - h / 2):.4f} {x:.4f} "
                         f"{-yaw - math.pi / 2:.6f}")
        (tmp_path / "label_2" / f"{i:06d}.txt").write_text("\n".join(lines + ["DontCare -1 -1 -10 0 0 1 1 -1 -1 -1 "
                                                                               "-1000 -1000 -1000 -10"]))
    job = load_job()
    args = job.parse_args(["--points", str(tmp_path / "velodyne"), "--labels", str(tmp_path / "label_2"),
                           "--calib", str(tmp_path / "calib"), "--val-fraction", "0.34"])
    records, source = job.kitti_frames(args, job.resolve_config(args))
    train, val = records["train"], records["val"]
    assert len(train) == 2 and len(val) == 1 and "2 KITTI training + 1 held-out frames" in source
    cfg = job.resolve_config(args)
    expected = job.frame_record(frames[2].points, frames[2].boxes, frames[2].classes, cfg)
    np.testing.assert_allclose(val[0]["boxes"][:, :6], expected["boxes"][:, :6], atol=1e-3)
    np.testing.assert_allclose(np.cos(val[0]["boxes"][:, 6] - expected["boxes"][:, 6]), 1.0, atol=1e-5)
    np.testing.assert_array_equal(val[0]["ignore"], expected["ignore"])
    kitti = ["--points", str(tmp_path / "velodyne"), "--labels", str(tmp_path / "label_2")]
    small = ["--epochs", "1", "--max-steps", "1", "--batch-size", "1", "--no-plot", "--time-budget", "0",
             "--point-cloud-range", "0", "-8", "-3", "16", "8", "1", "--voxel-size", "0.16", "0.16", "0.16",
             "--out", str(tmp_path / "run")]
    job.main([*kitti, "--calib", str(tmp_path / "calib"), *small])
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    # Camera-frame labels without calib: a clear error.
    with pytest.raises(SystemExit, match="calib"):
        job.main([*kitti, *small])
    # A missing or malformed file: one line naming the option and the file.
    (tmp_path / "calib" / "000001.txt").write_text("R0_rect: 1 0 0\n")
    with pytest.raises(SystemExit, match=r"--calib: .*000001.txt: calib: expected a 'R0_rect:' line with 9 numbers"):
        job.main([*kitti, "--calib", str(tmp_path / "calib"), *small])
    (tmp_path / "calib" / "000001.txt").unlink()
    with pytest.raises(SystemExit, match=r"--calib: .*000001.txt is missing"):
        job.main([*kitti, "--calib", str(tmp_path / "calib"), *small])
    (tmp_path / "calib" / "000001.txt").write_text(calib)
    (tmp_path / "label_2" / "000002.txt").write_text("Car 1 2 3\n")
    with pytest.raises(SystemExit, match=r"--labels: .*000002.txt: label line 1: expected 15 columns"):
        job.main([*kitti, "--calib", str(tmp_path / "calib"), *small])
    (tmp_path / "label_2" / "000002.txt").unlink()
    with pytest.raises(SystemExit, match=r"--labels: .*000002.txt is missing"):
        job.main([*kitti, "--calib", str(tmp_path / "calib"), *small])
    (tmp_path / "label_2" / "000002.txt").write_text("")
    (tmp_path / "velodyne" / "000000.bin").write_bytes(b"\0" * 20)
    with pytest.raises(SystemExit, match=r"--points: .*000000.bin holds 20 bytes; a KITTI .bin frame holds 16 per point"):
        job.main([*kitti, "--calib", str(tmp_path / "calib"), *small])
    with pytest.raises(SystemExit, match=r"--points: .*nowhere is not a folder"):
        job.main(["--points", str(tmp_path / "nowhere"), "--labels", str(tmp_path / "label_2"), *small])


# ---------------------------------------------------------------- faults lose nothing
KILLABLE = """
import importlib.util, io, os, signal, sys
script, mode, at = sys.argv[1], sys.argv[2], int(sys.argv[3])
spec = importlib.util.spec_from_file_location("train_second", script)
job = importlib.util.module_from_spec(spec)
spec.loader.exec_module(job)
import torch
from examples.detection.checkpoint import TEMP_SUFFIX
calls = [0]
if mode == "step":                 # SIGKILL at the at-th training step (inside an epoch)
    real_step = job.train_step
    def train_step(*a, **k):
        calls[0] += 1
        if calls[0] == at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_step(*a, **k)
    job.train_step = train_step
elif mode == "save":               # SIGKILL half-way through the at-th checkpoint's bytes
    real_save = torch.save
    def save(obj, f, *a, **k):
        if str(getattr(f, "name", "")).endswith(TEMP_SUFFIX):
            calls[0] += 1
            if calls[0] == at:
                buffer = io.BytesIO()
                real_save(obj, buffer, *a, **k)
                f.write(buffer.getvalue()[:buffer.tell() // 2])
                f.flush()
                os.fsync(f.fileno())
                os.kill(os.getpid(), signal.SIGKILL)
        return real_save(obj, f, *a, **k)
    torch.save = save
job.main(sys.argv[4:])
"""


def run_job(mode, at, args):
    return subprocess.run([sys.executable, "-c", KILLABLE, SCRIPT, mode, str(at), *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})


def assert_same_run(a, b):
    """Bitwise: weights, optimizer state, schedule, history and evaluations."""
    ca, cb = (torch.load(d / "checkpoint.pt", weights_only=False) for d in (a, b))
    assert ca["model"].keys() == cb["model"].keys()
    for k in ca["model"]:
        assert torch.equal(ca["model"][k], cb["model"][k]), k
    for sa, sb in zip(ca["optimizer"]["state"].values(), cb["optimizer"]["state"].values()):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert ca["scheduler"] == cb["scheduler"] and ca["history"] == cb["history"] and ca["eval"] == cb["eval"]
    assert (a / "metrics.json").read_text() == (b / "metrics.json").read_text()


def test_sigkill_during_an_epoch_and_during_a_checkpoint_write_then_resume(tmp_path):
    """Killed in epoch 2 (after step 1 of 2) or half-way through epoch 2's checkpoint bytes, the
    job leaves epoch 1's complete checkpoint; resumed from it, it ends bitwise equal to a run
    that was never interrupted."""
    args = [*TINY, "--epochs", "2"]
    ref = run_job("none", 0, [*args, "--out", str(tmp_path / "ref")])
    assert ref.returncode == 0, ref.stderr[-3000:]
    for mode, at in (("step", 4), ("save", 2)):
        out = tmp_path / mode
        killed = run_job(mode, at, [*args, "--out", str(out)])
        assert killed.returncode == -signal.SIGKILL, (mode, killed.returncode, killed.stderr[-2000:])
        left = torch.load(out / "checkpoint.pt", weights_only=False)       # complete, not truncated
        assert left["epoch"] == 1
        partial = [p for p in os.listdir(out) if p.endswith(".partial")]
        assert bool(partial) == (mode == "save"), os.listdir(out)
        resumed = run_job("none", 0, [*args, "--out", str(out), "--resume", str(out / "checkpoint.pt")])
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert not [p for p in os.listdir(out) if p.endswith(".partial")]
        assert_same_run(tmp_path / "ref", out)


def test_unwritable_or_full_out_fails_before_training(tmp_path, monkeypatch):
    job = load_job()
    monkeypatch.setattr(job, "generated_frames", lambda *a, **k: pytest.fail("set-up started"))
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match=r"--out: cannot write checkpoints to .*file/run: Not a directory"):
        job.main([*TINY, "--out", str(tmp_path / "file" / "run")])
    import shutil
    from examples.detection import checkpoint
    monkeypatch.setattr(checkpoint.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10 << 30, 10 << 30, 1 << 20))
    with pytest.raises(SystemExit, match=r"--out: .* has 1.0 MiB free; a checkpoint takes [0-9.]+ MiB and an atomic "
                                         r"save needs room for two"):
        job.main([*TINY, "--out", str(tmp_path / "full")])


def test_truncated_checkpoint_is_one_clear_error(tmp_path):
    job = load_job()
    (tmp_path / "checkpoint.pt").write_bytes(b"PK\x03\x04 not a whole file")
    with pytest.raises(SystemExit, match=r"--checkpoint: .*checkpoint.pt is not a readable checkpoint of this job"):
        job.main(["--eval-only", "--checkpoint", str(tmp_path / "checkpoint.pt")])
