"""Hand-written rewards for Appendix G goals: the baseline of the paper's Fig. 12.

Plain Python over a trace's contacts and positions, written from the goal's
words without the DSL, for rollouts run to the horizon (no stop on success).
A colour ("green object") means any body of that colour; a scene without one
fails. Each returns 1.0 on success, else 0.0, and can label a dataset as
``--label simpatterns.value.handwritten:a01``.
"""

from __future__ import annotations

import numpy as np

from simpatterns.trace import Trace

NEAR_PX = 5.0  # "very close" in A6: surfaces within 5 px (2% of the 256 px scene)


def _ids(trace: Trace, color: str) -> list[int]:
    if color == "red":
        return trace.find_bodies(role="agent")
    return trace.find_bodies(color=color)


def _touch(trace: Trace, a: str, b: str) -> np.ndarray:
    """Per frame: does some body of colour ``a`` touch some body of colour ``b``?"""
    ia, ib = _ids(trace, a), _ids(trace, b)
    if not ia or not ib:
        return np.zeros(trace.num_frames, bool)
    return trace.touching_matrix()[:, ia][:, :, ib].any(axis=(1, 2))


def a01(trace: Trace) -> float:
    """Green and blue touch at the end; they touched (a touch started); red never touches green."""
    gb = _touch(trace, "green", "blue")
    return float(bool(gb[-1]) and not _touch(trace, "red", "green").any())


def a04(trace: Trace) -> float:
    """Green touches blue and green touches red (any order); red never touches blue."""
    ok = _touch(trace, "green", "blue").any() and _touch(trace, "green", "red").any()
    return float(ok and not _touch(trace, "red", "blue").any())


def a06(trace: Trace) -> float:
    """Between 40% and 60% of the episode red comes within 5 px of blue; they never touch.
    Surface distance as centre distance minus bounding radii (exact for balls)."""
    red, blue = _ids(trace, "red"), _ids(trace, "blue")
    if not red or not blue or _touch(trace, "red", "blue").any():
        return 0.0
    n = trace.num_frames
    lo, hi = int(0.4 * (n - 1)), int(0.6 * (n - 1)) + 1
    best = np.inf
    for r in red:
        for b in blue:
            d = np.linalg.norm(trace.position[lo:hi, r] - trace.position[lo:hi, b], axis=1)
            gap = d - trace.bodies[r].bounding_radius - trace.bodies[b].bounding_radius
            best = min(best, float(gap.min()) if len(gap) else np.inf)
    return float(best <= NEAR_PX)


HANDWRITTEN = {"a01": a01, "a04": a04, "a06": a06}
