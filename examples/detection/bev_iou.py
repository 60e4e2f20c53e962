"""Rotated bird's-eye-view IoU of 3-D boxes (x, y, z, l, w, h, yaw), by clipping one
footprint rectangle against the other (Sutherland-Hodgman; both are convex) and
measuring the intersection polygon with the shoelace formula."""
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


def _clip(subject, clipper):
    """Part of convex polygon ``subject`` inside convex counter-clockwise ``clipper``."""
    out = list(subject)
    for i in range(len(clipper)):
        a, b = clipper[i], clipper[(i + 1) % len(clipper)]
        edge = b - a
        inp, out = out, []
        if not inp:
            break
        # side > 0: left of the edge, i.e. inside a counter-clockwise polygon.
        side = [edge[0] * (p[1] - a[1]) - edge[1] * (p[0] - a[0]) for p in inp]
        for j in range(len(inp)):
            p, q, sp, sq = inp[j], inp[(j + 1) % len(inp)], side[j], side[(j + 1) % len(inp)]
            if sp >= 0:
                out.append(p)
            if (sp >= 0) != (sq >= 0):
                out.append(p + (q - p) * (sp / (sp - sq)))
    return np.asarray(out).reshape(-1, 2)


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
    for i, j in zip(*np.nonzero(dist < ra[:, None] + rb[None, :])):
        inter = polygon_area(_clip(ca[i], cb[j]))
        iou[i, j] = inter / (area_a[i] + area_b[j] - inter)
    return iou
