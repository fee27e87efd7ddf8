"""The discovery log's records: one dataclass per kind, written as they always were.

A discovery job is a sequence of records (``RUN_DIR/samples.jsonl``, see
`simpatterns.evolve.runlog`); `simpatterns.evolve.state.JobState.apply` is the
one function that changes the job's state, live and when replaying the log:

- `LabelStart`: a label's run begins: its spec, the seed program (scored), the
  baseline the acceptance is measured from, the database config;
- `Sample`: one proposed program and what became of it (scored, or the reason it
  was rejected; applying it registers it or gives the reason it was dropped);
- `RoundEnd`: a round's samples are all in (a commit: a resumed job redoes a
  round that has no `RoundEnd`);
- `LabelDone`: the best program was accepted into the library, or why not;
- `ProposedLabels`: the labels self-discovery added (possibly none, and why);
- `JobDone`: the job finished.

``to_json`` writes the same keys, in the same order, as the first version of
the log, and ``from_json`` reads every log written since (fields added later
have defaults), so old runs replay and resume.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Union

from simpatterns.errors import SimpatternsError
from simpatterns.evolve.database import DatabaseConfig, DetectorProgram
from simpatterns.evolve.prompt import LabelSpec
from simpatterns.sandbox.reasons import Reason


def _reason(d: dict[str, Any] | None) -> Reason | None:
    return None if d is None else Reason(**d)


def _json(reason: Reason | None) -> dict[str, str] | None:
    return None if reason is None else reason.to_json()


@dataclass
class LabelStart:
    KIND: ClassVar[str] = "label_start"

    label: str
    index: int
    spec: LabelSpec
    origin: str  # "skeleton", "library" or "seed SPEC"
    seed_program: DetectorProgram
    seed_reason: Reason | None  # why the seed program was not scored (it is still in the database)
    baseline: float
    library_correlation: float
    step_reference: float | None  # the time penalty's library cost, Python steps per trace (None: older logs)
    library: list[str]  # the patterns the candidates may read
    database: DatabaseConfig
    replaces: bool  # the label is in the library already
    incumbent_fitness: float | None  # the library's detector of the label: what a replacement must beat
    elapsed_s: float | None = None  # logs before issue 12 only: a log holds no clock time (same seed, same log)
    library_mean_time_s: float | None = None  # logs before issue 12 only (the time penalty read run times)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "label": self.label, "index": self.index, "spec": self.spec.to_json(),
                "origin": self.origin, "seed_program": self.seed_program.to_json(),
                "seed_reason": _json(self.seed_reason), "baseline": self.baseline,
                "library_correlation": self.library_correlation,
                **_optional("library_mean_time_s", self.library_mean_time_s),
                **_optional("step_reference", self.step_reference),
                "library": list(self.library), "database": asdict(self.database), "replaces": self.replaces,
                "incumbent_fitness": self.incumbent_fitness, **_elapsed(self.elapsed_s)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "LabelStart":
        inc = d.get("incumbent_fitness")
        return cls(d["label"], int(d["index"]), LabelSpec(**d["spec"]), d.get("origin", ""),
                   DetectorProgram.from_json(d["seed_program"]), _reason(d.get("seed_reason")), float(d["baseline"]),
                   float(d.get("library_correlation", 0.0)), _float_or_none(d.get("step_reference")),
                   list(d.get("library", [])), DatabaseConfig(**d["database"]), bool(d["replaces"]),
                   None if inc is None else float(inc), _float_or_none(d.get("elapsed_s")),
                   _float_or_none(d.get("library_mean_time_s")))


@dataclass
class Sample:
    """One sample: the prompt it came from, the program, and its outcome. ``outcome``
    is "scored" (``fitness`` holds the parts, ``signature`` the per-trace scores) or
    "rejected" (``reason``); ``status`` is what applying it gave: "registered", the
    code of the reason it was dropped (``reason`` then says why), or "rejected"."""

    KIND: ClassVar[str] = "sample"

    label: str
    round: int
    k: int  # its place in the round
    sample: int  # its number within the label
    island: int
    epoch: int  # the island's epoch when the prompt was built
    parents: list[int]
    version: int
    prompt_hash: str
    seed: int
    model: str
    code: str | None
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    wall_s: float | None  # logs before issue 12 only (a log holds no clock time)
    outcome: str
    fitness: dict[str, Any] | None = None
    signature: list[float] | None = None
    reason: Reason | None = None
    status: str | None = None
    # in memory only, never in the log: the scored candidate's constants as written, which the
    # programs database keeps for prompts (a replayed sample reads them from ``code`` if asked)
    constants: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def scored(self) -> bool:
        return self.outcome == "scored"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "type": self.KIND, "label": self.label, "round": self.round, "k": self.k, "sample": self.sample,
            "island": self.island, "epoch": self.epoch, "parents": list(self.parents), "version": self.version,
            "prompt_hash": self.prompt_hash, "seed": self.seed, "model": self.model, "code": self.code,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason, **({} if self.wall_s is None else {"wall_s": self.wall_s}),
            "outcome": self.outcome,
            "fitness": self.fitness,
        }
        if self.signature is not None:
            d["signature"] = list(self.signature)
        d["reason"] = _json(self.reason)
        if self.status is not None:
            d["status"] = self.status
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Sample":
        sig = d.get("signature")
        return cls(d["label"], int(d["round"]), int(d.get("k", 0)), int(d["sample"]), int(d["island"]),
                   int(d["epoch"]), list(d.get("parents", [])), int(d.get("version", 0)), d.get("prompt_hash", ""),
                   int(d.get("seed", 0)), d.get("model", ""), d.get("code"), int(d.get("prompt_tokens", 0)),
                   int(d.get("completion_tokens", 0)), d.get("finish_reason", ""), _float_or_none(d.get("wall_s")),
                   d["outcome"], d.get("fitness"), None if sig is None else list(sig), _reason(d.get("reason")),
                   d.get("status"))


@dataclass
class RoundEnd:
    KIND: ClassVar[str] = "round_end"

    label: str
    round: int
    elapsed_s: float | None  # logs before issue 12 only
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, "label": self.label, "round": self.round, **_elapsed(self.elapsed_s),
                "tokens": self.tokens}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RoundEnd":
        return cls(d["label"], int(d["round"]), _float_or_none(d.get("elapsed_s")), int(d.get("tokens", 0)))


@dataclass
class LabelDone:
    """A label's end. ``provenance`` (set when accepted) becomes the ``evolve`` record of
    the detector's manifest entry."""

    KIND: ClassVar[str] = "label_done"

    label: str
    index: int
    accepted: bool
    why: str
    samples: int
    self_discovered: bool
    elapsed_s: float | None  # logs before issue 12 only
    baseline: float
    program: DetectorProgram | None  # the best program
    provenance: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        d = {"type": self.KIND, "label": self.label, "index": self.index, "accepted": self.accepted,
             "why": self.why, "samples": self.samples, "self_discovered": self.self_discovered,
             **_elapsed(self.elapsed_s), "baseline": self.baseline,
             "program": None if self.program is None else self.program.to_json()}
        if self.provenance is not None:
            d["provenance"] = self.provenance
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "LabelDone":
        prog = d.get("program")
        return cls(d["label"], int(d["index"]), bool(d["accepted"]), d.get("why", ""), int(d.get("samples", 0)),
                   bool(d.get("self_discovered", False)), _float_or_none(d.get("elapsed_s")),
                   float(d.get("baseline", 0.0)), None if prog is None else DetectorProgram.from_json(prog),
                   d.get("provenance"))


@dataclass
class ProposedLabels:
    """Labels self-discovery proposed (empty: ``why`` says why); ``prompt_hash`` and
    ``answer`` (cut at 4000 characters) when the LLM was asked."""

    KIND: ClassVar[str] = "proposed_labels"

    labels: list[LabelSpec] = field(default_factory=list)
    why: str | None = None
    prompt_hash: str | None = None
    answer: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.KIND, "labels": [s.to_json() for s in self.labels]}
        for key in ("why", "prompt_hash", "answer"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ProposedLabels":
        return cls([LabelSpec(**s) for s in d.get("labels", [])], d.get("why"), d.get("prompt_hash"), d.get("answer"))


@dataclass
class JobDone:
    KIND: ClassVar[str] = "job_done"

    elapsed_s: float | None  # logs before issue 12 only
    library: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.KIND, **_elapsed(self.elapsed_s), "library": self.library}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "JobDone":
        return cls(_float_or_none(d.get("elapsed_s")), str(d.get("library", "")))


Record = Union[LabelStart, Sample, RoundEnd, LabelDone, ProposedLabels, JobDone]


def _elapsed(value: float | None) -> dict[str, float]:
    """The ``elapsed_s`` key of a record read from an older log (new records have none)."""
    return _optional("elapsed_s", value)


def _optional(key: str, value: float | None) -> dict[str, float]:
    return {} if value is None else {key: value}


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)
KINDS: dict[str, Any] = {c.KIND: c for c in (LabelStart, Sample, RoundEnd, LabelDone, ProposedLabels, JobDone)}
# the kinds that end a group of records in the log (see `simpatterns.evolve.runlog`)
COMMITS = frozenset(KINDS) - {Sample.KIND}


class RecordError(SimpatternsError, ValueError):
    """A log line is not a record this code knows."""


def record_from_json(d: dict[str, Any]) -> Record:
    """The typed record of a log line; raises `RecordError` naming what is wrong."""
    kind = d.get("type") if isinstance(d, dict) else None
    if kind not in KINDS:
        raise RecordError(f"unknown record type {kind!r}")
    try:
        return KINDS[kind].from_json(d)
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"malformed {kind!r} record ({type(exc).__name__}: {exc})") from exc
