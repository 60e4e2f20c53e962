"""The README's main job runs (a few steps) and reports its throughput line."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_train_second_smoke():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_second.py"), "--steps", "3",
                          "--scenes", "1"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    line = out.stdout.strip().splitlines()[-1]
    m = re.match(r"done: 3 steps on cpu, final loss ([0-9.]+), ([0-9.]+) steps/s, ([0-9,]+) voxels/s", line)
    assert m, line
    assert float(m.group(2)) > 0 and int(m.group(3).replace(",", "")) > 0


def test_train_second_on_kitti_bin_frames(tmp_path):
    """--points: KITTI velodyne .bin frames (float32 x, y, z, intensity) written here, voxelized
    by PointToVoxel; the reported point and voxel counts match an independent count."""
    import importlib.util

    import numpy as np

    import voxel_reference as ref
    from mx_sparse.synthetic import PRESETS, generate_points
    frames = [generate_points("kitti", seed=s, azimuth_steps=300) for s in (1, 2)]
    for i, f in enumerate(frames):
        assert f.dtype == np.float32 and f.shape[1] == 4
        f.tofile(str(tmp_path / f"{i:06d}.bin"))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_second.py"), "--steps", "2",
                          "--batch-size", "2", "--points", str(tmp_path)], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    cfg = PRESETS["kitti"]
    voxels = 0
    for f in frames:
        cells, inside = ref.cells(f, cfg["voxel_size"], cfg["point_cloud_range"])
        voxels += len(np.unique(cells[inside], axis=0))
    data = next(line for line in lines if line.startswith("data: "))
    assert f"2 frame(s) from {tmp_path}; {sum(len(f) for f in frames):,} points -> {voxels:,} voxels" in data, data
    assert re.match(r"done: 2 steps on cpu, final loss [0-9.]+, [0-9.]+ steps/s, [0-9,]+ voxels/s", lines[-1])

    spec = importlib.util.spec_from_file_location("train_second", os.path.join(ROOT, "examples", "train_second.py"))
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    assert np.array_equal(job.load_frames(str(tmp_path / "000001.bin"), "kitti", 1)[0][0], frames[1])
    (tmp_path / "bad.bin").write_bytes(b"\0" * 18)
    for path, message in ((tmp_path / "bad.bin", "holds 18 bytes"), (tmp_path / "none", "neither"),
                          (tmp_path / "empty_dir", "no .bin files")):
        if path.name == "empty_dir":
            path.mkdir()
        try:
            job.load_frames(str(path), "kitti", 1)
            raise AssertionError("no error")
        except SystemExit as e:
            assert message in str(e), e
