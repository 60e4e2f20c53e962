"""The straightforward rotated BEV IoU -- one pair of boxes at a time, Sutherland-Hodgman
over Python lists, shoelace area -- that examples/detection/bev_iou.py computed before it
clipped all pairs at once; the reference its vectorised form is checked against."""
import math

import numpy as np


def corners(box):
    """Footprint corners [4, 2] of one box (x, y, z, l, w, h, yaw), counter-clockwise."""
    x, y, l, w, yaw = box[0], box[1], box[3], box[4], box[6]
    c, s = math.cos(yaw), math.sin(yaw)
    return [(x + c * dx - s * dy, y + s * dx + c * dy)
            for dx, dy in ((l / 2, w / 2), (-l / 2, w / 2), (-l / 2, -w / 2), (l / 2, -w / 2))]


def clip(subject, clipper):
    out = list(subject)
    for i in range(len(clipper)):
        (ax, ay), (bx, by) = clipper[i], clipper[(i + 1) % len(clipper)]
        inp, out = out, []
        for j in range(len(inp)):
            (px, py), (qx, qy) = inp[j], inp[(j + 1) % len(inp)]
            sp = (bx - ax) * (py - ay) - (by - ay) * (px - ax)
            sq = (bx - ax) * (qy - ay) - (by - ay) * (qx - ax)
            if sp >= 0:
                out.append((px, py))
            if (sp >= 0) != (sq >= 0):
                t = sp / (sp - sq)
                out.append((px + (qx - px) * t, py + (qy - py) * t))
    return out


def area(poly):
    if len(poly) < 3:
        return 0.0
    return 0.5 * abs(sum(poly[k][0] * poly[(k + 1) % len(poly)][1] - poly[k][1] * poly[(k + 1) % len(poly)][0]
                         for k in range(len(poly))))


def iou_matrix(boxes_a, boxes_b):
    out = np.zeros((len(boxes_a), len(boxes_b)))
    for i, a in enumerate(boxes_a):
        for j, b in enumerate(boxes_b):
            inter = area(clip(corners(a), corners(b)))
            out[i, j] = inter / (a[3] * a[4] + b[3] * b[4] - inter)
    return out
