"""Record any MuJoCo model as a 3D `Trace`.

One recording rule for every integrator: stored frame ``f`` is the state at
physics step ``f * stride`` (frame 0 the initial state), and its positions,
orientations, velocities, contacts and contact forces all belong to that
state (the forces with the controls and applied forces of the step that
starts from it). `TraceRecorder.advance` steps an ``MjData`` and records by
that rule; `simulate`, `rollout_traces` and the rope world all go through it.

Why a rule: ``mj_step`` runs ``mj_forward`` on the current state and then
integrates. With a single-step integrator (Euler, implicit, implicitfast,
discrete) the data after ``mj_step`` therefore still describe the state the
step started from, so a step on the stride grid is recorded after it with no
extra work. RK4 runs three more forward passes inside the step, at its
Runge-Kutta stages, and leaves their kinematics, contacts and forces in the
data: describing no state of the trajectory. Sleeping and the ipc contact
solver change the data after the forward pass (a tree put to sleep has its
velocities zeroed). With RK4, any integrator not known to be single-step,
sleeping or ipc, a step on the grid is recorded *before* stepping, after an
``mj_forward`` of its own: one forward pass per recorded frame, a tenth to a
third of an RK4 step (measured in ``docs/reference/mujoco.md``). The forward pass
changes nothing that ``mj_step`` reads, so the trajectory is bit-for-bit the
one without recording.

Positions: ``position="xipos"`` (default) stores each body's centre of mass,
``"xpos"`` its frame origin; ``meta["position"]`` says which. Velocities are
those of the stored point: ``cvel`` is a spatial velocity about each body's
subtree centre of mass, so the point's velocity is
``v + w x (point - subtree_com[root])`` (what ``mj_objectVelocity`` returns for
the centre of mass, for every body at once).

Contacts: one row per touching body pair per frame (the contract), with the
mean contact point, the unit sum of the normals (from the lower to the higher
body index) and the summed normal impulse (normal force times timestep).
Contacts MuJoCo excludes (gap, fused bodies) are not touching. A contact of
a 1D flex element (a rope) counts for the element's vertex body nearest the
contact point.

`simulate` steps a model with optional per-step controls and applied forces;
`rollout_traces` runs many open-loop rollouts in C with ``mujoco.rollout``
(threads, the GIL released), one stride at a time, and records each frame
from the data the rollout leaves (its warm start included), so its traces
equal `simulate`'s bit for bit.
"""

from __future__ import annotations

import bisect
import ctypes
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import mujoco
import numpy as np

from simpatterns.simulators.mujoco.growing import GrowingArrays
from simpatterns.simulators.mujoco.model import BodyMap, describe_bodies, load_model
from simpatterns.trace import RawEvent, Trace, collision_events, empty_contacts

SIMULATOR_NAME = "mujoco"
POSITIONS = ("xipos", "xpos")  # a body's centre of mass, its frame origin

# integrators whose mj_step is one forward pass then one update, so the data after it still
# describe the step's start state (checked on every MJCF file shipped with mujoco and gymnasium)
_SINGLE_STEP = frozenset(int(getattr(mujoco.mjtIntegrator, n)) for n in
                         ("mjINT_EULER", "mjINT_IMPLICIT", "mjINT_IMPLICITFAST", "mjINT_DISCRETE")
                         if hasattr(mujoco.mjtIntegrator, n))
# features whose state mjData carries from step to step outside mjtState (sleeping trees, the
# ipc contact solver's): mj_step updates it after its forward pass (a tree put to sleep has its
# velocities zeroed), and mujoco.rollout, which restarts from mjtState, does not carry it
_CARRIED = sum(int(getattr(mujoco.mjtEnableBit, n)) for n in ("mjENBL_SLEEP", "mjENBL_IPC")
               if hasattr(mujoco.mjtEnableBit, n))


def forward_first(model: mujoco.MjModel) -> bool:
    """True when a recorded step needs an ``mj_forward`` of its own before ``mj_step``: the
    integrator (RK4) leaves data that describe none of the trajectory's states, or the step
    changes them after its forward pass (sleeping, ipc)."""
    return int(model.opt.integrator) not in _SINGLE_STEP or bool(int(model.opt.enableflags) & _CARRIED)


def carries_state(model: mujoco.MjModel) -> bool:
    """True when the data carry state that ``mj_setState`` cannot restore (sleeping, ipc)."""
    return bool(int(model.opt.enableflags) & _CARRIED)


def check_position(position: str) -> str:
    if position not in POSITIONS:
        raise ValueError(f"position must be one of {', '.join(POSITIONS)} (centre of mass, frame origin), "
                         f"got {position!r}")
    return position


class _Buffers:
    """Per-frame arrays in fixed-size blocks: recording never copies what it already holds
    (a doubling buffer's copies and fresh pages cost more than the recording itself)."""

    BLOCK = 256

    def __init__(self, shapes: dict[str, tuple[int, ...]]):
        self.shapes = shapes
        self.blocks: list[dict[str, np.ndarray]] = []
        self.size = 0

    def row(self) -> tuple[dict[str, np.ndarray], int]:
        """The block and index where frame ``size`` goes (a new block when the last is full)."""
        k, i = divmod(self.size, self.BLOCK)
        if k == len(self.blocks):
            self.blocks.append({n: np.empty((self.BLOCK,) + shape) for n, shape in self.shapes.items()})
        return self.blocks[k], i

    def column(self, name: str, start: int = 0) -> np.ndarray:
        """``[size - start, ...]``: one array over the recorded frames from ``start`` on."""
        full, rest = divmod(self.size, self.BLOCK)
        parts = [b[name] for b in self.blocks[:full]] + ([self.blocks[full][name][:rest]] if rest else [])
        first, skip = divmod(start, self.BLOCK)
        parts = parts[first:]
        if parts and skip:
            parts[0] = parts[0][skip:]
        if not parts:
            return np.empty((0,) + self.shapes[name])
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


@dataclass
class _Assembled:
    """What earlier assemblies made of the frames before ``frames``, kept so that the next
    assembly computes only the frames recorded since (an episode's trace is asked for after
    every step): the trace's arrays, growing (``contact_rows`` of the contact arrays belong
    to those frames), and the collision events up to frame ``frames - 1``, which later
    frames cannot change."""

    frames: int = 0
    contact_rows: int = 0
    arrays: GrowingArrays = field(default_factory=GrowingArrays)
    events: list[Any] = field(default_factory=list)


_CONTACT_FIELDS = ("pos", "frame", "geom", "flex", "elem", "vert", "efc_address", "exclude")


@dataclass
class _ContactRows:
    """Raw contacts of the recorded frames, mapped to trace bodies once, at assembly.

    Recording copies the bytes of the ``mjContact`` structs in one call (``raw``; the
    field offsets are read once from ``d.contact``'s numpy views): a dozen numpy calls per
    step on tiny arrays would cost more than the recording of everything else."""

    frame: list[int] = field(default_factory=list)
    raw: list[np.ndarray] = field(default_factory=list)
    force: list[np.ndarray] = field(default_factory=list)
    stride: int = 0
    offsets: dict[str, int] = field(default_factory=dict)

    def layout(self, con: Any) -> None:
        """Field offsets inside one ``mjContact`` (from the addresses of ``d.contact``'s views)."""
        views = {n: getattr(con, n) for n in _CONTACT_FIELDS}
        address = {n: v.__array_interface__["data"][0] for n, v in views.items()}
        self.stride = int(views["pos"].strides[0])
        if any(v.strides[0] != self.stride for v in views.values()):
            raise RuntimeError("unexpected mjContact layout: fields with different strides")
        base = min(address.values())
        self.offsets = {n: a - base for n, a in address.items()}

    def copy(self, con: Any, n: int) -> np.ndarray:
        """The ``n`` contacts' structs as bytes ``[n, stride]``."""
        start = con.pos.__array_interface__["data"][0] - self.offsets["pos"]
        return np.frombuffer((ctypes.c_uint8 * (n * self.stride)).from_address(start), np.uint8).reshape(n, -1).copy()

    def column(self, raw: np.ndarray, name: str, dtype: Any, width: int) -> np.ndarray:
        """Field ``name`` of every row of ``raw`` as ``[K, width]``."""
        off = self.offsets[name]
        size = np.dtype(dtype).itemsize * width
        return np.ascontiguousarray(raw[:, off:off + size]).view(dtype).reshape(-1, width)


class TraceRecorder:
    """Builds a `Trace` from an ``MjData`` stepped by someone else (see the module docstring).

    ``names`` renames MuJoCo bodies by id; ``meta`` is merged into the trace's meta;
    ``position`` is ``"xipos"`` (centres of mass) or ``"xpos"`` (frame origins); a given
    ``body_map`` must come from `describe_bodies` with the same ``position``.
    ``incremental=True``: the trace is asked for again as it grows (after every step of an
    environment's episode), so `trace` keeps what it made of the frames recorded and the
    next call computes only the frames recorded since: the trace's arrays are read-only
    views of the first rows of arrays that grow (`GrowingArrays`; a trace of n frames costs
    its new rows, not a copy of all n). The traces equal those made afresh, and stay as they
    were when later ones are made; they share their collision event objects, which are not
    to be changed.
    """

    def __init__(self, model: Any, *, stride: int = 1, names: dict[int, str] | None = None,
                 body_map: BodyMap | None = None, meta: dict[str, Any] | None = None, position: str = "xipos",
                 incremental: bool = False):
        if stride < 1:
            raise ValueError(f"stride must be >= 1, got {stride}")
        self.model = load_model(model)
        self.stride = int(stride)
        self.position = check_position(position)
        self.map = body_map or describe_bodies(self.model, names, position)
        self.meta = dict(meta or {})
        self.incremental = bool(incremental)
        m = self.model
        root = m.body_rootid[1:]
        parents = set(m.body_parentid[1:].tolist())
        # a body that is its own root and has no children is its subtree: its centre is xipos and
        # its cvel is already about it; only the other bodies (and every frame origin) need
        # their root's subtree centre
        alone = (root == np.arange(1, m.nbody)) & ~np.isin(np.arange(1, m.nbody), list(parents))
        self._needs_root = np.flatnonzero(~alone if position == "xipos" else np.ones_like(alone))
        self._roots = np.unique(root[self._needs_root])  # MuJoCo body ids whose subtree_com is recorded
        self._root_slot = np.searchsorted(self._roots, root[self._needs_root])
        self._timestep = float(m.opt.timestep)
        self._flex_elem_verts = self._flex_elements(m)
        self._pyramidal = m.opt.cone == int(mujoco.mjtCone.mjCONE_PYRAMIDAL)
        self.reset()

    @staticmethod
    def _flex_elements(m: mujoco.MjModel) -> list[np.ndarray]:
        """Per flex: ``[nelem, dim + 1]`` global vertex ids of each element."""
        out = []
        for f in range(m.nflex):
            dim, n = int(m.flex_dim[f]), int(m.flex_elemnum[f])
            adr = int(m.flex_elemdataadr[f])
            local = m.flex_elem[adr: adr + n * (dim + 1)].reshape(n, dim + 1)
            out.append(local + int(m.flex_vertadr[f]))
        return out

    def reset(self) -> None:
        """Forget everything recorded (the next `step` is physics step 0)."""
        nb = self.model.nbody - 1
        self._buf = _Buffers({"pos": (nb, 3), "xquat": (nb, 4), "cvel": (nb, 6), "com": (self._roots.size, 3)})
        self._contacts = _ContactRows()
        self._steps = 0
        self._static: tuple[np.ndarray, np.ndarray] | None = None
        self._start_time: float | None = None
        self._assembled = _Assembled()

    @property
    def num_frames(self) -> int:
        return self._buf.size

    @property
    def steps(self) -> int:
        """Physics steps seen so far."""
        return self._steps

    def advance(self, data: mujoco.MjData, nstep: int = 1) -> None:
        """Step ``data`` ``nstep`` times with ``mj_step`` (its current controls and applied
        forces held), recording every ``stride``-th step's start state, for any integrator."""
        m, stride = self.model, self.stride
        first = forward_first(m)
        left = int(nstep)
        while left > 0:
            if self._steps % stride:  # off the grid: run up to the next recorded step in one call
                n = min(left, stride - self._steps % stride)
                mujoco.mj_step(m, data, nstep=n)
            else:
                n = 1
                if first:
                    mujoco.mj_forward(m, data)
                    self._record(data, data.time)
                    mujoco.mj_step(m, data)
                else:
                    mujoco.mj_step(m, data)
                    self._record(data, data.time - self._timestep)
            self._steps += n
            left -= n

    def step(self, data: mujoco.MjData) -> None:
        """Call after each ``mj_step`` of your own loop: keeps every ``stride``-th step's start
        state, which the data still describe with a single-step integrator (not with RK4,
        sleeping or ipc: use `advance`, which steps the data itself)."""
        if forward_first(self.model):
            m = self.model
            why = ("sleeping or ipc" if int(m.opt.integrator) in _SINGLE_STEP
                   else f"the integrator {mujoco.mjtIntegrator(int(m.opt.integrator)).name}")
            raise ValueError(f"TraceRecorder.step: with {why}, the data after mj_step describe no state of the "
                             "trajectory; step with recorder.advance(data) instead")
        if self._steps % self.stride == 0:
            self._record(data, data.time - self._timestep)
        self._steps += 1

    def capture(self, data: mujoco.MjData) -> None:
        """Record the current state as one frame, after ``mj_forward`` (not after a step):
        for a last frame, or for states set by hand. Counts as ``stride`` steps."""
        self._record(data, data.time)
        self._steps += self.stride

    def _record(self, d: mujoco.MjData, t: float) -> None:
        buf = self._buf
        f = buf.size
        block, i = buf.row()
        if self._start_time is None:
            self._start_time = float(t)
            wg = self.map.world_geoms
            quat = np.zeros((wg.size, 4))
            for k, g in enumerate(wg):
                mujoco.mju_mat2Quat(quat[k], d.geom_xmat[g])
            self._static = (d.geom_xpos[wg].copy(), quat)
        block["pos"][i] = (d.xipos if self.position == "xipos" else d.xpos)[1:]
        block["xquat"][i] = d.xquat[1:]
        block["cvel"][i] = d.cvel[1:]
        if self._roots.size:
            block["com"][i] = d.subtree_com[self._roots]
        buf.size = f + 1
        if d.ncon:
            self._record_contacts(d, f)

    def _record_contacts(self, d: mujoco.MjData, f: int) -> None:
        con = d.contact
        rows = self._contacts
        if not rows.stride:
            rows.layout(con)
        n = d.ncon
        rows.frame.append(f)
        rows.raw.append(rows.copy(con, n))
        rows.force.append(self._normal_force(d, con.efc_address, con.dim) if d.nefc else np.zeros(n))

    def _contact_bodies(self, frame: np.ndarray, geom: np.ndarray, flex: np.ndarray, elem: np.ndarray,
                        vert: np.ndarray, point: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Trace body of both sides of each contact ``[K, 2]`` (-1: none). A flex side counts for
        its vertex, or for the element's vertex nearest the contact point (a vertex's position is
        its body's recorded position)."""
        m = self.model
        body = np.full(geom.shape, -1, dtype=np.int64)
        if self.map.of_geom.size:
            body = np.where(geom >= 0, self.map.of_geom[np.maximum(geom, 0)], -1)
        vbody = self.map.flex_vert_body
        for fx, elems in enumerate(self._flex_elem_verts):
            for side in (0, 1):
                on = flex[:, side] == fx
                if not on.any():
                    continue
                rows = np.flatnonzero(on)
                by_vert = vert[rows, side] >= 0
                out = np.empty(rows.size, dtype=np.int64)
                out[by_vert] = vbody[vert[rows[by_vert], side] + int(m.flex_vertadr[fx])]
                r = rows[~by_vert]
                if r.size:
                    cand = vbody[elems[elem[r, side]]]  # [k, dim + 1] trace bodies of the element's vertices
                    # buffer column b - 1 holds MuJoCo body b
                    where = pos[frame[r][:, None], m.flex_vertbodyid[elems[elem[r, side]]] - 1]
                    nearest = np.argmin(((where - point[r][:, None]) ** 2).sum(axis=2), axis=1)
                    out[~by_vert] = cand[np.arange(r.size), nearest]
                body[rows, side] = out
        return body

    def _normal_force(self, d: mujoco.MjData, adr: np.ndarray, dim: np.ndarray) -> np.ndarray:
        """Normal force of each contact from the constraint forces (what ``mj_contactForce``
        gives as its first component): pyramidal cones spread it over 2 (dim - 1) edges."""
        efc = d.efc_force
        adr = np.maximum(adr, 0)  # excluded contacts (address -1) are dropped at assembly
        if not self._pyramidal or (dim == 1).all():
            return efc[adr]
        rows = np.where(dim > 1, 2 * (dim - 1), 1)
        k = np.arange(int(rows.max()))
        take = k[None, :] < rows[:, None]
        return np.where(take, efc[np.minimum(adr[:, None] + k[None, :], efc.size - 1)], 0.0).sum(axis=1)

    # ------------------------------------------------------------- assembly
    def trace(self, meta: dict[str, Any] | None = None, final: mujoco.MjData | None = None) -> Trace:
        """The trace recorded so far. ``final``: end it with ``final``'s current state too
        (computed with ``mj_forward``) when that state falls on the stride grid, i.e. after
        a multiple of ``stride`` steps; the recorder itself is left as it was."""
        if final is not None and self._steps % self.stride == 0 and self._steps > 0:
            mujoco.mj_forward(self.model, final)
            size, rows = self._buf.size, len(self._contacts.frame)
            self._record(final, final.time)
            try:
                return self._assemble(meta, size)
            finally:
                self._buf.size = size
                c = self._contacts
                del c.frame[rows:], c.raw[rows:], c.force[rows:]
        return self._assemble(meta, self._buf.size)

    def _assemble(self, meta: dict[str, Any] | None, kept: int) -> Trace:
        """The trace of every frame recorded; the first ``kept`` stay recorded (the rest is
        the final state, dropped after), so what is made of them is kept for the next call."""
        m = self.model
        T = self._buf.size
        if T == 0:
            raise ValueError("nothing recorded: step with advance(data) (or capture(data))")
        done = self._assembled
        start = done.frames
        N = self.map.num_world + m.nbody - 1
        pos = self._buf.column("pos", start)
        frames = self._frames(start, N, pos)
        frames["time"] = np.arange(start, T) * (self.stride * m.opt.timestep)
        contacts = self._contact_arrays(N, pos, start)
        if self.incremental:
            # the trace's arrays are read-only views of the first rows of growing ones: only the
            # new frames' rows are written (the last frame of the previous trace, its final state,
            # is written over; GrowingArrays keeps a row handed out as it was)
            grown = done.arrays
            for k, v in frames.items():
                grown.put(k, start, v)
            for k, v in contacts.items():
                grown.put(k, done.contact_rows, v)
            rows = done.contact_rows + len(contacts["contact_frame"])
            arrays = {k: grown.view(k, T) for k in frames} | {k: grown.view(k, rows) for k in contacts}
        else:
            arrays = frames | contacts
        names = [b.name for b in self.map.bodies]
        events = done.events + self._new_events(arrays, start, T, names)
        if self.incremental and kept > start:
            # keep what the frames that stay recorded made: their rows, and the events before the
            # last of them (an event at a frame depends on that frame and the one before only)
            done.contact_rows += int(np.searchsorted(contacts["contact_frame"], kept))
            done.events = [e for e in events if e.frame < kept]
            done.frames = kept
        position, velocity, angular = arrays.pop("position"), arrays.pop("velocity"), arrays.pop("angular")
        quaternion, tilt, time = arrays.pop("quaternion"), arrays.pop("tilt"), arrays.pop("time")
        contacts = arrays
        full_meta = {
            "simulator": SIMULATOR_NAME,
            "mujoco_version": mujoco.__version__,
            "dt": float(m.opt.timestep),
            "stride": self.stride,
            "steps": self._steps,
            "gravity": m.opt.gravity.tolist(),
            "units": "m",
            "world_size": [round(2.0 * float(m.stat.extent), 6)] * 3,
            "start_time": float(self._start_time or 0.0),
            "position": self.position,
            "integrator": mujoco.mjtIntegrator(int(m.opt.integrator)).name[len("mjINT_"):],
        }
        ropes = self._ropes()
        if ropes:
            full_meta["ropes"] = ropes
        full_meta.update(self.meta)
        full_meta.update(meta or {})
        return Trace(bodies=list(self.map.bodies), time=time, position=position, angle=tilt, velocity=velocity,
                     angular_velocity=angular, events=events, meta=full_meta, quaternion=quaternion, **contacts)

    def _frames(self, start: int, n: int, pos: np.ndarray) -> dict[str, np.ndarray]:
        """Positions, velocities, angular velocities, quaternions and tilts of the trace's
        ``n`` bodies at the recorded frames from ``start`` on (``pos``: their recorded positions)."""
        buf = self._buf
        W = self.map.num_world
        xquat, cvel = buf.column("xquat", start), buf.column("cvel", start)
        T = len(pos)
        omega = cvel[..., :3]
        lin = cvel[..., 3:].copy()
        if self._needs_root.size:
            k = self._needs_root
            lin[:, k] += np.cross(omega[:, k], pos[:, k] - buf.column("com", start)[:, self._root_slot])
        position = np.zeros((T, n, 3))
        velocity = np.zeros((T, n, 3))
        angular = np.zeros((T, n, 3))
        quaternion = np.zeros((T, n, 4))
        position[:, W:] = pos
        velocity[:, W:] = lin
        angular[:, W:] = omega
        quaternion[:, W:] = xquat
        if W:
            assert self._static is not None
            position[:, :W] = self._static[0]
            quaternion[:, :W] = self._static[1]
        x, y = quaternion[..., 1], quaternion[..., 2]
        tilt = np.arccos(np.clip(1.0 - 2.0 * (x * x + y * y), -1.0, 1.0))
        return {"position": position, "velocity": velocity, "angular": angular, "quaternion": quaternion,
                "tilt": tilt}

    @staticmethod
    def _new_events(contacts: dict[str, np.ndarray], start: int, T: int, names: list[str]) -> list[RawEvent]:
        """The collision events at frames ``start`` on (a start or an end at a frame compares
        it with the frame before, so the rows from frame ``start - 1`` on are read)."""
        before = max(start - 1, 0)
        frame = contacts["contact_frame"]
        r = int(np.searchsorted(frame, before))
        events = collision_events(frame[r:] - before, contacts["contact_a"][r:], contacts["contact_b"][r:],
                                  T - before, names)
        if not before:
            return events
        return [RawEvent(e.kind, e.frame + before, e.params) for e in events if e.frame > 0]

    def _ropes(self) -> list[dict[str, Any]]:
        """The model's 1D flexes (ropes, cables): name, trace indices of their beads in order
        along the rope, and whether the rope is a closed loop."""
        m = self.model
        out = []
        for f, elems in enumerate(self._flex_elem_verts):
            if int(m.flex_dim[f]) != 1 or elems.size == 0:
                continue
            adr, num = int(m.flex_vertadr[f]), int(m.flex_vertnum[f])
            beads = self.map.flex_vert_body[adr: adr + num]
            if (beads < 0).any():
                continue
            closed = bool(((elems[:, 0] == adr + num - 1) & (elems[:, 1] == adr)).any()
                          or ((elems[:, 1] == adr + num - 1) & (elems[:, 0] == adr)).any())
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_FLEX, f) or f"rope {f}"
            out.append({"name": name, "bodies": beads.tolist(), "closed": closed})
        return out

    def _contact_arrays(self, n: int, pos: np.ndarray, start: int = 0) -> dict[str, np.ndarray]:
        """The contact rows of the frames from ``start`` on; ``pos``: the recorded positions
        of those frames."""
        c = self._contacts
        i = bisect.bisect_left(c.frame, start)
        if i == len(c.frame):
            return empty_contacts(3)
        raw = np.concatenate(c.raw[i:])
        frame = np.repeat(np.asarray(c.frame[i:], dtype=np.int64), [len(x) for x in c.raw[i:]])
        force = np.concatenate(c.force[i:]) * self.model.opt.timestep
        adr, exclude = c.column(raw, "efc_address", np.int32, 1)[:, 0], c.column(raw, "exclude", np.int32, 1)[:, 0]
        live = (adr >= 0) & (exclude == 0)  # MuJoCo excludes contacts in a gap or of fused bodies
        raw, frame, force = raw[live], frame[live], force[live]
        point = c.column(raw, "pos", np.float64, 3)
        normal = c.column(raw, "frame", np.float64, 9)[:, :3]
        ints = {name: c.column(raw, name, np.int32, 2).astype(np.int64) for name in ("geom", "flex", "elem", "vert")}
        body = self._contact_bodies(frame - start, ints["geom"], ints["flex"], ints["elem"], ints["vert"], point, pos)
        keep = (body >= 0).all(axis=1) & (body[:, 0] != body[:, 1])
        if not keep.any():
            return empty_contacts(3)
        frame, body, point, normal, force = frame[keep], body[keep], point[keep], normal[keep], force[keep]
        normal = np.where((body[:, 0] > body[:, 1])[:, None], -normal, normal)  # from the lower index to the higher
        a, b = body.min(axis=1), body.max(axis=1)
        key = (frame * n + a) * n + b
        uniq, inverse, count = np.unique(key, return_inverse=True, return_counts=True)
        k = uniq.size
        mean_point = np.zeros((k, 3))
        np.add.at(mean_point, inverse, point)
        mean_point /= count[:, None]
        sum_normal = np.zeros((k, 3))
        np.add.at(sum_normal, inverse, normal)
        length = np.linalg.norm(sum_normal, axis=1)
        first = np.zeros(k, dtype=np.int64)
        first[inverse[::-1]] = np.arange(inverse.size)[::-1]  # first row of each pair
        sum_normal = np.where(length[:, None] > 1e-12, sum_normal / np.maximum(length, 1e-300)[:, None],
                              normal[first])
        impulse = np.bincount(inverse, weights=force, minlength=k)
        index_type = np.int16 if n < 32768 else np.int32
        return {
            "contact_frame": (uniq // (n * n)).astype(np.int32),
            "contact_a": ((uniq // n) % n).astype(index_type),
            "contact_b": (uniq % n).astype(index_type),
            "contact_point": mean_point,
            "contact_normal": sum_normal,
            "contact_impulse": impulse,
        }


# ----------------------------------------------------------------- running
StepHook = Callable[[int, mujoco.MjData], None]


def simulate(
    model: Any,
    steps: int,
    *,
    stride: int = 1,
    data: mujoco.MjData | None = None,
    controls: np.ndarray | None = None,
    forces: np.ndarray | None = None,
    before_step: StepHook | None = None,
    names: dict[int, str] | None = None,
    meta: dict[str, Any] | None = None,
    position: str = "xipos",
) -> Trace:
    """Step ``model`` ``steps`` times from ``data`` (default: a fresh ``MjData``) and record it.

    ``controls`` ``[steps, nu]`` (or ``[nu]``, held) sets ``data.ctrl``; ``forces``
    ``[steps, nbody, 6]`` (or ``[nbody, 6]``, held) sets ``data.xfrc_applied`` (force
    then torque, world frame) before each step; ``before_step(k, data)`` may set
    anything else. Frame ``f`` is the state at step ``f * stride``, for any integrator;
    ``position`` picks centres of mass (``"xipos"``) or frame origins (``"xpos"``).
    """
    m = load_model(model)
    d = data if data is not None else mujoco.MjData(m)
    ctrl = None if controls is None else np.asarray(controls, dtype=np.float64)
    frc = None if forces is None else np.asarray(forces, dtype=np.float64)
    if ctrl is not None and ctrl.shape[-1] != m.nu:
        raise ValueError(f"controls have {ctrl.shape[-1]} columns; the model has nu = {m.nu} actuators")
    if frc is not None and frc.shape[-2:] != (m.nbody, 6):
        raise ValueError(f"forces must be [steps, nbody={m.nbody}, 6] or [nbody, 6], got {frc.shape}")
    rec = TraceRecorder(m, stride=stride, names=names, meta=meta, position=position)
    if ctrl is not None and ctrl.ndim == 1:
        d.ctrl[:] = ctrl
    if frc is not None and frc.ndim == 2:
        d.xfrc_applied[:] = frc
    if before_step is None and (ctrl is None or ctrl.ndim == 1) and (frc is None or frc.ndim == 2):
        rec.advance(d, int(steps))  # nothing changes between steps
        return rec.trace()
    for k in range(int(steps)):
        if ctrl is not None and ctrl.ndim > 1:
            d.ctrl[:] = ctrl[k]
        if frc is not None and frc.ndim > 2:
            d.xfrc_applied[:] = frc[k]
        if before_step is not None:
            before_step(k, d)
        rec.advance(d)
    return rec.trace()


def rollout_traces(
    model: Any,
    steps: int,
    *,
    initial_states: np.ndarray | None = None,
    controls: np.ndarray | None = None,
    forces: np.ndarray | None = None,
    stride: int = 1,
    nthread: int | None = None,
    names: dict[int, str] | None = None,
    meta: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
    position: str = "xipos",
) -> list[Trace]:
    """Many open-loop rollouts stepped in C by ``mujoco.rollout`` (threads, GIL released).

    ``initial_states`` ``[B, nstate]`` full physics states (``mjSTATE_FULLPHYSICS``;
    default: the model's initial state, once); ``controls`` ``[B or 1, steps, nu]`` and
    ``forces`` ``[B or 1, steps, nbody, 6]`` applied body forces (``xfrc_applied``); a single
    initial state, control or force sequence is shared by all B rollouts.
    Each rollout runs one stride at a time on one ``MjData`` (``nthread`` of them, one per
    thread); a frame is that data after ``mj_forward`` with the next step's controls, warm
    start included, so the traces equal `simulate`'s bit for bit. The steps after the last
    frame are not run. Models with sleeping or the ipc solver enabled carry state that a
    rollout restarted from ``mjSTATE_FULLPHYSICS`` would lose: they are stepped with
    ``mj_step`` on the same threads instead.
    """
    from mujoco import rollout as mj_rollout

    m = load_model(model)
    check_position(position)
    spec = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
    nstate = mujoco.mj_stateSize(m, spec)
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    if initial_states is None:
        d0 = mujoco.MjData(m)
        x0 = np.empty(nstate)
        mujoco.mj_getState(m, d0, x0, spec)
        initial_states = x0[None]
    x0 = np.atleast_2d(np.asarray(initial_states, dtype=np.float64))
    if x0.shape[1] != nstate:
        raise ValueError(f"initial_states have {x0.shape[1]} columns; full physics states of this model have {nstate}")
    c = None if controls is None or m.nu == 0 else np.asarray(controls, dtype=np.float64).reshape((-1, steps, m.nu))
    f = None if forces is None else np.asarray(forces, dtype=np.float64).reshape((-1, steps, m.nbody * 6))
    nbatch = max(x0.shape[0], 1 if c is None else c.shape[0], 1 if f is None else f.shape[0])
    if x0.shape[0] not in (1, nbatch):
        raise ValueError(f"initial_states have {x0.shape[0]} rows; controls and forces ask for {nbatch} rollouts")
    parts: list[np.ndarray] = []
    cspec = 0
    if c is not None:
        parts.append(np.broadcast_to(c, (nbatch, steps, m.nu)))
        cspec |= int(mujoco.mjtState.mjSTATE_CTRL)
    if f is not None:
        parts.append(np.broadcast_to(f, (nbatch, steps, m.nbody * 6)))
        cspec |= int(mujoco.mjtState.mjSTATE_XFRC_APPLIED)
    control = np.ascontiguousarray(np.concatenate(parts, axis=2)) if parts else None
    metas = list(meta) if isinstance(meta, (list, tuple)) else [dict(meta or {})] * nbatch
    body_map = describe_bodies(m, names, position)

    def run(i: int, d: mujoco.MjData, pool: Any) -> Trace:
        rec = TraceRecorder(m, stride=stride, body_map=body_map, meta=metas[i], position=position)
        mujoco.mj_resetData(m, d)  # what the rollout itself starts from
        mujoco.mj_setState(m, d, x0[min(i, x0.shape[0] - 1)], spec)
        if carries_state(m):  # a rollout per stride would drop that state: step here (GIL released in mj_step)
            for k in range(steps):
                if control is not None:
                    mujoco.mj_setState(m, d, control[i, k], cspec)
                rec.advance(d)
            return rec.trace()
        state = np.empty((1, stride, nstate))
        sensors = np.empty((1, stride, m.nsensordata))
        x = np.empty((1, nstate))
        for k in range(0, steps, stride):
            if control is not None:
                mujoco.mj_setState(m, d, control[i, k], cspec)
            mujoco.mj_forward(m, d)  # the data now describe state k, as mj_step's own forward pass does
            rec.capture(d)
            if k + stride >= steps:
                break
            mujoco.mj_getState(m, d, x[0], spec)
            ctrl = None if control is None else control[i: i + 1, k: k + stride]
            # skip_checks: every array is already C-ordered float64 of the right shape
            pool.rollout([m], [d], x, ctrl, control_spec=cspec, skip_checks=True, nstep=stride,
                         initial_warmstart=d.qacc_warmstart[None].copy(), state=state, sensordata=sensors,
                         chunk_size=1)
        return rec.trace({"steps": steps})

    threads = max(1, min(nbatch, nthread or 1))
    datas = [mujoco.MjData(m) for _ in range(threads)]
    pools = [mj_rollout.Rollout(nthread=0) for _ in range(threads)]
    try:
        if threads == 1:
            return [run(i, datas[0], pools[0]) for i in range(nbatch)]
        from concurrent.futures import ThreadPoolExecutor

        def worker(t: int) -> list[Trace]:
            return [run(i, datas[t], pools[t]) for i in range(t, nbatch, threads)]

        with ThreadPoolExecutor(threads) as ex:
            per_thread = list(ex.map(worker, range(threads)))
        return [per_thread[i % threads][i // threads] for i in range(nbatch)]
    finally:
        for pool in pools:
            pool.close()
