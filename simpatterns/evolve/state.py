"""A discovery job's state, changed only by records, and how a job starts or resumes.

`JobState.apply` is the one function that changes the state, for a live job
and when replaying its log (`simpatterns.evolve.records`). Records are appended
in groups ending with a commit record; resume (`open_job`) loads the last
snapshot, replays the committed records after it and cuts off a torn tail, so
the state is the one the killed session had after its last commit.

Every random choice of a job draws from a generator seeded by ``[seed, label
index, round, sample, stream]`` (`JobState.rng`): it depends on counters, not
on timing, so a resumed job draws what the uninterrupted one would have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from simpatterns.errors import SimpatternsError
from simpatterns.evolve.database import DetectorProgram, ProgramsDatabase
from simpatterns.evolve.prompt import LabelSpec
from simpatterns.evolve.records import (
    JobDone,
    LabelDone,
    LabelStart,
    ProposedLabels,
    Record,
    RecordError,
    RoundEnd,
    Sample,
    record_from_json,
)
from simpatterns.evolve.runlog import RunLog, RunLogError

# stream ids of the per-sample generators (the last key of `JobState.rng`)
PROMPT_STREAM, PROPOSE_STREAM, RESET_STREAM, SELF_STREAM = 1, 2, 3, 4


class JobError(SimpatternsError, RuntimeError):
    """The job cannot start or resume; the message says why and what to do."""


@dataclass
class LabelState:
    spec: LabelSpec
    index: int
    db: ProgramsDatabase
    round: int = 0
    samples: int = 0
    seed_fitness: float = 0.0
    baseline: float = 0.0
    replaces: bool = False  # the label is already in the library
    incumbent: float | None = None  # fitness of the library's current detector of the label

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec.to_json(), "index": self.index, "db": self.db.to_json(), "round": self.round,
                "samples": self.samples, "seed_fitness": self.seed_fitness, "baseline": self.baseline,
                "replaces": self.replaces, "incumbent": self.incumbent}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "LabelState":
        return cls(LabelSpec(**d["spec"]), int(d["index"]), ProgramsDatabase.from_json(d["db"]), int(d["round"]),
                   int(d["samples"]), float(d["seed_fitness"]), float(d["baseline"]), bool(d["replaces"]),
                   d.get("incumbent"))


class JobState:
    """Everything a job has decided, changed only by `apply` (live and on replay)."""

    def __init__(self, seed: int, labels: list[LabelSpec]):
        self.seed = seed
        self.labels = list(labels)
        self.next_label = 0  # index of the next label to start
        self.current: LabelState | None = None
        self.done: list[LabelDone] = []
        self.proposed = False
        self.finished = False
        self.tokens = 0
        self.samples_total = 0
        self.elapsed_s = 0.0
        self.rejections: dict[str, int] = {}

    def rng(self, *keys: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, *keys])

    def apply(self, rec: Record) -> Record:
        """Apply one record; returns it (a sample gets its final ``status``, and the
        ``reason`` when the database dropped it)."""
        if isinstance(rec, LabelStart):
            db = ProgramsDatabase(rec.database)
            db.seed(rec.seed_program)
            self.current = LabelState(rec.spec, rec.index, db, seed_fitness=float(rec.seed_program.fitness),
                                      baseline=rec.baseline, replaces=rec.replaces, incumbent=rec.incumbent_fitness)
            self.next_label = rec.index + 1
        elif isinstance(rec, Sample):
            self._apply_sample(rec)
        elif isinstance(rec, RoundEnd):
            cur = self._cur(rec.KIND, rec.label)
            cur.round = rec.round + 1
            self.elapsed_s = max(self.elapsed_s, rec.elapsed_s or 0.0)
        elif isinstance(rec, LabelDone):
            self.done.append(rec)
            self.current = None
            self.next_label = max(self.next_label, rec.index + 1)
            self.elapsed_s = max(self.elapsed_s, rec.elapsed_s or 0.0)
        elif isinstance(rec, ProposedLabels):
            self.labels.extend(rec.labels)
            self.proposed = True
        elif isinstance(rec, JobDone):
            self.finished = True
        return rec

    def _apply_sample(self, rec: Sample) -> None:
        cur = self._cur(rec.KIND, rec.label)
        if rec.scored:
            assert rec.fitness is not None and rec.signature is not None and rec.code is not None
            prog = DetectorProgram(id=-1, source=rec.code, fitness=float(rec.fitness["fitness"]),
                           signature=tuple(rec.signature), events_hash=rec.fitness["events_hash"],
                           lines=int(rec.fitness["lines"]), sample=rec.sample, parts=dict(rec.fitness),
                           model=rec.model)
            if rec.constants is not None:  # a live sample: what its candidate declares, kept for prompts
                prog.constants = rec.constants
            why = cur.db.register(prog, rec.island, rec.epoch, self.rng(cur.index, RESET_STREAM, cur.db.resets))
            final = "registered" if why is None else why.code
            if why is not None:
                rec.reason = why
        else:
            assert rec.reason is not None
            cur.db.note_rejection(rec.island, rec.epoch, rec.reason)
            final = "rejected"
        if rec.status not in (None, final):
            raise RunLogError(f"replaying sample {rec.sample} of {rec.label!r}: logged status {rec.status!r} but "
                              f"replay gives {final!r}; the log does not match this code")
        rec.status = final
        if final != "registered":
            assert rec.reason is not None
            self.rejections[rec.reason.code] = self.rejections.get(rec.reason.code, 0) + 1
        self.tokens += rec.prompt_tokens + rec.completion_tokens
        cur.samples += 1
        self.samples_total += 1

    def _cur(self, kind: str, label: str) -> LabelState:
        if self.current is None or self.current.spec.label != label:
            raise RunLogError(f"record {kind!r} for {label!r} outside its label's run")
        return self.current

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "labels": [s.to_json() for s in self.labels], "next_label": self.next_label,
                "current": self.current.to_json() if self.current else None,
                "done": [r.to_json() for r in self.done], "proposed": self.proposed, "finished": self.finished,
                "tokens": self.tokens, "samples_total": self.samples_total, "elapsed_s": self.elapsed_s,
                "rejections": self.rejections,
                "rng": {"scheme": "numpy default_rng([seed, label index, round, sample, stream])",
                        "seed": self.seed}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "JobState":
        st = cls(int(d["seed"]), [LabelSpec(**s) for s in d["labels"]])
        st.next_label = int(d["next_label"])
        st.current = LabelState.from_json(d["current"]) if d["current"] else None
        st.done = [LabelDone.from_json(r) for r in d["done"]]
        st.proposed = bool(d["proposed"])
        st.finished = bool(d["finished"])
        st.tokens = int(d["tokens"])
        st.samples_total = int(d["samples_total"])
        st.elapsed_s = float(d["elapsed_s"])
        st.rejections = dict(d["rejections"])
        return st


def replay(state: JobState, log: RunLog, start: int = 0) -> JobState:
    """Apply the log's records from byte ``start`` to ``state``; returns it."""
    for offset, raw in log.records(start):
        try:
            rec = record_from_json(raw)
        except RecordError as exc:
            raise RunLogError(f"{log.samples_path}: record ending at byte {offset}: {exc}") from None
        state.apply(rec)
    return state


def open_job(log: RunLog, seed: int, labels: Sequence[LabelSpec], traces_id: str, base_order: list[str],
             resume: bool) -> tuple[JobState, dict[str, float] | None]:
    """The state a job starts from and the base library's times its first session
    measured: a fresh state and None for a new run directory, the replayed state for
    ``resume``. Raises `JobError` for a run directory that holds another job (or a run
    without ``resume``)."""
    job = log.read_job()
    if job is None:
        if log.samples_path.exists():
            if resume:
                raise JobError(f"{log.dir}: has samples.jsonl but no job.json; cannot resume")
            raise JobError(f"{log.dir}: already holds a run; pass --resume or choose another run directory")
        return JobState(seed, list(labels)), None
    if not resume:
        raise JobError(f"{log.dir}: already holds a run (job.json); pass --resume to continue it "
                       "or choose another run directory")
    problems = []
    if job.get("seed") != seed:
        problems.append(f"seed {job.get('seed')} vs {seed}")
    if job.get("traces", {}).get("hash") != traces_id:
        problems.append("the traces differ")
    logged = [s["label"] for s in job.get("labels", [])]
    if logged != [s.label for s in labels]:
        problems.append(f"labels {logged} vs {[s.label for s in labels]}")
    if job.get("base_library", {}).get("labels") != base_order:
        problems.append("the base library differs")
    if problems:
        raise JobError(f"{log.job_path}: cannot resume a different job: " + "; ".join(problems))
    snap = log.read_snapshot()
    end = log.committed_end(0)
    if snap is not None and int(snap.get("offset", -1)) <= end:
        state, start = JobState.from_json(snap["state"]), int(snap["offset"])
    else:
        state, start = JobState(seed, [LabelSpec(**s) for s in job["labels"]]), 0
    log.truncate(end)
    replay(state, log, start)
    return state, dict(job.get("base_steps") or {})
