"""The rope world: KnotGym's closed rope loop as a 1D ``<flexcomp>``.

KnotGym (seed 000) models a knot as a closed chain of about 100 beads made of
``<composite type="cable">`` pieces and the cable plugin, floating in a
viscous medium without gravity. MuJoCo 4 removed both; a 1D ``flexcomp`` of
type ``circle`` is the replacement: one body per bead (three slide joints
each), capsule elements between neighbours that collide with each other
(``selfcollide``), and ``<edge equality="true"/>`` keeping the bead spacing.
The medium is a linear drag on every bead (``damping`` per degree of
freedom, integrated implicitly, so strong pulls stay stable). The spacing
must exceed twice the radius or neighbouring elements touch at rest.

An action is KnotGym's: a point, snapped to the nearest bead, and a 3D force
held on that bead for ``frame_skip`` physics steps. `RopeWorld` steps the
model, records a `Trace` when asked (`TraceRecorder`), sets bead positions
(start and goal configurations), and renders top views. After every action
the data are brought forward to the state reached (``mj_forward``), so
positions, the Gauss code, the next action's bead and a trace's last frame
all read the rope as it is, not as it was one physics step before.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import mujoco
import numpy as np

from simpatterns.simulators.mujoco.tracer import TraceRecorder
from simpatterns.trace import Trace

BEAD_PREFIX = "bead"


@dataclass(frozen=True)
class RopeConfig:
    """Physical and action settings of the rope world (KnotGym's values where it has them).

    ``view`` is the side of the square region (metres) the top camera shows,
    centred on the rope's centre; action points in [-1, 1] map onto it."""

    beads: int = 100
    spacing: float = 0.012  # m between neighbouring beads: the loop is 1.2 m long
    radius: float = 0.005  # m, rope half thickness (KnotGym's capsule size)
    mass: float = 0.1  # kg, whole rope
    damping: float = 0.05  # N s/m per bead and axis: the viscous medium
    timestep: float = 0.008  # s (KnotGym's)
    frame_skip: int = 24  # physics steps per action (KnotGym's): 0.192 s
    max_force: float = 0.2  # N (KnotGym's a_frc_max)
    view: float = 0.45  # m, side of the region the camera shows (the rest loop is 0.38 m across)
    rgba: tuple[float, float, float, float] = (0.85, 0.35, 0.1, 1.0)

    def __post_init__(self) -> None:
        if self.beads < 8:
            raise ValueError(f"a rope loop needs at least 8 beads, got {self.beads}")
        if not self.spacing > 2 * self.radius:
            raise ValueError(f"spacing {self.spacing} must exceed twice the radius {self.radius}: "
                             "neighbouring elements would touch at rest")
        if self.frame_skip < 1 or self.timestep <= 0:
            raise ValueError("frame_skip must be >= 1 and timestep > 0")

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def rope_xml(config: RopeConfig = RopeConfig()) -> str:
    """The MJCF of the rope world (a closed loop in the z = 0 plane, centred at the origin)."""
    c = config
    rgba = " ".join(f"{v:g}" for v in c.rgba)
    return f"""<mujoco model="rope loop">
  <option timestep="{c.timestep}" integrator="implicitfast" gravity="0 0 0"/>
  <visual>
    <global offwidth="512" offheight="512" orthographic="true" fovy="{c.view}"/>
    <quality shadowsize="0" offsamples="0" numslices="8" numstacks="4" numquads="1"/>
    <rgba haze="0 0 0 1"/>
  </visual>
  <worldbody>
    <light directional="true" pos="0 0 3" dir="0 0 -1" castshadow="false" diffuse="0.9 0.9 0.9" ambient="0.25 0.25 0.25"/>
    <flexcomp name="{BEAD_PREFIX}" type="circle" count="{c.beads + 1} 1 1" spacing="{c.spacing} 1 1"
              radius="{c.radius}" dim="1" mass="{c.mass}" rgba="{rgba}">
      <edge equality="true"/>
      <contact selfcollide="auto" condim="1"/>
    </flexcomp>
  </worldbody>
</mujoco>
"""


def bead_colors(n: int) -> np.ndarray:
    """``[n, 4]`` RGBA along the rope: a hue cycle, bead 0 white (as in KnotGym), so the
    start and the direction of travel show in images."""
    x = np.arange(n) / n
    rgb = np.stack([np.sin(2 * np.pi * (x + k)) * 0.5 + 0.5 for k in (0.0, 0.33, 0.67)], axis=1)
    rgb[0] = 1.0
    return np.concatenate([rgb, np.ones((n, 1))], axis=1).astype(np.float32)


class RopeWorld:
    """One rope loop in MuJoCo: positions, actions, stepping, recording (see the module docstring)."""

    def __init__(self, config: RopeConfig = RopeConfig()):
        self.config = config
        self.model = mujoco.MjModel.from_xml_string(rope_xml(config))
        self.model.dof_damping[:] = config.damping
        self.data = mujoco.MjData(self.model)
        m = self.model
        if m.nflex != 1 or int(m.flex_vertnum[0]) != config.beads:
            raise RuntimeError(f"the rope model has {int(m.flex_vertnum[0]) if m.nflex else 0} beads, "
                               f"expected {config.beads}")
        self.bead_bodies = m.flex_vertbodyid[: config.beads].astype(np.int64)
        # slide joints move each bead from its body's model position: qpos = position - rest
        self._rest = m.body_pos[self.bead_bodies].copy()
        self._qadr = m.jnt_qposadr[m.body_jntadr[self.bead_bodies]]
        if not np.array_equal(self._qadr, np.arange(config.beads) * 3):
            raise RuntimeError("unexpected joint layout of the rope's beads")
        self.recorder: TraceRecorder | None = None
        mujoco.mj_forward(m, self.data)

    # ------------------------------------------------------------ state
    @property
    def num_beads(self) -> int:
        return self.config.beads

    def positions(self) -> np.ndarray:
        """Bead centres ``[beads, 3]`` (a copy)."""
        return self.data.xpos[self.bead_bodies].copy()

    def set_positions(self, positions: np.ndarray, velocities: np.ndarray | None = None) -> None:
        """Place the beads (``[beads, 3]``) at rest (or with ``velocities``) and clear forces."""
        p = np.asarray(positions, dtype=np.float64)
        if p.shape != (self.num_beads, 3):
            raise ValueError(f"positions must be [{self.num_beads}, 3], got {p.shape}")
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = (p - self._rest).ravel()
        if velocities is not None:
            self.data.qvel[:] = np.asarray(velocities, dtype=np.float64).ravel()
        mujoco.mj_forward(self.model, self.data)

    def centre(self) -> np.ndarray:
        return self.data.xpos[self.bead_bodies].mean(axis=0)

    def nearest_bead(self, point: np.ndarray) -> int:
        d = ((self.data.xpos[self.bead_bodies] - np.asarray(point, dtype=np.float64)) ** 2).sum(axis=1)
        return int(np.argmin(d))

    def point_of(self, action_point: np.ndarray) -> np.ndarray:
        """World point of a normalised action point in [-1, 1]^3: the camera's view square
        around the rope's centre (x right, y up in the image; z towards the camera)."""
        return self.centre() + np.asarray(action_point, dtype=np.float64) * (self.config.view / 2)

    # ------------------------------------------------------------- acting
    def start_recording(self, stride: int = 1, meta: dict[str, Any] | None = None) -> TraceRecorder:
        """Record every ``stride``-th physics step from now on (`trace` returns it; each call
        computes only the frames recorded since the last)."""
        self.recorder = TraceRecorder(self.model, stride=stride, meta={"rope": self.config.to_json(),
                                                                        **(meta or {})}, incremental=True)
        return self.recorder

    def trace(self, meta: dict[str, Any] | None = None) -> Trace:
        """The recording so far, ending with the current state (when it is on the stride grid)."""
        if self.recorder is None:
            raise RuntimeError("not recording: call start_recording() first")
        return self.recorder.trace(meta, final=self.data)

    def run(self, steps: int) -> None:
        """``steps`` physics steps with the applied forces as they are (recorded when
        recording), then release them and bring the data to the state reached: after
        ``mj_step`` they still describe the last step's start, one step old."""
        d, m = self.data, self.model
        if self.recorder is None:
            mujoco.mj_step(m, d, nstep=int(steps))
        else:
            self.recorder.advance(d, int(steps))
        d.xfrc_applied[:] = 0.0
        mujoco.mj_forward(m, d)

    def push(self, bead: int, force: np.ndarray, steps: int | None = None) -> None:
        """Hold ``force`` (N, world frame) on ``bead`` for ``steps`` physics steps
        (default ``frame_skip``), then release it; the data then describe the rope as it is."""
        d = self.data
        d.xfrc_applied[:] = 0.0
        d.xfrc_applied[self.bead_bodies[bead], :3] = force
        self.run(self.config.frame_skip if steps is None else int(steps))

    def act(self, action: np.ndarray) -> int:
        """KnotGym's action, normalised: ``action[:3]`` a point in [-1, 1]^3 (see
        `point_of`), snapped to the nearest bead; ``action[3:]`` the force in units of
        ``max_force``, its norm clipped to 1. Returns the bead pushed."""
        a = np.asarray(action, dtype=np.float64)
        bead = self.nearest_bead(self.point_of(a[:3]))
        force = a[3:6]
        norm = float(np.linalg.norm(force))
        if norm > 1.0:
            force = force / norm
        self.push(bead, force * self.config.max_force)
        return bead

    def settle(self, steps: int) -> None:
        """Let the rope coast ``steps`` physics steps with no force."""
        self.push(0, np.zeros(3), steps)

    def unstable(self) -> bool:
        """True when MuJoCo reported a diverging simulation (NaN or huge accelerations)."""
        return bool(self.data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number) or not np.isfinite(
            self.data.qpos).all()


def random_forces(world: RopeWorld, rng: np.random.Generator, actions: int, *, beads: int = 2,
                  inward: float = 0.3, strength: float = 1.0) -> None:
    """``actions`` random-force steps: each pushes ``beads`` random beads at once, for one
    frame skip, with ``strength`` x max_force in a random direction biased ``inward``
    towards the rope's centre (a pure random push mostly drags the loop around; the
    inward part folds it over itself, which makes crossings). Used to generate start
    and goal configurations, not an agent's action."""
    cfg, d = world.config, world.data
    for _ in range(actions):
        d.xfrc_applied[:] = 0.0
        pos = world.positions()
        centre = pos.mean(axis=0)
        for b in rng.choice(world.num_beads, size=beads, replace=False):
            direction = rng.normal(size=3)
            direction /= max(float(np.linalg.norm(direction)), 1e-12)
            to_centre = centre - pos[b]
            direction += inward * to_centre / max(float(np.linalg.norm(to_centre)), 1e-12)
            d.xfrc_applied[world.bead_bodies[b], :3] = direction * cfg.max_force * strength
        world.run(cfg.frame_skip)


def circle_positions(config: RopeConfig = RopeConfig()) -> np.ndarray:
    """The rope's rest loop: a circle in the z = 0 plane."""
    n = config.beads
    radius = n * config.spacing / (2 * math.pi)
    a = 2 * math.pi * np.arange(n) / n
    return np.stack([radius * np.cos(a), radius * np.sin(a), np.zeros(n)], axis=1)
