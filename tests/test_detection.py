"""Rotated BEV IoU, average precision, the cluster baseline, KITTI label parsing and the
CenterPoint target/decode pair, each against hand-computed values."""
import math

import numpy as np
import pytest

from examples.detection import (ClusterPriorBaseline, average_precision, bev_iou, evaluate_detections,
                                 parse_kitti_calib, parse_kitti_labels, polygon_area)


def box(x, y, l, w, yaw=0.0, z=0.0, h=1.0):
    return [x, y, z, l, w, h, yaw]


# ---------------------------------------------------------------- rotated BEV IoU
def test_iou_identical_and_disjoint():
    a = [box(1.0, 2.0, 4.0, 2.0, 0.3)]
    assert bev_iou(a, a)[0, 0] == pytest.approx(1.0)
    assert bev_iou(a, [box(10.0, 2.0, 4.0, 2.0, 0.3)])[0, 0] == 0.0
    # Touching along an edge: zero area in common.
    assert bev_iou([box(0, 0, 2, 2)], [box(2, 0, 2, 2)])[0, 0] == pytest.approx(0.0, abs=1e-12)


def test_iou_ignores_height():
    assert bev_iou([box(0, 0, 2, 2, z=0.0, h=1.0)], [box(0, 0, 2, 2, z=5.0, h=3.0)])[0, 0] == pytest.approx(1.0)


def test_iou_rotated_by_90_degrees():
    # A square turned by 90 degrees is the same footprint.
    assert bev_iou([box(0, 0, 2, 2)], [box(0, 0, 2, 2, math.pi / 2)])[0, 0] == pytest.approx(1.0)
    # A 4x2 rectangle and itself turned by 90 degrees share a 2x2 square: 4 / (8 + 8 - 4).
    assert bev_iou([box(0, 0, 4, 2)], [box(0, 0, 4, 2, math.pi / 2)])[0, 0] == pytest.approx(1 / 3)


def test_iou_known_overlaps():
    # Shifted by half a side: 1x2 in common, union 6.
    assert bev_iou([box(0, 0, 2, 2)], [box(1, 0, 2, 2)])[0, 0] == pytest.approx(1 / 3)
    # Unit square and the same turned 45 degrees: a regular octagon of area 2(sqrt2 - 1);
    # IoU = 2(sqrt2 - 1) / (2 - 2(sqrt2 - 1)) = 1 / sqrt2.
    assert bev_iou([box(0, 0, 1, 1)], [box(0, 0, 1, 1, math.pi / 4)])[0, 0] == pytest.approx(1 / math.sqrt(2))
    # Small box inside a big one: IoU = small area / big area.
    assert bev_iou([box(0, 0, 4, 4, 0.7)], [box(0.2, -0.1, 1, 0.5, 0.1)])[0, 0] == pytest.approx(0.5 / 16)


def test_iou_matrix_shape_and_symmetry():
    rng = np.random.default_rng(0)
    a = np.c_[rng.uniform(-3, 3, (5, 2)), np.zeros(5), rng.uniform(0.5, 4, (5, 2)), np.ones(5), rng.uniform(-3, 3, 5)]
    b = np.c_[rng.uniform(-3, 3, (4, 2)), np.zeros(4), rng.uniform(0.5, 4, (4, 2)), np.ones(4), rng.uniform(-3, 3, 4)]
    m = bev_iou(a, b)
    assert m.shape == (5, 4) and np.all((m >= 0) & (m <= 1 + 1e-12))
    np.testing.assert_allclose(m, bev_iou(b, a).T, atol=1e-12)
    assert bev_iou(np.zeros((0, 7)), b).shape == (0, 4)


def test_iou_rejects_bad_boxes():
    with pytest.raises(ValueError, match="boxes_b"):
        bev_iou([box(0, 0, 1, 1)], [[0, 0, 0, 0, 1, 1, 0]])


def test_polygon_area():
    assert polygon_area([[0, 0], [2, 0], [2, 3], [0, 3]]) == pytest.approx(6.0)
    assert polygon_area([[0, 0], [1, 1]]) == 0.0


# ---------------------------------------------------------------- average precision
def test_ap_hand_computed_pr_curve():
    # 3 boxes; detections by score: TP, FP, TP, FP.
    # precision 1, 1/2, 2/3, 1/2 at recall 1/3, 1/3, 2/3, 2/3; monotone envelope 1, 2/3, 2/3, 1/2;
    # AP = 1/3 * 1 + 1/3 * 2/3 = 5/9.
    assert average_precision([True, False, True, False], 3) == pytest.approx(5 / 9)
    assert average_precision([True, True], 2) == pytest.approx(1.0)
    assert average_precision([False, False], 2) == 0.0
    assert math.isnan(average_precision([False], 0))


def test_evaluate_detections_matching():
    gt = [dict(boxes=np.array([box(0, 0, 4, 2), box(10, 0, 4, 2), box(20, 0, 4, 2)]),
               classes=np.array([0, 0, 0]), ignore=np.array([False, False, True]))]
    pred = [dict(boxes=np.array([box(0, 0, 4, 2),          # TP (score 0.9)
                                 box(0.2, 0, 4, 2),        # duplicate of a matched box: FP (0.8)
                                 box(20, 0, 4, 2),         # on the ignored box: not counted (0.7)
                                 box(10, 0, 4, 2),         # TP (0.6)
                                 box(30, 0, 4, 2)]),       # nothing there: FP (0.5)
                 scores=np.array([0.9, 0.8, 0.7, 0.6, 0.5]), classes=np.array([0, 0, 0, 0, 0]))]
    ev = evaluate_detections(pred, gt, {"Car": [0.5]}, ["Car"])
    r = ev["per_class"]["Car"][0.5]
    # TP, FP, TP, FP over 2 boxes: precision 1, 1/2, 2/3, 1/2 at recall 1/2, 1/2, 1, 1 -> AP = 1/2 + 1/2 * 2/3.
    assert r["num_gt"] == 2 and r["num_det"] == 4
    assert r["ap"] == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert r["recall"] == pytest.approx(1.0)
    assert ev["mean_ap"][0] == pytest.approx(r["ap"])
    # Wrong class predictions do not match.
    pred[0]["classes"][:] = 1
    assert evaluate_detections(pred, gt, {"Car": [0.5]}, ["Car"])["per_class"]["Car"][0.5]["ap"] == 0.0


def test_evaluate_detections_frame_count_must_match():
    with pytest.raises(ValueError, match="2 prediction frames but 1"):
        evaluate_detections([{}, {}], [{}], {"Car": [0.5]}, ["Car"])


# ---------------------------------------------------------------- baseline
def test_cluster_baseline_finds_an_isolated_object():
    rng = np.random.default_rng(0)
    ground = np.c_[rng.uniform(0, 20, 4000), rng.uniform(-10, 10, 4000), np.full(4000, -1.7)]
    # A car-sized block of points standing on the ground at (10, 2), long along x.
    car = np.c_[rng.uniform(8, 12, 800), rng.uniform(1.1, 2.9, 800), rng.uniform(-1.5, -0.3, 800)]
    sizes = [[4.0, 1.8, 1.5], [0.8, 0.6, 1.7], [1.8, 0.6, 1.7]]
    det = ClusterPriorBaseline(sizes, [0, -10, -3, 20, 10, 1])(np.r_[ground, car])
    assert len(det["boxes"]) == 1 and det["classes"][0] == 0
    assert bev_iou(det["boxes"], [box(10, 2, 4, 1.8)])[0, 0] > 0.8


# ---------------------------------------------------------------- KITTI files
# Lidar x (forward) -> camera z, lidar y (left) -> camera -x, lidar z (up) -> camera -y.
CALIB = """P0: 1 0 0 0 0 1 0 0 0 0 1 0
R0_rect: 1 0 0 0 1 0 0 0 1
Tr_velo_to_cam: 0 -1 0 0 0 0 -1 0 1 0 0 0
"""


def test_kitti_camera_labels_to_lidar():
    text = ("Car 0.00 0 -1.57 600 150 700 250 1.50 1.60 4.00 2.00 1.50 10.00 0.00\n"
            "DontCare -1 -1 -10 0 0 10 10 -1 -1 -1 -1000 -1000 -1000 -10\n"
            "Pedestrian 0.00 0 0.0 1 1 2 2 1.80 0.60 0.80 -1.00 1.70 5.00 1.5707963\n")
    boxes, classes = parse_kitti_labels(text, parse_kitti_calib(CALIB))
    np.testing.assert_array_equal(classes, [0, 1])
    # Bottom centre (2, 1.5, 10) in the camera, lifted by h/2 = 0.75: lidar (10, -2, -0.75);
    # rotation_y 0 faces camera +x = lidar -y: yaw -pi/2.
    np.testing.assert_allclose(boxes[0], [10, -2, -0.75, 4.0, 1.6, 1.5, -math.pi / 2], atol=1e-5)
    # rotation_y pi/2 faces camera -z = lidar -x: yaw -pi (wrapped into [-pi, pi)).
    np.testing.assert_allclose(boxes[1, :6], [5, 1, -0.8, 0.8, 0.6, 1.8], atol=1e-5)
    assert math.cos(boxes[1, 6]) == pytest.approx(-1.0, abs=1e-6)


def test_kitti_lidar_frame_labels_and_errors():
    boxes, classes = parse_kitti_labels("Cyclist 5 1 -1 1.8 0.6 1.7 0.3\nVan 1 1 1 5 2 2 0\n")
    np.testing.assert_allclose(boxes, [[5, 1, -1, 1.8, 0.6, 1.7, 0.3]], atol=1e-6)
    np.testing.assert_array_equal(classes, [2])
    with pytest.raises(ValueError, match="calib"):
        parse_kitti_labels("Car 0 0 0 0 0 1 1 1.5 1.6 4 2 1.5 10 0\n")
    with pytest.raises(ValueError, match="got 3"):
        parse_kitti_labels("Car 1 2\n")
    with pytest.raises(ValueError, match="R0_rect"):
        parse_kitti_calib("Tr_velo_to_cam: 0 -1 0 0 0 0 -1 0 1 0 0 0\n")


# ---------------------------------------------------------------- CenterPoint targets and decoding
def test_centerpoint_targets_decode_back_to_the_boxes():
    torch = pytest.importorskip("torch")
    from examples.detection.centerpoint import BevGrid, decode, encode_targets
    grid = BevGrid([0, -8, -3, 16, 8, 1], [0.16, 0.16, 0.16], stride=4)
    assert (grid.width, grid.height, grid.cell_x) == (26, 26, 0.64)     # ceil(100 / 8) * 2 cells
    boxes = np.array([[5.3, 1.1, -0.9, 4.2, 1.8, 1.5, 0.4], [10.0, -4.7, -1.0, 0.8, 0.6, 1.7, -2.0]])
    heat, reg, index = encode_targets(boxes, [0, 1], grid, 3)
    assert heat.shape == (3, 26, 26) and heat[0].max() == 1 and heat[1].max() == 1 and heat[2].max() == 0
    # A network that outputs exactly the targets: logit +-20 for peaks / background.
    logits = torch.where(torch.from_numpy(heat) == 1, 20.0, -20.0)[None]
    regression = torch.zeros(1, 8, grid.height * grid.width)
    regression[0, :, torch.from_numpy(index)] = torch.from_numpy(reg).t()
    out = decode(dict(heatmap=logits, regression=regression.view(1, 8, grid.height, grid.width)), grid)[0]
    order = np.argsort(out["classes"])
    np.testing.assert_array_equal(out["classes"][order], [0, 1])
    np.testing.assert_allclose(out["boxes"][order], boxes, atol=1e-5)


def test_centerpoint_output_matches_its_grid():
    torch = pytest.importorskip("torch")
    import mx_sparse
    from examples.detection.centerpoint import BevGrid, CenterPoint
    pcr, vs = [0, -4, -3, 8.32, 4, 1], [0.16, 0.16, 0.16]       # 52 x 50 voxels: not multiples of 8
    grid = BevGrid(pcr, vs)
    model = CenterPoint(4, 26, 3).eval()
    idx = torch.tensor([[0, 3, 10, 7], [0, 20, 49, 51]], dtype=torch.int32)
    x = mx_sparse.SparseConvTensor(torch.rand(2, 4), idx, [26, 50, 52], 1)
    with torch.no_grad():
        out = model(x)
    assert out["heatmap"].shape == (1, 3, grid.height, grid.width)
    assert out["regression"].shape == (1, 8, grid.height, grid.width)
