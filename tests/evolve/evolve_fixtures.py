"""Trace making and process checks shared by the evolve tests (imported by conftest and tests)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from simpatterns.simulators.phyre import get_template, simulate

def make_traces(n: int, seed: int = 0, steps: int = 300) -> list:
    template = get_template("00000")
    params = list(template.valid_param_sets())
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        p = params[int(rng.integers(len(params)))]
        rollout = simulate(template.scene(p), tuple(float(x) for x in rng.uniform(0, 1, 3)), max_steps=steps)
        if rollout.trace is not None:
            out.append(rollout.trace)
    return out


def nobody_processes() -> list[int]:
    """Pids of live processes owned by 'nobody' (sandbox children when we are root)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        uid_line = next((ln for ln in status.splitlines() if ln.startswith("Uid:")), "")
        state = next((ln for ln in status.splitlines() if ln.startswith("State:")), "")
        if uid_line.split()[1:2] == ["65534"] and " Z " not in state + " ":
            out.append(int(entry))
    return out
