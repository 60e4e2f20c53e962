"""KITTI object-detection files: velodyne ``.bin`` frames, ``label_2`` boxes and
``calib`` matrices, turned into lidar-frame boxes (x, y, z, l, w, h, yaw) with z at
the box centre.

``label_2`` boxes are in the rectified camera frame (location = bottom centre,
dimensions h w l, rotation_y about the camera's y axis); they need the frame's calib
file (``R0_rect`` and ``Tr_velo_to_cam``) to reach the lidar frame. Label files that are
already in the lidar frame are accepted in a short form, one box per line:
``Class x y z l w h yaw`` (z = box centre, yaw counter-clockwise from +x).
Classes other than Car, Pedestrian and Cyclist (Van, Truck, DontCare, ...) are skipped.
"""
import os

import numpy as np

CLASSES = ("Car", "Pedestrian", "Cyclist")


def read_kitti_frame(path: str) -> np.ndarray:
    """A KITTI velodyne frame: float32 (x, y, z, intensity) per point."""
    size = os.path.getsize(path)
    if size == 0 or size % 16:
        raise ValueError(f"{path} holds {size} bytes; a KITTI .bin frame holds 16 per point "
                         f"(float32 x, y, z, intensity)")
    return np.fromfile(path, dtype=np.float32).reshape(-1, 4)


def parse_kitti_calib(text: str) -> np.ndarray:
    """The 4x4 matrix taking lidar points to the rectified camera frame (R0_rect @ Tr_velo_to_cam)."""
    rows = {}
    for line in text.splitlines():
        if ":" in line:
            key, values = line.split(":", 1)
            rows[key.strip()] = np.array(values.split(), np.float64)
    for key, n in (("R0_rect", 9), ("Tr_velo_to_cam", 12)):
        if key not in rows or len(rows[key]) != n:
            raise ValueError(f"calib: expected a '{key}:' line with {n} numbers; found "
                             f"{len(rows[key]) if key in rows else 'none'}")
    r0, tr = np.eye(4), np.eye(4)
    r0[:3, :3] = rows["R0_rect"].reshape(3, 3)
    tr[:3, :4] = rows["Tr_velo_to_cam"].reshape(3, 4)
    return r0 @ tr


def parse_kitti_labels(text: str, lidar_to_camera=None):
    """(boxes float32 [K, 7] in the lidar frame, class ids int64 [K]) of one label file.

    15-column ``label_2`` lines need ``lidar_to_camera`` (from :func:`parse_kitti_calib`);
    8-column lines (``Class x y z l w h yaw``) are taken as lidar-frame boxes as they are.
    """
    boxes, classes = [], []
    camera_to_lidar = None if lidar_to_camera is None else np.linalg.inv(lidar_to_camera)
    for n, line in enumerate(text.splitlines(), 1):
        f = line.split()
        if not f:
            continue
        if len(f) not in (8, 15, 16):
            raise ValueError(f"label line {n}: expected 15 columns (KITTI label_2, 16 with a score) or 8 "
                             f"(Class x y z l w h yaw in the lidar frame); got {len(f)}: {line!r}")
        if f[0] not in CLASSES:
            continue
        v = np.array(f[1:], np.float64)
        if len(f) == 8:
            box = v[:7]
        else:
            if camera_to_lidar is None:
                raise ValueError(f"label line {n} is a camera-frame KITTI label_2 box; its calib file is "
                                 f"needed to place it in the lidar frame (--calib DIR)")
            h, w, l, x, y, z, ry = v[7:14]
            # Camera y points down and the location is the bottom centre: lift by h/2.
            center = camera_to_lidar @ np.array([x, y - h / 2, z, 1.0])
            yaw = -ry - np.pi / 2                       # camera ry turns about -z of the lidar
            box = np.array([*center[:3], l, w, h, (yaw + np.pi) % (2 * np.pi) - np.pi])
        boxes.append(box)
        classes.append(CLASSES.index(f[0]))
    return np.asarray(boxes, np.float32).reshape(-1, 7), np.asarray(classes, np.int64)
