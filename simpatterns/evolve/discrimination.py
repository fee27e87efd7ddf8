"""Does a fitness tell a correct detector from a wrong one? (issue 19)

For every pattern of a reference library (the built-ins) that fires on enough
traces, its correct events are scored against families of wrong detectors,
each with base libraries of several sizes:

- ``random``: random frames, no params, a Poisson number of events per trace
  with the correct detector's mean (plus one) — the check of the issue;
- ``random times``: the correct events' params (so the same bodies and counts
  per trace), in random order, at uniformly random frames;
- ``shifted``: every event moved by the same offset (±0.5 s, ±1 s), events
  falling off the trace dropped;
- ``wrong bodies``: the right frames, every body named in the params replaced
  by another body of the trace (patterns that name no body have none);
- ``mis-tuned``: the offline proposer's value operator on the detector's numeric
  constants (log-normal, its escape step sigma = 1, chained up to three times),
  kept when their events differ from the correct ones (event F1 below
  ``MISTUNED_MAX_F1``) and are not degenerate;
- ``library copy``: the events of a pattern already in the base library (a
  redundant detector);
- ``other label`` (reported, not a target): another benchmark pattern's
  events when that pattern is *not* in the base library. A fitness that does
  not read the label cannot know which of two informative detectors is the
  label's; this column says how often the label's own one wins anyway.

Base libraries (`library_sizes`): ``raw`` (the raw-event patterns),
``half`` (raw plus every second other pattern) and ``all but`` (the whole
library minus the pattern and its dependents).

Per family and size it reports the AUC (the fraction of (correct, wrong) pairs
the correct detector wins, ties half), the worst pattern's AUC, the median
rank of the correct detector among its wrong ones, and the fraction of wrong
and correct detectors the context accepts (``accepts`` and, when it has one,
``acceptance_problems``). The fitness is anything with the `FitnessContext`
interface (``score(events, times, lines)``, ``accepts``), built by a factory
from the base library's events and times. `mistune` makes the deliberately
mis-tuned seeds of ``benchmarks/fitness_recovery.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from simpatterns.annotation import Annotation
from simpatterns.detectors.contract import DetectorError, load_detector
from simpatterns.detectors.library import PatternLibrary
from simpatterns.annotation import EventList
from simpatterns.trace import Trace

FAMILIES = ("random", "random times", "shifted", "wrong bodies", "mis-tuned", "library copy")
INFO_FAMILIES = ("other label",)
SIZES = ("raw", "half", "all but")
RAW_PATTERNS = ("collision start", "collision end", "task complete")
SHIFTS_S = (-1.0, -0.5, 0.5, 1.0)
MISTUNED_MAX_F1 = 0.8  # a mutant this close to the correct events is not wrong
RANDOM_SOURCE_LINES = 9  # a random detector is a short program


class Context(Protocol):
    def score(self, events: Sequence[EventList], steps: np.ndarray | None, lines: int) -> Any: ...

    def accepts(self, parts: Any) -> bool: ...  # a context may also have acceptance_problems(events) -> list


# (the library's events, its cost per pattern in Python steps; here {}: candidates are scored
# without a cost, so the time penalty plays no part in this benchmark)
ContextFactory = Callable[[dict[str, list[EventList]], dict[str, float]], Context]


@dataclass
class Detection:
    """What a detector emitted over the traces, and how long its source is."""

    name: str
    family: str
    events: list[EventList]
    lines: int


@dataclass
class Case:
    label: str
    correct: Detection
    wrong: list[Detection]  # the library-independent families


# ------------------------------------------------------------------ events
def event_bodies(params: dict[str, Any], names: frozenset[str] | set[str]) -> list[str]:
    """Body names an event's params mention: string values, or lists of strings, that name a body."""
    out: list[str] = []
    for v in params.values():
        if isinstance(v, str):
            if v in names:
                out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, str) and x in names)
    return out


def event_f1(pred: Sequence[EventList], ref: Sequence[EventList], names: Sequence[Sequence[str]],
             tol: int = 2) -> float:
    """F1 of ``pred`` against ``ref`` over all traces: an event matches one reference event of the same
    trace naming the same bodies within ``tol`` frames (each matched once, greedily in frame order)."""
    tp = n_pred = n_ref = 0
    for p_evs, r_evs, nm in zip(pred, ref, names):
        nset = frozenset(nm)
        n_pred += len(p_evs)
        n_ref += len(r_evs)
        groups: dict[tuple[str, ...], list[int]] = {}
        for f, params in r_evs:
            groups.setdefault(tuple(sorted(event_bodies(params, nset))), []).append(int(f))
        for key in groups:
            groups[key].sort()
        used: dict[tuple[str, ...], list[bool]] = {k: [False] * len(v) for k, v in groups.items()}
        for f, params in sorted(p_evs, key=lambda e: e[0]):
            key = tuple(sorted(event_bodies(params, nset)))
            frames = groups.get(key)
            if not frames:
                continue
            i = int(np.searchsorted(frames, int(f) - tol))
            while i < len(frames) and frames[i] <= int(f) + tol:
                if not used[key][i]:
                    used[key][i] = True
                    tp += 1
                    break
                i += 1
    if n_pred == 0 and n_ref == 0:
        return 1.0
    return 2.0 * tp / (n_pred + n_ref)


def random_events(correct: Sequence[EventList], traces: Sequence[Trace], rng: np.random.Generator) -> list[EventList]:
    mean = float(np.mean([len(e) for e in correct]))
    return [sorted((int(f), {}) for f in rng.integers(0, t.num_frames, int(rng.poisson(mean)) + 1)) for t in traces]


def random_times(correct: Sequence[EventList], traces: Sequence[Trace], rng: np.random.Generator) -> list[EventList]:
    out = []
    for evs, t in zip(correct, traces):
        frames = np.sort(rng.integers(0, t.num_frames, len(evs)))
        order = rng.permutation(len(evs))  # params in random order: sorted frames would follow the true order
        out.append([(int(f), dict(evs[int(k)][1])) for f, k in zip(frames, order)])
    return out


def shifted(correct: Sequence[EventList], traces: Sequence[Trace], frames: int) -> list[EventList]:
    return [[(f + frames, dict(p)) for f, p in evs if 0 <= f + frames < t.num_frames]
            for evs, t in zip(correct, traces)]


def wrong_bodies(correct: Sequence[EventList], traces: Sequence[Trace], rng: np.random.Generator
                 ) -> list[EventList] | None:
    """The same frames with every named body replaced by another body of the trace; None when the
    detector names no body."""
    out: list[EventList] = []
    named = False
    for evs, t in zip(correct, traces):
        names = list(t.names)
        nset = frozenset(names)
        row: EventList = []
        for f, p in evs:
            mine = set(event_bodies(p, nset))
            others = [n for n in names if n not in mine] or names
            q: dict[str, Any] = {}
            for k, v in p.items():
                if isinstance(v, str) and v in nset:
                    q[k] = others[int(rng.integers(len(others)))]
                    named = True
                elif isinstance(v, (list, tuple)) and any(isinstance(x, str) and x in nset for x in v):
                    q[k] = [others[int(rng.integers(len(others)))] if isinstance(x, str) and x in nset else x
                            for x in v]
                    named = True
                else:
                    q[k] = v
            row.append((f, q))
        out.append(row)
    return out if named else None


def run_detector(source: str, traces: Sequence[Trace], deps: dict[str, list[EventList]]) -> list[EventList] | None:
    """Run trusted detector source in-process on every trace; None when it fails to load or raises."""
    try:
        det = load_detector(source)
        if det.detect is None:
            return None
        out = []
        for i, t in enumerate(traces):
            evs = det.detect(t, {d: list(deps[d][i]) for d in det.depends})
            out.append(sorted(((int(f), dict(p)) for f, p in evs), key=lambda e: e[0]))
        return out
    except (DetectorError, ArithmeticError, LookupError, ValueError, TypeError, AttributeError):
        return None


def mistuned(source: str, correct: Sequence[EventList], traces: Sequence[Trace], deps: dict[str, list[EventList]],
             count: int, seed: int, attempts: int = 60, sigma: float = 1.0) -> list[Detection]:
    """Up to ``count`` threshold mutants of ``source``: the offline proposer's value operator
    (`mutation.mutate_value`, log-normal with its ``sigma``) applied to one or two numeric constants,
    chained one to three times, kept when the events are not degenerate and differ from ``correct``
    (F1 < `MISTUNED_MAX_F1`). Comparison operators are left alone: a flipped comparison is a logic
    error, not a mis-tuned threshold."""
    from simpatterns.evolve.mutation import apply_edits, find_sites, mutate_value

    names = [t.names for t in traces]
    seen: set[str] = set()
    out: list[Detection] = []
    rng = np.random.default_rng([seed, 7])
    for k in range(attempts):
        if len(out) >= count:
            break
        src = source
        for _ in range(int(rng.integers(1, 4))):
            sites = [s for s in find_sites(src) if s.kind == "const" and s.value]
            if not sites:
                break
            chosen = rng.choice(len(sites), size=min(len(sites), int(rng.integers(1, 3))), replace=False)
            edits = [(sites[int(i)], mutate_value(sites[int(i)].text, rng, sigma)) for i in chosen]
            src = apply_edits(src, [(s, v) for s, v in edits if v is not None])
        if src == source or src in seen:
            continue
        seen.add(src)
        events = run_detector(src, traces, deps)
        if events is None or not any(events) or event_f1(events, correct, names) >= MISTUNED_MAX_F1:
            continue
        out.append(Detection(f"mutant {k}", "mis-tuned", events, _lines(src)))
    return out


def _lines(source: str) -> int:
    return len([ln for ln in source.splitlines() if ln.strip()])


# ------------------------------------------------------------------ cases
def library_sizes(library: PatternLibrary, label: str) -> dict[str, list[str]]:
    """Base libraries for scoring ``label``: raw events only, half, all but the label and its dependents."""
    drop = {label, *library.dependents(label)}
    rest = [p for p in library.order() if p not in drop]
    raw = [p for p in rest if p in RAW_PATTERNS]
    others = [p for p in rest if p not in RAW_PATTERNS]
    return {"raw": raw, "half": raw + others[::2], "all but": rest}


def events_of(annotations: Sequence[Annotation], label: str) -> list[EventList]:
    return [list(a.events_of(label)) for a in annotations]


def build_cases(traces: Sequence[Trace], annotations: Sequence[Annotation], library: PatternLibrary,
                labels: Sequence[str] | None = None, *, min_traces: int = 5, n_random: int = 20,
                n_random_times: int = 10, n_wrong_bodies: int = 5, n_mistuned: int = 8, seed: int = 0) -> list[Case]:
    """One `Case` per label (default: every non-raw pattern firing on at least ``min_traces`` traces)."""
    if labels is None:
        labels = [p for p in library.order() if p not in RAW_PATTERNS
                  and sum(1 for a in annotations if a.events_of(p)) >= min_traces]
    every = {p: events_of(annotations, p) for p in library.order()}
    dt = traces[0].dt
    cases = []
    for li, label in enumerate(labels):
        det = library.get(label)
        correct = every[label]
        lines = det.num_lines
        rng = np.random.default_rng([seed, li])
        wrong: list[Detection] = []
        wrong += [Detection(f"random {k}", "random", random_events(correct, traces, rng), RANDOM_SOURCE_LINES)
                  for k in range(n_random)]
        wrong += [Detection(f"random times {k}", "random times", random_times(correct, traces, rng), lines)
                  for k in range(n_random_times)]
        wrong += [Detection(f"shifted {s:+g} s", "shifted", shifted(correct, traces, int(round(s / dt))), lines)
                  for s in SHIFTS_S]
        for k in range(n_wrong_bodies):
            wb = wrong_bodies(correct, traces, rng)
            if wb is None:
                break
            wrong.append(Detection(f"wrong bodies {k}", "wrong bodies", wb, lines))
        wrong += mistuned(det.source, correct, traces, every, n_mistuned, seed=seed * 1000 + li)
        cases.append(Case(label, Detection(label, "correct", correct, lines), wrong))
    return cases


# ------------------------------------------------------------------ scoring
@dataclass
class PatternResult:
    label: str
    size: str
    correct: float  # its fitness (-inf when rejected as degenerate)
    accepted: bool
    wrong: dict[str, list[tuple[str, float, bool]]] = field(default_factory=dict)  # family -> (name, fitness, accepted)

    def auc(self, family: str) -> float | None:
        scores = [s for _, s, _ in self.wrong.get(family, [])]
        if not scores:
            return None
        w = np.array(scores)
        return float(np.mean((self.correct > w) + 0.5 * (self.correct == w)))

    def rank(self, families: Sequence[str] = FAMILIES) -> int:
        """1 + the number of wrong detectors (of ``families``) scoring at least as high."""
        return 1 + sum(1 for f in families for _, s, _ in self.wrong.get(f, []) if s >= self.correct)

    def total(self, families: Sequence[str] = FAMILIES) -> int:
        return 1 + sum(len(self.wrong.get(f, [])) for f in families)


def _value(parts: Any) -> tuple[float, bool, Any]:
    fit = getattr(parts, "fitness", None)
    return (float(fit), True, parts) if fit is not None else (-math.inf, False, parts)


def evaluate(cases: Sequence[Case], annotations: Sequence[Annotation], library: PatternLibrary,
             make_context: ContextFactory, sizes: Sequence[str] = SIZES, progress: Callable[[str], None] | None = None
             ) -> list[PatternResult]:
    """Score every case's correct and wrong detectors under each base library size."""
    every = {p: events_of(annotations, p) for p in library.order()}
    bench_labels = {c.label for c in cases}
    results = []
    for case in cases:
        for size in sizes:
            base = library_sizes(library, case.label)[size]
            ctx = make_context({p: every[p] for p in base}, {})

            def score(d: Detection) -> tuple[float, bool]:
                v, ok, parts = _value(ctx.score(d.events, None, d.lines))
                ok = bool(ok and ctx.accepts(parts))
                if ok and hasattr(ctx, "acceptance_problems"):
                    ok = not ctx.acceptance_problems(d.events)
                return v, ok

            c_val, c_ok = score(case.correct)
            res = PatternResult(case.label, size, c_val, c_ok)
            dets = list(case.wrong)
            dets += [Detection(f"copy of {p}", "library copy", every[p], library.get(p).num_lines)
                     for p in base if any(every[p])]
            dets += [Detection(f"events of {p}", "other label", every[p], library.get(p).num_lines)
                     for p in sorted(bench_labels - set(base) - {case.label})]
            for d in dets:
                v, ok = score(d)
                res.wrong.setdefault(d.family, []).append((d.name, v, ok))
            results.append(res)
            if progress:
                progress(f"{case.label} / {size}: AUC " + ", ".join(
                    f"{f} {res.auc(f):.2f}" for f in FAMILIES if res.auc(f) is not None))
    return results


@dataclass
class Cell:
    auc: float  # pooled over the patterns' (correct, wrong) pairs
    worst: float  # the lowest per-pattern AUC
    worst_label: str
    accepted: float  # fraction of the family's wrong detectors accepted
    pairs: int


def summarize(results: Sequence[PatternResult], families: Sequence[str] = FAMILIES + INFO_FAMILIES
              ) -> dict[tuple[str, str], Cell]:
    out = {}
    for size in dict.fromkeys(r.size for r in results):
        rs = [r for r in results if r.size == size]
        for fam in families:
            wins = pairs = acc = 0.0
            worst, worst_label = math.inf, ""
            for r in rs:
                sc = r.wrong.get(fam, [])
                if not sc:
                    continue
                w = np.array([s for _, s, _ in sc])
                wins += float(np.sum((r.correct > w) + 0.5 * (r.correct == w)))
                pairs += len(w)
                acc += sum(1 for _, _, ok in sc if ok)
                a = r.auc(fam)
                if a is not None and a < worst:
                    worst, worst_label = a, r.label
            if pairs:
                out[(size, fam)] = Cell(wins / pairs, worst, worst_label, acc / pairs, int(pairs))
    return out


def markdown_table(results: Sequence[PatternResult], title: str = "") -> str:
    """Rows: library sizes; columns: families (AUC, worst pattern's AUC in brackets), the correct
    detectors' median rank and acceptance, and the wrong detectors' acceptance."""
    cells = summarize(results)
    sizes = list(dict.fromkeys(r.size for r in results))
    fams = [f for f in FAMILIES + INFO_FAMILIES if any((s, f) in cells for s in sizes)]
    head = ["base library"] + [f + (" (info)" if f in INFO_FAMILIES else "") for f in fams] + [
        "median rank", "correct accepted", "wrong accepted"]
    lines = [f"**{title}**", ""] if title else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in sizes:
        rs = [r for r in results if r.size == s]
        row = [s]
        for f in fams:
            c = cells.get((s, f))
            row.append("-" if c is None else f"{c.auc:.2f} ({c.worst:.2f})")
        ranks = [r.rank() for r in rs]
        totals = [r.total() for r in rs]
        wrong_acc = [ok for r in rs for f in FAMILIES for _, _, ok in r.wrong.get(f, [])]
        row += [f"{np.median(ranks):g} of {int(np.median(totals))}",
                f"{np.mean([r.accepted for r in rs]):.0%}",
                f"{np.mean(wrong_acc) if wrong_acc else 0:.0%}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def per_pattern_table(results: Sequence[PatternResult], size: str) -> str:
    fams = list(FAMILIES)
    lines = ["| pattern | " + " | ".join(fams) + " | rank |", "|" + "---|" * (len(fams) + 2)]
    for r in results:
        if r.size != size:
            continue
        cells = [("-" if r.auc(f) is None else f"{r.auc(f):.2f}") for f in fams]
        lines.append(f"| {r.label} | " + " | ".join(cells) + f" | {r.rank()}/{r.total()} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ recovery
def mistune(source: str, factor: float) -> str:
    """``source`` with every named module-level numeric constant multiplied by ``factor``
    (integers rounded, at least 1): a deliberately mis-tuned seed for a discovery run."""
    from simpatterns.evolve.mutation import _format, apply_edits, find_sites

    edits = []
    for s in find_sites(source):
        if s.name and s.value:
            was_int = "." not in s.text and "e" not in s.text.lower()
            value = max(1, int(round(s.value * factor))) if was_int else s.value * factor
            edits.append((s, _format(value, was_int)))
    return apply_edits(source, edits)


def acceptance_table(results: Sequence[PatternResult]) -> str:
    """Rows: library sizes; columns: the fraction of correct detectors and of each family's wrong
    detectors that the context accepts (at its theta)."""
    sizes = list(dict.fromkeys(r.size for r in results))
    fams = [f for f in FAMILIES if any(r.wrong.get(f) for r in results)]
    lines = ["| base library | correct | " + " | ".join(fams) + " |", "|" + "---|" * (len(fams) + 2)]
    for s in sizes:
        rs = [r for r in results if r.size == s]
        row = [s, f"{np.mean([r.accepted for r in rs]):.0%}"]
        for f in fams:
            oks = [ok for r in rs for _, _, ok in r.wrong.get(f, [])]
            row.append(f"{np.mean(oks):.0%}" if oks else "-")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
