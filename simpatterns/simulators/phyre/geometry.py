"""Shape geometry of PHYRE's object kinds, in scene pixels.

Sizes follow PHYRE's shape builders (facts, re-derived here): a ball's radius
comes from a scale of 128 px (rounded down, plus half a pixel for
rasterisation); bars and boxes from a scale of 256 px, bar thickness
256/50 px; a jar's height from a scale of 256 px, width = height / 1.2,
base = 0.8 x width, wall thickness logarithmic in height (256/50 px at
scale 0.3); standing sticks are two thin bars leaning at +-77.5 degrees.

Each builder returns parts in the body's *local* frame, origin where PHYRE
puts the body's origin (the jar's origin is the middle of its base).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SCENE_SIZE = 256.0
BAR_THICKNESS = SCENE_SIZE / 50.0
BALL_SCALE_PX = SCENE_SIZE / 2.0
LENGTH_SCALE_PX = SCENE_SIZE
JAR_WIDTH_RATIO = 1.0 / 1.2
JAR_BASE_RATIO = 0.8
STICKS_ANGLE_DEG = 77.5
WALL_THICKNESS = 5.0

Part = dict[str, Any]


def circle(radius: float, center: tuple[float, float] = (0.0, 0.0)) -> Part:
    return {"kind": "circle", "center": [float(center[0]), float(center[1])], "radius": float(radius)}


def poly(vertices: list[tuple[float, float]]) -> Part:
    return {"kind": "poly", "vertices": [[float(x), float(y)] for x, y in vertices]}


def rectangle(width: float, height: float) -> Part:
    w, h = width / 2.0, height / 2.0
    return poly([(w, h), (-w, h), (-w, -h), (w, -h)])


@dataclass(frozen=True)
class ShapeGeometry:
    kind: str
    parts: tuple[Part, ...]
    size: dict[str, float]


def ball_radius_from_scale(scale: float) -> float:
    return int(scale * BALL_SCALE_PX) + 0.5


def ball(scale: float | None = None, radius: float | None = None) -> ShapeGeometry:
    r = ball_radius_from_scale(scale) if radius is None else float(radius)
    if r <= 0:
        raise ValueError(f"ball radius must be positive, got {r}")
    return ShapeGeometry("ball", (circle(r),), {"radius": r})


def box(scale: float | None = None, width: float | None = None, height: float | None = None) -> ShapeGeometry:
    if scale is not None:
        width = height = scale * LENGTH_SCALE_PX
    assert width is not None and height is not None
    return ShapeGeometry("box", (rectangle(width, height),), {"width": float(width), "height": float(height)})


def bar(scale: float | None = None, length: float | None = None, thickness: float = BAR_THICKNESS) -> ShapeGeometry:
    if scale is not None:
        length = scale * LENGTH_SCALE_PX
    assert length is not None
    return ShapeGeometry(
        "bar", (rectangle(length, thickness),), {"length": float(length), "thickness": float(thickness)}
    )


def jar_thickness(height: float) -> float:
    return math.log(height) / math.log(0.3 * SCENE_SIZE) * SCENE_SIZE / 50.0


def jar(scale: float) -> ShapeGeometry:
    """Three convex parts: base slab and two outward-leaning walls."""
    height = scale * LENGTH_SCALE_PX
    width = height * JAR_WIDTH_RATIO
    base_w = width * JAR_BASE_RATIO
    t = jar_thickness(height)
    hb = base_w / 2.0
    base = poly([(hb, t / 2), (-hb, t / 2), (-hb, -t / 2), (hb, -t / 2)])
    lean = (width - base_w) / 2.0
    hyp = math.hypot(height, lean)
    cos, sin = lean / hyp, height / hyp
    dx, dx_top, dy = t * sin, t / sin, t * cos
    left = poly(
        [
            (-width / 2, height - t / 2),
            (-hb, -t / 2),
            (-hb + dx, dy - t / 2),
            (-width / 2 + dx_top, height - t / 2),
        ]
    )
    right = poly(
        [
            (width / 2, height - t / 2),
            (width / 2 - dx_top, height - t / 2),
            (hb - dx, dy - t / 2),
            (hb, -t / 2),
        ]
    )
    size = {"height": height, "width": width, "base_width": base_w, "thickness": t}
    return ShapeGeometry("jar", (base, left, right), size)


def standing_sticks(scale: float) -> ShapeGeometry:
    """Two bars crossing at the origin, leaning at +-77.5 degrees."""
    width = scale * LENGTH_SCALE_PX
    height = BAR_THICKNESS
    corners = [(width / 3, height / 3), (-width / 3, height / 3), (-width / 3, -height / 3), (width / 3, -height / 3)]
    parts = []
    for deg in (-STICKS_ANGLE_DEG, STICKS_ANGLE_DEG):
        a = math.radians(deg)
        c, s = math.cos(a), math.sin(a)
        parts.append(poly([(c * x - s * y, c * y + s * x) for x, y in corners]))
    return ShapeGeometry("standingsticks", tuple(parts), {"length": width, "thickness": height})


def polygon_area_centroid(vertices: list[list[float]]) -> tuple[float, float, float]:
    """Area and centroid of a simple polygon (shoelace)."""
    a = cx = cy = 0.0
    n = len(vertices)
    for i in range(n):
        x0, y0 = vertices[i]
        x1, y1 = vertices[(i + 1) % n]
        cross = x0 * y1 - x1 * y0
        a += cross
        cx += (x0 + x1) * cross
        cy += (y0 + y1) * cross
    a *= 0.5
    if abs(a) < 1e-12:
        return 0.0, float(vertices[0][0]), float(vertices[0][1])
    return abs(a), cx / (6 * a), cy / (6 * a)


def parts_area_centroid(parts: tuple[Part, ...] | list[Part]) -> tuple[float, float, float]:
    """Total area and area-weighted centroid of a body's parts."""
    total = sx = sy = 0.0
    for p in parts:
        if p["kind"] == "circle":
            area = math.pi * p["radius"] ** 2
            cx, cy = p["center"]
        else:
            area, cx, cy = polygon_area_centroid(p["vertices"])
        total += area
        sx += area * cx
        sy += area * cy
    return total, sx / total, sy / total


def shift_parts(parts: tuple[Part, ...], dx: float, dy: float) -> tuple[Part, ...]:
    out = []
    for p in parts:
        if p["kind"] == "circle":
            out.append(circle(p["radius"], (p["center"][0] + dx, p["center"][1] + dy)))
        else:
            out.append(poly([(x + dx, y + dy) for x, y in p["vertices"]]))
    return tuple(out)


def world_points(parts: tuple[Part, ...], x: float, y: float, angle: float) -> list[tuple[float, float]]:
    """Extreme points of parts placed at (x, y, angle): polygon vertices and
    circle bounding-box corners (circles are rotation invariant)."""
    c, s = math.cos(angle), math.sin(angle)
    pts: list[tuple[float, float]] = []
    for p in parts:
        if p["kind"] == "circle":
            px, py = p["center"]
            wx, wy = x + c * px - s * py, y + s * px + c * py
            r = p["radius"]
            pts += [(wx - r, wy - r), (wx + r, wy + r)]
        else:
            pts += [(x + c * vx - s * vy, y + s * vx + c * vy) for vx, vy in p["vertices"]]
    return pts
