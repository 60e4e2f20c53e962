"""The README's main job (examples/train_second.py, a CenterPoint detector) on a tiny
config: trains, saves, resumes, re-evaluates a checkpoint to the number saved with it,
and reads KITTI frames, label_2 files and calib files."""
import importlib.util
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_second.py")
# Two tiny scenes, a 16 m x 16 m range, two steps: seconds, not minutes.
TINY = ["--train-scenes", "2", "--val-scenes", "1", "--epochs", "1", "--max-steps", "2", "--batch-size", "1",
        "--azimuth-steps", "256", "--point-cloud-range", "0", "-8", "-3", "16", "8", "1", "--no-plot",
        "--threads", "1"]


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
    assert re.match(r"done: 2 steps in \d+ s \([0-9.]+ steps/s\) on cpu, \d+ s in all; held-out mAP +[0-9.]+ "
                    r"vs baseline +[0-9.]+ \((NOT )?above the baseline\)", lines[-1]), lines[-1]
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
    assert job.to_json(ev) == json.loads(json.dumps(resumed["eval"]))


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
    (train, val), source = job.kitti_frames(args, job.resolve_config(args))
    assert len(train) == 2 and len(val) == 1 and "2 KITTI training + 1 held-out frames" in source
    cfg = job.resolve_config(args)
    expected = job.frame_record(frames[2].points, frames[2].boxes, frames[2].classes, cfg)
    np.testing.assert_allclose(val[0]["boxes"][:, :6], expected["boxes"][:, :6], atol=1e-3)
    np.testing.assert_allclose(np.cos(val[0]["boxes"][:, 6] - expected["boxes"][:, 6]), 1.0, atol=1e-5)
    np.testing.assert_array_equal(val[0]["ignore"], expected["ignore"])
    job.main(["--points", str(tmp_path / "velodyne"), "--labels", str(tmp_path / "label_2"), "--calib",
              str(tmp_path / "calib"), "--epochs", "1", "--max-steps", "1", "--batch-size", "1", "--no-plot",
              "--point-cloud-range", "0", "-8", "-3", "16", "8", "1", "--out", str(tmp_path / "run")])
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    # Camera-frame labels without calib: a clear error.
    with pytest.raises(SystemExit, match="calib"):
        job.main(["--points", str(tmp_path / "velodyne"), "--labels", str(tmp_path / "label_2"), "--epochs", "1"])
