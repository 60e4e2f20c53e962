"""Rotated bird's-eye-view IoU of 3-D boxes (x, y, z, l, w, h, yaw), by clipping one
footprint rectangle against the other (Sutherland-Hodgman; both are convex) and
measuring the intersection polygon with the shoelace formula -- for all box pairs whose
circumscribed circles meet at once, in numpy arrays (one pair at a time in Python made the
IoU most of the metric's cost)."""
import numpy as np


def bev_corners(boxes) -> np.ndarray:
    """Footprint corners [N, 4, 2] of boxes [N, >=7], counter-clockwise."""
    b = np.asarray(boxes, np.float64).reshape(-1, np.shape(boxes)[-1])
    half_l, half_w = b[:, 3] / 2, b[:, 4] / 2
    local = np.stack([np.stack([half_l, half_w], -1), np.stack([-half_l, half_w], -1),
                      np.stack([-half_l, -half_w], -1), np.stack([half_l, -half_w], -1)], 1)
    c, s = np.cos(b[:, 6]), np.sin(b[:, 6])
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], 1)       # [N, 2, 2]
    return np.einsum("nij,nkj->nki", rot, local) + b[:, None, :2]


def polygon_area(poly) -> float:
    """Area of a simple polygon [K, 2] (shoelace); 0 for fewer than 3 vertices."""
    p = np.asarray(poly, np.float64)
    if len(p) < 3:
        return 0.0
    x, y = p[:, 0], p[:, 1]
    return 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def clip_convex(subject, counts, clipper):
    """Sutherland-Hodgman on P pairs at once: the part of each convex polygon ``subject``
    [P, W, 2] (its first ``counts`` [P] vertices) inside the convex counter-clockwise
    ``clipper`` [P, K, 2]. Returns (vertices [P, W', 2], counts [P]). Per pair the same float
    operations, in the same order, as clipping one pair at a time."""
    subject, counts = np.asarray(subject, np.float64), np.asarray(counts, np.int64)
    for i in range(clipper.shape[1]):
        subject, counts = _clip_by_edge(subject, counts, clipper[:, i], clipper[:, (i + 1) % clipper.shape[1]])
    return subject, counts


def _clip_by_edge(subject, counts, a, b):
    """The part of each polygon left of its edge a -> b: every vertex emits itself when
    inside and the edge crossing when it and the next vertex lie on different sides; the
    kept ones are packed to the front of each row in order."""
    pairs, width = np.arange(len(subject)), subject.shape[1]
    valid = np.arange(width) < counts[:, None]
    edge = b - a
    # side > 0: left of the edge, i.e. inside a counter-clockwise polygon.
    side = edge[:, None, 0] * (subject[..., 1] - a[:, None, 1]) - edge[:, None, 1] * (subject[..., 0] - a[:, None, 0])
    following = (np.arange(width) + 1) % np.maximum(counts, 1)[:, None]
    q, side_q = subject[pairs[:, None], following], side[pairs[:, None], following]
    with np.errstate(divide="ignore", invalid="ignore"):      # rows without a crossing are not kept
        crossing = subject + (q - subject) * (side / (side - side_q))[..., None]
    keep = np.stack([valid & (side >= 0), valid & ((side >= 0) != (side_q >= 0))], 2).reshape(len(pairs), 2 * width)
    candidates = np.stack([subject, crossing], 2).reshape(len(pairs), 2 * width, 2)
    counts = keep.sum(1)
    rows, cols = np.nonzero(keep)
    out = np.zeros((len(pairs), max(int(counts.max(initial=0)), 1), 2))
    out[rows, (np.cumsum(keep, 1) - 1)[rows, cols]] = candidates[rows, cols]
    return out, counts


def polygon_areas(vertices, counts) -> np.ndarray:
    """Areas [P] of simple polygons given as their first ``counts`` [P] vertices of
    ``vertices`` [P, W, 2] (shoelace); 0 for fewer than 3 vertices."""
    width = vertices.shape[1]
    valid = np.arange(width) < counts[:, None]
    following = (np.arange(width) + 1) % np.maximum(counts, 1)[:, None]
    x = np.where(valid, vertices[..., 0], 0.0)
    y = np.where(valid, vertices[..., 1], 0.0)
    rows = np.arange(len(vertices))[:, None]
    twice = np.sum(x * y[rows, following], 1) - np.sum(y * x[rows, following], 1)
    return np.where(counts >= 3, 0.5 * np.abs(twice), 0.0)


def bev_iou(boxes_a, boxes_b) -> np.ndarray:
    """Rotated BEV IoU matrix [N, M] of boxes [N, >=7] and [M, >=7] (x, y, z, l, w, h, yaw)."""
    a = np.asarray(boxes_a, np.float64).reshape(-1, np.shape(boxes_a)[-1] if np.size(boxes_a) else 7)
    b = np.asarray(boxes_b, np.float64).reshape(-1, np.shape(boxes_b)[-1] if np.size(boxes_b) else 7)
    for name, x in (("boxes_a", a), ("boxes_b", b)):
        if x.shape[1] < 7 or (len(x) and np.any(x[:, 3:5] <= 0)):
            raise ValueError(f"bev_iou: {name} must be [N, >=7] boxes (x, y, z, l, w, h, yaw) with l, w > 0; "
                             f"got shape {list(x.shape)}")
    iou = np.zeros((len(a), len(b)))
    if not len(a) or not len(b):
        return iou
    ca, cb = bev_corners(a), bev_corners(b)
    area_a, area_b = a[:, 3] * a[:, 4], b[:, 3] * b[:, 4]
    # Footprints whose circumscribed circles are apart cannot overlap: skip the clipping.
    ra, rb = np.hypot(a[:, 3], a[:, 4]) / 2, np.hypot(b[:, 3], b[:, 4]) / 2
    dist = np.hypot(a[:, None, 0] - b[None, :, 0], a[:, None, 1] - b[None, :, 1])
    i, j = np.nonzero(dist < ra[:, None] + rb[None, :])
    inter = polygon_areas(*clip_convex(ca[i], np.full(len(i), 4), cb[j]))
    iou[i, j] = inter / (area_a[i] + area_b[j] - inter)
    return iou
