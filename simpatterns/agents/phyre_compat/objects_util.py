"""PHYRE's ``featurized_objects_vector_to_raster``: draw a scene back from its object features."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from simpatterns.agents.phyre_compat.simulation import OBJECT_FEATURE_SIZE, SCENE_HEIGHT, SCENE_WIDTH, SHAPES
from simpatterns.simulators.phyre import geometry as geo


def _parts_from_diameter(shape: str, diameter: float) -> tuple[dict, ...]:
    """A body's parts about its centre of mass, inverting PHYRE's diameter formulas (`simulation.diameter`)."""
    if shape == "ball":
        g = geo.ball(radius=diameter / 2.0)
    elif shape in ("bar", "standingsticks"):
        length = math.sqrt(max(diameter**2 - geo.BAR_THICKNESS**2, 0.0))
        g = geo.bar(length=length) if shape == "bar" else geo.standing_sticks(length / geo.LENGTH_SCALE_PX)
    else:  # jar: diameter = 1.25 x height for PHYRE's width and base ratios
        g = geo.jar(0.8 * diameter / geo.LENGTH_SCALE_PX)
    _, cx, cy = geo.parts_area_centroid(g.parts)
    return geo.shift_parts(g.parts, -cx, -cy)


def featurized_objects_vector_to_raster(featurized_objects: np.ndarray) -> np.ndarray:
    """``(N, 14)`` object features -> ``int64 [256, 256]`` colour codes, row 0 at the bottom, objects
    drawn in order (the user's ball last), as PHYRE draws them."""
    f = np.asarray(featurized_objects, dtype=np.float64)
    if f.ndim != 2 or f.shape[1] != OBJECT_FEATURE_SIZE:
        raise ValueError(f"featurized objects must be N x {OBJECT_FEATURE_SIZE}, got {f.shape}")
    img = Image.new("L", (SCENE_WIDTH, SCENE_HEIGHT), 0)
    draw = ImageDraw.Draw(img)
    for row in f:
        x, y = row[0] * SCENE_WIDTH, row[1] * SCENE_HEIGHT
        a = row[2] * 2 * math.pi
        c, s = math.cos(a), math.sin(a)
        colour = int(np.argmax(row[8:14])) + 1  # colour codes: 1 red ... 6 black
        for part in _parts_from_diameter(SHAPES[int(np.argmax(row[4:8]))], row[3] * SCENE_WIDTH):
            if part["kind"] == "circle":
                px, py = part["center"]
                cx, cy, r = x + c * px - s * py, y + s * px + c * py, part["radius"]
                draw.ellipse([cx - r, SCENE_HEIGHT - cy - r, cx + r, SCENE_HEIGHT - cy + r], fill=colour)
            else:
                draw.polygon([(x + c * vx - s * vy, SCENE_HEIGHT - (y + s * vx + c * vy))
                              for vx, vy in part["vertices"]], fill=colour)
    return np.asarray(img, dtype=np.int64)[::-1].copy()
