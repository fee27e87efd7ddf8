"""PHYRE's one-ball world in pymunk, recording a full `Trace` every step.

Physical constants are PHYRE's (Box2D): 256 px scene at 6 px per metre, so
gravity is 9.8 m/s^2 = 58.8 px/s^2; dt = 1/60 s, at most 1000 steps; friction
0.5, restitution 0.2, angular damping 0.01, dynamic density 0.25 kg/m^2.

Box2D combines two fixtures' friction as sqrt(f1*f2) and restitution as
max(r1, r2); pymunk multiplies both. With every body equal, giving each shape
sqrt(0.5) friction and sqrt(0.2) elasticity makes every pair's effective
values 0.5 and 0.2, as in PHYRE.

Success is PHYRE's: the green body and the goal body touch for 180
consecutive steps (3 s). Frame 0 is the initial state (its contacts come from
a geometric query, with zero impulse); frame k is the state after step k.

Every trace records its episode's horizon, ``meta["horizon"] = max_steps + 1``
frames (1001), also when the run stops early, and why it stopped
(``meta["stopped"]``: ``"success"`` at PHYRE's success, after which the goal
pair keeps touching; ``"settled"`` with ``stop_when_settled``, after which
nothing moves): reward programs measure time on the horizon, so a stopped
rollout and the same rollout run in full give the same frames the same times.
"""

from __future__ import annotations

import math
import threading
from array import array
from dataclasses import dataclass
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

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
    RawEvent,
    Trace,
    collision_events,
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


def quantize_action(index: int, bins: int) -> np.ndarray:
    """Action for cell ``index`` of a bins^3 grid (cell centres), x fastest."""
    if not 0 <= index < bins**3:
        raise ValueError(f"action index {index} outside [0, {bins ** 3})")
    ix, iy, ir = index % bins, (index // bins) % bins, index // bins**2
    return (np.array([ix, iy, ir], dtype=np.float64) + 0.5) / bins


def action_to_index(action: Sequence[float], bins: int) -> int:
    """Inverse of `quantize_action`: the grid cell containing ``action``."""
    cells = np.clip((np.asarray(action, dtype=np.float64) * bins).astype(int), 0, bins - 1)
    return int(cells[0] + bins * cells[1] + bins * bins * cells[2])


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


def check_action(scene: Scene, action: Sequence[float]) -> str | None:
    """None if PHYRE would accept ``action`` in ``scene``, else the reason."""
    return _place_agent(scene, action)[2]


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
    """C arrays for pymunk's batch iterators, owned here.

    pymunk 7's ``batch.Buffer`` never frees its arrays (about 1 MB leaked per
    1000-step rollout), so we own them: ``ffi.gc`` frees them with this object.
    Data leaves only as numpy copies, so a thread's next rollout can reuse them
    (`_BatchRecorder`): fresh C memory costs zeroing and page faults every time.
    """

    def __init__(self) -> None:
        self._float_arr = _ffi.gc(_lib.pmFloatArrayNew(0), _lib.pmFloatArrayFree)
        self._int_arr = _ffi.gc(_lib.pmIntArrayNew(0), _lib.pmIntArrayFree)

    def clear(self, floats: int = 0) -> None:
        """Empty both arrays, with room for ``floats`` floats (growing by half at a time would
        copy them about twice over)."""
        if self._float_arr.max < floats + 2:  # pymunk grows an array one slot before it is full
            self._float_arr = _ffi.gc(_lib.pmFloatArrayNew(floats + 2), _lib.pmFloatArrayFree)
        self._float_arr.num = 0
        self._int_arr.num = 0

    def float_buf(self):
        return _ffi.buffer(self._float_arr.arr, _ffi.sizeof("cpFloat") * self._float_arr.num)

    def int_buf(self):
        return _ffi.buffer(self._int_arr.arr, _ffi.sizeof("uintptr_t") * self._int_arr.num)

    def ints(self) -> np.ndarray:
        return np.frombuffer(self.int_buf(), dtype=np.uintp).copy()

    def capacity(self) -> int:
        """The larger of the two arrays' capacities, in items."""
        return max(self._float_arr.max, self._int_arr.max)


_spare = threading.local()  # each thread's C buffers between its rollouts (`_BatchRecorder.release`)
_SPARE_FLOATS = 1 << 20  # the largest arrays kept (8 MB each); a 1000-step run of 40 bodies needs 240,000


class _BatchRecorder:
    """Per-step copies of body state and arbiters into growing C buffers.

    Uses pymunk.batch's C iterators directly with prebuilt descriptors: the
    public wrapper rebuilds them on every call, which costs four times the
    copy itself at 60 Hz x 1000 steps.
    """

    def __init__(self, space: pymunk.Space, frames: int, moving: int):
        self.body_buf, self.arb_buf = getattr(_spare, "buffers", None) or (_CBuffer(), _CBuffer())
        _spare.buffers = None
        # frame 0 of every body, then the steps of the ``moving`` ones (a longer run grows it)
        self.body_buf.clear(max(len(space.bodies), min(frames - 1, MAX_STEPS) * moving) * 6)
        self.arb_buf.clear()
        self._space = space._space
        self._body_data = self._descriptor(_BODY_FIELDS.value, self.body_buf)
        self._arb_data = self._descriptor(_ARB_FIELDS.value, self.arb_buf)
        self._body_fn = _ffi.addressof(_lib, "pmSpaceBodyGetIteratorFuncBatched")
        self._arb_fn = _ffi.addressof(_lib, "pmSpaceArbiterIteratorFuncBatched")

    @staticmethod
    def _descriptor(fields: int, buf: _CBuffer):
        data = _ffi.new("pmBatchedData *")
        data.fields = fields
        data.floatArray = buf._float_arr
        data.intArray = buf._int_arr
        return data

    def record_first(self) -> tuple[np.ndarray, np.ndarray]:
        """Frame 0 of every body: their ids and [n, 6] states, in the order pymunk records
        bodies (dynamic ones first). The body buffer is then emptied for the steps, which
        record the dynamic bodies only (`_static_bodies_aside`)."""
        data = self._descriptor(_BODY_FIELDS.value | pbatch.BodyFields.BODY_ID.value, self.body_buf)
        _lib.cpSpaceEachBody(self._space, self._body_fn, data)
        ids = self.body_buf.ints()
        first = np.frombuffer(self.body_buf.float_buf(), dtype=np.float64).reshape(ids.size, 6).copy()
        self.body_buf.clear()  # keeps its room
        return ids, first

    def release(self) -> None:
        """Hand the buffers to this thread's next recorder, once their data is copied out
        (unless a long run made them large: then they are freed)."""
        if max(self.body_buf.capacity(), self.arb_buf.capacity()) <= _SPARE_FLOATS:
            _spare.buffers = (self.body_buf, self.arb_buf)


def damper(dyn: list[pymunk.Body]) -> Callable[[], None]:
    """Applies `DAMP_EVERY` steps of Box2D's angular damping to ``dyn`` at once."""
    bodies = [b._body for b in dyn]
    get, set_ = _lib.cpBodyGetAngularVelocity, _lib.cpBodySetAngularVelocity

    def damp() -> None:
        for b in bodies:
            set_(b, get(b) * _DAMP)

    return damp


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
    touches: list[bool] = []  # the goal pair's contacts in this step (post-solve callbacks append)
    if scene.goal is not None:
        for shape in world.bodies[goal_a].shapes:
            shape.collision_type = _GOAL_A_TYPE
        for shape in world.bodies[goal_b].shapes:
            shape.collision_type = _GOAL_B_TYPE

        def goal_touch(_arb: pymunk.Arbiter, _space: pymunk.Space, _data: object) -> None:
            touches.append(True)

        space.on_collision(_GOAL_A_TYPE, _GOAL_B_TYPE, post_solve=goal_touch)

    initial = world.touching_pairs()
    goal_touch_now = any(a == goal_a and b == goal_b for a, b, _, _ in initial)

    dyn = [world.bodies[i] for i in world.dynamic_index]
    recorder = _BatchRecorder(space, max_steps + 1, len(dyn))
    space_ids, first = recorder.record_first()
    space.step(0.0)  # lets pymunk validate masses once; then the loop steps in C directly
    arb_counts = array("q", [0])  # int64 appends, read by numpy without a copy
    # the goal pair's current run of touching frames: its first and its last frame
    run_start = last_touch = 0 if goal_touch_now else -2
    solved_frame: int | None = None
    k = 0
    cp_step, sp = _lib.cpSpaceStep, space._space
    each_body, body_fn, body_data = _lib.cpSpaceEachBody, recorder._body_fn, recorder._body_data
    each_arb, arb_fn, arb_data = _lib.cpSpaceEachCachedArbiter, recorder._arb_fn, recorder._arb_data
    arb_ints, damp, count = recorder.arb_buf._int_arr, damper(dyn), arb_counts.append
    body_buf, moving, damp_every = recorder.body_buf, len(dyn), DAMP_EVERY
    settled_frame: int | None = None
    space._locked = True  # as pymunk's step does: callbacks may not add/remove bodies
    try:
        with _static_bodies_aside(space, space_ids, world):
            # per step, only what must be: a step without goal contact costs two checks
            for k in range(1, max_steps + 1):
                cp_step(sp, DT)
                if k % damp_every == 0:
                    damp()
                each_body(sp, body_fn, body_data)
                each_arb(sp, arb_fn, arb_data)
                count(arb_ints.num)
                if touches:
                    touches.clear()
                    if last_touch != k - 1:
                        run_start = k
                    last_touch = k
                    if k - run_start + 1 >= SOLVE_STEPS and solved_frame is None:
                        solved_frame = k
                        if stop_on_success:
                            break
                elif stop_when_settled and k % SETTLE_FRAMES == 0 and _settled(body_buf, k, moving):
                    settled_frame = k
                    break
    finally:
        space._locked = False
    steps = k
    body_buf, arb_buf = recorder.body_buf, recorder.arb_buf

    T = steps + 1
    # frame 0 of every body, then the dynamic bodies' steps (static ones stay put), in our order
    moved = np.frombuffer(body_buf.float_buf(), dtype=np.float64).reshape(steps, moving * 6)  # copied before free
    position, angle, velocity, angular_velocity = _gather_state(first, moved, _space_columns(world.body_ids, space_ids))
    key, point, normal, impulse = _contact_rows(arb_buf, np.frombuffer(arb_counts, dtype=np.int64), world.body_ids,
                                                initial)
    recorder.release()
    contacts = _merge_rows(key, point, normal, impulse, n)
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


def _settled(body_buf: _CBuffer, k: int, moving: int) -> bool:
    """All bodies slower than the settle thresholds over the last SETTLE_FRAMES frames (the
    buffer holds steps 1 to k of the dynamic bodies; static ones never move)."""
    if moving == 0:
        return True
    state = np.frombuffer(body_buf.float_buf(), dtype=np.float64).reshape(k, moving, 6)[-SETTLE_FRAMES:]
    speed = np.hypot(state[..., 3], state[..., 4])
    return bool(speed.max() < SETTLE_SPEED and np.abs(state[..., 5]).max() < SETTLE_SPIN)


@contextmanager
def _static_bodies_aside(space: pymunk.Space, space_ids: np.ndarray, world: _World) -> Iterator[None]:
    """Takes the static bodies out of chipmunk's list of bodies for the run, so that the
    per-step body copy (`cpSpaceEachBody`) visits only the dynamic ones: most bodies are static
    (7-39 bodies a template scene, 2-6 of them dynamic) and never move. Their shapes stay in the space and collide as before (a
    step reads the body list only to integrate dynamic bodies). They go back afterwards in
    their order (``space_ids``, pymunk's order), so the space is as it was."""
    by_id = dict(zip(world.body_ids.tolist(), world.bodies))
    static = [by_id[i]._body for i in space_ids.tolist() if by_id[i].body_type == pymunk.Body.STATIC]
    sp = space._space
    for body in static:
        _lib.cpSpaceRemoveBody(sp, body)
    try:
        yield
    finally:
        for body in static:
            _lib.cpSpaceAddBody(sp, body)


def _space_columns(ids: np.ndarray, space_ids: np.ndarray) -> np.ndarray:
    """For each of our bodies (``ids``), its place in pymunk's batch order (``space_ids``)."""
    order = np.argsort(space_ids)
    return order[np.searchsorted(space_ids[order], ids)]


def _gather_state(first: np.ndarray, moved: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, ...]:
    """Frame 0 of every body (``first``: [n, 6] rows of (x, y, angle, vx, vy, spin) in pymunk's
    order) and the dynamic bodies' steps (``moved``: [T - 1, m * 6], the first m in that order)
    -> position, angle, velocity and angular velocity in our order (``cols``: each body's place
    in pymunk's). Every frame starts as frame 0 (contiguous rows broadcast fast); the dynamic
    bodies' columns are then copied in, positions as complex numbers (one copy moves x and y)."""
    T, n, m = moved.shape[0] + 1, cols.size, moved.shape[1] // 6
    start = first.take(cols, axis=0)
    position, velocity = np.empty((T, n), np.complex128), np.empty((T, n, 2))
    angle, spin = np.empty((T, n)), np.empty((T, n))
    position[:] = _as_pairs(start[:, 0:2])  # broadcasts from contiguous rows only: strided ones cost 7x
    velocity[:] = np.ascontiguousarray(start[:, 3:5])
    angle[:] = np.ascontiguousarray(start[:, 2])
    spin[:] = np.ascontiguousarray(start[:, 5])
    pairs, v = moved.view(np.complex128), velocity.reshape(T, 2 * n)
    for i in np.flatnonzero(cols < m).tolist():
        at = int(cols[i]) * 6
        position[1:, i] = pairs[:, at // 2]
        angle[1:, i] = moved[:, at + 2]
        v[1:, 2 * i] = moved[:, at + 3]
        v[1:, 2 * i + 1] = moved[:, at + 4]
        spin[1:, i] = moved[:, at + 5]
    return _as_xy(position).reshape(T, n, 2), angle, velocity, spin


def _contact_rows(buf: _CBuffer, counts: np.ndarray, ids: np.ndarray,
                  initial: list[tuple[int, int, tuple, tuple]]) -> tuple[np.ndarray, ...]:
    """Frame 0's contacts (``initial``) and the batched arbiter data -> contact rows sorted by
    key ((frame * n + a) * n + b, a < b), as `_merge_rows` takes them: key, point [K, 2],
    normal [K, 2] (from a to b) and impulse. Every array is a copy: the C buffer is freed next.

    Each arbiter's floats are (impulse, normal, point) as (x, y) pairs, read as one complex
    column each: a sorted take moves both coordinates at once."""
    ints = np.frombuffer(buf.int_buf(), dtype=np.uintp)  # (body a id, body b id, contacts) per arbiter
    pairs = np.frombuffer(buf.float_buf(), dtype=np.complex128)
    n, k0 = ids.size, len(initial)
    frame = np.repeat(np.arange(1, counts.size, dtype=np.int64), np.diff(counts) // 3)
    order = np.argsort(ids)
    a = order.take(np.searchsorted(ids[order], ints[0::3]), mode="clip")  # in range: see `_gather_state`
    b = order.take(np.searchsorted(ids[order], ints[1::3]), mode="clip")
    key = (frame * n + np.minimum(a, b)) * n + np.maximum(a, b)
    touching = ints[2::3] > 0  # cached arbiters of shapes whose boxes overlap but do not touch: dropped
    kept = int(np.count_nonzero(touching))
    if kept < key.size:
        key[~touching] = np.iinfo(np.int64).max  # sorted last, then cut
    at = np.argsort(key, kind="stable")[:kept]  # step order sorts frames; pairs within a step come unsorted
    rows = k0 + kept
    out_key, point, normal = np.empty(rows, np.int64), np.empty(rows, np.complex128), np.empty(rows, np.complex128)
    for i, (ia, ib, p, q) in enumerate(initial):  # frame 0's keys are 0 * n * n + a * n + b: they come first
        out_key[i], point[i], normal[i] = ia * n + ib, complex(*p), complex(*q)
    np.take(key, at, out=out_key[k0:], mode="clip")
    at3 = at * 3  # flat indices: a take from a strided column would copy the column first
    np.take(pairs, at3 + 2, out=point[k0:], mode="clip")
    np.take(pairs, at3 + 1, out=normal[k0:], mode="clip")
    np.negative(normal[k0:], out=normal[k0:], where=(a > b).take(at, mode="clip"))  # the normal points from a to b
    impulse = np.zeros(rows)
    total = pairs.take(at3, mode="clip")
    np.hypot(total.real, total.imag, out=impulse[k0:])
    return out_key, _as_xy(point), _as_xy(normal), impulse


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
    columns: point x, y, normal x, y, impulse. The caller's arrays are not changed."""
    px, py, nx, ny, impulse = columns
    return _merge_rows(key, np.column_stack((px, py)), np.column_stack((nx, ny)),
                       np.asarray(impulse, dtype=np.float64), n)


def _merge_rows(key: np.ndarray, point: np.ndarray, normal: np.ndarray, impulse: np.ndarray,
                n: int) -> dict[str, np.ndarray]:
    """`merge_contacts` on rows as `_contact_rows` makes them: ``point`` and ``normal`` [K, 2]."""
    if key.size == 0:
        return empty_contacts(2)
    # an (x, y) row as one complex number: one take moves it, and complex numbers sort as (x, y)
    p, q = _as_pairs(point), _as_pairs(normal)
    if key.size > 1 and (key[1:] < key[:-1]).any():  # step order sorts frames; pairs within a step come unsorted
        order = np.argsort(key, kind="stable")
        key, p, q, impulse = key[order], p[order], q[order], impulse[order]
    first = np.ones(key.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    if first.all():
        return _contact_columns(key, n, _as_xy(p), _as_xy(q), impulse)
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, key.size))
    # Rows of one key are summed in an order fixed by their values: chipmunk's arbiter order
    # follows memory addresses, so it differs between processes, and so would the last bits
    # of the sums. Two rows sum the same in either order (IEEE addition commutes): only
    # groups of three or more are ordered, by point, then normal, then impulse.
    big = counts >= 3
    if big.any():
        order = np.arange(key.size)  # rows in summing order
        three = np.flatnonzero(counts == 3)  # a jar's three parts touching one body: nearly every big group
        if three.size and _order_threes(order, starts[three], p, q, impulse):
            big[three] = False
        if big.any():
            at = np.flatnonzero(np.repeat(big, counts))
            rows = [x.take(at, mode="clip") for x in (p, q, impulse)]  # in range: see `_gather_state`
            order[at] = at.take(np.lexsort((rows[2], rows[1], rows[0], key.take(at, mode="clip"))), mode="clip")
        p, q, impulse = p.take(order, mode="clip"), q.take(order, mode="clip"), impulse.take(order, mode="clip")
    # reduceat along rows sums each column in row order, as it would alone (checked bit for bit;
    # a complex column's reduceat does not: it sums contiguous runs pairwise)
    point, total = np.add.reduceat(_as_xy(p), starts, axis=0), np.add.reduceat(_as_xy(q), starts, axis=0)
    point[:, 0] /= counts  # the mean point; column by column, as a [K, 1] divisor broadcasts slowly
    point[:, 1] /= counts
    tx, ty = total[:, 0], total[:, 1]
    norm = np.sqrt(tx * tx + ty * ty)
    unit = np.zeros_like(total)  # zero stays zero
    moving = norm > 0
    np.divide(tx, norm, out=unit[:, 0], where=moving)
    np.divide(ty, norm, out=unit[:, 1], where=moving)
    return _contact_columns(key[starts], n, point, unit, np.add.reduceat(impulse, starts))


def _order_threes(order: np.ndarray, first: np.ndarray, p: np.ndarray, q: np.ndarray, impulse: np.ndarray) -> bool:
    """Puts the rows of each group of three (from rows ``first``) in ``order`` sorted by point,
    normal and impulse, in the order a stable `lexsort` gives: each row's place is the number
    of rows it must follow (those it sorts after, and earlier ones it does not sort before),
    from three comparisons of whole rows (a `lexsort`, with complex or five float keys, costs
    several times more). False, and nothing done, where a value is NaN (it compares with
    nothing)."""
    at = first[:, None] + np.arange(3)
    pp, qq, ii = p.take(at, mode="clip"), q.take(at, mode="clip"), impulse.take(at, mode="clip")
    keys = (pp.real, pp.imag, qq.real, qq.imag, ii)  # compared in this order
    if any(np.isnan(k).any() for k in keys):
        return False

    def after(i: int, j: int) -> np.ndarray:
        """Where row i of a group sorts after row j."""
        out = keys[-1][:, i] > keys[-1][:, j]
        for k in keys[-2::-1]:
            out = (k[:, i] > k[:, j]) | ((k[:, i] == k[:, j]) & out)
        return out

    a01, a02, a12 = after(0, 1), after(0, 2), after(1, 2)
    place = np.column_stack((a01.astype(np.intp) + a02, 1 - a01 + a12, 2 - a02 - a12))
    order[(first[:, None] + place).ravel()] = at.ravel()
    return True


def _as_pairs(xy: np.ndarray) -> np.ndarray:
    """[K, 2] floats -> [K] complex x + iy (a view when it can be)."""
    return np.ascontiguousarray(xy, dtype=np.float64).view(np.complex128).reshape(-1)


def _as_xy(pairs: np.ndarray) -> np.ndarray:
    return pairs.view(np.float64).reshape(-1, 2)


def _contact_columns(key: np.ndarray, n: int, point: np.ndarray, normal: np.ndarray,
                     impulse: np.ndarray) -> dict[str, np.ndarray]:
    frame = key // (n * n)  # integer division by a scalar is fast in numpy, remainder is not
    pair = key - frame * (n * n)
    a = pair // n
    return {
        "contact_frame": frame.astype(np.int32),
        "contact_a": a.astype(np.int16),
        "contact_b": (pair - a * n).astype(np.int16),
        "contact_point": np.ascontiguousarray(point, dtype=np.float64),
        "contact_normal": np.ascontiguousarray(normal, dtype=np.float64),
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

