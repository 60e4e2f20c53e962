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
                    wall=0.30, pole=0.55, trunk=0.18, foliage=0.08)

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
    each kind also carries a reflectivity [K].
    """
    ground: Ground
    boxes: dict
    cylinders: dict
    ellipsoids: dict


class _SceneBuilder:
    """Collects primitives as rows, then stacks them into a :class:`Scene`."""

    def __init__(self, ground, rng):
        self.ground, self.rng = ground, rng
        self.boxes, self.cylinders, self.ellipsoids = [], [], []

    def _refl(self, kind):
        return REFLECTIVITY[kind] * self.rng.uniform(0.7, 1.3)

    def box_on_ground(self, x, y, length, width, height, yaw, kind, lift=0.0):
        z = self.ground.height(x, y) + lift + height / 2
        self.boxes.append([x, y, z, length / 2, width / 2, height / 2, yaw,
                           self._refl(kind)])

    def cylinder_on_ground(self, x, y, radius, height, kind):
        z0 = self.ground.height(x, y)
        self.cylinders.append([x, y, radius, z0, z0 + height, self._refl(kind)])

    def ellipsoid(self, x, y, z, rx, ry, rz, kind):
        self.ellipsoids.append([x, y, z, rx, ry, rz, self._refl(kind)])

    def build(self):
        b = np.asarray(self.boxes, np.float64).reshape(-1, 8)
        c = np.asarray(self.cylinders, np.float64).reshape(-1, 6)
        e = np.asarray(self.ellipsoids, np.float64).reshape(-1, 7)
        return Scene(
            ground=self.ground,
            boxes=dict(center=b[:, 0:3], half=b[:, 3:6], yaw=b[:, 6], refl=b[:, 7]),
            cylinders=dict(center_xy=c[:, 0:2], radius=c[:, 2], z_range=c[:, 3:5],
                           refl=c[:, 5]),
            ellipsoids=dict(center=e[:, 0:3], radii=e[:, 3:6], refl=e[:, 6]),
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
    """A car is a body box plus a cabin box; a van is one tall box."""
    yaw = road.yaw + (np.pi if rng.random() < 0.5 else 0.0) + rng.normal(0, 0.05)
    x, y = road.to_world(u, v)
    if rng.random() < 0.2:
        sb.box_on_ground(x, y, rng.uniform(4.8, 5.6), rng.uniform(1.9, 2.1),
                         rng.uniform(2.0, 2.5), yaw, "van", lift=0.15)
        return
    length, width, body = rng.uniform(3.9, 4.8), rng.uniform(1.7, 1.9), rng.uniform(0.75, 0.95)
    sb.box_on_ground(x, y, length, width, body, yaw, "car", lift=0.2)
    # Cabin sits slightly behind the centre, on top of the body.
    back = -0.1 * length
    cx, cy = x + back * np.cos(yaw), y + back * np.sin(yaw)
    sb.box_on_ground(cx, cy, 0.55 * length, 0.92 * width, rng.uniform(0.5, 0.65),
                     yaw, "car", lift=0.2 + body)


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


def build_scene(rng: np.random.Generator) -> Scene:
    """Random straight street: sloped ground, vehicles, buildings, poles, trees."""
    ground = Ground(gx=rng.uniform(-0.02, 0.02), gy=rng.uniform(-0.02, 0.02),
                    reflectivity=REFLECTIVITY["ground"])
    # The ego drives along +x; a small road yaw keeps facades off the voxel axes.
    road = _Road(yaw=rng.normal(0, np.radians(4)), half_width=rng.uniform(6, 9),
                 sidewalk=rng.uniform(2.5, 5.0))
    sb = _SceneBuilder(ground, rng)
    _place_vehicles(sb, rng, road)
    _place_buildings(sb, rng, road)
    _place_street_furniture(sb, rng, road)
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
    """Distances [R,K] and reflectivities [K] of all primitives that can be hit."""
    mid, half = _chunk_azimuth(dirs)
    cols = [ray_ground(origin, dirs, scene.ground)[:, None]]
    refl = [np.array([scene.ground.reflectivity])]
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
    return np.concatenate(cols, 1), np.concatenate(refl)


def cast_rays(scene: Scene, origin, dirs, chunk=2048):
    """Nearest hit of every ray.

    Returns ``(t [R], reflectivity [R], is_ground [R])``; ``t`` is inf on a
    miss. Rays are processed in contiguous chunks; when the rays are ordered by
    azimuth (as :func:`beam_directions` produces) each chunk only tests the
    primitives inside its azimuth wedge, which keeps the cost near-linear.
    """
    origin = np.asarray(origin, np.float64)
    dirs = np.asarray(dirs, np.float64)
    extents = _primitive_extents(scene, origin)
    t = np.full(len(dirs), np.inf)
    refl = np.zeros(len(dirs))
    is_ground = np.zeros(len(dirs), bool)
    for lo in range(0, len(dirs), chunk):
        tk, rk = _intersect_chunk(scene, extents, origin, dirs[lo:lo + chunk])
        best = tk.argmin(1)
        t[lo:lo + chunk] = tk[np.arange(len(tk)), best]
        refl[lo:lo + chunk] = rk[best]
        is_ground[lo:lo + chunk] = best == 0   # column 0 is always the ground
    return t, refl, is_ground


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


def scan_sweep(scene, origin, cfg, rng):
    """One revolution from ``origin``; returns world-frame points [M,4] (xyz, intensity)."""
    dirs = beam_directions(cfg["num_beams"], cfg["fov_up_deg"], cfg["fov_down_deg"],
                           cfg["azimuth_steps"], cfg["hfov_deg"], rng.uniform(0, 2 * np.pi))
    t, refl, is_ground = cast_rays(scene, origin, dirs)
    # Noise is drawn for every ray (not only hits) so the stream stays aligned.
    t = t + rng.normal(0, cfg["range_noise"], len(t))
    keep = (np.isfinite(t) & (t >= cfg["min_range"]) & (t <= cfg["max_range"])
            & (rng.random(len(t)) >= cfg["dropout"]))
    xyz = origin + t[:, None] * dirs
    # Asphalt is not a perfect plane: roughen only the ground returns.
    xyz[:, 2] += is_ground * rng.normal(0, cfg["ground_roughness"], len(t))
    intensity = np.clip(refl + rng.normal(0, cfg["intensity_noise"], len(t)), 0.0, 1.0)
    return np.concatenate([xyz, intensity[:, None]], 1)[keep]


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
