"""Seeded, deterministic LiDAR-like scenes for exercising sparse voxel backbones.

Uniformly random voxels are a poor stand-in for LiDAR data: real voxel sets are
thin 2-D surfaces (ground, facades, car bodies), so each active voxel has several
active neighbours and the sparse convolution rulebooks look very different.
This module builds a small street scene out of analytic primitives, ray-casts a
spinning multi-beam sensor against it and voxelizes the returns the same way
SECOND / CenterPoint do.

Coordinate frame of the returned points: sensor frame of the *latest* sweep
(x forward, y left, z up, origin at the LiDAR), so the ground sits at about
``-sensor_height`` -- the same convention as KITTI velodyne / nuScenes LIDAR_TOP.

:func:`generate_labeled_frame` builds the same street with pedestrians and cyclists
added and returns the points together with one 3-D box label per car, pedestrian and
cyclist (KITTI's three detection classes), for training and evaluating detectors.

Only numpy is used for generation; torch is touched only in :func:`make_batch`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

EPS = 1e-6

# Sensor + voxelization presets. ``dropout`` is the fraction of rays lost to
# glass, dark paint and grazing incidence; the noise levels are 1-sigma values
# close to the sensors' datasheets. ``hfov_deg=90`` on kitti mimics the
# camera-FOV crop used by KITTI detectors (about 20k instead of 35k voxels).
PRESETS = {
    "kitti": dict(
        num_beams=64, fov_up_deg=2.0, fov_down_deg=-24.8,
        azimuth_steps=1800, hfov_deg=360.0, sensor_height=1.73,
        min_range=2.0, max_range=90.0, range_noise=0.02,
        intensity_noise=0.03, ground_roughness=0.02, dropout=0.08,
        num_sweeps=1, sweep_dt=0.1, ego_speed=0.0, time_lag=False,
        point_cloud_range=[0.0, -40.0, -3.0, 70.4, 40.0, 1.0],
        voxel_size=[0.05, 0.05, 0.1],
    ),
    "nuscenes": dict(
        num_beams=32, fov_up_deg=10.0, fov_down_deg=-30.0,
        azimuth_steps=1084, hfov_deg=360.0, sensor_height=1.84,
        min_range=1.0, max_range=80.0, range_noise=0.012,
        intensity_noise=0.03, ground_roughness=0.02, dropout=0.08,
        num_sweeps=10, sweep_dt=0.05, ego_speed=8.0, time_lag=True,
        point_cloud_range=[-51.2, -51.2, -5.0, 51.2, 51.2, 3.0],
        voxel_size=[0.1, 0.1, 0.2],
    ),
}

# Base reflectivity per surface type; each object gets a random multiplier so
# that intensity carries some (weak) object identity, as in real data.
REFLECTIVITY = dict(ground=0.12, car=0.35, van=0.40, building=0.22,
                    wall=0.30, pole=0.55, trunk=0.18, foliage=0.08,
                    person=0.25, head=0.15, bicycle=0.45)

# Detection classes of the box labels, in class-id order (KITTI's three).
CLASSES = ("Car", "Pedestrian", "Cyclist")

SCENE_HALF_LENGTH = 110.0   # road extent along u, beyond every preset's range


# --------------------------------------------------------------------------
# Scene description
# --------------------------------------------------------------------------
@dataclass
class Ground:
    """Plane z = gx * x + gy * y (z = 0 under the current sensor)."""
    gx: float
    gy: float
    reflectivity: float

    def height(self, x, y):
        return self.gx * np.asarray(x) + self.gy * np.asarray(y)


@dataclass
class Scene:
    """All primitives as stacked arrays so ray casting is vectorised per kind.

    boxes:       center [K,3], half [K,3], yaw [K]
    cylinders:   center_xy [K,2], radius [K], z_range [K,2]  (vertical, no caps)
    ellipsoids:  center [K,3], radii [K,3]                   (axis-aligned)
    each kind also carries a reflectivity [K] and an owner [K]: the row of
    ``labels`` the primitive belongs to, -1 for unlabelled scenery.
    labels:      [L,8] (x, y, z, l, w, h, yaw, class id); z is the box centre,
                 l runs along the yaw direction.
    """
    ground: Ground
    boxes: dict
    cylinders: dict
    ellipsoids: dict
    labels: np.ndarray = None


class _SceneBuilder:
    """Collects primitives as rows, then stacks them into a :class:`Scene`."""

    def __init__(self, ground, rng):
        self.ground, self.rng = ground, rng
        self.boxes, self.cylinders, self.ellipsoids = [], [], []
        self.labels = []
        # Primitives added now belong to this label row (-1: scenery).
        self.owner = -1

    def _refl(self, kind):
        return REFLECTIVITY[kind] * self.rng.uniform(0.7, 1.3)

    def box_on_ground(self, x, y, length, width, height, yaw, kind, lift=0.0):
        z = self.ground.height(x, y) + lift + height / 2
        self.boxes.append([x, y, z, length / 2, width / 2, height / 2, yaw,
                           self._refl(kind), self.owner])

    def cylinder_on_ground(self, x, y, radius, height, kind):
        z0 = self.ground.height(x, y)
        self.cylinders.append([x, y, radius, z0, z0 + height, self._refl(kind), self.owner])

    def ellipsoid(self, x, y, z, rx, ry, rz, kind):
        self.ellipsoids.append([x, y, z, rx, ry, rz, self._refl(kind), self.owner])

    def begin_object(self):
        """The primitives added from now until :meth:`end_object` are parts of one
        labelled object. Draws no random numbers, so labelling never changes a scene."""
        self.owner = len(self.labels)

    def end_object(self, x, y, length, width, height, yaw, class_name):
        """Close the object with its label: a box standing on the ground at (x, y)."""
        z = self.ground.height(x, y) + height / 2
        self.labels.append([x, y, z, length, width, height, yaw, CLASSES.index(class_name)])
        self.owner = -1

    def build(self):
        b = np.asarray(self.boxes, np.float64).reshape(-1, 9)
        c = np.asarray(self.cylinders, np.float64).reshape(-1, 7)
        e = np.asarray(self.ellipsoids, np.float64).reshape(-1, 8)
        return Scene(
            ground=self.ground,
            boxes=dict(center=b[:, 0:3], half=b[:, 3:6], yaw=b[:, 6], refl=b[:, 7],
                       owner=b[:, 8].astype(np.int64)),
            cylinders=dict(center_xy=c[:, 0:2], radius=c[:, 2], z_range=c[:, 3:5],
                           refl=c[:, 5], owner=c[:, 6].astype(np.int64)),
            ellipsoids=dict(center=e[:, 0:3], radii=e[:, 3:6], refl=e[:, 6],
                            owner=e[:, 7].astype(np.int64)),
            labels=np.asarray(self.labels, np.float64).reshape(-1, 8),
        )


@dataclass
class _Road:
    """Straight road; (u, v) = (along, lateral) road coordinates."""
    yaw: float
    half_width: float
    sidewalk: float

    def to_world(self, u, v):
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        return u * c - v * s, u * s + v * c


def _walk_along(rng, gap_range, start=-SCENE_HALF_LENGTH, stop=SCENE_HALF_LENGTH):
    """Positions along the road separated by random gaps (for rows of objects)."""
    u = start + rng.uniform(0, gap_range[1])
    out = []
    while u < stop:
        out.append(u)
        u += rng.uniform(*gap_range)
    return out


def _add_vehicle(sb, rng, road, u, v):
    """A car is a body box plus a cabin box; a van is one tall box. Both are labelled
    Car (the ground-to-roof box around the body), as KITTI's Car covers sedans to MPVs."""
    yaw = road.yaw + (np.pi if rng.random() < 0.5 else 0.0) + rng.normal(0, 0.05)
    x, y = road.to_world(u, v)
    if rng.random() < 0.2:
        length, width, height = rng.uniform(4.8, 5.6), rng.uniform(1.9, 2.1), rng.uniform(2.0, 2.5)
        sb.begin_object()
        sb.box_on_ground(x, y, length, width, height, yaw, "van", lift=0.15)
        sb.end_object(x, y, length, width, height + 0.15, yaw, "Car")
        return
    length, width, body = rng.uniform(3.9, 4.8), rng.uniform(1.7, 1.9), rng.uniform(0.75, 0.95)
    sb.begin_object()
    sb.box_on_ground(x, y, length, width, body, yaw, "car", lift=0.2)
    # Cabin sits slightly behind the centre, on top of the body.
    back = -0.1 * length
    cx, cy = x + back * np.cos(yaw), y + back * np.sin(yaw)
    cabin = rng.uniform(0.5, 0.65)
    sb.box_on_ground(cx, cy, 0.55 * length, 0.92 * width, cabin,
                     yaw, "car", lift=0.2 + body)
    sb.end_object(x, y, length, width, 0.2 + body + cabin, yaw, "Car")


def _place_vehicles(sb, rng, road):
    # Parked rows along both kerbs, with empty slots.
    for side in (-1, 1):
        for u in _walk_along(rng, (5.5, 8.0)):
            if rng.random() < 0.65:
                _add_vehicle(sb, rng, road, u, side * (road.half_width - 1.1))
    # Moving traffic in the lanes; keep the ego lane clear near the sensor.
    for lane_v in (-3.5, 0.0, 3.5):
        for u in _walk_along(rng, (12.0, 35.0)):
            if abs(u) < 12.0 and abs(lane_v) < 2.0:
                continue
            _add_vehicle(sb, rng, road, u, lane_v + rng.normal(0, 0.2))


def _place_buildings(sb, rng, road):
    """Blocks of buildings behind the sidewalk; gaps get fences/walls."""
    for side in (-1, 1):
        u = -SCENE_HALF_LENGTH
        front = road.half_width + road.sidewalk
        while u < SCENE_HALF_LENGTH:
            length, depth = rng.uniform(8, 30), rng.uniform(8, 15)
            setback = rng.uniform(0, 2.0)
            x, y = road.to_world(u + length / 2, side * (front + setback + depth / 2))
            sb.box_on_ground(x, y, length, depth, rng.uniform(5, 20), road.yaw, "building")
            u += length
            gap = rng.uniform(0, 8) if rng.random() < 0.5 else 0.0
            if gap > 1.0:
                x, y = road.to_world(u + gap / 2, side * (front + 0.2))
                sb.box_on_ground(x, y, gap, 0.3, rng.uniform(1.0, 2.2), road.yaw, "wall")
            u += gap


def _place_street_furniture(sb, rng, road):
    """Lamp/sign poles near the kerb and trees in the middle of the sidewalk."""
    for side in (-1, 1):
        for u in _walk_along(rng, (15.0, 35.0)):
            x, y = road.to_world(u, side * (road.half_width + 0.4))
            sb.cylinder_on_ground(x, y, rng.uniform(0.06, 0.15), rng.uniform(3, 8), "pole")
        for u in _walk_along(rng, (8.0, 25.0)):
            x, y = road.to_world(u, side * (road.half_width + road.sidewalk / 2))
            trunk = rng.uniform(1.8, 3.0)
            sb.cylinder_on_ground(x, y, rng.uniform(0.12, 0.3), trunk + 0.5, "trunk")
            r = rng.uniform(1.2, 2.5)
            z = sb.ground.height(x, y) + trunk + 0.8 * r
            sb.ellipsoid(x, y, z, r, r * rng.uniform(0.8, 1.2), r * rng.uniform(0.8, 1.3),
                         "foliage")


def _footprints(sb):
    """(x, y, radius) of the bounding circle of every primitive placed so far."""
    rows = [(b[0], b[1], np.hypot(b[3], b[4])) for b in sb.boxes]
    rows += [(c[0], c[1], c[2]) for c in sb.cylinders]
    rows += [(e[0], e[1], max(e[3], e[4])) for e in sb.ellipsoids]
    return np.asarray(rows, np.float64).reshape(-1, 3)


def _is_free(footprints, x, y, radius, margin=0.3):
    """True when a circle at (x, y) overlaps no placed primitive's bounding circle."""
    gap = np.hypot(footprints[:, 0] - x, footprints[:, 1] - y) - footprints[:, 2] - radius
    return bool(np.all(gap > margin))


def _add_pedestrian(sb, rng, x, y, yaw):
    """Legs, torso (boxes) and head (ellipsoid) inside a KITTI-sized Pedestrian box."""
    length, width, height = rng.uniform(0.6, 0.95), rng.uniform(0.5, 0.7), rng.uniform(1.55, 1.9)
    c, s = np.cos(yaw), np.sin(yaw)
    stride = rng.uniform(-0.15, 0.15) * length        # legs apart along the walking direction
    sb.begin_object()
    for sign in (-1, 1):
        sb.box_on_ground(x + sign * stride * c, y + sign * stride * s, 0.22, 0.2, 0.48 * height,
                         yaw, "person")
    sb.box_on_ground(x, y, 0.45 * length, 0.85 * width, 0.33 * height, yaw, "person", lift=0.48 * height)
    r = 0.1 * height / 1.75
    sb.ellipsoid(x, y, sb.ground.height(x, y) + height - r, r, r, r * 1.15, "head")
    sb.end_object(x, y, length, width, height, yaw, "Pedestrian")


def _add_cyclist(sb, rng, x, y, yaw):
    """Bicycle (a thin slab of frame and wheels) and rider inside a Cyclist box."""
    length, width, height = rng.uniform(1.6, 1.9), rng.uniform(0.5, 0.75), rng.uniform(1.6, 1.85)
    sb.begin_object()
    sb.box_on_ground(x, y, length, 0.12, 0.62 * height * rng.uniform(0.95, 1.0), yaw, "bicycle")
    sb.box_on_ground(x, y, 0.35 * length, 0.85 * width, 0.3 * height, yaw, "person", lift=0.55 * height)
    r = 0.1 * height / 1.75
    sb.ellipsoid(x, y, sb.ground.height(x, y) + height - r, r, r, r * 1.15, "head")
    sb.end_object(x, y, length, width, height, yaw, "Cyclist")


def _place_people(sb, rng, road, extent=60.0, tries=8):
    """Pedestrians on both sidewalks (some crossing the road), cyclists riding near the
    kerbs, then bins, bollards, benches and bushes on the sidewalks, each placed only
    where it overlaps nothing already there."""
    footprints = _footprints(sb)

    def put(add, u, v, yaw, radius):
        nonlocal footprints
        x, y = road.to_world(u, v)
        if not _is_free(footprints, x, y, radius):
            return False
        add(sb, rng, x, y, yaw)
        footprints = np.concatenate([footprints, [[x, y, radius]]])
        return True

    # Unlabelled street furniture of person and bicycle size first: what a detector must
    # learn to tell apart from pedestrians and cyclists (a size prior alone cannot).
    for side in (-1, 1):
        for u in _walk_along(rng, (3.0, 8.0), -extent, extent):
            kind = str(rng.choice(list(_FURNITURE)))
            for _ in range(tries):
                v = side * (road.half_width + road.sidewalk * rng.uniform(0.05, 0.95))
                if put(_FURNITURE[kind], u + rng.uniform(-1, 1), v, road.yaw + rng.normal(0, 0.1),
                       1.0 if kind == "bench" else 0.5):
                    break
    for side in (-1, 1):
        for u in _walk_along(rng, (1.0, 4.0), -extent, extent):
            for _ in range(tries):
                v = side * (road.half_width + road.sidewalk * rng.uniform(0.1, 0.9))
                along = road.yaw + (0.0 if rng.random() < 0.5 else np.pi) + rng.normal(0, 0.3)
                if put(_add_pedestrian, u + rng.uniform(-1, 1), v, along, 0.6):
                    break
        for u in _walk_along(rng, (3.0, 9.0), -extent, extent):
            for _ in range(tries):
                v = side * (road.half_width - rng.uniform(0.6, 3.0))
                along = road.yaw + (0.0 if side < 0 else np.pi) + rng.normal(0, 0.1)
                if put(_add_cyclist, u + rng.uniform(-2, 2), v, along, 1.0):
                    break
    for u in _walk_along(rng, (3.0, 10.0), -extent, extent):        # crossing the road
        v = rng.uniform(-road.half_width, road.half_width)
        put(_add_pedestrian, u, v, road.yaw + np.pi / 2 * rng.choice([-1, 1]) + rng.normal(0, 0.2), 0.6)


def _add_bin(sb, rng, x, y, yaw):
    side = rng.uniform(0.5, 0.75)
    sb.box_on_ground(x, y, side, side * rng.uniform(0.8, 1.0), rng.uniform(0.9, 1.25), yaw, "wall")


def _add_bollard(sb, rng, x, y, yaw):
    sb.cylinder_on_ground(x, y, rng.uniform(0.08, 0.2), rng.uniform(0.7, 1.1), "pole")


def _add_bench(sb, rng, x, y, yaw):
    length = rng.uniform(1.5, 2.0)
    sb.box_on_ground(x, y, length, rng.uniform(0.45, 0.6), 0.05, yaw, "wall", lift=0.42)     # seat
    c, s = np.cos(yaw + np.pi / 2), np.sin(yaw + np.pi / 2)
    sb.box_on_ground(x + 0.25 * c, y + 0.25 * s, length, 0.06, 0.45, yaw, "wall", lift=0.45)  # back


def _add_bush(sb, rng, x, y, yaw):
    r = rng.uniform(0.35, 0.8)
    sb.ellipsoid(x, y, sb.ground.height(x, y) + 0.8 * r, r, r * rng.uniform(0.7, 1.0), r * rng.uniform(0.8, 1.4),
                 "foliage")


_FURNITURE = dict(bin=_add_bin, bollard=_add_bollard, bench=_add_bench, bush=_add_bush)


def build_scene(rng: np.random.Generator, people_rng: np.random.Generator = None) -> Scene:
    """Random straight street: sloped ground, vehicles, buildings, poles, trees, and,
    when ``people_rng`` is given, pedestrians, cyclists and small street furniture drawn from that generator
    (a separate stream, so the rest of the scene is the same with or without them)."""
    ground = Ground(gx=rng.uniform(-0.02, 0.02), gy=rng.uniform(-0.02, 0.02),
                    reflectivity=REFLECTIVITY["ground"])
    # The ego drives along +x; a small road yaw keeps facades off the voxel axes.
    road = _Road(yaw=rng.normal(0, np.radians(4)), half_width=rng.uniform(6, 9),
                 sidewalk=rng.uniform(2.5, 5.0))
    sb = _SceneBuilder(ground, rng)
    _place_vehicles(sb, rng, road)
    _place_buildings(sb, rng, road)
    _place_street_furniture(sb, rng, road)
    if people_rng is not None:
        sb.rng = people_rng
        _place_people(sb, people_rng, road)
    return sb.build()


# --------------------------------------------------------------------------
# Ray / primitive intersections. All take one origin [3] and dirs [R,3] (unit)
# and return the nearest positive distance t [R,K], inf on a miss.
# --------------------------------------------------------------------------
def ray_plane(origin, dirs, normal, offset):
    """Distance along each ray to the plane {p : normal . p = offset} -> [R]."""
    normal = np.asarray(normal, np.float64)
    denom = dirs @ normal
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (offset - np.dot(origin, normal)) / denom
    return np.where(t > EPS, t, np.inf)   # nan (parallel) compares False -> inf


def ray_boxes(origin, dirs, center, half, yaw):
    """Slab test against yaw-rotated boxes, done in each box's local frame."""
    c, s = np.cos(yaw), np.sin(yaw)
    rel = np.asarray(origin, np.float64) - center                  # [K,3]
    o_local = (c * rel[:, 0] + s * rel[:, 1], -s * rel[:, 0] + c * rel[:, 1], rel[:, 2])
    dx, dy = dirs[:, 0:1], dirs[:, 1:2]
    d_local = (dx * c + dy * s, -dx * s + dy * c,
               np.broadcast_to(dirs[:, 2:3], (len(dirs), len(yaw))))
    t_near = np.full((len(dirs), len(yaw)), -np.inf)
    t_far = np.full((len(dirs), len(yaw)), np.inf)
    for o, d, h in zip(o_local, d_local, half.T):
        # Axis-parallel rays: a tiny slope avoids 0 * inf = nan and still gives
        # the right answer (huge t of equal sign when outside the slab).
        d = np.where(np.abs(d) < 1e-12, 1e-12, d)
        t1, t2 = (-h - o) / d, (h - o) / d
        t_near = np.maximum(t_near, np.minimum(t1, t2))
        t_far = np.minimum(t_far, np.maximum(t1, t2))
    hit = (t_far >= t_near) & (t_near > EPS)
    return np.where(hit, t_near, np.inf)


def _nearest_root(a, b, c):
    """Smaller root of a t^2 + b t + c = 0 (inf when there is none)."""
    disc = b * b - 4 * a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (-b - np.sqrt(np.maximum(disc, 0.0))) / (2 * a)
    return np.where((disc >= 0) & (t > EPS), t, np.inf)


def ray_cylinders(origin, dirs, center_xy, radius, z_range):
    """Vertical finite cylinders (side wall only).

    Caps are ignored: poles and trunks are either taller than the sensor or
    hidden in a crown, so a ray can practically never see their top.
    """
    rel = np.asarray(origin[:2], np.float64) - center_xy           # [K,2]
    dx, dy = dirs[:, 0:1], dirs[:, 1:2]
    a = dx * dx + dy * dy                                          # [R,1]
    b = 2 * (dx * rel[:, 0] + dy * rel[:, 1])                      # [R,K]
    c = (rel ** 2).sum(1) - radius ** 2                            # [K]
    t = _nearest_root(a, b, c)
    z = origin[2] + t * dirs[:, 2:3]
    inside = (z >= z_range[:, 0]) & (z <= z_range[:, 1])
    return np.where(inside, t, np.inf)


def ray_ellipsoids(origin, dirs, center, radii):
    """Axis-aligned ellipsoids, by scaling space so they become unit spheres."""
    o = (np.asarray(origin, np.float64) - center) / radii          # [K,3]
    d = dirs[:, None, :] / radii                                   # [R,K,3]
    a = (d * d).sum(-1)
    b = 2 * (d * o).sum(-1)
    c = (o * o).sum(-1) - 1.0
    return _nearest_root(a, b, c)


def ray_ground(origin, dirs, ground: Ground):
    """Rays against the sloped ground plane z = gx x + gy y."""
    return ray_plane(origin, dirs, (-ground.gx, -ground.gy, 1.0), 0.0)


# --------------------------------------------------------------------------
# Ray casting with azimuth culling
# --------------------------------------------------------------------------
def _wrap(angle):
    return (angle + np.pi) % (2 * np.pi) - np.pi


def _angular_extent(origin, center_xy, bound_radius):
    """Azimuth centre and half-width of each primitive's bounding circle.

    A primitive containing the origin (in xy) gets half-width pi, i.e. it is
    never culled.
    """
    rel = center_xy - np.asarray(origin[:2])
    dist = np.hypot(rel[:, 0], rel[:, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        half = np.arcsin(np.clip(bound_radius / dist, 0.0, 1.0))
    half = np.where(dist > bound_radius, half, np.pi)
    return np.arctan2(rel[:, 1], rel[:, 0]), half


def _primitive_extents(scene, origin):
    """Per kind: (azimuth centre, half-width) as seen from ``origin``."""
    b, c, e = scene.boxes, scene.cylinders, scene.ellipsoids
    return dict(
        boxes=_angular_extent(origin, b["center"][:, :2], np.hypot(b["half"][:, 0], b["half"][:, 1])),
        cylinders=_angular_extent(origin, c["center_xy"], c["radius"]),
        ellipsoids=_angular_extent(origin, e["center"][:, :2], e["radii"][:, :2].max(1)),
    )


def _chunk_azimuth(dirs):
    """Circular mean azimuth of a ray chunk and the half-width around it."""
    az = np.arctan2(dirs[:, 1], dirs[:, 0])
    mid = np.arctan2(np.sin(az).sum(), np.cos(az).sum())
    return mid, np.abs(_wrap(az - mid)).max()


def _select(prims, mask):
    return {k: v[mask] for k, v in prims.items()}


def _intersect_chunk(scene, extents, origin, dirs):
    """Distances [R,K], reflectivities [K] and owners [K] of all primitives that can be hit."""
    mid, half = _chunk_azimuth(dirs)
    cols = [ray_ground(origin, dirs, scene.ground)[:, None]]
    refl = [np.array([scene.ground.reflectivity])]
    owner = [np.array([-1])]
    casters = dict(
        boxes=lambda p: ray_boxes(origin, dirs, p["center"], p["half"], p["yaw"]),
        cylinders=lambda p: ray_cylinders(origin, dirs, p["center_xy"], p["radius"], p["z_range"]),
        ellipsoids=lambda p: ray_ellipsoids(origin, dirs, p["center"], p["radii"]),
    )
    for kind, cast in casters.items():
        az, width = extents[kind]
        visible = np.abs(_wrap(az - mid)) <= half + width
        if visible.any():
            prims = _select(getattr(scene, kind), visible)
            cols.append(cast(prims))
            refl.append(prims["refl"])
            owner.append(prims["owner"])
    return np.concatenate(cols, 1), np.concatenate(refl), np.concatenate(owner)


def cast_rays(scene: Scene, origin, dirs, chunk=2048, with_owner=False):
    """Nearest hit of every ray.

    Returns ``(t [R], reflectivity [R], is_ground [R])``; ``t`` is inf on a
    miss. With ``with_owner`` a fourth array [R] holds the label row of the hit
    primitive (-1 for scenery, ground and misses). Rays are processed in
    contiguous chunks; when the rays are ordered by azimuth (as
    :func:`beam_directions` produces) each chunk only tests the primitives
    inside its azimuth wedge, which keeps the cost near-linear.
    """
    origin = np.asarray(origin, np.float64)
    dirs = np.asarray(dirs, np.float64)
    extents = _primitive_extents(scene, origin)
    t = np.full(len(dirs), np.inf)
    refl = np.zeros(len(dirs))
    is_ground = np.zeros(len(dirs), bool)
    owner = np.full(len(dirs), -1, np.int64)
    for lo in range(0, len(dirs), chunk):
        tk, rk, ok = _intersect_chunk(scene, extents, origin, dirs[lo:lo + chunk])
        best = tk.argmin(1)
        t[lo:lo + chunk] = tk[np.arange(len(tk)), best]
        refl[lo:lo + chunk] = rk[best]
        owner[lo:lo + chunk] = np.where(np.isfinite(t[lo:lo + chunk]), ok[best], -1)
        is_ground[lo:lo + chunk] = best == 0   # column 0 is always the ground
    return (t, refl, is_ground, owner) if with_owner else (t, refl, is_ground)


# --------------------------------------------------------------------------
# Sensor
# --------------------------------------------------------------------------
def beam_directions(num_beams, fov_up_deg, fov_down_deg, azimuth_steps,
                    hfov_deg=360.0, azimuth_offset=0.0):
    """Unit ray directions [R,3], azimuth-major (all beams of one firing together).

    ``azimuth_steps`` counts steps over a full turn; ``hfov_deg`` < 360 keeps
    only the firings within +-hfov/2 of the +x axis (like a camera-FOV crop).
    """
    elev = np.radians(np.linspace(fov_up_deg, fov_down_deg, num_beams))
    az = azimuth_offset + np.arange(azimuth_steps) * (2 * np.pi / azimuth_steps)
    az = _wrap(az)
    az = np.sort(az[np.abs(az) <= np.radians(hfov_deg) / 2 + 1e-9])
    az, elev = np.meshgrid(az, elev, indexing="ij")
    ce = np.cos(elev)
    return np.stack([ce * np.cos(az), ce * np.sin(az), np.sin(elev)], -1).reshape(-1, 3)


def scan_sweep(scene, origin, cfg, rng, with_owner=False):
    """One revolution from ``origin``; returns world-frame points [M,4] (xyz, intensity)
    and, with ``with_owner``, the label row [M] each point was returned by (-1: none)."""
    dirs = beam_directions(cfg["num_beams"], cfg["fov_up_deg"], cfg["fov_down_deg"],
                           cfg["azimuth_steps"], cfg["hfov_deg"], rng.uniform(0, 2 * np.pi))
    t, refl, is_ground, owner = cast_rays(scene, origin, dirs, with_owner=True)
    # Noise is drawn for every ray (not only hits) so the stream stays aligned.
    t = t + rng.normal(0, cfg["range_noise"], len(t))
    keep = (np.isfinite(t) & (t >= cfg["min_range"]) & (t <= cfg["max_range"])
            & (rng.random(len(t)) >= cfg["dropout"]))
    xyz = origin + t[:, None] * dirs
    # Asphalt is not a perfect plane: roughen only the ground returns.
    xyz[:, 2] += is_ground * rng.normal(0, cfg["ground_roughness"], len(t))
    intensity = np.clip(refl + rng.normal(0, cfg["intensity_noise"], len(t)), 0.0, 1.0)
    points = np.concatenate([xyz, intensity[:, None]], 1)[keep]
    return (points, owner[keep]) if with_owner else points


def _resolve_config(preset, overrides):
    if preset not in PRESETS:
        raise KeyError(f"unknown preset {preset!r}; choose from {sorted(PRESETS)}")
    unknown = set(overrides) - set(PRESETS[preset])
    if unknown:
        raise TypeError(f"unknown override(s) {sorted(unknown)}")
    return {**PRESETS[preset], **overrides}


def generate_points(preset: str = "kitti", seed: int = 0, **overrides) -> np.ndarray:
    """Simulate one LiDAR frame of a random street scene.

    Args:
        preset: ``'kitti'`` (HDL-64-like, single sweep) or ``'nuscenes'``
            (HDL-32-like, ``num_sweeps`` sweeps aggregated with ego motion).
        seed: seed of the ``numpy.random.Generator``; same seed -> identical output.
        **overrides: any key of ``PRESETS[preset]`` (e.g. ``azimuth_steps``).

    Returns:
        float32 array ``[P, 4]`` (x, y, z, intensity) or ``[P, 5]`` with a
        trailing time lag in seconds when the preset has ``time_lag=True``.
        Points are in the sensor frame of the latest sweep. Nothing is cropped
        to ``point_cloud_range`` here; :func:`voxelize` does that.
    """
    cfg = _resolve_config(preset, overrides)
    rng = np.random.default_rng(seed)
    scene = build_scene(rng)
    h = cfg["sensor_height"]
    sweeps = []
    for k in range(cfg["num_sweeps"]):
        lag = k * cfg["sweep_dt"]
        # Older sweeps were taken further back along +x (ego drives forward).
        ex = -cfg["ego_speed"] * lag
        origin = np.array([ex, 0.0, float(scene.ground.height(ex, 0.0)) + h])
        pts = scan_sweep(scene, origin, cfg, rng)
        pts[:, 2] -= h                       # world -> latest sensor frame
        if cfg["time_lag"]:
            pts = np.concatenate([pts, np.full((len(pts), 1), lag)], 1)
        sweeps.append(pts)
    return np.concatenate(sweeps).astype(np.float32)


@dataclass
class LabeledFrame:
    """One generated LiDAR frame with its 3-D box labels, all in the sensor frame.

    points:      float32 [P, 4] (x, y, z, intensity)
    boxes:       float32 [K, 7] (x, y, z, l, w, h, yaw): z is the box centre, l runs
                 along yaw (counter-clockwise from +x), the KITTI-lidar/OpenPCDet box.
    classes:     int64 [K], index into :data:`CLASSES`
    num_points:  int64 [K], returns of each object in ``points``
    point_owner: int64 [P], the box row each point was returned by, -1 for scenery
    """
    points: np.ndarray
    boxes: np.ndarray
    classes: np.ndarray
    num_points: np.ndarray
    point_owner: np.ndarray


def generate_labeled_frame(preset: str = "kitti", seed: int = 0, **overrides) -> LabeledFrame:
    """A street scene with cars, pedestrians and cyclists, scanned once, with box labels.

    Deterministic by ``seed``; the street (road, vehicles, buildings, poles, trees) is
    the one :func:`generate_points` builds for the same seed, and pedestrians and
    cyclists are added from a second seeded stream. Occlusion comes from the ray
    casting: an object behind another gets fewer or no returns (see ``num_points``;
    all objects of the street are returned, filter on ``num_points`` for visible ones).
    Multi-sweep presets are scanned as one sweep (objects here do not move).
    """
    cfg = _resolve_config(preset, overrides)
    rng = np.random.default_rng(seed)
    scene = build_scene(rng, people_rng=np.random.default_rng([seed, 1]))
    h = cfg["sensor_height"]
    origin = np.array([0.0, 0.0, float(scene.ground.height(0.0, 0.0)) + h])
    points, owner = scan_sweep(scene, origin, cfg, rng, with_owner=True)
    points[:, 2] -= h                         # world -> sensor frame
    labels = scene.labels
    boxes = labels[:, :7].copy()
    boxes[:, 2] -= h
    return LabeledFrame(points=points.astype(np.float32), boxes=boxes.astype(np.float32),
                        classes=labels[:, 7].astype(np.int64),
                        num_points=np.bincount(owner[owner >= 0], minlength=len(labels)).astype(np.int64),
                        point_owner=owner)


# --------------------------------------------------------------------------
# Voxelization and statistics
# --------------------------------------------------------------------------
def grid_size(point_cloud_range, voxel_size):
    """Number of voxels along (x, y, z)."""
    pcr = np.asarray(point_cloud_range, np.float64)
    return np.round((pcr[3:] - pcr[:3]) / np.asarray(voxel_size, np.float64)).astype(np.int64)


def voxelize(points, point_cloud_range, voxel_size):
    """Mean-feature voxelization (as in SECOND's MeanVFE).

    Args:
        points: ``[P, C]`` with x, y, z first; all C columns are averaged.
        point_cloud_range: ``[x0, y0, z0, x1, y1, z1]``; points outside are dropped.
        voxel_size: ``[vx, vy, vz]``.

    Returns:
        ``features`` float32 ``[N, C]``, ``coords`` int32 ``[N, 3]`` in
        (z, y, x) order, unique and sorted lexicographically, and
        ``spatial_shape`` ``[D, H, W]`` with ``D = grid_z + 1`` (the SECOND /
        CenterPoint sparse-shape convention, e.g. [41, 1600, 1408] for KITTI).
    """
    pts = np.asarray(points, np.float64)
    lo = np.asarray(point_cloud_range[:3], np.float64)
    gx, gy, gz = grid_size(point_cloud_range, voxel_size)
    ijk = np.floor((pts[:, :3] - lo) / np.asarray(voxel_size, np.float64)).astype(np.int64)
    inside = np.all((ijk >= 0) & (ijk < [gx, gy, gz]), axis=1)
    pts, ijk = pts[inside], ijk[inside]
    # z-major packed key: sorting keys == sorting (z, y, x).
    keys = (ijk[:, 2] * gy + ijk[:, 1]) * gx + ijk[:, 0]
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    sums = np.stack([np.bincount(inverse, weights=col, minlength=len(uniq)) for col in pts.T], 1)
    features = (sums / counts[:, None]).astype(np.float32)
    coords = np.stack([uniq // (gy * gx), (uniq // gx) % gy, uniq % gx], 1).astype(np.int32)
    return features, coords, [int(gz) + 1, int(gy), int(gx)]


def mean_active_neighbors(coords_zyx) -> float:
    """Mean number of other active voxels in each active voxel's 3x3x3 block.

    ``coords_zyx`` is ``[N, 3]`` (z, y, x) or ``[N, 4]`` (batch, z, y, x);
    neighbours never cross batches. Voxels are packed into int64 keys with a
    one-voxel margin on every axis, so that +-1 offsets never wrap into a
    neighbouring row, and looked up with ``searchsorted`` (no dense volume).
    """
    c = np.asarray(coords_zyx, np.int64)
    if c.shape[1] == 3:
        c = np.concatenate([np.zeros((len(c), 1), np.int64), c], 1)
    if len(c) == 0:
        return 0.0
    dims = c[:, 1:].max(0) + 3                          # margin on both sides
    strides = np.array([dims[0] * dims[1] * dims[2], dims[1] * dims[2], dims[2], 1])
    keys = np.unique((c + [0, 1, 1, 1]) @ strides)
    total = 0
    for dz in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dz == dy == dx == 0:
                    continue
                q = keys + (dz * strides[1] + dy * strides[2] + dx)
                pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
                total += np.count_nonzero(keys[pos] == q)
    return total / len(keys)


def make_batch(preset: str = "kitti", batch_size: int = 1, seed: int = 0, device="cpu"):
    """A ready-to-use sparse batch; sample ``b`` uses seed ``seed + b``.

    Returns ``dict(features=[N,C] float32, indices=[N,4] int32 (batch,z,y,x)
    sorted, spatial_shape=[D,H,W], batch_size=int)`` with torch tensors on
    ``device``.
    """
    import torch

    cfg = PRESETS[preset]
    feats, inds, shape = [], [], None
    for b in range(batch_size):
        f, c, shape = voxelize(generate_points(preset, seed + b),
                               cfg["point_cloud_range"], cfg["voxel_size"])
        feats.append(f)
        inds.append(np.concatenate([np.full((len(c), 1), b, np.int32), c], 1))
    return dict(features=torch.from_numpy(np.concatenate(feats)).to(device),
                indices=torch.from_numpy(np.concatenate(inds)).to(device),
                spatial_shape=shape, batch_size=batch_size)


def _report(preset, seed=0):
    cfg = PRESETS[preset]
    t0 = time.perf_counter()
    pts = generate_points(preset, seed)
    t1 = time.perf_counter()
    feats, coords, shape = voxelize(pts, cfg["point_cloud_range"], cfg["voxel_size"])
    t2 = time.perf_counter()
    print(f"{preset:9s} points={len(pts):7d} voxels={len(coords):6d} C={feats.shape[1]} "
          f"shape={shape} mean_nbrs={mean_active_neighbors(coords):.2f} "
          f"gen={t1 - t0:.2f}s vox={t2 - t1:.2f}s")


if __name__ == "__main__":
    for name in PRESETS:
        _report(name)
