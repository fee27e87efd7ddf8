"""REFERENCE, frozen: the PHYRE recorder (`simulate`) as it was before issue 32's speed-up
(simpatterns/simulators/phyre/physics.py at commit 3ccc56b, with `trace.collision_events`).

Not used by the library. `test_recorder_reference.py` checks that the live recorder's
traces equal this one's bit for bit; keep it unchanged so that the check keeps meaning
something (scenes, geometry and the `Trace` type still come from the library).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pymunk
import pymunk.batch as pbatch
from pymunk._chipmunk_cffi import ffi as _ffi, lib as _lib

from simpatterns.errors import SimpatternsError
from simpatterns.simulators.phyre import geometry as geo
from simpatterns.simulators.phyre.scene import ROLE_AGENT, BodySpec, Scene
from simpatterns.trace import (
    HORIZON_KEY,
    STOPPED_KEY,
    STOPPED_SETTLED,
    STOPPED_SUCCESS,
    TASK_COMPLETE,
    Body,
    COLLISION_END,
    COLLISION_START,
    RawEvent,
    Trace,
    empty_contacts,
)

DT = 1.0 / 60.0
MAX_STEPS = 1000
PX_PER_METRE = 6.0
GRAVITY = -9.8 * PX_PER_METRE
FRICTION = 0.5
RESTITUTION = 0.2
ANGULAR_DAMPING = 0.01
DENSITY = 0.25 / PX_PER_METRE**2  # kg per px^2, so masses match PHYRE's kg
SOLVE_STEPS = 180
SHAPE_FRICTION = math.sqrt(FRICTION)
SHAPE_ELASTICITY = math.sqrt(RESTITUTION)
SOLVER_ITERATIONS = 10
COLLISION_SLOP = 0.05  # px; Box2D's linear slop is 0.005 m = 0.03 px
ACTION_MIN_RADIUS = 2.0
ACTION_RADIUS_RANGE = 30.0
ACTION_POSITION_SCALE = 255.0
AGENT_NAME = "red ball"
SIMULATOR_NAME = "phyre-pymunk"


class InvalidAction(SimpatternsError):
    """An action PHYRE would reject; ``reason`` says why in one line."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Rollout:
    """The result of one action: a trace, or the reason nothing was simulated."""

    trace: Trace | None
    invalid_reason: str | None = None

    @property
    def valid(self) -> bool:
        return self.trace is not None

    @property
    def success(self) -> bool:
        return self.trace is not None and self.trace.success


def action_to_ball(action: Sequence[float]) -> tuple[float, float, float]:
    """(x, y, r) in [0, 1]^3 -> ball centre x, y and radius in pixels.

    Raises `InvalidAction` for wrong length, non-finite or out-of-range values.
    """
    try:
        vals = [float(v) for v in action]
    except (TypeError, ValueError) as exc:
        raise InvalidAction(f"action must be three numbers (x, y, r), got {action!r}") from exc
    if len(vals) != 3:
        raise InvalidAction(f"action must have 3 values (x, y, r), got {len(vals)}")
    for name, v in zip("xyr", vals):
        if not math.isfinite(v):
            raise InvalidAction(f"action {name} = {v} is not finite")
        if not 0.0 <= v <= 1.0:
            raise InvalidAction(f"action {name} = {v} is outside [0, 1]")
    x, y, r = vals
    return (
        x * ACTION_POSITION_SCALE,
        y * ACTION_POSITION_SCALE,
        ACTION_MIN_RADIUS + ACTION_RADIUS_RANGE * r,
    )


def agent_spec(action: Sequence[float]) -> BodySpec:
    cx, cy, r = action_to_ball(action)
    spec = BodySpec("ball", True, (geo.circle(r),), {"radius": r}, x=cx, y=cy)
    spec.name, spec.color = AGENT_NAME, "red"
    return spec


class _World:
    """A pymunk space for a scene (plus the agent's ball)."""

    def __init__(self, specs: list[BodySpec]):
        self.space = pymunk.Space()
        self.space.gravity = (0.0, GRAVITY)
        self.space.iterations = SOLVER_ITERATIONS
        self.space.collision_slop = COLLISION_SLOP
        self.bodies: list[pymunk.Body] = []
        self.parts: list[tuple[dict, ...]] = []  # each body's parts about its centre of mass, as traces record them
        self.shape_owner: dict[pymunk.Shape, int] = {}
        for i, spec in enumerate(specs):
            _, cx, cy = geo.parts_area_centroid(spec.parts)
            c, s = math.cos(spec.angle), math.sin(spec.angle)
            body_type = pymunk.Body.DYNAMIC if spec.dynamic else pymunk.Body.STATIC
            body = pymunk.Body(body_type=body_type)
            body.position = (spec.x + c * cx - s * cy, spec.y + s * cx + c * cy)
            body.angle = spec.angle
            if spec.dynamic:
                body.velocity = tuple(spec.velocity)
                body.angular_velocity = spec.angular_velocity
            shapes = []
            self.parts.append(geo.shift_parts(spec.parts, -cx, -cy))
            for part in self.parts[-1]:
                if part["kind"] == "circle":
                    shape = pymunk.Circle(body, part["radius"], tuple(part["center"]))
                else:
                    shape = pymunk.Poly(body, [tuple(v) for v in part["vertices"]], radius=0.0)
                shape.friction = SHAPE_FRICTION
                shape.elasticity = SHAPE_ELASTICITY
                if spec.dynamic:
                    shape.density = DENSITY
                shapes.append(shape)
                self.shape_owner[shape] = i
            self.space.add(body, *shapes)
            self.bodies.append(body)
        self.dynamic_index = [i for i, spec in enumerate(specs) if spec.dynamic]
        self.body_ids = np.array([b.id for b in self.bodies], dtype=np.uintp)  # what arbiters name bodies by

    def overlapping(self, index: int) -> list[int]:
        """Bodies whose shapes overlap (penetrate) body ``index``'s shapes."""
        hits: set[int] = set()
        for shape in self.bodies[index].shapes:
            for info in self.space.shape_query(shape):
                other = self.shape_owner.get(info.shape)
                if other is None or other == index:
                    continue
                if any(p.distance < -1e-9 for p in info.contact_point_set.points):
                    hits.add(other)
        return sorted(hits)

    def touching_pairs(self) -> list[tuple[int, int, tuple, tuple]]:
        """Pairs in contact now, with a contact point and normal (geometric)."""
        out: dict[tuple[int, int], tuple] = {}
        for i in self.dynamic_index:
            for shape in self.bodies[i].shapes:
                for info in self.space.shape_query(shape):
                    j = self.shape_owner.get(info.shape)
                    if j is None or j == i or not info.contact_point_set.points:
                        continue
                    a, b = (i, j) if i < j else (j, i)
                    n = info.contact_point_set.normal
                    if i > j:
                        n = -n
                    p = info.contact_point_set.points[0].point_a
                    out.setdefault((a, b), ((p.x, p.y), (n.x, n.y)))
        return [(a, b, p, n) for (a, b), (p, n) in sorted(out.items())]


def scene_specs(scene: Scene, action: Sequence[float] | None) -> list[BodySpec]:
    """The scene's bodies plus the agent's ball (none when ``action`` is None)."""
    return list(scene.bodies) + ([] if action is None else [agent_spec(action)])


def _place_agent(
    scene: Scene, action: Sequence[float] | None
) -> tuple[list[BodySpec], _World | None, str | None]:
    if action is None:  # purpose-built scenes without the agent's ball
        specs = scene_specs(scene, None)
        return specs, _World(specs), None
    try:
        cx, cy, r = action_to_ball(action)
    except InvalidAction as exc:
        return [], None, exc.reason
    if cx - r < 0 or cx + r > geo.SCENE_SIZE or cy - r < 0 or cy + r > geo.SCENE_SIZE:
        return [], None, f"ball at ({cx:.1f}, {cy:.1f}) radius {r:.1f} extends outside the scene"
    specs = scene_specs(scene, action)
    world = _World(specs)
    hits = world.overlapping(len(specs) - 1)
    if hits:
        return specs, None, "ball overlaps " + ", ".join(specs[i].name or specs[i].kind for i in hits)
    return specs, world, None


def simulate(
    scene: Scene,
    action: Sequence[float] | None,
    *,
    max_steps: int = MAX_STEPS,
    stride: int = 1,
    stop_on_success: bool = True,
    stop_when_settled: bool = False,
    seed: int | None = None,
) -> Rollout:
    """Place the red ball, run the world and record every step.

    Returns a `Rollout`; for an invalid action ``trace`` is None and
    ``invalid_reason`` says why (nothing is simulated). ``action=None`` runs
    the scene without the agent's ball (purpose-built scenes). A scene
    without a goal never succeeds.

    ``stop_when_settled`` (a search accelerator, off by default) ends a run
    early, as failed, once every dynamic body has been slower than
    `SETTLE_SPEED` for `SETTLE_FRAMES` frames while the goal pair is not
    touching. It is a heuristic, not a proof: a body creeping below the
    threshold can still reach the goal (template 00017 variant 1, action
    (0.8997, 0.2029, 0.2286) "settles" at frame 150 and succeeds at frame
    ~770 in the full run). So it is used only where a wrong "failed" costs
    search quality (annealing objectives, variant screening), never to
    decide an outcome that is reported or stored (datasets, menus, the
    phyre-shaped API, agent attempts, variant verification).
    ``meta["settled_frame"]`` records where.
    """
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    specs, world, reason = _place_agent(scene, action)
    if reason is not None:
        return Rollout(None, reason)
    trace = _run(world, specs, scene, max_steps, stop_on_success, stop_when_settled)
    trace.meta.update(
        {
            "action": None if action is None else [float(v) for v in action],
            "action_px": None if action is None else dict(zip(("x", "y", "radius"), action_to_ball(action))),
            "seed": seed,
        }
    )
    if stride > 1:
        trace = thin(trace, stride)
    return Rollout(trace)


_BODY_FIELDS = (pbatch.BodyFields.POSITION | pbatch.BodyFields.ANGLE | pbatch.BodyFields.VELOCITY
                | pbatch.BodyFields.ANGULAR_VELOCITY)
_ARB_FIELDS = (
    pbatch.ArbiterFields.BODY_A_ID | pbatch.ArbiterFields.BODY_B_ID | pbatch.ArbiterFields.CONTACT_COUNT
    | pbatch.ArbiterFields.TOTAL_IMPULSE | pbatch.ArbiterFields.NORMAL | pbatch.ArbiterFields.POINT_A_1
)
_GOAL_A_TYPE, _GOAL_B_TYPE = 1, 2
DAMP_EVERY = 5  # apply Box2D's per-step angular damping factor compounded every 5 steps (83 ms):
# the factor is 1 - 1.7e-4 per step, so batching changes no trajectory measurably and
# saves a third of the per-step Python cost
_DAMP = (1.0 / (1.0 + DT * ANGULAR_DAMPING)) ** DAMP_EVERY


class _CBuffer:
    """Growable C arrays for pymunk's batch iterators, freed with this object.

    pymunk 7's ``batch.Buffer`` never frees its arrays (about 1 MB leaked per
    1000-step rollout), so we own them: ``ffi.gc`` frees them on collection
    and `free` does it at once. Data leaves only as numpy copies.
    """

    def __init__(self) -> None:
        self._float_arr = _ffi.gc(_lib.pmFloatArrayNew(0), _lib.pmFloatArrayFree)
        self._int_arr = _ffi.gc(_lib.pmIntArrayNew(0), _lib.pmIntArrayFree)

    def float_buf(self):
        return _ffi.buffer(self._float_arr.arr, _ffi.sizeof("cpFloat") * self._float_arr.num)

    def int_buf(self):
        return _ffi.buffer(self._int_arr.arr, _ffi.sizeof("uintptr_t") * self._int_arr.num)

    def floats(self) -> np.ndarray:
        return np.frombuffer(self.float_buf(), dtype=np.float64).copy()

    def ints(self) -> np.ndarray:
        return np.frombuffer(self.int_buf(), dtype=np.uintp).copy()

    def free(self) -> None:
        _ffi.release(self._float_arr)
        _ffi.release(self._int_arr)


class _BatchRecorder:
    """Per-step copies of body state and arbiters into growing C buffers.

    Uses pymunk.batch's C iterators directly with prebuilt descriptors: the
    public wrapper rebuilds them on every call, which costs four times the
    copy itself at 60 Hz x 1000 steps.
    """

    def __init__(self, space: pymunk.Space, dyn: list[pymunk.Body]):
        self.body_buf, self.arb_buf = _CBuffer(), _CBuffer()
        self._space = space._space
        self._body_data = self._descriptor(_BODY_FIELDS.value, self.body_buf)
        self._arb_data = self._descriptor(_ARB_FIELDS.value, self.arb_buf)
        self._body_fn = _ffi.addressof(_lib, "pmSpaceBodyGetIteratorFuncBatched")
        self._arb_fn = _ffi.addressof(_lib, "pmSpaceArbiterIteratorFuncBatched")
        self._dyn = [b._body for b in dyn]

    @staticmethod
    def _descriptor(fields: int, buf: _CBuffer):
        data = _ffi.new("pmBatchedData *")
        data.fields = fields
        data.floatArray = buf._float_arr
        data.intArray = buf._int_arr
        return data

    def record_bodies(self) -> None:
        _lib.cpSpaceEachBody(self._space, self._body_fn, self._body_data)

    def record_arbiters(self) -> int:
        _lib.cpSpaceEachCachedArbiter(self._space, self._arb_fn, self._arb_data)
        return self.arb_buf._int_arr.num

    def free(self) -> None:
        self.body_buf.free()
        self.arb_buf.free()

    def damp(self) -> None:
        get, set_ = _lib.cpBodyGetAngularVelocity, _lib.cpBodySetAngularVelocity
        for b in self._dyn:
            set_(b, get(b) * _DAMP)


SETTLE_FRAMES = 30  # 0.5 s of rest
SETTLE_SPEED = 0.5  # px/s; resting contacts jitter well below this
SETTLE_SPIN = 0.05  # rad/s


def _run(
    world: _World, specs: list[BodySpec], scene: Scene, max_steps: int, stop_on_success: bool,
    stop_when_settled: bool = False,
) -> Trace:
    """Step and record. Body state and arbiters are copied out in one C call
    each per step (pymunk.batch) into growing buffers; Python only touches
    per-step bookkeeping, which keeps recording overhead small."""
    space = world.space
    n = len(specs)
    goal_a, goal_b = sorted(scene.goal) if scene.goal is not None else (-1, -1)
    state = {"goal": False}
    if scene.goal is not None:
        for shape in world.bodies[goal_a].shapes:
            shape.collision_type = _GOAL_A_TYPE
        for shape in world.bodies[goal_b].shapes:
            shape.collision_type = _GOAL_B_TYPE

        def goal_touch(_arb: pymunk.Arbiter, _space: pymunk.Space, _data: object) -> None:
            state["goal"] = True

        space.on_collision(_GOAL_A_TYPE, _GOAL_B_TYPE, post_solve=goal_touch)

    initial = world.touching_pairs()
    goal_touch_now = any(a == goal_a and b == goal_b for a, b, _, _ in initial)

    dyn = [world.bodies[i] for i in world.dynamic_index]
    recorder = _BatchRecorder(space, dyn)
    recorder.record_bodies()
    space.step(0.0)  # lets pymunk validate masses once; then the loop steps in C directly
    arb_counts = [0]
    run = 1 if goal_touch_now else 0
    solved_frame: int | None = None
    steps = 0
    cp_step, sp = _lib.cpSpaceStep, space._space
    each_body, body_fn, body_data = _lib.cpSpaceEachBody, recorder._body_fn, recorder._body_data
    each_arb, arb_fn, arb_data = _lib.cpSpaceEachCachedArbiter, recorder._arb_fn, recorder._arb_data
    arb_ints, damp, count = recorder.arb_buf._int_arr, recorder.damp, arb_counts.append
    body_buf, n_space = recorder.body_buf, len(space.bodies)
    settled_frame: int | None = None
    space._locked = True  # as pymunk's step does: callbacks may not add/remove bodies
    try:
        for k in range(1, max_steps + 1):
            state["goal"] = False
            cp_step(sp, DT)
            if k % DAMP_EVERY == 0:
                damp()
            each_body(sp, body_fn, body_data)
            each_arb(sp, arb_fn, arb_data)
            count(arb_ints.num)
            steps = k
            if state["goal"]:
                run += 1
                if run >= SOLVE_STEPS and solved_frame is None:
                    solved_frame = k
                    if stop_on_success:
                        break
            else:
                run = 0
                if stop_when_settled and k % SETTLE_FRAMES == 0 and _settled(body_buf, k, n_space):
                    settled_frame = k
                    break
    finally:
        space._locked = False
    body_buf, arb_buf = recorder.body_buf, recorder.arb_buf

    T = steps + 1
    # every body in pymunk's order, static ones included (they stay put), gathered into ours
    state = np.frombuffer(body_buf.float_buf(), dtype=np.float64).reshape(T, n, 6)  # a view: copied before free
    cols = _space_columns(world)
    position = state[:, :, 0:2].take(cols, axis=1)
    angle = state[:, :, 2].take(cols, axis=1)
    velocity = state[:, :, 3:5].take(cols, axis=1)
    angular_velocity = state[:, :, 5].take(cols, axis=1)
    key, columns = _arbiter_rows(arb_buf, np.asarray(arb_counts), world)
    recorder.free()
    if initial:  # frame 0's contacts (key 0 * n * n + a * n + b) come first
        init = np.array([(a * n + b, p[0], p[1], q[0], q[1], 0.0) for a, b, p, q in initial])
        key = np.concatenate((init[:, 0].astype(np.int64), key))
        columns = [np.concatenate((init[:, j + 1], c)) for j, c in enumerate(columns)]

    contacts = merge_contacts(key, columns, n)
    bodies = scene.trace_bodies(world.parts) + ([agent_body(specs[-1])] if len(specs) > len(scene.bodies) else [])
    names = [b.name for b in bodies]
    events = collision_events(contacts["contact_frame"], contacts["contact_a"], contacts["contact_b"], T, names)
    success = solved_frame is not None
    events.append(RawEvent(TASK_COMPLETE, solved_frame if success else T - 1, {"success": success}))
    meta = {
        "simulator": SIMULATOR_NAME,
        "template": scene.template,
        "variant": scene.variant,
        "params": scene.params,
        "description": scene.description,
        "goal": list(scene.goal_names) if scene.goal_names else None,
        "dt": DT,
        "stride": 1,
        "steps": steps,
        "max_steps": max_steps,
        # the episode runs max_steps steps whether or not this rollout did (see the Trace contract)
        HORIZON_KEY: max_steps + 1,
        STOPPED_KEY: (STOPPED_SUCCESS if success and steps < max_steps
                      else STOPPED_SETTLED if settled_frame is not None else None),
        "world_size": [geo.SCENE_SIZE, geo.SCENE_SIZE],
        "units": "px",
        "success": success,
        "solved_frame": solved_frame,
        "settled_frame": settled_frame,
    }
    return Trace(
        bodies=bodies,
        time=np.arange(T, dtype=np.float64) * DT,
        position=position,
        angle=angle,
        velocity=velocity,
        angular_velocity=angular_velocity,
        events=events,
        meta=meta,
        **contacts,
    )


def _settled(body_buf: _CBuffer, k: int, n_space: int) -> bool:
    """All bodies slower than the settle thresholds over the last SETTLE_FRAMES frames."""
    state = np.frombuffer(body_buf.float_buf(), dtype=np.float64).reshape(k + 1, n_space, 6)[-SETTLE_FRAMES:]
    speed = np.hypot(state[..., 3], state[..., 4])
    return bool(speed.max() < SETTLE_SPEED and np.abs(state[..., 5]).max() < SETTLE_SPIN)


def _space_columns(world: _World) -> np.ndarray:
    """For each of our bodies, its place in pymunk's batch iteration order."""
    probe = _CBuffer()
    data = _BatchRecorder._descriptor(pbatch.BodyFields.BODY_ID.value, probe)
    _lib.cpSpaceEachBody(world.space._space, _ffi.addressof(_lib, "pmSpaceBodyGetIteratorFuncBatched"), data)
    ids = probe.ints()
    probe.free()
    order = np.argsort(ids)
    return order[np.searchsorted(ids[order], world.body_ids)]


def _arbiter_rows(buf: _CBuffer, counts: np.ndarray, world: _World) -> tuple[np.ndarray, list[np.ndarray]]:
    """Batched arbiter data -> contact rows in step order, as `merge_contacts` takes them: each
    row's key ((frame * n + a) * n + b, a < b) and its columns px, py, nx, ny, impulse.

    Works column by column on strided views: gathering whole rows of a [K, 3] or [K, 6]
    array, or writing through a boolean mask and a slice at once, costs 10-40x more
    per element in numpy (the rows are small)."""
    ints = np.frombuffer(buf.int_buf(), dtype=np.uintp)  # views: (body a id, body b id, contacts) per arbiter
    floats = np.frombuffer(buf.float_buf(), dtype=np.float64)  # (impulse x, y, normal x, y, point x, y)
    if ints.size == 0:
        return np.zeros(0, np.int64), [np.zeros(0) for _ in range(5)]
    n = len(world.bodies)
    frame = np.repeat(np.arange(1, counts.size, dtype=np.int64), np.diff(counts) // 3)
    touching = ints[2::3] > 0  # cached arbiters of shapes whose boxes overlap but do not touch: dropped
    keep = None if touching.all() else np.flatnonzero(touching)

    def column(values: np.ndarray, width: int, j: int) -> np.ndarray:
        col = values[j::width]
        return col if keep is None else col[keep]

    ids = world.body_ids
    order = np.argsort(ids)
    a = order[np.searchsorted(ids[order], column(ints, 3, 0))]
    b = order[np.searchsorted(ids[order], column(ints, 3, 1))]
    sign = np.where(a > b, -1.0, 1.0)  # the normal points from a to b
    key = ((frame if keep is None else frame[keep]) * n + np.minimum(a, b)) * n + np.maximum(a, b)
    return key, [
        column(floats, 6, 4).copy(),  # always copies (a one-row view counts as contiguous): the C
        column(floats, 6, 5).copy(),  # buffer is freed next
        column(floats, 6, 2) * sign,
        column(floats, 6, 3) * sign,
        np.hypot(column(floats, 6, 0), column(floats, 6, 1)),
    ]


def agent_body(spec: BodySpec) -> Body:
    return Body(
        name=AGENT_NAME,
        color="red",
        shape="ball",
        dynamic=True,
        role=ROLE_AGENT,
        size=dict(spec.size),
        parts=(geo.circle(spec.size["radius"]),),
    )


def merge_contacts(key: np.ndarray, columns: Sequence[np.ndarray], n: int) -> dict[str, np.ndarray]:
    """One row per (frame, body pair), sorted: impulses summed, points and normals averaged
    (a jar's three parts can touch the same body in one step).

    Rows come as ``key`` ((frame * n + a) * n + b, a < b; frames in order) and five
    columns: point x, y, normal x, y, impulse. They stay separate 1-D columns: gathering
    the rows of a [K, 8] array by index is about 3x slower in numpy than `take` on each
    column. The caller's arrays are not changed."""
    if key.size == 0:
        return empty_contacts(2)
    cols = list(columns)
    if key.size > 1 and (key[1:] < key[:-1]).any():  # step order sorts frames; pairs within a step come unsorted
        order = np.argsort(key, kind="stable")
        key, cols = key[order], [c.take(order) for c in cols]
    first = np.ones(key.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    if first.all():
        return _contact_columns(key, n, *cols)
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, key.size))
    # Rows of one key are summed in an order fixed by their values: chipmunk's arbiter order
    # follows memory addresses, so it differs between processes, and so would the last bits
    # of the sums. Two rows sum the same in either order (IEEE addition commutes): only
    # groups of three or more are ordered, by point x, and by every column if x ties.
    big = counts >= 3
    if big.any():
        at = np.flatnonzero(np.repeat(big, counts))
        k, group = key[at], [c[at] for c in cols]
        order = np.lexsort((group[0], k))
        x, ks = group[0][order], k[order]
        if ((x[1:] == x[:-1]) & (ks[1:] == ks[:-1])).any():
            order = np.lexsort((*group[::-1], k))
        cols = [c.copy() for c in cols]  # the caller's columns stay as they were
        for c, g in zip(cols, group):
            c[at] = g[order]
    px, py, nx, ny, impulse = (np.add.reduceat(c, starts) for c in cols)
    nx, ny = _unit(nx, ny)
    return _contact_columns(key[starts], n, px / counts, py / counts, nx, ny, impulse)


def _unit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) scaled to length 1 (bit for bit as linalg.norm would); zero vectors stay zero."""
    norm = np.sqrt(x * x + y * y)
    nz = norm > 0
    return (np.divide(x, norm, out=np.zeros_like(x), where=nz),
            np.divide(y, norm, out=np.zeros_like(y), where=nz))


def _contact_columns(key: np.ndarray, n: int, px: np.ndarray, py: np.ndarray, nx: np.ndarray, ny: np.ndarray,
                     impulse: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "contact_frame": (key // (n * n)).astype(np.int32),
        "contact_a": ((key // n) % n).astype(np.int16),
        "contact_b": (key % n).astype(np.int16),
        "contact_point": np.stack((px, py), axis=1),
        "contact_normal": np.stack((nx, ny), axis=1),
        "contact_impulse": np.ascontiguousarray(impulse, dtype=np.float64),
    }


def thin(trace: Trace, stride: int) -> Trace:
    """Keep every ``stride``-th frame; raw events map to the stored frame at or before them."""
    keep = np.arange(0, trace.num_frames, stride)
    sel = trace.contact_frame % stride == 0
    events = [RawEvent(e.kind, e.frame // stride, e.params) for e in trace.events]
    meta = dict(trace.meta, stride=stride)
    if meta.get(HORIZON_KEY):
        meta[HORIZON_KEY] = (int(meta[HORIZON_KEY]) - 1) // stride + 1
    for key in ("solved_frame", "settled_frame"):  # frame indices index the stored rows
        if meta.get(key) is not None:
            meta[key] = meta[key] // stride
    return Trace(
        bodies=trace.bodies,
        time=trace.time[keep],
        position=trace.position[keep],
        angle=trace.angle[keep],
        velocity=trace.velocity[keep],
        angular_velocity=trace.angular_velocity[keep],
        contact_frame=(trace.contact_frame[sel] // stride).astype(np.int32),
        contact_a=trace.contact_a[sel],
        contact_b=trace.contact_b[sel],
        contact_point=trace.contact_point[sel],
        contact_normal=trace.contact_normal[sel],
        contact_impulse=trace.contact_impulse[sel],
        events=events,
        meta=meta,
    )


def collision_events(
    contact_frame: np.ndarray, contact_a: np.ndarray, contact_b: np.ndarray, num_frames: int, names: Iterable[str]
) -> list[RawEvent]:
    """Derive CollisionStart/CollisionEnd from contact rows.

    A pair starts at the first frame of each touching run and ends at the
    first frame after it where it no longer touches; a run still open at the
    last frame has no end event. Sorted by frame, then pair.
    """
    names = list(names)
    if contact_frame.size == 0:
        return []
    n = len(names)
    key = contact_a.astype(np.int64) * n + contact_b.astype(np.int64)
    if contact_frame.size > 1 and (contact_frame[1:] < contact_frame[:-1]).any():
        order = np.lexsort((contact_frame, key))
    else:  # rows in frame order (as traces store them): a stable sort by pair is the same order, 3x cheaper
        order = np.argsort(key, kind="stable")
    k, f = key[order], contact_frame[order].astype(np.int64)
    new_run = np.ones(k.size, dtype=bool)
    new_run[1:] = (k[1:] != k[:-1]) | (f[1:] != f[:-1] + 1)
    run_end = np.ones(k.size, dtype=bool)
    run_end[:-1] = new_run[1:]
    run_end &= f + 1 < num_frames  # a run still open at the last frame has no end
    frame = np.concatenate((f[new_run], f[run_end] + 1))
    pair = np.concatenate((k[new_run], k[run_end]))
    is_start = np.concatenate((np.ones(int(new_run.sum()), np.int8), np.zeros(int(run_end.sum()), np.int8)))
    at = np.lexsort((is_start, pair, frame))  # by frame, then pair, an end before a start
    return [
        RawEvent(COLLISION_START if start else COLLISION_END, fr, {"object_a": names[p // n], "object_b": names[p % n]})
        for fr, p, start in zip(frame[at].tolist(), pair[at].tolist(), is_start[at].tolist())
    ]
