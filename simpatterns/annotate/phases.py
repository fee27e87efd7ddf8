"""How a library runs over a trace: the phase plan, and one trace's state while it runs.

Trusted (in-process) and untrusted (sandboxed) detectors run in *phases* that
alternate between the two kinds (`plan_phases`):

- a trusted pattern runs in the earliest trusted phase after all its
  dependencies (trusted ones of the same phase run before it, in order);
- an untrusted pattern runs in the earliest untrusted phase after all its
  dependencies, and strictly after untrusted ones it reads, so the patterns
  of one untrusted phase are independent and share one set of dependency events.

A library without untrusted detectors is one trusted phase in run order.
Dependencies travel as plain data between phases, so a trusted detector may read
an untrusted one's events and the other way round.

`TraceState` is what one trace has so far (events, timings, errors), whichever
kind of phase adds to it, so both kinds share one error, skip and timing
vocabulary: every error reads ``pattern 'LABEL' on trace 'NAME': WHAT``; a
pattern whose dependency failed on a trace is skipped there (timing 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable

from simpatterns.annotation import Annotation, EventList
from simpatterns.detectors.library import PatternLibrary
from simpatterns.trace import _ARRAY_FIELDS, Body, Trace

Phase = tuple[bool, list[str]]  # (trusted, labels in run order)

# Key of ``Annotation.errors`` for a trace that could not be read (``on_error="record"``);
# never a pattern label, since labels are non-empty.
TRACE_ERROR_KEY = ""


def plan_phases(library: PatternLibrary) -> list[Phase]:
    """``[(trusted, labels), ...]`` in run order; see the module docstring."""
    order = library.order()
    if not library.untrusted_labels():
        return [(True, order)]
    phase: dict[str, int] = {}
    for label in order:
        det = library.get(label)
        p = 0 if det.trusted else 1  # even phases: trusted, odd: untrusted
        for d in det.depends:
            d_trusted = library.get(d).trusted
            if det.trusted:
                need = phase[d] if d_trusted else phase[d] + 1
            else:
                need = phase[d] + 1 if d_trusted else phase[d] + 2
            p = max(p, need)
        phase[label] = p
    return [(n % 2 == 0, [k for k in order if phase[k] == n]) for n in sorted(set(phase.values()))]


def needed_labels(library: PatternLibrary, labels: Iterable[str]) -> set[str]:
    """Labels outside ``labels`` that they read: what a phase needs from earlier ones."""
    inside = set(labels)
    return {d for k in inside for d in library.get(k).depends if d not in inside}


def describe_trace(trace: Trace, decimals: int = 3) -> str:
    """A trace by its template, variant and action (``decimals`` per coordinate); "" when
    its meta has none of them. How errors (and plot titles) name a trace without an id."""
    meta = trace.meta
    parts = []
    if meta.get("template"):
        parts.append(f"template {meta['template']}")
    if meta.get("variant") is not None:
        parts.append(f"variant {meta['variant']}")
    if meta.get("action") is not None:
        parts.append("action (" + ", ".join(f"{v:.{decimals}f}" for v in meta["action"]) + ")")
    return ", ".join(parts)


def guarded_view(trace: Trace) -> Trace:
    """A shallow copy whose arrays are read-only views (no data copied): detectors
    cannot change what later detectors read, and the caller's trace is untouched."""
    views = {}
    for name in _ARRAY_FIELDS:
        v = getattr(trace, name).view()
        v.flags.writeable = False
        views[name] = v
    return replace(trace, events=list(trace.events), meta=dict(trace.meta), **views)


@dataclass
class TraceState:
    """One trace's events, timings and errors so far (see the module docstring)."""

    trace: Trace
    trace_id: str = ""
    events: dict[str, EventList] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    _guarded: Trace | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.trace_id or describe_trace(self.trace) or "<trace>"

    @property
    def guarded(self) -> Trace:
        """`guarded_view` of the trace, made once: what in-process detectors see."""
        if self._guarded is None:
            self._guarded = guarded_view(self.trace)
        return self._guarded

    def failed_dependencies(self, depends: Iterable[str]) -> list[str]:
        return [d for d in depends if d in self.errors]

    def done(self, label: str, events: EventList, seconds: float) -> None:
        self.events[label] = events
        self.timings[label] = seconds

    def fail(self, label: str, what: str, seconds: float) -> None:
        self.errors[label] = f"pattern {label!r} on trace {self.name!r}: {what}"
        self.timings[label] = seconds

    def skip(self, label: str, failed: list[str]) -> None:
        self.fail(label, f"skipped because its dependency {', '.join(repr(d) for d in failed)} failed", 0.0)

    def given(self, labels: Iterable[str]) -> tuple[dict[str, EventList], dict[str, str]]:
        """The events and errors of ``labels`` (what a phase run elsewhere needs)."""
        wanted = set(labels)
        return ({k: v for k, v in self.events.items() if k in wanted},
                {k: v for k, v in self.errors.items() if k in wanted})

    def result(self, labels: Iterable[str]) -> tuple[dict[str, EventList], dict[str, float], dict[str, str]]:
        """What ``labels`` added: their events, timings and errors."""
        wanted = list(labels)
        return ({k: self.events[k] for k in wanted if k in self.events},
                {k: self.timings[k] for k in wanted if k in self.timings},
                {k: self.errors[k] for k in wanted if k in self.errors})

    def merge(self, events: dict[str, EventList], timings: dict[str, float], errors: dict[str, str]) -> None:
        self.events.update(events)
        self.timings.update(timings)
        self.errors.update(errors)

    def annotation(self, labels: list[str]) -> Annotation:
        return Annotation(pattern_events=self.events, num_frames=self.trace.num_frames, patterns=labels,
                          dt=self.trace.dt, trace_id=self.trace_id,
                          timings={k: self.timings.get(k, 0.0) for k in labels}, errors=self.errors,
                          episode=self.trace.episode, bodies=described_bodies(self.trace))


def described_bodies(trace) -> list:
    """A trace's bodies as words, without geometry: what an annotation keeps of them. Built field by
    field: `dataclasses.replace` costs 2.5x more, paid for every body of every annotated trace."""
    return [Body(name=b.name, color=b.color, shape=b.shape, dynamic=b.dynamic, role=b.role) for b in trace.bodies]


def unreadable(trace_id: str, labels: list[str], error: Exception) -> Annotation:
    """The empty annotation of a trace file that could not be read (``on_error="record"``)."""
    return Annotation(pattern_events={}, num_frames=0, patterns=labels, trace_id=trace_id,
                      errors={TRACE_ERROR_KEY: str(error)})
