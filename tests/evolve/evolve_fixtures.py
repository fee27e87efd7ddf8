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


def alive(pids) -> list[int]:
    """The pids of ``pids`` that still run (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            state = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("State:"))
        except (OSError, StopIteration):
            continue
        if state.split()[1:2] != ["Z"]:  # "State:\tZ (zombie)": a tab, not a space
            out.append(pid)
    return out


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (a sandbox root names its servers and children)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    out.append(int(entry))
            except OSError:
                continue
    return alive(out)
