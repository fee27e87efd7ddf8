"""A frame is one state: every MJCF file shipped with gymnasium and mujoco, every integrator,
both friction cones, traced by `simulate` and `rollout_traces` against plain MuJoCo stepping
(a copy of the data at each recorded step, brought to consistency with ``mj_forward``)."""

import glob
import importlib.util
import os
import tempfile

import mujoco
import numpy as np
import pytest

from simpatterns.simulators.mujoco import TraceRecorder, describe_bodies, rollout_traces, simulate

STEPS, STRIDE = 120, 3
INTEGRATORS = list(mujoco.mjtIntegrator.__members__)  # Euler, RK4, implicit, implicitfast, discrete
CONES = ["mjCONE_PYRAMIDAL", "mjCONE_ELLIPTIC"]


def shipped_models() -> tuple[dict[str, str], list[str]]:
    """``{name: path}`` of the *.xml files inside the installed gymnasium and mujoco packages
    that load on their own, and the paths of those that do not (include-only fragments)."""
    found, failed = {}, []
    for package in ("gymnasium", "mujoco"):
        spec = importlib.util.find_spec(package)
        for root in spec.submodule_search_locations if spec else []:
            for path in sorted(glob.glob(os.path.join(root, "**", "*.xml"), recursive=True)):
                try:
                    mujoco.MjModel.from_xml_path(path)
                except Exception:  # a fragment meant to be included, or assets missing
                    failed.append(path)
                    continue
                found[f"{package}/{os.path.relpath(path, root)}"] = path
    return found, failed


_here = os.getcwd()
os.chdir(tempfile.gettempdir())  # MuJoCo logs compiler warnings (humanoid's) to MUJOCO_LOG.TXT in the cwd
try:
    MODELS, UNLOADABLE = shipped_models()
finally:
    os.chdir(_here)


@pytest.fixture(autouse=True)
def _log_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def test_the_shipped_models_are_found():
    # gymnasium ships 14 MJCF files, 11 of them RK4 (the reported bug); those that fail to
    # load on their own are skipped (none in the installed versions)
    gym = [n for n in MODELS if n.startswith("gymnasium/")]
    assert len(gym) >= 14, (sorted(MODELS), UNLOADABLE)
    rk4 = [n for n in gym if mujoco.MjModel.from_xml_path(MODELS[n]).opt.integrator == mujoco.mjtIntegrator.mjINT_RK4]
    assert len(rk4) >= 11


def load(path: str, integrator: str, cone: str) -> mujoco.MjModel:
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.integrator = getattr(mujoco.mjtIntegrator, integrator)
    m.opt.cone = getattr(mujoco.mjtCone, cone)
    return m


def random_controls(m: mujoco.MjModel, steps: int, seed: int = 0) -> np.ndarray:
    """Seeded controls over each actuator's range (or [-1, 1]), changed every step."""
    rng = np.random.default_rng(seed)
    lo = np.where(m.actuator_ctrllimited == 1, m.actuator_ctrlrange[:, 0], -1.0)
    hi = np.where(m.actuator_ctrllimited == 1, m.actuator_ctrlrange[:, 1], 1.0)
    return rng.uniform(lo, hi, (steps, m.nu))


def reference(m: mujoco.MjModel, controls: np.ndarray, stride: int) -> list[dict]:
    """Plain MuJoCo: at each recorded step a copy of the data (with that step's controls),
    ``mj_forward`` on the copy, then positions, orientations, velocities (``mj_objectVelocity``),
    touching body pairs and their normal impulses (``mj_contactForce``)."""
    bodies = describe_bodies(m)
    d = mujoco.MjData(m)
    frames = []
    for k in range(controls.shape[0]):
        d.ctrl[:] = controls[k]
        if k % stride == 0:
            c = mujoco.MjData(m)
            mujoco.mj_copyData(c, m, d)
            mujoco.mj_forward(m, c)
            vel = np.zeros((m.nbody, 6))
            for b in range(1, m.nbody):
                mujoco.mj_objectVelocity(m, c, mujoco.mjtObj.mjOBJ_BODY, b, vel[b], 0)
            impulse: dict[tuple[int, int], float] = {}
            for i in range(c.ncon):
                con = c.contact[i]
                if con.efc_address < 0 or con.exclude:
                    continue
                a, b = sorted(int(bodies.of_geom[g]) for g in con.geom)
                if a == b:
                    continue
                f6 = np.zeros(6)
                mujoco.mj_contactForce(m, c, i, f6)
                impulse[(a, b)] = impulse.get((a, b), 0.0) + f6[0] * m.opt.timestep
            frames.append({"pos": c.xipos[1:].copy(), "quat": c.xquat[1:].copy(), "ang": vel[1:, :3],
                           "lin": vel[1:, 3:], "impulse": impulse})
        mujoco.mj_step(m, d)
    return frames


def assert_frames_match(trace, frames: list[dict], world: int) -> None:
    assert trace.num_frames == len(frames)
    for f, ref in enumerate(frames):
        assert np.allclose(trace.position[f, world:], ref["pos"], rtol=0, atol=1e-9), f
        assert np.allclose(trace.quaternion[f, world:], ref["quat"], rtol=0, atol=1e-9), f
        assert np.allclose(trace.velocity[f, world:], ref["lin"], rtol=0, atol=1e-9), f
        assert np.allclose(trace.angular_velocity[f, world:], ref["ang"], rtol=0, atol=1e-9), f
        rows = np.flatnonzero(trace.contact_frame == f)
        pairs = {(int(trace.contact_a[r]), int(trace.contact_b[r])): float(trace.contact_impulse[r]) for r in rows}
        assert set(pairs) == set(ref["impulse"]), f
        for pair, value in ref["impulse"].items():
            assert pairs[pair] == pytest.approx(value, rel=1e-9, abs=1e-9), (f, pair)


@pytest.mark.parametrize("cone", CONES)
@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_every_shipped_model_is_traced_state_by_state(integrator, cone):
    moved = touched = 0
    for name, path in MODELS.items():
        m = load(path, integrator, cone)
        controls = random_controls(m, STEPS)
        frames = reference(m, controls, STRIDE)
        trace = simulate(m, STEPS, stride=STRIDE, controls=controls)
        world = describe_bodies(m).num_world
        assert trace.meta["integrator"] == integrator[len("mjINT_"):]
        assert_frames_match(trace, frames, world)
        # rollout_traces runs the same steps in C, one stride at a time: the same trace
        (batched,) = rollout_traces(m, STEPS, controls=controls[None], stride=STRIDE)
        for field in ("position", "quaternion", "velocity", "angular_velocity", "contact_frame", "contact_a",
                      "contact_b", "contact_point", "contact_normal", "contact_impulse"):
            assert np.array_equal(getattr(batched, field), getattr(trace, field)), (name, field)
        moved += trace.num_bodies > world and np.ptp(trace.position[:, world:], axis=0).max() > 1e-3
        touched += trace.num_contacts > 0
    assert moved >= 14 and touched >= 8  # the controls make things move and touch


def test_an_rk4_step_leaves_data_of_no_state_and_the_recorder_does_not_read_them():
    # the reported bug: after mj_step with RK4 the data hold the last Runge-Kutta stage
    m = load(MODELS["gymnasium/envs/mujoco/assets/hopper.xml"], "mjINT_RK4", "mjCONE_PYRAMIDAL")
    controls = random_controls(m, 60, seed=1)
    d = mujoco.MjData(m)
    stale = []
    for k in range(60):
        d.ctrl[:] = controls[k]
        mujoco.mj_step(m, d)
        stale.append(d.xipos[1:].copy())
    frames = reference(m, controls, 1)
    assert max(np.abs(s - f["pos"]).max() for s, f in zip(stale, frames)) > 1e-4
    rec = TraceRecorder(m)
    with pytest.raises(ValueError, match="with the integrator mjINT_RK4, .*recorder.advance"):
        rec.step(d)
    d = mujoco.MjData(m)
    for k in range(60):
        d.ctrl[:] = controls[k]
        rec.advance(d)
    assert_frames_match(rec.trace(), frames, describe_bodies(m).num_world)


@pytest.mark.parametrize("integrator", ["mjINT_EULER", "mjINT_RK4"])
def test_recording_does_not_change_the_trajectory(integrator):
    m = load(MODELS["gymnasium/envs/mujoco/assets/ant.xml"], integrator, "mjCONE_PYRAMIDAL")
    controls = random_controls(m, 100, seed=2)
    bare, recorded = mujoco.MjData(m), mujoco.MjData(m)
    rec = TraceRecorder(m, stride=1)
    for k in range(100):
        bare.ctrl[:] = recorded.ctrl[:] = controls[k]
        mujoco.mj_step(m, bare)
        rec.advance(recorded)
    assert np.array_equal(bare.qpos, recorded.qpos) and np.array_equal(bare.qvel, recorded.qvel)


@pytest.mark.parametrize("integrator", ["mjINT_IMPLICITFAST", "mjINT_RK4"])
def test_frame_origins_instead_of_centres_of_mass(integrator):
    m = load(MODELS["gymnasium/envs/mujoco/assets/walker2d_v5.xml"], integrator, "mjCONE_PYRAMIDAL")
    controls = random_controls(m, 40, seed=3)
    trace = simulate(m, 40, stride=4, controls=controls, position="xpos")
    com = simulate(m, 40, stride=4, controls=controls)
    assert trace.meta["position"] == "xpos" and com.meta["position"] == "xipos"
    world = describe_bodies(m).num_world
    d = mujoco.MjData(m)
    for k in range(40):
        d.ctrl[:] = controls[k]
        if k % 4 == 0:
            c = mujoco.MjData(m)
            mujoco.mj_copyData(c, m, d)
            mujoco.mj_forward(m, c)
            f = k // 4
            assert np.allclose(trace.position[f, world:], c.xpos[1:], rtol=0, atol=1e-12)
            for b in range(1, m.nbody):
                v = np.zeros(6)
                mujoco.mj_objectVelocity(m, c, mujoco.mjtObj.mjOBJ_XBODY, b, v, 0)  # the frame origin's
                assert np.allclose(trace.velocity[f, world + b - 1], v[3:], rtol=0, atol=1e-9)
                assert np.allclose(trace.angular_velocity[f, world + b - 1], v[:3], rtol=0, atol=1e-9)
        mujoco.mj_step(m, d)
    assert np.abs(trace.position - com.position).max() > 0.01  # the limbs' centres are off their origins
    # each body's parts are centred on the stored point: geom positions in the body frame
    torso = trace.bodies[trace.body_index("torso")]
    g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "torso_geom")
    assert np.allclose(torso.parts[0]["center"], m.geom_pos[g])
    with pytest.raises(ValueError, match="position must be one of xipos, xpos"):
        simulate(m, 4, position="com")


def test_threaded_rollouts_with_their_own_controls_equal_simulate():
    m = load(MODELS["gymnasium/envs/mujoco/assets/hopper.xml"], "mjINT_RK4", "mjCONE_ELLIPTIC")
    controls = np.stack([random_controls(m, 90, seed=s) for s in range(3)])
    traces = rollout_traces(m, 90, controls=controls, stride=4, nthread=2)
    for k, batched in enumerate(traces):
        single = simulate(m, 90, stride=4, controls=controls[k])
        assert batched.num_frames == single.num_frames == 23
        for field in ("position", "quaternion", "velocity", "contact_frame", "contact_a", "contact_impulse"):
            assert np.array_equal(getattr(batched, field), getattr(single, field)), (k, field)
    assert not np.array_equal(traces[0].position, traces[1].position)


DROP = """<mujoco><option timestep="0.002" {option}>{flag}</option>
  <worldbody><geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .3"><freejoint/><geom type="box" size=".05 .05 .05"/></body>
    <body pos=".02 0 .5"><freejoint/><geom type="sphere" size=".05"/></body>
    <body pos=".5 0 .2"><freejoint/><geom type="capsule" size=".03 .06"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_sleeping_bodies_are_recorded_state_by_state(integrator):
    # a tree put to sleep has its velocities zeroed by mj_step after its forward pass, and
    # mujoco.rollout restarts awake: both need the forward pass and plain stepping
    m = mujoco.MjModel.from_xml_string(DROP.format(option="", flag='<flag sleep="enable"/>'))
    m.opt.integrator = getattr(mujoco.mjtIntegrator, integrator)
    steps = 500
    d = mujoco.MjData(m)
    slept = 0
    for _ in range(steps):
        mujoco.mj_step(m, d)
        slept += int((d.body_awake[1:] == 0).any())
    assert slept > 0  # something fell asleep
    controls = np.zeros((steps, 0))
    trace = simulate(m, steps)
    assert_frames_match(trace, reference(m, controls, 1), 1)
    (batched,) = rollout_traces(m, steps)
    assert np.array_equal(batched.position, trace.position)
    assert np.array_equal(batched.velocity, trace.velocity)
    assert np.array_equal(batched.contact_impulse, trace.contact_impulse)


def test_the_ipc_contact_solver_is_recorded_state_by_state():
    # ipc (discrete integrator only) keeps contact state across steps outside mjtState; the
    # contact forces after its mj_step are not those of a forward pass on the step's start
    m = mujoco.MjModel.from_xml_string(DROP.format(option='integrator="discrete"', flag='<flag ipc="enable"/>'))
    trace = simulate(m, 300, stride=2)
    assert trace.num_contacts > 0
    assert_frames_match(trace, reference(m, np.zeros((300, 0)), 2), 1)
    (batched,) = rollout_traces(m, 300, stride=2)
    assert np.array_equal(batched.contact_impulse, trace.contact_impulse)


def test_step_after_your_own_mj_step_refuses_sleeping_models():
    m = mujoco.MjModel.from_xml_string(DROP.format(option="", flag='<flag sleep="enable"/>'))
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d)
    with pytest.raises(ValueError, match="with sleeping or ipc, .*recorder.advance") as err:
        TraceRecorder(m).step(d)
    assert "\n" not in str(err.value)
