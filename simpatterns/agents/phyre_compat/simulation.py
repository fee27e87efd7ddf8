"""PHYRE's ``Simulation`` and ``FeaturizedObjects`` over our traces.

Features per object (PHYRE's 14 columns): x and y of the centre of mass over the scene
size, angle in [0, 2 pi) over 2 pi, diameter over the scene width, shape one-hot (ball,
bar, jar, standing sticks), colour one-hot (red, green, blue, purple, gray, black).
Walls are not objects; the user's red ball comes last. ``float32``, as PHYRE.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from simpatterns.agents.metrics import SimulationStatus
from simpatterns.trace import Trace

SCENE_WIDTH = SCENE_HEIGHT = 256
OBJECT_FEATURE_SIZE = 14
SHAPES = ("ball", "bar", "jar", "standingsticks")
COLORS = ("red", "green", "blue", "purple", "gray", "black")


def diameter(shape: str, size: dict[str, float]) -> float:
    """PHYRE's diameter of a body (its creator's formulas) from our body sizes, in pixels."""
    if shape == "ball":
        return 2.0 * size["radius"]
    if shape in ("bar", "standingsticks"):
        return math.hypot(size["length"], size["thickness"])
    if shape == "jar":
        return math.hypot((size["width"] - size["base_width"]) / 2.0 + size["base_width"], size["height"])
    if shape == "box":
        return math.hypot(size["width"], size["height"])
    return 0.0


def featurize(trace: Trace, frames: Sequence[int]) -> np.ndarray:
    """``len(frames) x N x 14`` features of the non-wall bodies (the red ball last, as in traces)."""
    keep = [i for i, b in enumerate(trace.bodies) if b.role != "wall"]
    f = np.asarray(frames, dtype=np.intp)
    out = np.zeros((len(f), len(keep), OBJECT_FEATURE_SIZE), dtype=np.float32)
    out[:, :, 0] = trace.position[f][:, keep, 0] / SCENE_WIDTH
    out[:, :, 1] = trace.position[f][:, keep, 1] / SCENE_HEIGHT
    out[:, :, 2] = np.mod(trace.angle[f][:, keep], 2 * math.pi) / (2 * math.pi)
    for j, i in enumerate(keep):
        b = trace.bodies[i]
        out[:, j, 3] = diameter(b.shape, b.size) / SCENE_WIDTH
        if b.shape in SHAPES:
            out[:, j, 4 + SHAPES.index(b.shape)] = 1.0
        out[:, j, 8 + COLORS.index(b.color if b.color in COLORS else "black")] = 1.0
    return out


class FeaturizedObjects:
    """PHYRE's featurisation: ``features`` is ``T x N x 14`` (see the module docstring)."""

    def __init__(self, featurized_objects: np.ndarray):
        f = np.asarray(featurized_objects)
        if f.ndim != 3 or f.shape[-1] != OBJECT_FEATURE_SIZE:
            raise ValueError(f"featurized objects must be T x N x {OBJECT_FEATURE_SIZE}, got {f.shape}")
        self.features = f
        self.xs, self.ys, self.angles = f[:, :, 0], f[:, :, 1], f[:, :, 2]
        self.diameters = f[0, :, 3]
        self.shapes_one_hot = f[0, :, 4:8]
        self.colors_one_hot = f[0, :, 8:14]
        self.states = f[:, :, 0:3]

    @property
    def shapes(self) -> list[str]:
        return [SHAPES[k].upper() for k in np.argmax(self.shapes_one_hot, axis=1)]

    @property
    def colors(self) -> list[str]:
        return [COLORS[k].upper() for k in np.argmax(self.colors_one_hot, axis=1)]

    @property
    def num_objects(self) -> int:
        return self.features.shape[1]

    @property
    def num_user_inputs(self) -> int:
        return sum(c == "RED" for c in self.colors)

    @property
    def num_scene_objects(self) -> int:
        return self.num_objects - self.num_user_inputs


class Simulation:
    """The result of ``ActionSimulator.simulate_action``: ``status``, ``images``, ``featurized_objects``."""

    def __init__(self, *, status: SimulationStatus | None = None, images: np.ndarray | None = None,
                 featurized_objects: np.ndarray | None = None):
        self.status = status
        self.images = images
        self.featurized_objects = None if featurized_objects is None else FeaturizedObjects(featurized_objects)
