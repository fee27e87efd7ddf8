"""The MuJoCo world: any MJCF model traced in 3D, and KnotGym's rope-and-knot tasks.

- `simulate`, `rollout_traces`, `TraceRecorder`: any model (file, MJCF text or
  ``MjModel``) to `Trace` with D = 3 (`tracer`); bodies in words (`model`).
- `RopeWorld`, `RopeConfig`: a closed rope loop of 100 beads as a 1D
  ``flexcomp`` in a viscous medium without gravity (`rope`); `RopeRenderer`
  top-down images (`render`, needs ``MUJOCO_GL=egl`` or ``osmesa`` headless).
- The knot oracle (`knot`): `diagram`, `gauss_code`, `GaussCode` (simplify,
  canonical, same_as), `is_unknot`, `pd_code`.
- `KnotTask`, `load_configurations` (`tasks`): unknot / tie / convert over the
  shipped start and goal configurations.

MuJoCo picks its OpenGL backend when it is first imported, from ``MUJOCO_GL``.
On Linux without a display this package sets ``MUJOCO_GL=egl`` unless it is
set already (or MuJoCo was imported before), so images render headless; use
``MUJOCO_GL=osmesa`` where EGL is missing.
"""

import os as _os
import sys as _sys

if _sys.platform.startswith("linux") and "mujoco" not in _sys.modules and not _os.environ.get("DISPLAY"):
    _os.environ.setdefault("MUJOCO_GL", "egl")

from simpatterns.simulators.mujoco.knot import (
    Crossing,
    Diagram,
    GaussCode,
    diagram,
    find_crossings,
    gauss_code,
    is_unknot,
    num_crossings,
    pd_code,
    same_code,
)
from simpatterns.simulators.mujoco.model import color_word, describe_bodies, load_model
from simpatterns.simulators.mujoco.rope import RopeConfig, RopeWorld, circle_positions, random_forces, rope_xml
from simpatterns.simulators.mujoco.tasks import (
    TASK_NAMES,
    Configurations,
    KnotTask,
    generate_configurations,
    load_configurations,
)
from simpatterns.simulators.mujoco.tracer import TraceRecorder, rollout_traces, simulate


def __getattr__(name: str):
    # the renderer creates an OpenGL context: load it on first use only
    if name == "RopeRenderer":
        from simpatterns.simulators.mujoco.render import RopeRenderer

        return RopeRenderer
    raise AttributeError(f"module 'simpatterns.simulators.mujoco' has no attribute {name!r}")


__all__ = [
    "Configurations", "Crossing", "Diagram", "GaussCode", "KnotTask", "RopeConfig", "RopeRenderer", "RopeWorld",
    "TASK_NAMES", "TraceRecorder", "circle_positions", "color_word", "describe_bodies", "diagram",
    "find_crossings", "gauss_code", "generate_configurations", "is_unknot", "load_configurations", "load_model",
    "num_crossings", "pd_code", "random_forces", "rollout_traces", "rope_xml", "same_code", "simulate",
]
