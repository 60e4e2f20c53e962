"""Average precision and recall of 3-D detections, matched by rotated BEV IoU.

Matching follows PASCAL VOC / KITTI: detections of one class, in descending score
over all frames, each take the unmatched ground-truth box of its frame with the
highest IoU; at or above the threshold it is a true positive, otherwise a false
positive (a second detection of a matched box too). Boxes marked ``ignore`` (too few
points to be seen, like KITTI's DontCare) neither count as ground truth nor make a
detection on them false. AP is the all-point interpolated area under the
precision-recall curve (VOC 2010+): precision made monotone from the right, summed
over each recall step.
"""
import numpy as np

from .bev_iou import bev_iou


def average_precision(is_tp, num_gt: int) -> float:
    """AP of detections already sorted by descending score; ``is_tp`` [N] bool.

    nan when there is no ground truth (the class is then left out of a mean)."""
    if num_gt <= 0:
        return float("nan")
    tp = np.asarray(is_tp, bool)
    if not len(tp):
        return 0.0
    tp_cum = np.cumsum(tp)
    recall = tp_cum / num_gt
    precision = tp_cum / np.arange(1, len(tp) + 1)
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    steps = np.diff(np.concatenate([[0.0], recall]))
    return float(np.sum(steps * envelope))


def match_class(predictions, ground_truths, class_id: int, threshold: float):
    """(is_tp in descending score order, number of counted ground-truth boxes) of one class."""
    dets, frames, num_gt = [], [], 0
    for f, (pred, gt) in enumerate(zip(predictions, ground_truths)):
        pk = np.asarray(pred["classes"]) == class_id
        gk = np.asarray(gt["classes"]) == class_id
        ignore = np.asarray(gt["ignore"], bool)[gk]
        num_gt += int(np.sum(~ignore))
        iou = bev_iou(np.asarray(pred["boxes"]).reshape(-1, 7)[pk], np.asarray(gt["boxes"]).reshape(-1, 7)[gk])
        frames.append(dict(iou=iou, ignore=ignore, taken=np.zeros(len(ignore), bool)))
        dets += [(float(s), f, row) for row, s in enumerate(np.asarray(pred["scores"])[pk])]
    dets.sort(key=lambda d: -d[0])                   # stable: ties keep frame order
    is_tp = []
    for _, f, row in dets:
        fr = frames[f]
        iou = fr["iou"][row]
        free = np.where(fr["taken"] | fr["ignore"], -1.0, iou)
        best = int(np.argmax(free)) if len(free) else -1
        if best >= 0 and free[best] >= threshold:
            fr["taken"][best] = True
            is_tp.append(True)
        elif np.any(iou[fr["ignore"]] >= threshold):
            continue                                   # on an ignored box: not counted at all
        else:
            is_tp.append(False)
    return np.asarray(is_tp, bool), num_gt


def evaluate_detections(predictions, ground_truths, thresholds, class_names):
    """AP and recall per class and IoU threshold, plus the mean AP over classes.

    Args:
        predictions: per frame, dict(boxes [N, 7], scores [N], classes [N]).
        ground_truths: per frame, dict(boxes [K, 7], classes [K], ignore [K] bool).
        thresholds: per class name, a list of IoU thresholds.
        class_names: the class names in class-id order.
    Returns:
        ``{"per_class": {name: {thr: {"ap", "recall", "num_gt", "num_det"}}}, "mean_ap": {level: value}}``
        where ``level`` is the index into each class's threshold list (0 = its first).
    """
    if len(predictions) != len(ground_truths):
        raise ValueError(f"evaluate_detections: {len(predictions)} prediction frames but "
                         f"{len(ground_truths)} ground-truth frames")
    per_class, levels = {}, {}
    for c, name in enumerate(class_names):
        per_class[name] = {}
        for level, thr in enumerate(thresholds[name]):
            is_tp, num_gt = match_class(predictions, ground_truths, c, thr)
            ap = average_precision(is_tp, num_gt)
            recall = float(is_tp.sum() / num_gt) if num_gt else float("nan")
            per_class[name][thr] = dict(ap=ap, recall=recall, num_gt=num_gt, num_det=int(len(is_tp)))
            if not np.isnan(ap):
                levels.setdefault(level, []).append(ap)
    return dict(per_class=per_class, mean_ap={lv: float(np.mean(v)) for lv, v in levels.items()})
