"""The library a discovery job grows, with every pattern's events on the job's traces.

The base library's detectors are trusted and run in-process once, at the start
(`LibraryState.from_base`); an accepted (evolved) detector never runs
in-process: it is run once more in the sandbox for its events on every trace,
and enters the library as an untrusted `Detector` built from what its source
declares (`LibraryState.accept`: nothing is parsed or executed here for a
program the job scored itself). The sandbox then gets the new events as
dependency events, so later labels can read the new pattern.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from simpatterns.annotate.annotator import annotate_many
from simpatterns.annotation import EventList
from simpatterns.detectors.contract import Declarations, Detector
from simpatterns.detectors.cost import counted_detect
from simpatterns.detectors.library import EVOLVE_RECORD, PatternLibrary
from simpatterns.evolve.database import DetectorProgram
from simpatterns.evolve.prompt import LabelSpec
from simpatterns.evolve.records import LabelDone
from simpatterns.evolve.state import JobError
from simpatterns.sandbox.distributed import ExecutorSandbox
from simpatterns.sandbox.pool import Sandbox
from simpatterns.trace import Trace


@dataclass
class LibraryState:
    """A library, and per pattern its events on each of the job's traces and its mean
    Python steps per trace (the cost the fitness's time penalty compares with)."""

    library: PatternLibrary
    events: dict[str, list[EventList]]
    steps: dict[str, float]

    @classmethod
    def from_base(cls, base: PatternLibrary, traces: Sequence[Trace]) -> tuple["LibraryState", dict[str, float]]:
        """The base library annotated on the traces; also returns its mean steps per trace.
        Raises `JobError` when a base detector fails on a trace."""
        lib = base.copy()
        anns = annotate_many(traces, lib)
        errors = {k: v for a in anns for k, v in a.errors.items()}
        if errors:
            raise JobError(f"the base library fails on the traces: {next(iter(errors.values()))}")
        events = {k: [a.events_of(k) for a in anns] for k in lib.order()}
        counted = {k: _mean_steps(lib, k, traces, events) for k in lib.order()}
        return cls(lib, events, dict(counted)), counted

    def without(self, label: str) -> "LibraryState":
        """The library a candidate for ``label`` is scored against: without ``label`` and
        the patterns that read it."""
        drop = {label} | (set(self.library.dependents(label)) if label in self.library else set())
        keep = [k for k in self.library.order() if k not in drop]
        return LibraryState(self.library, {k: self.events[k] for k in keep}, {k: self.steps[k] for k in keep})

    def available(self, label: str) -> list[str]:
        """The patterns a candidate for ``label`` may read."""
        return list(self.without(label).events)

    def prompt_info(self, spec: LabelSpec) -> dict[str, dict[str, Any]]:
        """What a prompt shows of each readable pattern: description, params, and the full
        source of the ones the label lists as dependencies."""
        info = {}
        for k in self.available(spec.label):
            e = self.library.entry(k)
            d: dict[str, Any] = {"description": e.description, "params": list(e.params)}
            if spec.depends is not None and k in spec.depends:
                d["source"] = self.library.get(k).source
            info[k] = d
        return info

    def accept(self, done: LabelDone, sandbox: Sandbox | ExecutorSandbox, program: DetectorProgram | None = None) -> Detector:
        """Put the accepted program of ``done`` into the library (provenance "evolved",
        or "self-discovered"; its manifest entry keeps ``done.provenance``) with its
        events from the sandbox. ``program``: the database's program (what its source
        declares is known); without it (a resumed job) the source is parsed again."""
        assert done.program is not None and done.provenance is not None
        program = program or done.program
        constants = program.declared()
        if constants is None:
            raise JobError(f"accepted detector {done.label!r} is not a detector any more")
        detector = Detector.from_declarations(Declarations.from_constants(constants), program.source, None,
                                              filename="<evolved>", trusted=False)
        result = sandbox.evaluate(detector)
        if not result.ok or result.events is None:
            raise JobError(f"accepted detector {done.label!r} failed when run again in the sandbox: "
                           f"{result.reason.short() if result.reason else '?'}")
        provenance = "self-discovered" if done.self_discovered else "evolved"
        pattern = detector.pattern
        self.library.add(detector, provenance, fitness=float(done.program.fitness), replace=pattern in self.library)
        self.library.entry(pattern).extra[EVOLVE_RECORD] = done.provenance
        self.events[pattern] = result.events
        self.steps[pattern] = float(done.provenance.get("mean_steps", 0.0))
        return detector


def _mean_steps(lib: PatternLibrary, label: str, traces: Sequence[Trace], events: dict[str, list[EventList]]) -> float:
    """A base detector's mean Python steps per trace, counted by running it once more
    (in-process: it is trusted); an untrusted one's as its provenance recorded (else 0)."""
    det = lib.get(label)
    if not det.trusted or det.detect is None:
        record = lib.entry(label).extra.get(EVOLVE_RECORD) or {}
        return float(record.get("mean_steps", 0.0))
    detect, counter = counted_detect(det.source, det.filename)
    counts = []
    for i, t in enumerate(traces):
        counter.take()
        detect(t, {d: list(events[d][i]) for d in det.depends})
        counts.append(counter.take())
    return float(np.mean(counts)) if counts else 0.0
