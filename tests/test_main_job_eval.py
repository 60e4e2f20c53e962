"""The main job's evaluation made cheap, checked against the straightforward forms it
replaced: the rotated BEV IoU of all pairs at once against one pair at a time
(tests/iou_reference.py), the AP built on it against the AP built on the reference, the BEV
map written channels-first against SparseConvTensor.dense() (alone and inside the job's
predict())."""
import importlib.util
import os
import sys

import numpy as np
import pytest
import torch

import iou_reference
import mx_sparse
import examples.detection.average_precision  # noqa: F401  (the module, not the function of that name)
from examples.detection import bev_iou, evaluate_detections
from examples.detection.centerpoint import bev_map

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def random_boxes(rng, n, spread=3.0):
    b = np.zeros((n, 7))
    b[:, :2] = rng.uniform(-spread, spread, (n, 2))
    b[:, 2] = rng.uniform(-2, 0, n)
    b[:, 3:5] = rng.uniform(0.2, 4.5, (n, 2))
    b[:, 5] = rng.uniform(0.5, 2, n)
    b[:, 6] = rng.uniform(-4, 4, n)
    return b


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_iou_matches_the_pairwise_reference(seed):
    rng = np.random.default_rng(seed)
    a, b = random_boxes(rng, 40), random_boxes(rng, 30)
    # Cases that stress the clipping: the same box, the same box turned by 90 and 180 degrees,
    # a box inside another, axis-aligned boxes sharing an edge, a box shifted by a hair.
    b[0] = a[0]
    b[1], b[1, 6] = a[1], a[1, 6] + np.pi / 2
    b[2], b[2, 6] = a[2], a[2, 6] + np.pi
    b[3], b[3, 3:5] = a[3], a[3, 3:5] / 3
    a[4], b[4] = [0, 0, 0, 2, 2, 1, 0], [2, 0, 0, 2, 2, 1, 0]
    b[5], b[5, 0] = a[5], a[5, 0] + 1e-9
    got, want = bev_iou(a, b), iou_reference.iou_matrix(a, b)
    assert np.count_nonzero(want) > 30                      # the random sets do overlap
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got[0, 0] == pytest.approx(1.0) and got[2, 2] == pytest.approx(1.0)
    # No pair near enough to clip, and no boxes at all.
    assert not bev_iou(a[:3], a[:3] + [100, 0, 0, 0, 0, 0, 0]).any()
    assert bev_iou(a[:0], b).shape == (0, 30) and bev_iou(a, b[:0]).shape == (40, 0)


def test_ap_on_vectorised_iou_equals_ap_on_the_reference(monkeypatch):
    rng = np.random.default_rng(7)
    gts, preds = [], []
    for _ in range(6):
        g = random_boxes(rng, 8, spread=6)
        gts.append(dict(boxes=g, classes=rng.integers(0, 2, 8), ignore=rng.random(8) < 0.2))
        p = np.concatenate([g + rng.normal(0, 0.3, g.shape), random_boxes(rng, 5, spread=6)])
        p[:, 3:5] = np.abs(p[:, 3:5]) + 0.1
        preds.append(dict(boxes=p, scores=rng.random(len(p)), classes=rng.integers(0, 2, len(p))))
    thresholds = {"A": [0.3, 0.6], "B": [0.25, 0.5]}
    got = evaluate_detections(preds, gts, thresholds, ["A", "B"])
    monkeypatch.setattr(sys.modules["examples.detection.average_precision"], "bev_iou", iou_reference.iou_matrix)
    want = evaluate_detections(preds, gts, thresholds, ["A", "B"])
    assert got == want
    assert 0 < got["mean_ap"][0] < 1


def test_bev_map_equals_dense_with_height_folded():
    torch.manual_seed(0)
    shape, n = [3, 20, 24], 150
    flat = torch.randperm(2 * 3 * 20 * 24)[:n]
    idx = torch.stack(torch.unravel_index(flat, [2] + shape), 1).int()
    feats = torch.randn(n, 5, dtype=torch.float64, requires_grad=True)
    x = mx_sparse.SparseConvTensor(feats, idx, shape, 2)
    want = x.dense().flatten(1, 2)
    got = bev_map(x)
    assert got.shape == (2, 15, 20, 24) and torch.equal(got, want)
    weight = torch.randn_like(want)
    (g_got,) = torch.autograd.grad((got * weight).sum(), feats)
    (g_want,) = torch.autograd.grad((want * weight).sum(), feats)
    assert torch.equal(g_got, g_want)


def load_job():
    spec = importlib.util.spec_from_file_location("train_second", os.path.join(ROOT, "examples", "train_second.py"))
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    return job


def test_predict_equals_the_former_dense_path():
    job = load_job()
    cfg = {k: v for k, (v, _) in job.DEFAULTS.items()}
    cfg.update(val_scenes=3, azimuth_steps=256, point_cloud_range=[0, -8, -3, 16, 8, 1],
               voxel_size=[0.16, 0.16, 0.16], batch_size=2, score_threshold=0.0)
    torch.set_num_threads(1)
    model, grid = job.build(cfg, torch.device("cpu"))
    records, _ = job.generated_frames(cfg, ("val",))
    data = job.Voxelized(records["val"], cfg, torch.device("cpu"))
    model.eval()
    former = []
    with torch.no_grad():   # SparseConvTensor.dense(), then the height folded into the channels
        for ids in ([0, 1], [2]):
            bev = model.neck(model.encoder(data.batch(ids)).dense().flatten(1, 2))
            out = dict(heatmap=model.heatmap(bev), regression=model.regression(bev))
            former += job.decode(out, grid, score_threshold=0.0)
    preds = job.predict(model, data, grid, cfg)
    assert len(preds) == 3
    for p, f in zip(preds, former):
        assert len(f["scores"]) > 0
        for key in ("boxes", "scores", "classes"):
            np.testing.assert_array_equal(p[key], f[key])
