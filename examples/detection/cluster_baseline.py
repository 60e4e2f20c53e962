"""A non-learned detector to measure a trained one against: ground removal, bird's-eye
clusters of the remaining points, and at each cluster the class-mean box.

Steps per frame: fit the ground plane to the lowest point of each 4 m cell (least
squares, refitted once without outliers); keep points 0.25-3 m above it; mark the
occupied cells of a fine BEV grid and join 8-connected cells into clusters; for each
cluster of at least ``min_points`` points take the principal axis of its points as the
yaw, the centre of their extent along and across it as the box centre, and the
training set's mean (l, w, h) of the class whose mean footprint is closest to the
cluster's extent as the box size. The score falls with that footprint mismatch, so walls
and hedges rank below car-, person- and bicycle-sized clusters.
"""
import numpy as np


def fit_ground(points, cell=4.0):
    """(a, b, c) of the plane z = a x + b y + c through the lowest point of each cell."""
    ij = np.floor(points[:, :2] / cell).astype(np.int64)
    key = ij[:, 0] * 1_000_003 + ij[:, 1]
    order = np.lexsort((points[:, 2], key))
    first = order[np.concatenate([[True], np.diff(key[order]) != 0])]
    low = points[first, :3].astype(np.float64)
    keep = np.ones(len(low), bool)
    for _ in range(2):                                    # refit without the cells' outliers
        a = np.c_[low[keep, :2], np.ones(keep.sum())]
        coef = np.linalg.lstsq(a, low[keep, 2], rcond=None)[0]
        keep = np.abs(np.c_[low[:, :2], np.ones(len(low))] @ coef - low[:, 2]) < 0.3
        if keep.sum() < 3:
            break
    return coef


def label_components(occupied):
    """8-connected component label per cell of a 2-D bool grid (-1 where empty)."""
    big = occupied.size
    labels = np.where(occupied, np.arange(big).reshape(occupied.shape), big)
    while True:
        padded = np.pad(labels, 1, constant_values=big)
        h, w = labels.shape
        best = labels
        for dy in (0, 1, 2):
            for dx in (0, 1, 2):
                best = np.minimum(best, padded[dy:dy + h, dx:dx + w])
        best = np.where(occupied, best, big)
        if np.array_equal(best, labels):
            return np.where(occupied, labels, -1)
        labels = best


class ClusterPriorBaseline:
    """Class-mean boxes at point clusters (see the module docstring).

    Args:
        class_sizes: [num_classes, 3] mean (l, w, h) per class (from the training labels).
        point_cloud_range: [x0, y0, z0, x1, y1, z1]; points outside are not used.
        cell: BEV grid cell of the clustering, metres.
        min_points: smallest cluster that yields a box.
    """

    def __init__(self, class_sizes, point_cloud_range, cell=0.25, min_points=5):
        self.class_sizes = np.asarray(class_sizes, np.float64).reshape(-1, 3)
        self.pcr = np.asarray(point_cloud_range, np.float64)
        self.cell, self.min_points = cell, min_points

    def __call__(self, points):
        """dict(boxes [N, 7], scores [N], classes [N]) of one frame's points [P, >=3]."""
        p = np.asarray(points, np.float64)[:, :3]
        p = p[np.all((p >= self.pcr[:3]) & (p < self.pcr[3:]), 1)]
        empty = dict(boxes=np.zeros((0, 7)), scores=np.zeros(0), classes=np.zeros(0, np.int64))
        if len(p) < 3:
            return empty
        a, b, c = fit_ground(p)
        height = p[:, 2] - (a * p[:, 0] + b * p[:, 1] + c)
        p = p[(height > 0.25) & (height < 3.0)]
        ij = np.floor((p[:, :2] - self.pcr[:2]) / self.cell).astype(np.int64)
        shape = tuple(np.ceil((self.pcr[3:5] - self.pcr[:2]) / self.cell).astype(int))
        occupied = np.zeros(shape, bool)
        occupied[ij[:, 0], ij[:, 1]] = True
        cluster = label_components(occupied)[ij[:, 0], ij[:, 1]]
        boxes, scores, classes = [], [], []
        for k in np.unique(cluster):
            q = p[cluster == k]
            if len(q) < self.min_points:
                continue
            box, score, cls = self._box(q, a, b, c)
            boxes.append(box), scores.append(score), classes.append(cls)
        if not boxes:
            return empty
        return dict(boxes=np.asarray(boxes), scores=np.asarray(scores), classes=np.asarray(classes, np.int64))

    def _box(self, q, a, b, c):
        xy = q[:, :2] - q[:, :2].mean(0)
        _, vecs = np.linalg.eigh(xy.T @ xy)
        axis = vecs[:, -1]                                      # principal direction
        yaw = np.arctan2(axis[1], axis[0])
        along, across = xy @ axis, xy @ np.array([-axis[1], axis[0]])
        extent = np.array([np.ptp(along), np.ptp(across)])
        mismatch = np.abs(self.class_sizes[:, :2] - extent).sum(1)
        cls = int(np.argmin(mismatch))
        mid = q[:, :2].mean(0) + axis * (along.max() + along.min()) / 2 \
            + np.array([-axis[1], axis[0]]) * (across.max() + across.min()) / 2
        l, w, h = self.class_sizes[cls]
        ground = a * mid[0] + b * mid[1] + c
        return np.array([mid[0], mid[1], ground + h / 2, l, w, h, yaw]), float(np.exp(-mismatch[cls])), cls
