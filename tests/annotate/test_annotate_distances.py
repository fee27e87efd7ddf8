from __future__ import annotations

import numpy as np
import pytest

from simpatterns.annotation import Annotation, PatternEvent
from simpatterns.annotate.distances import (
    EPSILON,
    activation_histograms,
    event_histograms,
    annotation_distance,
    annotation_distance_matrix,
    dataset_hash,
    histogram_cross_entropy,
    histogram_cross_entropy_matrix,
    histogram_cross_entropy_stack,
    histogram_stack,
    pattern_distance_matrices,
    pattern_histograms,
    trace_distance,
    trace_distance_matrix,
)
from simpatterns.simulators.phyre import get_template, simulate
from simpatterns.trace import Body, Trace, empty_contacts


def synthetic(names: list[str], pos: np.ndarray, static: tuple[str, ...] = (), dt: float = 1 / 60) -> Trace:
    T, n = pos.shape[:2]
    return Trace(
        bodies=[Body(name, "red", "ball", name not in static) for name in names],
        time=np.arange(T) * dt, position=pos.astype(np.float64), angle=np.zeros((T, n)),
        velocity=np.zeros((T, n, 2)), angular_velocity=np.zeros((T, n)), meta={"dt": dt}, **empty_contacts(),
    )


def reference_distance(a: Trace, b: Trace) -> float:
    """The definition, frame by frame and body by body (see distances' docstring)."""
    used = []
    for name in a.names:
        if name not in b.names:
            continue
        ia, ib = a.names.index(name), b.names.index(name)
        if not a.bodies[ia].dynamic and not b.bodies[ib].dynamic and np.array_equal(a.position[0, ia], b.position[0, ib]):
            continue
        used.append((ia, ib))
    T = max(a.num_frames, b.num_frames)
    if not used:
        return 0.0
    per_frame = []
    for t in range(T):
        ta, tb = min(t, a.num_frames - 1), min(t, b.num_frames - 1)
        per_frame.append(np.mean([np.linalg.norm(a.position[ta, i] - b.position[tb, j]) for i, j in used]))
    return float(np.mean(per_frame))


def test_hand_computed_distances():
    # ball at (0, 0) for 10 frames vs at (3, 4) for 5 frames, then held: 5 px at every frame
    a = synthetic(["ball"], np.zeros((10, 1, 2)))
    b = synthetic(["ball"], np.tile([[[3.0, 4.0]]], (5, 1, 1)))
    assert trace_distance(a, b) == pytest.approx(5.0)
    # b moves away 1 px per frame for 4 frames then stops at 3 px: (0+1+2+3+3+3)/6
    pos = np.zeros((4, 1, 2))
    pos[:, 0, 0] = np.arange(4)
    c = synthetic(["ball"], np.zeros((6, 1, 2)))
    d = synthetic(["ball"], pos)
    assert trace_distance(c, d) == pytest.approx(12 / 6)
    # a wall at the same place in both is not a matched body that dilutes the mean
    moved = np.zeros((10, 2, 2))
    moved[:, 1] = (3.0, 4.0)  # the ball moved, the wall (body 0) did not
    e = synthetic(["wall", "ball"], np.zeros((10, 2, 2)), static=("wall",))
    f = synthetic(["wall", "ball"], moved, static=("wall",))
    assert trace_distance(e, f) == pytest.approx(5.0)


def test_identical_traces_are_at_zero(drop_trace):
    assert trace_distance(drop_trace, drop_trace) == 0.0
    m = trace_distance_matrix([drop_trace, drop_trace])
    assert np.array_equal(m, np.zeros((2, 2)))


def test_matrix_matches_the_definition_on_random_traces():
    rng = np.random.default_rng(3)
    traces = []
    for k in range(7):
        names = ["wall", "red", "green"] + (["blue"] if k % 2 else []) + (["bar"] if k % 3 == 0 else [])
        T = int(rng.integers(4, 30))
        pos = rng.normal(size=(T, len(names), 2)) * 20
        pos[:, 0] = 0.0  # the wall never moves and is everywhere the same
        if "bar" in names:
            pos[:, names.index("bar")] = pos[0, names.index("bar")]  # static, at different places
        traces.append(synthetic(names, pos, static=("wall", "bar")))
    m = trace_distance_matrix(traces)
    ref = np.array([[reference_distance(a, b) for b in traces] for a in traces])
    np.testing.assert_allclose(m, ref, rtol=1e-5, atol=1e-4)
    assert np.array_equal(m, m.T) and np.all(np.diag(m) == 0)
    # blocks and threads do not change the numbers
    np.testing.assert_allclose(trace_distance_matrix(traces, block_bytes=1, threads=2), m, rtol=1e-6)


def test_distance_errors():
    a = synthetic(["ball"], np.zeros((5, 1, 2)))
    with pytest.raises(ValueError, match="frame intervals"):
        trace_distance(a, synthetic(["ball"], np.zeros((5, 1, 2)), dt=1 / 30))
    with pytest.raises(ValueError, match="share no body"):
        trace_distance(a, synthetic(["box"], np.zeros((5, 1, 2))))


def _valid_scene(template: str, actions: list[tuple[float, float, float]]):
    from simpatterns.simulators.phyre import check_action

    t = get_template(template)
    for k, params in enumerate(t.valid_param_sets()):
        scene = t.scene(params)
        if all(check_action(scene, a) is None for a in actions):
            return scene
        if k > 200:
            break
    raise AssertionError(f"no parameter set of {template} accepts {actions}")


def test_same_template_and_nearby_actions_are_closer_than_other_templates():
    base = (0.3, 0.9, 0.2)
    near = [base, (0.31, 0.9, 0.2), (0.3, 0.89, 0.21)]
    groups = []
    for template in ("00000", "00002", "00005"):
        scene = _valid_scene(template, near)
        groups.append([simulate(scene, a, max_steps=400).trace for a in near])
    traces = [t for g in groups for t in g]
    m = trace_distance_matrix(traces)
    label = np.repeat(np.arange(len(groups)), len(near))
    same = label[:, None] == label[None, :]
    off = ~np.eye(len(traces), dtype=bool)
    assert m[same & off].max() < m[~same].min()


def test_cache_is_keyed_by_content(tmp_path, drop_traces):
    m = trace_distance_matrix(drop_traces, cache_dir=tmp_path)
    files = list(tmp_path.glob("trace_distances_*.npy"))
    assert len(files) == 1 and dataset_hash(drop_traces) in files[0].name
    np.save(files[0], np.full_like(m, 7.0))  # a planted value proves the second call reads the cache
    assert np.all(trace_distance_matrix(drop_traces, cache_dir=tmp_path) == 7.0)
    other = list(reversed(drop_traces))
    back = trace_distance_matrix(other, cache_dir=tmp_path)
    np.testing.assert_allclose(back, m[::-1, ::-1], rtol=1e-6)
    assert len(list(tmp_path.glob("trace_distances_*.npy"))) == 2
    assert not list(tmp_path.glob(".*"))  # no temp files left


# ------------------------------------------------------------------ annotations
def ann(frames_by_pattern: dict[str, list[int]], T: int = 100) -> Annotation:
    events = [PatternEvent(p, f, {}) for p, fs in frames_by_pattern.items() for f in fs]
    return Annotation.from_events(events, num_frames=T, patterns=sorted(frames_by_pattern))


def test_histograms_are_smoothed_distributions():
    a = ann({"bounce": [0, 1, 1, 50], "roll": []}, T=100)
    h = pattern_histograms(a, ["bounce", "roll", "absent"], bins=10)
    assert h.shape == (3, 10)
    np.testing.assert_allclose(h.sum(1), 1.0)
    assert h.min() >= EPSILON / 10 - 1e-12
    np.testing.assert_allclose(h[1], 0.1)  # never fired: uniform
    np.testing.assert_allclose(h[2], 0.1)
    # frames 0 and 1 are 2 active frames in bin 0 (the duplicate counts once), frame 50 in bin 5
    raw = np.zeros(10)
    raw[0], raw[5] = 2, 1
    blurred = np.array([0.75 * raw[0] + 0.25 * raw[1]]
                       + [0.25 * raw[k - 1] + 0.5 * raw[k] + 0.25 * raw[k + 1] for k in range(1, 9)]
                       + [0.25 * raw[8] + 0.75 * raw[9]])
    expect = (1 - EPSILON) * blurred / blurred.sum() + EPSILON / 10
    np.testing.assert_allclose(h[0], expect)


def _smoothed(raw: np.ndarray) -> np.ndarray:
    """The documented smoothing, written out: blur [1/4, 1/2, 1/4] keeping mass at the edges,
    normalise, mix with EPSILON of uniform."""
    b = len(raw)
    pad = np.concatenate([raw[:1], raw, raw[-1:]])
    blurred = 0.25 * pad[:-2] + 0.5 * pad[1:-1] + 0.25 * pad[2:]
    return (1 - EPSILON) * blurred / blurred.sum() + EPSILON / b


def test_activation_histograms_hand_computed():
    # 4 bins; row 0 over 100 frames: 0, 0 (once), 24 -> bin 0; 25 -> bin 1; 99 -> bin 3
    # row 1 over 8 frames (per-row horizon): 2 -> bin 1, 7 -> bin 3, 9 (past the horizon) -> last bin
    # row 2: nothing -> uniform
    h = activation_histograms([[0, 0, 24, 25, 99], np.array([2, 7, 9]), []], np.array([100, 8, 8]), bins=4)
    assert h.shape == (3, 4)
    np.testing.assert_allclose(h[0], _smoothed(np.array([2.0, 1, 0, 1])))
    np.testing.assert_allclose(h[1], _smoothed(np.array([0.0, 1, 0, 2])))
    np.testing.assert_allclose(h[2], 0.25)
    # one horizon for every row
    np.testing.assert_allclose(activation_histograms([[5], [95]], 100, bins=2),
                               [_smoothed(np.array([1.0, 0])), _smoothed(np.array([0.0, 1]))])
    with pytest.raises(ValueError, match="bins"):
        activation_histograms([[1]], 10, bins=0)
    # any order of frames and rows gives the same rows
    np.testing.assert_allclose(activation_histograms([[], [99, 0, 25, 0, 24]], 100, bins=4)[1], h[0])
    # event lists as stored give what their frames give
    events = [[(0, {}), (0, {"k": 1}), (24, {}), (25, {}), (99, {})], [(2, {}), (7, {}), (9, {})], []]
    np.testing.assert_allclose(event_histograms(events, np.array([100, 8, 8]), bins=4), h)


def test_cross_entropy_matches_the_formula_and_is_symmetric():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8))
    h_pq = -sum(p[k] * np.log(q[k]) for k in range(8))
    h_qp = -sum(q[k] * np.log(p[k]) for k in range(8))
    assert histogram_cross_entropy(p, q) == pytest.approx((h_pq + h_qp) / 2)
    assert histogram_cross_entropy(p, q) == histogram_cross_entropy(q, p)
    P, Q = rng.dirichlet(np.ones(8), size=5), rng.dirichlet(np.ones(8), size=3)
    mat = histogram_cross_entropy_matrix(P, Q)
    loop = np.array([[histogram_cross_entropy(a, b) for b in Q] for a in P])
    np.testing.assert_allclose(mat, loop)
    stack = histogram_cross_entropy_stack(P[:, None, :], Q[None, :, :])
    np.testing.assert_allclose(stack, loop)


def test_annotation_matrix_is_the_mean_over_patterns_of_pairwise_cross_entropy():
    anns = [
        ann({"bounce": [10], "roll": [20, 21, 22]}),
        ann({"bounce": [12], "roll": []}),
        ann({"bounce": [90], "roll": [50]}, T=120),
        ann({"bounce": [], "roll": [5, 95]}),
    ]
    patterns = ["bounce", "roll"]
    m = annotation_distance_matrix(anns, patterns, bins=12)
    hist = histogram_stack(anns, patterns, bins=12)  # horizon: 120 frames, the longest
    loop = np.array([[np.mean([histogram_cross_entropy(hist[i, k], hist[j, k]) for k in range(2)])
                      for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(m, loop)
    np.testing.assert_allclose(m, m.T)
    np.testing.assert_allclose(pattern_distance_matrices(hist).mean(0), m)
    assert annotation_distance(anns[0], anns[2], patterns, bins=12) == pytest.approx(m[0, 2])


def test_nearby_activation_times_are_closer():
    a, b, c = ann({"bounce": [10]}), ann({"bounce": [14]}), ann({"bounce": [80]})
    for divergence in ("cross-entropy", "jeffreys"):
        m = annotation_distance_matrix([a, b, c], ["bounce"], bins=20, divergence=divergence)
        assert m[0, 1] < m[0, 2] and m[1, 0] < m[1, 2]
    j = annotation_distance_matrix([a, a, c], ["bounce"], divergence="jeffreys")
    assert j[0, 1] == pytest.approx(0.0, abs=1e-12) and j[0, 2] > 0
    with pytest.raises(ValueError, match="divergence"):
        annotation_distance_matrix([a], ["bounce"], divergence="kl")
