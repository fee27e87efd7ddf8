"""Pillow rendering of PHYRE-style traces: PHYRE's palette, y up.

Bodies are drawn from the trace's geometry (``Body.parts``) at each frame's
position and angle, so any `Trace` with 2-D parts renders, not only PHYRE
scenes. Balls get a thin spoke so rolling is visible.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from simpatterns.files import atomic_open
from simpatterns.trace import Trace

# PHYRE's colours (its vis module's palette)
PALETTE: dict[str, tuple[int, int, int]] = {
    "white": (255, 255, 255),
    "red": (0xF3, 0x4F, 0x46),
    "green": (0x6B, 0xCE, 0xBB),
    "blue": (0x18, 0x77, 0xF2),
    "purple": (0x4B, 0x4A, 0xA4),
    "gray": (0xB9, 0xCA, 0xD2),
    "black": (0, 0, 0),
}
SPOKE = (255, 255, 255)
# PHYRE's colour codes, in its observation rasters
COLOR_CODES: dict[str, int] = {name: k for k, name in enumerate(PALETTE)}


def _world_size(trace: Trace) -> tuple[float, float]:
    w, h = trace.meta.get("world_size", [256.0, 256.0])
    return float(w), float(h)


def render_frame(trace: Trace, frame: int, size: int = 256) -> Image.Image:
    """One frame as an RGB image of ``size`` x ``size`` pixels."""
    img = Image.new("RGB", (size, size), PALETTE["white"])
    _draw_bodies(ImageDraw.Draw(img), trace, frame, size, lambda body: PALETTE.get(body.color, PALETTE["black"]),
                 spokes=True)
    return img


def render_color_codes(trace: Trace, frame: int, size: int = 256) -> np.ndarray:
    """One frame as a ``[size, size]`` uint8 array of colour codes (`COLOR_CODES`: 0 white,
    1 red, 2 green, 3 blue, 4 purple, 5 gray, 6 black), row 0 at the *bottom* of the
    scene, as PHYRE's observations are; no spokes."""
    img = Image.new("L", (size, size), 0)
    _draw_bodies(ImageDraw.Draw(img), trace, frame, size,
                 lambda body: COLOR_CODES.get(body.color, COLOR_CODES["black"]), spokes=False)
    return np.asarray(img, dtype=np.uint8)[::-1].copy()


def _draw_bodies(draw: ImageDraw.ImageDraw, trace: Trace, frame: int, size: int, fill, spokes: bool) -> None:
    if not 0 <= frame < trace.num_frames:
        raise IndexError(f"frame {frame} outside [0, {trace.num_frames})")
    w, h = _world_size(trace)
    sx, sy = size / w, size / h

    def to_px(x: float, y: float) -> tuple[float, float]:
        return x * sx, (h - y) * sy

    # static first, then dynamic, agent last: matches what a viewer expects on overlap
    order = sorted(range(trace.num_bodies), key=lambda i: (trace.bodies[i].dynamic, trace.bodies[i].role == "agent"))
    for i in order:
        body = trace.bodies[i]
        if body.role == "wall":  # PHYRE's walls sit just outside the scene
            continue
        colour = fill(body)
        x, y = trace.position[frame, i]
        a = float(trace.angle[frame, i])
        c, s = math.cos(a), math.sin(a)
        for part in body.parts:
            if part["kind"] == "circle":
                px, py = part["center"]
                cx, cy = x + c * px - s * py, y + s * px + c * py
                r = part["radius"]
                x0, y0 = to_px(cx - r, cy + r)
                x1, y1 = to_px(cx + r, cy - r)
                draw.ellipse([x0, y0, x1, y1], fill=colour)
                if spokes and body.dynamic and r * sx >= 3:
                    ex, ey = to_px(cx + 0.8 * r * c, cy + 0.8 * r * s)
                    draw.line([to_px(cx, cy), (ex, ey)], fill=SPOKE, width=max(1, int(r * sx / 6)))
            else:
                pts = [to_px(x + c * vx - s * vy, y + s * vx + c * vy) for vx, vy in part["vertices"]]
                draw.polygon(pts, fill=colour)


def render_frames(trace: Trace, frames: Sequence[int] | None = None, size: int = 256) -> list[Image.Image]:
    frames = range(trace.num_frames) if frames is None else frames
    return [render_frame(trace, int(f), size) for f in frames]


def caption_strip(img: Image.Image, lines: Sequence[str], line_height: int = 12) -> Image.Image:
    """Return ``img`` with a white strip below holding ``lines`` of text."""
    font = ImageFont.load_default()
    n = max(1, len(lines))
    out = Image.new("RGB", (img.width, img.height + n * line_height + 4), PALETTE["white"])
    out.paste(img, (0, 0))
    draw = ImageDraw.Draw(out)
    for k, text in enumerate(lines):
        draw.text((3, img.height + 2 + k * line_height), text, fill=(20, 20, 20), font=font)
    return out


def save_png(trace: Trace, path: str | Path, frame: int = -1, size: int = 256) -> Path:
    path = Path(path)
    f = frame if frame >= 0 else trace.num_frames + frame
    with atomic_open(path, "wb") as fh:
        render_frame(trace, f, size).save(fh, format="PNG")
    return path


def save_gif(
    trace: Trace,
    path: str | Path,
    stride: int = 2,
    size: int = 256,
    captions: Sequence[Sequence[str]] | None = None,
    fps: float | None = None,
) -> Path:
    """Rollout as an animated GIF; ``captions[k]`` are text lines under the k-th written frame.

    Plays in real time by default (every ``stride``-th frame at 60/stride fps).
    """
    path = Path(path)
    frames = list(range(0, trace.num_frames, stride))
    if frames[-1] != trace.num_frames - 1:
        frames.append(trace.num_frames - 1)
    images = render_frames(trace, frames, size)
    if captions is not None:
        height = max((len(c) for c in captions), default=1)
        images = [caption_strip(im, list(captions[k]) + [""] * (height - len(captions[k]))) for k, im in enumerate(images)]
    fps = fps or (1.0 / (trace.dt * stride))
    duration_ms = int(round(1000.0 / fps))
    with atomic_open(path, "wb") as fh:
        images[0].save(fh, format="GIF", save_all=True, append_images=images[1:], duration=duration_ms, loop=0)
    return path


def frame_array(trace: Trace, frame: int, size: int = 256) -> np.ndarray:
    """``[size, size, 3]`` uint8 array (for Gymnasium rgb observations)."""
    return np.asarray(render_frame(trace, frame, size), dtype=np.uint8)
