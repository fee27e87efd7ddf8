"""The generic MJCF tracer: bodies in words, velocities, contacts, stride, batched rollouts."""

import mujoco
import numpy as np
import pytest
from mujoco_paths import TABLE_XML

from simpatterns.simulators.mujoco import TraceRecorder, color_word, load_model, rollout_traces, simulate

BALL_ON_FLOOR = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" rgba="0.5 0.5 0.5 1"/>
    <body name="ball" pos="0 0 0.5"><freejoint/><geom type="sphere" size="0.05" mass="0.2" rgba="0.9 0.1 0.1 1"/></body>
    <body pos="0.5 0 0.5"><freejoint/><geom type="box" size="0.05 0.05 0.05" rgba="0.1 0.2 0.9 1"/></body>
    <body pos="-0.5 0 0.5"><freejoint/><geom type="box" size="0.05 0.05 0.05" rgba="0.1 0.2 0.9 1"/></body>
  </worldbody>
</mujoco>"""


def test_bodies_in_words(table_trace):
    tr = table_trace
    assert tr.names[:2] == ["floor", "table"] and "red ball" in tr.names and "yellow box" in tr.names
    floor, ball, box = tr.body("floor"), tr.body("red ball"), tr.body("blue box")
    assert (floor.dynamic, floor.role, floor.shape, floor.color) == (False, "world", "plane", "gray")
    assert (ball.dynamic, ball.shape, ball.color, ball.size) == (True, "ball", "red", {"radius": 0.06})
    assert box.shape == "box" and box.size == pytest.approx({"width": 0.16, "depth": 0.16, "height": 0.16})
    assert tr.body("table").color == "brown"
    assert ball.bounding_radius == pytest.approx(0.06)


def test_unnamed_bodies_are_called_by_colour_and_shape():
    tr = simulate(BALL_ON_FLOOR, 10)
    assert tr.names == ["floor", "ball", "blue box 1", "blue box 2"]


@pytest.mark.parametrize("rgba,word", [((0.9, 0.1, 0.1), "red"), ((0.1, 0.8, 0.2), "green"), ((0.1, 0.2, 0.9), "blue"),
                                       ((0.95, 0.85, 0.1), "yellow"), ((0.5, 0.5, 0.5), "gray"), ((1, 1, 1), "white"),
                                       ((0.05, 0.05, 0.05), "black"), ((0.45, 0.3, 0.15), "brown"),
                                       ((1.0, 0.55, 0.0), "orange"), ((0.6, 0.2, 0.8), "purple")])
def test_colour_words(rgba, word):
    assert color_word(rgba) == word


def test_velocities_and_contact_forces_match_mujoco():
    m = load_model(TABLE_XML)
    d = mujoco.MjData(m)
    rec = TraceRecorder(m)
    checked_forces = 0
    for k in range(700):
        mujoco.mj_step(m, d)
        rec.step(d)
        if k % 70 == 0:
            tr = rec.trace()
            for b in range(1, m.nbody):
                v = np.zeros(6)
                mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, v, 0)
                i = rec.map.of_mjbody[b]
                assert np.allclose(tr.velocity[-1, i], v[3:], atol=1e-9)
                assert np.allclose(tr.angular_velocity[-1, i], v[:3], atol=1e-9)
                assert np.allclose(tr.position[-1, i], d.xipos[b])
            total = 0.0
            for c in range(d.ncon):
                f6 = np.zeros(6)
                mujoco.mj_contactForce(m, d, c, f6)
                total += f6[0]
                checked_forces += 1
            rows = tr.contact_frame == tr.num_frames - 1
            assert tr.contact_impulse[rows].sum() == pytest.approx(total * m.opt.timestep, rel=1e-9, abs=1e-12)
    assert checked_forces > 0


def test_resting_contact_normal_points_from_lower_index_up_and_carries_the_weight(table_trace):
    tr = table_trace
    f = tr.num_frames - 1
    ball, table = tr.body_index("red ball"), tr.body_index("table")
    row = int(tr.contact_row(f, table, ball))
    assert row >= 0 and tr.contact_a[row] == table and tr.contact_b[row] == ball
    assert np.allclose(tr.contact_normal[row], [0, 0, 1], atol=1e-6)
    weight = 0.3 * 9.81
    assert tr.contact_impulse[row] / tr.meta["dt"] == pytest.approx(weight, rel=1e-3)
    assert tr.contact_point[row, 2] == pytest.approx(0.425, abs=2e-3)  # the table top


def test_contact_rows_are_sorted_pairs_and_events_follow_them(table_trace):
    tr = table_trace
    assert (tr.contact_a < tr.contact_b).all()
    key = (tr.contact_frame.astype(np.int64) * tr.num_bodies + tr.contact_a) * tr.num_bodies + tr.contact_b
    assert (np.diff(key) > 0).all()  # sorted, one row per pair and frame
    starts = tr.raw_events("CollisionStart")
    assert starts and all(tr.pair_touching(e.params["object_a"], e.params["object_b"])[e.frame] for e in starts)
    assert all(e.frame == 0 or not tr.pair_touching(e.params["object_a"], e.params["object_b"])[e.frame - 1]
               for e in starts)


def test_stride_frames_are_the_states_at_multiples_of_the_stride():
    m = load_model(BALL_ON_FLOOR)
    d = mujoco.MjData(m)
    xs = []
    for _ in range(60):
        mujoco.mj_forward(m, d)
        xs.append(d.xipos[1:].copy())
        mujoco.mj_step(m, d)
    tr = simulate(m, 60, stride=7)
    assert tr.num_frames == 9 and tr.dt == pytest.approx(7 * 0.002)
    assert np.allclose(tr.position[:, 1:], np.stack(xs[::7]), atol=1e-12)
    assert np.allclose(tr.time, np.arange(9) * 7 * 0.002)


def test_batched_rollouts_equal_single_ones_and_take_forces():
    m = load_model(BALL_ON_FLOOR)
    forces = np.zeros((2, 300, m.nbody, 6))
    forces[1, :100, 1, 0] = 2.0  # push the ball along +x in the second rollout
    traces = rollout_traces(m, 300, forces=forces, stride=10, nthread=2)
    single = [simulate(m, 300, stride=10, forces=forces[k]) for k in range(2)]
    for a, b in zip(traces, single):
        assert a.num_frames == b.num_frames == 30
        assert np.allclose(a.position, b.position, atol=1e-9)
        assert np.array_equal(a.contact_frame, b.contact_frame)
    ball = traces[0].body_index("ball")
    assert traces[1].position[-1, ball, 0] > traces[0].position[-1, ball, 0] + 0.1


def test_rope_contacts_belong_to_beads_and_the_loop_is_described(rope_trace):
    tr = rope_trace
    rope = tr.meta["ropes"][0]
    assert rope["closed"] and len(rope["bodies"]) == 100
    assert [tr.names[i] for i in rope["bodies"][:3]] == ["bead 0", "bead 1", "bead 2"]
    assert all(tr.bodies[i].role == "rope bead" for i in rope["bodies"])
    assert tr.num_contacts > 0 and (tr.contact_a != tr.contact_b).all()


def test_bad_models_are_named():
    with pytest.raises(ValueError, match="nowhere.xml: no such MJCF file"):
        load_model("nowhere.xml")
    with pytest.raises(ValueError, match="<MJCF string>: MuJoCo cannot load"):
        load_model("<mujoco><worldbody><geom type='sphere'/></worldbody>")


PENDULUM = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="arm" pos="0 0 1"><joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      <body name="forearm" pos="0.3 0 0"><joint type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0.1" size="0.02"/></body>
    </body>
  </worldbody>
</mujoco>"""


def test_articulated_bodies_velocities_match_mujoco():
    m = load_model(PENDULUM)
    d = mujoco.MjData(m)
    rec = TraceRecorder(m)
    for _ in range(300):
        mujoco.mj_step(m, d)
        rec.step(d)
    tr = rec.trace()
    for b in (1, 2):
        v = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, v, 0)
        assert np.allclose(tr.velocity[-1, rec.map.of_mjbody[b]], v[3:], atol=1e-9)
        assert np.allclose(tr.angular_velocity[-1, rec.map.of_mjbody[b]], v[:3], atol=1e-9)
    assert np.abs(tr.velocity[-1]).max() > 0.1  # it swings
