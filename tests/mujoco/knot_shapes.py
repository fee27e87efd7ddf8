"""Closed curves with a known knot type, for the knot-oracle tests."""

from __future__ import annotations

import numpy as np

T = np.linspace(0, 2 * np.pi, 160, endpoint=False)


def torus(p: int, q: int) -> np.ndarray:
    return np.stack([np.cos(p * T) * (2 + np.cos(q * T)), np.sin(p * T) * (2 + np.cos(q * T)), -np.sin(q * T)], 1)


KNOTS = {  # name -> (points, Seifert genus)
    "unknot": (np.stack([np.cos(T), np.sin(T), 0 * T], 1), 0),
    "trefoil": (np.stack([np.sin(T) + 2 * np.sin(2 * T), np.cos(T) - 2 * np.cos(2 * T), -np.sin(3 * T)], 1), 1),
    "figure eight": (np.stack([(2 + np.cos(2 * T)) * np.cos(3 * T), (2 + np.cos(2 * T)) * np.sin(3 * T),
                               np.sin(4 * T)], 1), 1),
    "cinquefoil": (torus(2, 5), 2),
    "torus 3 4": (torus(3, 4), 3),
}


def rotated(points: np.ndarray, rng: np.random.Generator, noise: float = 0.0) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return points @ q.T + rng.normal(scale=noise, size=points.shape)


def genus(code) -> int:
    """Seifert genus from knot Floer homology, on our diagram's PD code simplified by spherogram
    (knot_floer_homology refuses diagrams with a Reidemeister I loop)."""
    import spherogram

    from simpatterns.simulators.mujoco.knot import pd_code

    pd = pd_code(code)
    if not pd:
        return 0
    link = spherogram.Link(pd)  # checks that the PD code is planar
    link.simplify("global")
    if len(link.crossings) == 0:
        return 0
    return int(link.knot_floer_homology()["seifert_genus"])
