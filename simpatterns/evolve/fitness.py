"""Fitness of a candidate detector: two kinds, chosen by `FitnessConfig.kind`.

- ``"evidence"`` (the default, issue 19): how far above chance, in standard
  deviations, the candidate's events sit in the traces — per body, aligned in
  time, given the library's events (`simpatterns.evolve.evidence`), minus the
  paper's length and time penalties. Baseline 0 (chance); acceptance
  ``fitness > theta`` means the same for every label, library and data set.
  The discrimination benchmark (`simpatterns.evolve.discrimination`,
  ``benchmarks/fitness_discrimination.py``) chose it; see ``docs/design/evolve.md``.
- ``"paper"``: Algorithm 2 and Appendix F as published, below.

Paper fitness::

    fitness = corr(D_T, D_A')                                   # trace vs annotation distances
              + (w_novelty * novelty
                 - w_length * 0.5 * log10(min(lines, 1000))
                 - w_time * clip((t - t_lib) / t_lib, 0, 1)) / (L + 1)

- ``D_T``: the pairwise trace-distance matrix (cached; it depends only on the
  data set). ``D_A'``: the annotation-distance matrix of the library plus
  the candidate. Pearson correlation over the pairs ``i < j``.
- novelty: the mean, over existing patterns, of the mean over traces of the
  annotation distance between the candidate's histogram and that pattern's
  (0 when the library is empty).
- length penalty: logarithmic in non-blank lines, lines capped at 1000, so
  at most ``0.5 * log10(1000) = 1.5`` (the paper's cap and maximum).
- time penalty: 0 while the candidate's cost per trace is at most the
  library's mean per-pattern cost ``t_lib``, rising linearly to 1 at
  ``2 * t_lib`` and staying 1 beyond (the paper's shape). The paper measures
  cost as run time; ours counts the candidate's Python steps per trace (loop
  iterations and function calls, `simpatterns.detectors.cost`), because
  measured time differs between two runs and the same seed must give the same
  library. ``t_lib`` is floored at ``step_floor`` (the built-in detectors take
  about 20 steps per trace, which tells nothing apart; a Python loop over a
  trace's frames takes hundreds). The time the sandbox measures is reported, never scored.
- degenerate detectors are rejected, not scored: no event on any trace, an
  event on every frame of every trace, or the same frames on every trace
  (it cannot tell any two traces apart; we add this third case because the
  novelty term would otherwise reward a constant detector).

The ``/ (L + 1)`` (``scale_by_library``, our addition): the candidate's
share of ``D_A'`` is ``1 / (L + 1)``, so its effect on the correlation shrinks
as the library grows while unscaled penalties would not; scaling the other
terms the same way keeps the trade-off between a detector's signal and its
cost independent of the library's size. With an empty library the formula
is the paper's. Acceptance (`FitnessConfig.theta`) is measured from the
library's own correlation (``baseline``), the fitness a detector that adds
nothing would get, so one threshold means the same for any library.

`FitnessContext` precomputes everything that does not depend on the
candidate once per (traces, library): the trace-distance pairs, the
library's per-trace histograms ``[N, L, B]`` and the sum of its per-pattern
distance matrices. Scoring a candidate then builds one ``[N, B]`` histogram
and one ``N x N`` matrix product.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from simpatterns.annotate import distances as dist
from simpatterns.annotation import Annotation, EventList
from simpatterns.evolve.evidence import EvidenceContext, TraceSalience
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.reasons import Reason
from simpatterns.trace import Trace


FITNESS_KINDS = ("evidence", "paper")
# per kind, the defaults of the weights and theta left as None in `FitnessConfig`
KIND_DEFAULTS: dict[str, dict[str, float]] = {
    "evidence": {"w_novelty": 0.0, "w_length": 1.0, "w_time": 1.0, "theta": 3.0},
    "paper": {"w_novelty": 0.01, "w_length": 0.1, "w_time": 0.05, "theta": 0.0},
}


@dataclass
class FitnessConfig:
    """Weights and knobs of the fitness.

    ``kind``: ``"evidence"`` (default) or ``"paper"`` (see the module docstring).
    The weights and ``theta`` default (None) to the kind's values in
    `KIND_DEFAULTS`:

    - evidence: the fitness is in standard deviations above chance, so a
      penalty of one unit costs one standard deviation: ``w_length = 1`` (a
      10-line program pays 0.5, 1000 lines 1.5), ``w_time = 1``; novelty is
      part of the evidence (what the library does not explain), ``w_novelty``
      is unused. ``theta = 3``: accept a detector three standard deviations
      above chance after penalties — the benchmark's correct built-ins clear
      it at every library size while random, random-time, wrong-body and
      copied detectors do not (docs/design/evolve.md).
    - paper: the paper (Appendix F) fixes the shapes — the length penalty is
      logarithmic with lines capped at 1000 and a maximum of about 1.5; the
      time penalty is 0 up to the library's mean annotation time and reaches 1
      at twice it. Its weights and threshold were lost with the formulas in
      the text we have. Ours: novelty is in nats (about 3 to 6, and highest
      for the least informative detectors), hence its small weight; the time
      penalty saturates whenever the library is made of cheap patterns (raw
      collision events take microseconds), hence a weight that lets it break
      ties without vetoing every real detector.
    """

    kind: str = "evidence"
    w_novelty: float | None = None
    w_length: float | None = None
    w_time: float | None = None
    scale_by_library: bool = True  # paper: divide the three weighted terms by L + 1 (see module docstring)
    theta: float | None = None  # accept when fitness - baseline > theta
    theta_baseline: str = "library"  # paper: "library" (the library's own correlation) or "zero" (absolute)
    max_lines: int = 1000  # lines beyond this cost no more (the paper's cap)
    length_scale: float = 0.5  # penalty = length_scale * log10(min(lines, max_lines)): 1.5 at 1000
    bins: int = dist.DEFAULT_BINS  # paper: annotation histogram bins
    divergence: str = "cross-entropy"  # paper: the paper's; "jeffreys" makes identical annotations 0 apart
    signature_decimals: int = 1  # rounding of the per-trace score signature (database clusters)
    step_floor: float = 200.0  # the library's cost per trace is taken as at least this many Python steps
    checks: bool = True  # evidence: acceptance also checks the events' timing and bodies (`acceptance_problems`)
    mistimed_margin: float = 6.0  # evidence: reject when a common time shift adds more sd than this
    wrong_bodies_margin: float = 3.0  # evidence: reject when the other moving bodies show this many sd more

    def __post_init__(self) -> None:
        if self.kind not in FITNESS_KINDS:
            raise ValueError(f"fitness kind must be one of {', '.join(FITNESS_KINDS)}; got {self.kind!r}")

    def resolved(self) -> "FitnessConfig":
        """A copy with every weight and theta left as None set to the kind's default."""
        values = {k: (v if getattr(self, k) is None else getattr(self, k)) for k, v in KIND_DEFAULTS[self.kind].items()}
        return replace(self, **values)


@dataclass
class FitnessParts:
    """A scored candidate: the total and every term, for the log and the report."""

    fitness: float
    gain: float  # fitness - baseline; acceptance compares it with theta
    correlation: float
    novelty: float
    length_penalty: float
    time_penalty: float
    lines: int
    mean_steps: float  # the candidate's Python steps per trace (`simpatterns.detectors.cost`): its cost
    num_events: int
    traces_fired: int
    signature: tuple[float, ...] = field(repr=False, default=())
    events_hash: str = ""
    kind: str = "paper"
    evidence: float = 0.0  # evidence kind: sqrt(max(own, 0) * max(new, 0)), before penalties
    evidence_dynamics: float = 0.0  # z of the events against the bodies' local changes
    evidence_place: float = 0.0  # z of the events' positions against the bodies' positions
    evidence_new: float = 0.0  # z of the dynamics given the library's events

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("signature")
        return d


def length_penalty(lines: int, config: FitnessConfig) -> float:
    return config.length_scale * math.log10(max(1, min(int(lines), config.max_lines)))


def time_penalty(candidate: float, library: float, resolution: float = 0.0) -> float:
    """0 up to ``library``, linear to 1 at ``2 * library``, 1 beyond (any unit of cost)."""
    if library <= 0:
        return 0.0
    p = float(np.clip((candidate - library) / library, 0.0, 1.0))
    if resolution > 0:
        p = round(p / resolution) * resolution
    return p


def events_hash(events: Sequence[EventList]) -> str:
    """Hash of what a program emits over the traces, in the sandbox's canonical encoding
    (so it equals `SandboxResult.events_hash`): equal hash, equal behaviour on this data set."""
    from simpatterns.sandbox.events import encode_events

    blob = "{" + ",".join(f'"{i}":{encode_events(evs)}' for i, evs in enumerate(events)) + "}"
    return hashlib.blake2b(blob.encode(), digest_size=12).hexdigest()


class FitnessContext:
    """Everything the fitness needs that does not depend on the candidate."""

    def __init__(
        self,
        traces: Sequence[Trace],
        library_events: dict[str, Sequence[EventList]],
        library_steps: dict[str, float] | None = None,
        config: FitnessConfig | None = None,
        trace_distances: np.ndarray | None = None,
        cache_dir: str | None = None,
        salience: TraceSalience | None = None,
    ):
        """``library_events[label][i]``: the events of an existing pattern on trace
        ``i``; ``library_steps[label]``: its mean Python steps per trace. The trace side of
        each kind can be handed in when already computed (it depends only on the
        traces): ``trace_distances`` (paper) or ``salience`` (evidence)."""
        self.config = (config or FitnessConfig()).resolved()
        self.traces = list(traces)
        n = len(self.traces)
        if n < 3:
            raise ValueError(f"fitness needs at least 3 traces to compare them, got {n}")
        for label, per_trace in library_events.items():
            if len(per_trace) != n:
                raise ValueError(f"library events of {label!r} cover {len(per_trace)} traces, expected {n}")
        self.patterns = list(library_events)
        self.frames = np.array([t.num_frames for t in self.traces], dtype=np.int64)
        self.horizon = int(self.frames.max())
        steps = [float((library_steps or {}).get(p, 0.0)) for p in self.patterns]
        self.library_mean_steps = float(np.mean(steps)) if steps else 0.0
        self.step_reference = max(self.library_mean_steps, float(self.config.step_floor))  # the time penalty's t_lib
        self.library_correlation = 0.0
        if self.config.kind == "evidence":
            self.salience = salience if salience is not None else TraceSalience(self.traces)
            if self.salience.n != n:
                raise ValueError(f"trace salience covers {self.salience.n} traces, expected {n}")
            self.evidence = EvidenceContext(self.salience, library_events)
        else:
            self._init_paper(library_events, trace_distances, cache_dir)

    def _init_paper(self, library_events: dict[str, Sequence[EventList]], trace_distances: np.ndarray | None,
                    cache_dir: str | None) -> None:
        n = len(self.traces)
        D_T = trace_distances if trace_distances is not None else dist.trace_distance_matrix(self.traces, cache_dir)
        if D_T.shape != (n, n):
            raise ValueError(f"trace distance matrix has shape {D_T.shape}, expected {(n, n)}")
        self.D_T = np.asarray(D_T, dtype=np.float64)
        self._iu = np.triu_indices(n, 1)
        t = self.D_T[self._iu]
        self._t_centered = t - t.mean()
        self._t_norm = float(np.sqrt((self._t_centered * self._t_centered).sum()))
        # row-wise (per-trace) views for the signature: off-diagonal entries of each row
        off = ~np.eye(n, dtype=bool)
        self._off = off
        rows = self.D_T[off].reshape(n, n - 1)
        self._rows_c = rows - rows.mean(1, keepdims=True)
        self._rows_norm = np.sqrt((self._rows_c**2).sum(1))
        cfg = self.config
        if cfg.theta_baseline not in ("library", "zero"):
            raise ValueError(f"theta_baseline must be 'library' or 'zero', got {cfg.theta_baseline!r}")
        L = len(self.patterns)
        if L:
            self.hist_lib = np.stack(
                [dist.event_histograms(library_events[p], self.horizon, cfg.bins)
                 for p in self.patterns], axis=1)  # [N, L, B]
            self.S_lib = L * dist.distance_from_histograms(self.hist_lib, cfg.divergence)
        else:
            self.hist_lib = np.zeros((n, 0, cfg.bins))
            self.S_lib = np.zeros((n, n))
        self.library_correlation = self._corr((self.S_lib / L)[self._iu]) if L else 0.0

    @classmethod
    def from_annotations(
        cls, traces: Sequence[Trace], annotations: Sequence[Annotation], patterns: Sequence[str] | None = None,
        config: FitnessConfig | None = None, **kwargs: Any,
    ) -> "FitnessContext":
        """From the library's `Annotation`s (one per trace, e.g. `annotate_many`); the
        library's cost is taken as ``step_floor`` (annotations carry times, not steps)."""
        pats = list(patterns) if patterns is not None else (list(annotations[0].patterns) if annotations else [])
        events = {p: [a.events_of(p) for a in annotations] for p in pats}
        return cls(traces, events, None, config, **kwargs)

    # -------------------------------------------------------------- pieces
    # Elementwise products and sums, not BLAS (`@`, `np.dot`): on a loaded machine a
    # multi-threaded BLAS turns these microsecond products into tens of milliseconds.
    def _corr(self, a: np.ndarray) -> float:
        ac = a - a.mean()
        denom = float(np.sqrt((ac * ac).sum())) * self._t_norm
        if denom <= 1e-300:
            return 0.0
        return float((ac * self._t_centered).sum() / denom)

    def histograms(self, events: Sequence[EventList]) -> np.ndarray:
        """``[N, B]`` smoothed histograms of a candidate's events on the shared horizon
        (`simpatterns.annotate.distances.event_histograms`, as for the library)."""
        return dist.event_histograms(events, self.horizon, self.config.bins)

    def degenerate(self, events: Sequence[EventList]) -> Reason | None:
        fired = [len(e) > 0 for e in events]
        if not any(fired):
            return Reason(R.DEGENERATE_NEVER, f"no event on any of {len(events)} traces")
        # both remaining cases need every trace: stop at the first that breaks them
        if all(len(evs) >= int(self.frames[i]) for i, evs in enumerate(events)) and all(
                len({f for f, _ in evs}) >= int(self.frames[i]) for i, evs in enumerate(events)):
            return Reason(R.DEGENERATE_ALWAYS, "an event on every frame of every trace")
        first = {f for f, _ in events[0]}
        if all({f for f, _ in evs} == first for evs in events[1:]):
            return Reason(R.DEGENERATE_CONSTANT, f"the same frames {sorted(first)[:5]} on every trace")
        return None

    @property
    def baseline(self) -> float:
        """What `FitnessConfig.theta` is measured from: chance (0) for the evidence kind; for the
        paper's, the library's own correlation (``theta_baseline = "library"``) or 0."""
        if self.config.kind == "evidence":
            return 0.0
        return self.library_correlation if self.config.theta_baseline == "library" else 0.0

    def accepts(self, parts: "FitnessParts") -> bool:
        """The threshold test: ``fitness - baseline > theta``."""
        return parts.fitness - self.baseline > self.config.theta

    def acceptance_problems(self, events: Sequence[EventList]) -> list[str]:
        """Why the events of a detector that clears theta should still not be accepted (empty: accept).

        Evidence kind with ``checks``: the events are misplaced in time (a common shift of every
        event would raise their evidence by more than ``mistimed_margin`` sd) or attributed to the
        wrong bodies (the other moving bodies at the same frames show ``wrong_bodies_margin`` sd
        more). Both are above chance, so theta alone cannot reject them; the checks cost about 80
        scorings, once per label. The paper kind has no checks."""
        cfg = self.config
        if cfg.kind != "evidence" or not cfg.checks:
            return []
        return self.evidence.checks(events, cfg.mistimed_margin, cfg.wrong_bodies_margin)

    # -------------------------------------------------------------- score
    def score(self, events: Sequence[EventList], steps: np.ndarray | None, lines: int,
              events_digest: str | None = None) -> FitnessParts | Reason:
        """Score a candidate's (schema-checked) events; a `Reason` when degenerate.
        ``steps[i]``: its Python steps on trace ``i`` (`SandboxResult.steps`; None: 0).
        ``events_digest``: the sandbox's hash of the canonical events, when known."""
        if len(events) != len(self.traces):
            raise ValueError(f"events for {len(events)} traces, expected {len(self.traces)}")
        bad = self.degenerate(events)
        if bad is not None:
            return bad
        mean_t = float(np.mean(steps)) if steps is not None and len(steps) else 0.0
        digest = events_digest or events_hash(events)
        if self.config.kind == "evidence":
            return self._score_evidence(events, mean_t, lines, digest)
        return self._score_paper(events, mean_t, lines, digest)

    def _penalties(self, lines: int, mean_t: float) -> tuple[float, float]:
        cfg = self.config
        return length_penalty(lines, cfg), time_penalty(mean_t, self.step_reference)

    def _score_evidence(self, events: Sequence[EventList], mean_t: float, lines: int, digest: str) -> FitnessParts:
        cfg = self.config
        ev = self.evidence.score(events)
        lp, tp = self._penalties(lines, mean_t)
        fitness = ev.evidence - cfg.w_length * lp - cfg.w_time * tp
        d = cfg.signature_decimals
        return FitnessParts(
            fitness=float(fitness), gain=float(fitness - self.baseline), correlation=0.0, novelty=0.0,
            length_penalty=lp, time_penalty=tp, lines=int(lines),
            mean_steps=mean_t, num_events=int(sum(len(e) for e in events)),
            traces_fired=int(sum(1 for e in events if e)),
            signature=tuple(float(x) for x in np.round(ev.signature, d) + 0.0), events_hash=digest,
            kind="evidence", evidence=ev.evidence, evidence_dynamics=ev.dynamics, evidence_place=ev.place,
            evidence_new=ev.new,
        )

    def _score_paper(self, events: Sequence[EventList], mean_t: float, lines: int, digest: str) -> FitnessParts:
        cfg = self.config
        L = len(self.patterns)
        h = self.histograms(events)  # [N, B]
        logh = np.log(h)
        cross = np.einsum("ib,jb->ij", h, logh)  # = h @ log(h).T without BLAS threads
        D_c = -0.5 * (cross + cross.T)  # the contract's histogram_cross_entropy_matrix(h)
        if cfg.divergence == "jeffreys":
            ent = -(h * np.log(h)).sum(-1)
            D_c = np.maximum(D_c - 0.5 * (ent[:, None] + ent[None, :]), 0.0)
        D_new = (self.S_lib + D_c) / (L + 1)
        corr = self._corr(D_new[self._iu])
        if L:
            cross = dist.histogram_cross_entropy_stack(h[:, None, :], self.hist_lib)  # [N, L]
            if cfg.divergence == "jeffreys":
                ent_c = -(h * np.log(h)).sum(-1)[:, None]
                ent_l = -(self.hist_lib * np.log(self.hist_lib)).sum(-1)
                cross = np.maximum(cross - 0.5 * (ent_c + ent_l), 0.0)
            novelty = float(cross.mean(0).mean())
        else:
            novelty = 0.0
        lp, tp = self._penalties(lines, mean_t)
        extra = cfg.w_novelty * novelty - cfg.w_length * lp - cfg.w_time * tp
        fitness = corr + (extra / (L + 1) if cfg.scale_by_library else extra)
        return FitnessParts(
            fitness=float(fitness),
            gain=float(fitness - self.baseline),
            correlation=corr,
            novelty=novelty,
            length_penalty=lp,
            time_penalty=tp,
            lines=int(lines),
            mean_steps=mean_t,
            num_events=int(sum(len(e) for e in events)),
            traces_fired=int(sum(1 for e in events if e)),
            signature=self.signature(D_c),
            events_hash=digest,
        )

    def signature(self, D_c: np.ndarray) -> tuple[float, ...]:
        """Per-trace scores: for each trace, the correlation of its row of the
        candidate's own distance matrix with its row of ``D_T``, rounded. Programs
        with the same signature behave alike and share a database cluster."""
        n = D_c.shape[0]
        rows = D_c[self._off].reshape(n, n - 1)
        rc = rows - rows.mean(1, keepdims=True)
        denom = np.sqrt((rc**2).sum(1)) * self._rows_norm
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(denom > 1e-300, (rc * self._rows_c).sum(1) / denom, 0.0)
        d = self.config.signature_decimals
        return tuple(float(x) for x in np.round(r, d) + 0.0)  # + 0.0: no negative zeros
