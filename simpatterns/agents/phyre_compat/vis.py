"""PHYRE's ``vis``: colour-code observations to RGB pictures, and a series of them to a GIF."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from simpatterns.files import atomic_open
from simpatterns.simulators.phyre.render import PALETTE

# PHYRE's palette by colour code, plus its "light red" (code 7)
WAD_COLORS = np.array([*PALETTE.values(), (0xFC, 0xDF, 0xE3)], dtype=np.uint8)
SOLVE_STATUS_COLORS = np.array([(121, 6, 4), (11, 102, 35)], dtype=np.uint8)  # cherry (not solved), green


def observations_to_uint8_rgb(scene: np.ndarray, user_input: Sequence[tuple[int, int]] = (),
                              is_solved: bool | None = None) -> np.ndarray:
    """Colour codes (row 0 at the bottom) -> ``uint8 [H, W, 3]`` with row 0 at the top; ``user_input``
    points are painted red; ``is_solved`` adds PHYRE's 5-row status band on top."""
    img = WAD_COLORS[np.asarray(scene)]
    for y, x in user_input:  # PHYRE indexes [x, y] here; kept so pictures match
        if 0 <= x < img.shape[1] and 0 <= y < img.shape[0]:
            img[x, y] = (255, 0, 0)
    img = img[::-1]
    if is_solved is not None:
        band = np.tile(SOLVE_STATUS_COLORS[int(is_solved)].reshape(1, 1, 3), (5, img.shape[1], 1))
        band[:, :5] = WAD_COLORS[0]
        band[:, -5:] = WAD_COLORS[0]
        img = np.concatenate([band, img], 0)
    return img


def observations_to_float_rgb(scene: np.ndarray, user_input: Sequence[tuple[int, int]] = (),
                              is_solved: bool | None = None) -> np.ndarray:
    """`observations_to_uint8_rgb` as ``float64`` in [0, 1]."""
    return np.array(observations_to_uint8_rgb(scene, user_input, is_solved), dtype=np.float64) / 255.0


def save_observation_series_to_gif(batched_observation_series: Sequence[np.ndarray], fpath: str | Path,
                                   solved_states: Sequence[bool] | None = None) -> None:
    """One GIF of several image series side by side, 0.1 s per step; a shorter series holds its last
    image. Pillow writes it and merges identical consecutive steps into one longer frame (PHYRE's
    imageio keeps them), so the playing time is the same but the frame count can be smaller."""
    steps = max(len(images) for images in batched_observation_series)
    frames = []
    for step in range(steps):
        row = [observations_to_uint8_rgb(images[min(len(images) - 1, step)],
                                         is_solved=None if solved_states is None else solved_states[i])
               for i, images in enumerate(batched_observation_series)]
        frames.append(Image.fromarray(np.concatenate(row, axis=1)))
    with atomic_open(fpath, "wb") as fh:
        frames[0].save(fh, format="GIF", save_all=True, append_images=frames[1:], loop=0, duration=100)
