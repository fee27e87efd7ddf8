"""The input image of a value model: a scene's 7 semantic roles, max-pooled to a resolution.

The grid is drawn at the full 256 px by `simpatterns.envs.observation.semantic_grid`
and max-pooled per channel, so a 5 px bar still sets its channel at 32x32 (an
average or a direct 32 px drawing loses it). Several channels can be set in one
pooled pixel; the background channel is kept as drawn.
"""

from __future__ import annotations

import numpy as np

from simpatterns.envs.observation import RGB_SIZE, SEMANTIC_CHANNELS, semantic_grid
from simpatterns.simulators.phyre import Scene, simulate

CHANNELS = len(SEMANTIC_CHANNELS)


def check_resolution(resolution: int) -> int:
    if not isinstance(resolution, int) or resolution < 1 or RGB_SIZE % resolution:
        raise ValueError(f"resolution must divide {RGB_SIZE} (e.g. 32, 64, 128), got {resolution!r}")
    return resolution


def scene_image(scene: Scene, resolution: int = 64) -> np.ndarray:
    """``(7, resolution, resolution)`` uint8 in {0, 1}: the scene before the action (no red ball)."""
    k = RGB_SIZE // check_resolution(resolution)
    trace = simulate(scene, None, max_steps=0).trace
    grid = semantic_grid(trace, 0, RGB_SIZE)  # (256, 256, 7)
    pooled = grid.reshape(resolution, k, resolution, k, CHANNELS).max(axis=(1, 3))
    return np.ascontiguousarray(pooled.transpose(2, 0, 1))
