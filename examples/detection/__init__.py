"""What the main job needs around the library's backbone (a demo beside the package, not in
the wheel): the CenterPoint head (:mod:`.centerpoint`), rotated bird's-eye-view IoU, average
precision, KITTI file reading, a non-learned baseline detector, BEV pictures and atomic
checkpoint writes."""
from .average_precision import average_precision, evaluate_detections
from .bev_iou import bev_corners, bev_iou, polygon_area
from .cluster_baseline import ClusterPriorBaseline
from .kitti import parse_kitti_calib, parse_kitti_labels, read_kitti_frame

__all__ = ["bev_iou", "bev_corners", "polygon_area", "average_precision", "evaluate_detections",
           "ClusterPriorBaseline", "parse_kitti_labels", "parse_kitti_calib", "read_kitti_frame"]
