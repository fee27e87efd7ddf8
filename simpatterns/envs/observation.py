"""Observations of a PHYRE-style trace frame: RGB image, semantic role grid, object features.

``semantic`` is the 7-channel role grid of the paper's value models (§5.3):
each pixel is one-hot over

====  ==========================================================
 ch   bodies drawn into it
====  ==========================================================
 0    dynamic goal object (green)
 1    static goal body (purple: a static goal subject, or a static goal object)
 2    dynamic goal subject (blue)
 3    static confounder (black)
 4    dynamic confounder (gray)
 5    the agent's body (red ball)
 6    background (no body)
====  ==========================================================

shape ``(size, size, 7)`` uint8 in {0, 1}, rows top to bottom (image order,
y down), exactly one channel set per pixel (`ObservationOptions` can put the
channels first and make a set channel 255: the layout and range of
Stable-Baselines3's ``CnnPolicy``, the defaults of ``PhyreOneBall-v1``). Where bodies overlap, later
drawn wins: static, then dynamic, then the agent (the renderer's order).

``objects`` is a ``(max_objects, 19)`` float32 array, one row per non-wall
body in scene order, zero rows after the last body; the LAST row is
reserved for the agent's ball (all zero until the action is taken). Columns
are listed in `OBJECT_COLUMNS`: positions and sizes are divided by the
scene size (256 px), velocities by the scene size per second; values are
clipped into the space's finite bounds (positions [-1, 2], velocities
[-100, 100], angular velocity [-1000, 1000] rad/s), which PHYRE scenes never
reach.
"""

from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces
from PIL import Image, ImageDraw

from simpatterns.trace import Trace

SEMANTIC_CHANNELS = (
    "dynamic goal object",
    "static goal body",
    "dynamic goal subject",
    "static confounder",
    "dynamic confounder",
    "agent",
    "background",
)
_BACKGROUND = 6

ROLES = ("goal_object", "goal_subject", "confounder", "agent")
SHAPES = ("ball", "bar", "jar", "standingsticks", "box")
OBJECT_COLUMNS = (
    "present", "x", "y", "cos_angle", "sin_angle", "vx", "vy", "angular_velocity", "dynamic",
    *(f"role_{r}" for r in ROLES),
    *(f"shape_{s}" for s in SHAPES),
    "bounding_radius",
)
# finite bounds (values are clipped into them) so the space is a proper Box for RL libraries;
# nothing in a 256 px PHYRE scene comes near the velocity bounds (free fall across it is ~170 px/s)
_BOUNDS = {
    "x": (-1.0, 2.0), "y": (-1.0, 2.0), "cos_angle": (-1.0, 1.0), "sin_angle": (-1.0, 1.0),
    "vx": (-100.0, 100.0), "vy": (-100.0, 100.0), "angular_velocity": (-1000.0, 1000.0),
    "bounding_radius": (0.0, 2.0),
}
_LOW = np.array([_BOUNDS.get(c, (0.0, 1.0))[0] for c in OBJECT_COLUMNS], np.float32)
_HIGH = np.array([_BOUNDS.get(c, (0.0, 1.0))[1] for c in OBJECT_COLUMNS], np.float32)

OBS_MODES = ("rgb", "semantic", "objects")
RGB_SIZE = 256


def semantic_channel(role: str, dynamic: bool) -> int | None:
    """Channel of a body with this role; None for walls (outside the scene)."""
    if role == "agent":
        return 5
    if role == "goal_object":
        return 0 if dynamic else 1
    if role == "goal_subject":
        return 2 if dynamic else 1
    if role == "wall":
        return None
    return 4 if dynamic else 3


ONEHOT_VALUES = (1, 255)


def observation_space(mode: str, semantic_size: int = 64, max_objects: int = 16, *,
                      channels_first: bool = False, onehot_value: int = 1) -> spaces.Space:
    """The space of ``mode``'s observations; images are (H, W, C), or (C, H, W) with
    ``channels_first``; a semantic pixel's set channel holds ``onehot_value``."""
    if mode == "rgb":
        return spaces.Box(0, 255, _image_shape(RGB_SIZE, 3, channels_first), np.uint8)
    if mode == "semantic":
        return spaces.Box(0, onehot_value, _image_shape(semantic_size, len(SEMANTIC_CHANNELS), channels_first),
                          np.uint8)
    if mode == "objects":
        low = np.broadcast_to(_LOW, (max_objects, len(OBJECT_COLUMNS)))
        high = np.broadcast_to(_HIGH, (max_objects, len(OBJECT_COLUMNS)))
        return spaces.Box(low.copy(), high.copy(), dtype=np.float32)
    raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {mode!r}")


def _image_shape(size: int, channels: int, channels_first: bool) -> tuple[int, int, int]:
    return (channels, size, size) if channels_first else (size, size, channels)


def as_layout(image: np.ndarray, channels_first: bool) -> np.ndarray:
    """An (H, W, C) image in the observation's layout (a contiguous copy when transposed)."""
    return np.ascontiguousarray(image.transpose(2, 0, 1)) if channels_first else image


def _world(trace: Trace) -> tuple[float, float]:
    w, h = trace.meta.get("world_size", [256.0, 256.0])
    return float(w), float(h)


def _draw_order(trace: Trace) -> list[int]:
    return sorted(range(trace.num_bodies), key=lambda i: (trace.bodies[i].dynamic, trace.bodies[i].role == "agent"))


def semantic_grid(trace: Trace, frame: int, size: int = 64, onehot_value: int = 1) -> np.ndarray:
    """The 7-channel role grid of one frame, (size, size, 7) (see the module docstring)."""
    w, h = _world(trace)
    sx, sy = size / w, size / h
    label = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(label)
    for i in _draw_order(trace):
        body = trace.bodies[i]
        ch = semantic_channel(body.role, body.dynamic)
        if ch is None:
            continue
        fill = ch + 1  # 0 stays background
        x, y = trace.position[frame, i]
        a = float(trace.angle[frame, i])
        c, s = math.cos(a), math.sin(a)
        for part in body.parts:
            if part["kind"] == "circle":
                px, py = part["center"]
                cx, cy, r = x + c * px - s * py, y + s * px + c * py, part["radius"]
                draw.ellipse([(cx - r) * sx, (h - cy - r) * sy, (cx + r) * sx, (h - cy + r) * sy], fill=fill)
            else:
                v = np.asarray(part["vertices"], dtype=np.float64)
                wx = x + c * v[:, 0] - s * v[:, 1]
                wy = y + s * v[:, 0] + c * v[:, 1]
                draw.polygon(list(zip((wx * sx).tolist(), ((h - wy) * sy).tolist())), fill=fill)
    labels = np.asarray(label, dtype=np.int64)
    # label 0 (nothing drawn) -> background channel, label k -> channel k-1
    channel = np.where(labels == 0, _BACKGROUND, labels - 1)
    grid = (channel[..., None] == np.arange(len(SEMANTIC_CHANNELS))).astype(np.uint8)
    return grid * np.uint8(onehot_value) if onehot_value != 1 else grid


def object_features(trace: Trace, frame: int, max_objects: int = 16) -> np.ndarray:
    """The ``(max_objects, len(OBJECT_COLUMNS))`` feature array of one frame."""
    w, _ = _world(trace)
    out = np.zeros((max_objects, len(OBJECT_COLUMNS)), np.float32)
    rows = [i for i, b in enumerate(trace.bodies) if b.role not in ("wall", "agent")]
    agent = [i for i, b in enumerate(trace.bodies) if b.role == "agent"]
    if len(rows) > max_objects - 1:
        raise ValueError(
            f"scene has {len(rows)} bodies besides walls and agent; objects observations hold "
            f"{max_objects - 1} (raise max_objects)"
        )
    slots = list(range(len(rows))) + [max_objects - 1] * len(agent)
    idx = np.asarray(rows + agent, dtype=np.intp)
    if idx.size == 0:
        return out
    slots_a = np.asarray(slots, dtype=np.intp)
    col = {c: k for k, c in enumerate(OBJECT_COLUMNS)}
    ang = trace.angle[frame, idx]
    out[slots_a, col["present"]] = 1.0
    out[slots_a, col["x"]] = trace.position[frame, idx, 0] / w
    out[slots_a, col["y"]] = trace.position[frame, idx, 1] / w
    out[slots_a, col["cos_angle"]] = np.cos(ang)
    out[slots_a, col["sin_angle"]] = np.sin(ang)
    out[slots_a, col["vx"]] = trace.velocity[frame, idx, 0] / w
    out[slots_a, col["vy"]] = trace.velocity[frame, idx, 1] / w
    out[slots_a, col["angular_velocity"]] = trace.angular_velocity[frame, idx]
    for slot, i in zip(slots, idx.tolist()):
        b = trace.bodies[i]
        out[slot, col["dynamic"]] = float(b.dynamic)
        if b.role in ROLES:
            out[slot, col[f"role_{b.role}"]] = 1.0
        if b.shape in SHAPES:
            out[slot, col[f"shape_{b.shape}"]] = 1.0
        out[slot, col["bounding_radius"]] = b.bounding_radius / w
    return np.clip(out, _LOW, _HIGH, out=out)
