"""Fitness on real traces with the built-in detectors: both kinds (the paper's Algorithm 2 and
Appendix F, and the evidence fitness); the discrimination benchmark is test_fitness_discrimination.py."""

import numpy as np
import pytest

from simpatterns.annotate import distances as dist
from simpatterns.annotation import Annotation, PatternEvent
from simpatterns.annotate.annotator import annotate_many
from simpatterns.sandbox import reasons as R
from simpatterns.evolve.fitness import (
    FitnessConfig,
    FitnessContext,
    length_penalty,
    time_penalty,
)
from simpatterns.detectors.contract import count_lines

RANDOM_SOURCE_LINES = 9  # a short random detector: the length penalty favours it, not the correct one


@pytest.fixture(scope="module")
def annotated(many_traces, builtin):
    return annotate_many(many_traces, builtin)


def test_candidate_histograms_are_the_annotation_distance_histograms_on_the_shared_horizon(many_traces):
    """Fitness bins a candidate's events with the annotation distance's histogram function,
    over the longest trace: the same rows `histogram_stack` gives for annotations of those events."""
    rng = np.random.default_rng(0)
    frames = [sorted(rng.integers(0, t.num_frames, int(rng.integers(0, 6))).tolist()) for t in many_traces]
    events = [[(int(f), {}) for f in fs] for fs in frames]
    ctx = FitnessContext(many_traces, {}, {})
    assert ctx.horizon == max(t.num_frames for t in many_traces)
    anns = [Annotation.from_events([PatternEvent("p", int(f), {}) for f in fs], t.num_frames, ["p"])
            for fs, t in zip(frames, many_traces)]
    np.testing.assert_allclose(ctx.histograms(events), dist.histogram_stack(anns, ["p"], 20, ctx.horizon)[:, 0, :],
                               rtol=1e-12, atol=1e-15)


def test_penalty_shapes():
    cfg = FitnessConfig().resolved()
    assert length_penalty(1000, cfg) == pytest.approx(1.5)
    assert length_penalty(50_000, cfg) == pytest.approx(1.5)  # capped at 1000 lines
    assert length_penalty(10, cfg) == pytest.approx(0.5)
    assert time_penalty(0.9, 1.0) == 0.0
    assert time_penalty(1.5, 1.0) == pytest.approx(0.5)
    assert time_penalty(2.0, 1.0) == pytest.approx(1.0)
    assert time_penalty(7.0, 1.0) == 1.0
    assert time_penalty(1.26, 1.0, resolution=0.1) == pytest.approx(0.3)


def _context(traces, annotated, library_labels, cfg=None):
    events = {k: [[(e.frame, e.params) for e in a.by_pattern(k)] for a in annotated] for k in library_labels}
    return FitnessContext(traces, events, None, cfg)  # the library's cost: the step floor


BASE = ["collision start", "collision end", "task complete"]  # Algorithm 1 starts from raw events


@pytest.mark.parametrize("kind", ["paper", "evidence"])
@pytest.mark.parametrize("label", ["high energy impact", "brief tap", "airborne"])
def test_correct_detector_ranks_above_random_and_degenerate(many_traces, annotated, builtin, label, kind):
    """On 40 traces the paper's correlation term is noisy (one random detector in ten can get lucky), so
    the correct built-in detector must beat the typical random one: more than 80% of 20 detectors
    that fire a random number of times at random frames, independent of the trace."""
    ctx = _context(many_traces, annotated, BASE, FitnessConfig(kind=kind))
    correct = [[(e.frame, e.params) for e in a.by_pattern(label)] for a in annotated]
    assert sum(1 for c in correct if c) >= 5, f"{label} hardly fires on the test traces"
    good = ctx.score(correct, None, count_lines(builtin.get(label).source))
    assert ctx.accepts(good), good
    mean_count = np.mean([len(c) for c in correct])
    random_fitness = []
    for s in range(20):
        rng = np.random.default_rng(s)
        rand = [[(int(f), {}) for f in rng.integers(0, t.num_frames, rng.poisson(mean_count) + 1)]
                for t in many_traces]
        random_fitness.append(ctx.score(rand, None, RANDOM_SOURCE_LINES).fitness)
    assert np.mean(np.array(random_fitness) < good.fitness) > 0.8, (good.fitness, sorted(random_fitness))
    never = ctx.score([[] for _ in many_traces], None, 5)
    always = ctx.score([[(f, {}) for f in range(t.num_frames)] for t in many_traces], None, 5)
    constant = ctx.score([[(3, {})] for _ in many_traces], None, 5)
    assert never.code == R.DEGENERATE_NEVER
    assert always.code == R.DEGENERATE_ALWAYS
    assert constant.code == R.DEGENERATE_CONSTANT


@pytest.mark.parametrize("kind", ["paper", "evidence"])
def test_time_penalty_reaches_fitness(many_traces, annotated, builtin, kind):
    ctx = _context(many_traces, annotated, [k for k in builtin.order() if k != "bounce"], FitnessConfig(kind=kind))
    correct = [[(e.frame, e.params) for e in a.by_pattern("bounce")] for a in annotated]
    assert ctx.step_reference == FitnessConfig().step_floor  # builtin-style detectors: a few steps each
    fast = ctx.score(correct, np.full(len(many_traces), ctx.step_reference * 0.5), 30)
    mid = ctx.score(correct, np.full(len(many_traces), ctx.step_reference * 1.5), 30)
    slow = ctx.score(correct, np.full(len(many_traces), ctx.step_reference * 3), 30)
    assert (fast.time_penalty, mid.time_penalty, slow.time_penalty) == (0.0, pytest.approx(0.5), 1.0)
    assert fast.mean_steps == ctx.step_reference * 0.5
    assert slow.fitness < fast.fitness
    assert fast.events_hash == slow.events_hash and fast.signature == slow.signature


def test_empty_library_is_the_plain_correlation(many_traces, annotated):
    ctx = FitnessContext(many_traces, {}, {}, FitnessConfig(kind="paper", w_novelty=0, w_length=0, w_time=0))
    ev = [[(e.frame, e.params) for e in a.by_pattern("bounce")] for a in annotated]
    parts = ctx.score(ev, None, 10)
    h = dist.activation_histograms([[f for f, _ in e] for e in ev], ctx.horizon, 20)
    D_a = dist.histogram_cross_entropy_matrix(h)
    iu = np.triu_indices(len(many_traces), 1)
    assert parts.correlation == pytest.approx(np.corrcoef(ctx.D_T[iu], D_a[iu])[0, 1], abs=1e-9)
    assert parts.novelty == 0.0 and ctx.baseline == 0.0
