"""Discovery jobs (paper Algorithm 1): evolve a detector per label, accept, grow the library.

For each label of a labels file, in order:

1. seed the programs database with the label's start program (the skeleton
   of Algorithm 1, a detector given as ``seed``, or the library's current
   detector of that label) -- once; a resumed job never re-adds it;
2. run rounds until the sample budget is spent: a round builds
   ``batch_size`` prompts from one database state (each on a random island,
   with random earlier versions), gets the proposals concurrently (LLM
   requests in flight, or offline mutations), pushes them through a bounded
   queue to a pool of sandbox evaluators (gate -> sandbox -> fitness), and
   registers the results in sample order;
3. accept the best program when its fitness clears theta: it is written
   into the library (atomically) with its provenance.

Then, optionally, a self-discovery round: the LLM proposes new labels from
the library and from reasoning texts the user supplies, each evolved like a
guided label.

Determinism and resume. Every random choice draws from a generator seeded
by ``[seed, label index, round, sample, stream]``, so it depends on counters,
not on timing. Results are registered in sample order after the whole round
is in, so concurrency cannot reorder them. Every state change is a record
applied by one function (`JobState.apply`) both live and when replaying the
log, and records are appended in groups ending with a commit record; resume
loads the last snapshot, replays the committed records after it, cuts off a
torn tail and redoes the interrupted round from the same seeds. The one
input that is not reproducible is a candidate's measured run time (the
time penalty, rounded to `FitnessConfig.time_resolution`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from simpatterns.annotate import distances as dist
from simpatterns.detectors.contract import Detector, normalize_label, source_hash
from simpatterns.detectors.library import PatternLibrary
from simpatterns.evolve import reasons as R
from simpatterns.evolve.config import EvolveConfig
from simpatterns.evolve.database import Program, ProgramsDatabase
from simpatterns.evolve.fitness import FitnessContext, FitnessParts
from simpatterns.evolve.gate import check_candidate, count_lines
from simpatterns.evolve.prompt import LabelSpec, Prompt, Version, build_prompt, skeleton, trace_api
from simpatterns.evolve.proposers import OfflineProposer, Proposal
from simpatterns.evolve.reasons import Reason, Rejected
from simpatterns.evolve.runlog import RunLog, RunLogError, atomic_write_json
from simpatterns.evolve.sandbox import Sandbox, SandboxError
from simpatterns.llm.client import resolve_prompt_mode
from simpatterns.trace import Trace

EventList = list[tuple[int, dict[str, Any]]]

# stream ids for the per-sample generators
_PROMPT, _PROPOSE, _RESET, _SELF = 1, 2, 3, 4


class JobError(RuntimeError):
    """The job cannot start or resume; the message says why and what to do."""


# ------------------------------------------------------------------ state
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
        self.done: list[dict[str, Any]] = []  # label_done records
        self.proposed = False
        self.finished = False
        self.tokens = 0
        self.samples_total = 0
        self.elapsed_s = 0.0
        self.rejections: dict[str, int] = {}

    def rng(self, *keys: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, *keys])

    def apply(self, rec: dict[str, Any]) -> dict[str, Any]:
        """Apply one record; returns it (sample records get their final status)."""
        kind = rec["type"]
        if kind == "label_start":
            spec = LabelSpec(**rec["spec"])
            db = ProgramsDatabase(_db_config(rec["database"]))
            db.seed(Program.from_json(rec["seed_program"]))
            incumbent = rec.get("incumbent_fitness")
            self.current = LabelState(spec, int(rec["index"]), db, seed_fitness=float(rec["seed_program"]["fitness"]),
                                      baseline=float(rec["baseline"]), replaces=bool(rec["replaces"]),
                                      incumbent=None if incumbent is None else float(incumbent))
            self.next_label = int(rec["index"]) + 1
        elif kind == "sample":
            cur = self._cur(rec)
            island, epoch = int(rec["island"]), int(rec["epoch"])
            status = rec.get("outcome")
            if status == "scored":
                prog = Program(id=-1, source=rec["code"], fitness=float(rec["fitness"]["fitness"]),
                               signature=tuple(rec["signature"]), events_hash=rec["fitness"]["events_hash"],
                               lines=int(rec["fitness"]["lines"]), sample=int(rec["sample"]),
                               parts=dict(rec["fitness"]), model=rec.get("model", ""))
                why = cur.db.register(prog, island, epoch, self.rng(cur.index, _RESET, cur.db.resets))
                final = "registered" if why is None else why.code
                if why is not None:
                    rec["reason"] = why.to_json()
            else:
                reason = Reason(**rec["reason"])
                cur.db.note_rejection(island, epoch, reason)
                final = "rejected"
            if rec.get("status") not in (None, final):
                raise RunLogError(f"replaying sample {rec['sample']} of {rec['label']!r}: logged status "
                                  f"{rec['status']!r} but replay gives {final!r}; the log does not match this code")
            rec["status"] = final
            if final != "registered":
                code = rec["reason"]["code"]
                self.rejections[code] = self.rejections.get(code, 0) + 1
            self.tokens += int(rec.get("prompt_tokens", 0)) + int(rec.get("completion_tokens", 0))
            cur.samples += 1
            self.samples_total += 1
        elif kind == "round_end":
            cur = self._cur(rec)
            cur.round = int(rec["round"]) + 1
            self.elapsed_s = float(rec["elapsed_s"])
        elif kind == "label_done":
            self.done.append(rec)
            self.current = None
            self.next_label = max(self.next_label, int(rec["index"]) + 1)
            self.elapsed_s = float(rec.get("elapsed_s", self.elapsed_s))
        elif kind == "proposed_labels":
            self.labels.extend(LabelSpec(**d) for d in rec["labels"])
            self.proposed = True
        elif kind == "job_done":
            self.finished = True
        return rec

    def _cur(self, rec: dict[str, Any]) -> LabelState:
        if self.current is None or self.current.spec.label != rec["label"]:
            raise RunLogError(f"record {rec['type']!r} for {rec.get('label')!r} outside its label's run")
        return self.current

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "labels": [s.to_json() for s in self.labels], "next_label": self.next_label,
                "current": self.current.to_json() if self.current else None, "done": self.done,
                "proposed": self.proposed, "finished": self.finished, "tokens": self.tokens,
                "samples_total": self.samples_total, "elapsed_s": self.elapsed_s, "rejections": self.rejections,
                "rng": {"scheme": "numpy default_rng([seed, label index, round, sample, stream])",
                        "seed": self.seed}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "JobState":
        st = cls(int(d["seed"]), [LabelSpec(**s) for s in d["labels"]])
        st.next_label = int(d["next_label"])
        st.current = LabelState.from_json(d["current"]) if d["current"] else None
        st.done = list(d["done"])
        st.proposed = bool(d["proposed"])
        st.finished = bool(d["finished"])
        st.tokens = int(d["tokens"])
        st.samples_total = int(d["samples_total"])
        st.elapsed_s = float(d["elapsed_s"])
        st.rejections = dict(d["rejections"])
        return st


def _db_config(d: dict[str, Any]) -> Any:
    from simpatterns.evolve.database import DatabaseConfig

    return DatabaseConfig(**d)


# --------------------------------------------------------------- library
@dataclass
class LibraryState:
    """The library a job grows, with every pattern's events on the job's traces.

    Base-library detectors are trusted and run in-process (`annotate_many`);
    evolved ones never do: their events come from the sandbox.
    """

    library: PatternLibrary
    events: dict[str, list[EventList]]
    times: dict[str, float]

    def without(self, label: str) -> "LibraryState":
        drop = {label} | (set(self.library.dependents(label)) if label in self.library else set())
        keep = [k for k in self.library.order() if k not in drop]
        return LibraryState(self.library, {k: self.events[k] for k in keep}, {k: self.times[k] for k in keep})


def evolved_detector(source: str, info: Any) -> Detector:
    """An untrusted `Detector` record for an accepted candidate: its code is never
    executed in-process (annotation runs it in the sandbox)."""
    return Detector(pattern=info.pattern, description=info.description, depends=list(info.depends),
                    params=list(info.params), source=source, detect=None, filename="<evolved>", trusted=False)


# ------------------------------------------------------------------- job
@dataclass
class Outcome:
    parts: FitnessParts | None = None
    reason: Reason | None = None
    lines: int = 0
    wall_s: float = 0.0


@dataclass
class RoundItem:
    k: int
    sample: int
    island: int
    epoch: int
    versions: list[Version]
    prompt: Prompt
    seed: int
    proposal: Proposal | None = None
    outcome: Outcome | None = None


ProgressFn = Callable[[dict[str, Any]], None]


class DiscoveryJob:
    """One discovery job; see the module docstring. Use `run` (blocking) or `arun`."""

    def __init__(
        self,
        traces: Sequence[Trace],
        labels: Sequence[LabelSpec],
        base_library: PatternLibrary,
        run_dir: str | Path,
        library_out: str | Path,
        proposer: Any | None = None,
        config: EvolveConfig | None = None,
        resume: bool = False,
        reasoning_texts: Sequence[str] = (),
        traces_id: str | None = None,
        progress: ProgressFn | None = None,
        sandbox_factory: Callable[..., Sandbox] | None = None,
    ):
        self.traces = list(traces)
        if len(self.traces) < 3:
            raise JobError(f"discovery needs at least 3 traces, got {len(self.traces)}")
        self.config = config or EvolveConfig()
        self.proposer = proposer or OfflineProposer()
        self.base_library = base_library
        self.log = RunLog(run_dir)
        self.library_out = Path(library_out)
        self.resume = resume
        self.reasoning_texts = list(reasoning_texts)
        self.progress = progress
        self.sandbox_factory = sandbox_factory or Sandbox
        self.traces_id = traces_id or dist.dataset_hash(self.traces)
        self.state = JobState(self.config.seed, list(labels))
        self.sandbox: Sandbox | None = None
        self.sandbox_root: str | None = None
        self.sandbox_pids: set[int] = set()
        self.lib: LibraryState | None = None
        self._fitness: FitnessContext | None = None
        self._fitness_label: str | None = None
        self._D_T: np.ndarray | None = None
        self._api = trace_api()
        self._compact = resolve_prompt_mode(self.config.prompt, getattr(self.proposer, "client", None)) == "compact"
        self._t0 = time.monotonic()
        self._elapsed_before = 0.0
        self._rounds_since_snapshot = 0

    # ----------------------------------------------------------- entry point
    def run(self) -> PatternLibrary:
        return asyncio.run(self.arun())

    async def arun(self) -> PatternLibrary:
        base_times = self._start_or_resume()
        self._remove_stale_sandbox()
        self.sandbox = self.sandbox_factory(self.traces, workers=self.config.workers, limits=self.config.sandbox)
        self.sandbox_root = self.sandbox.root
        self.log.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.log.dir / "session.json", {  # which processes belong to this run, for operators
            "pid": os.getpid(), "sandbox_root": self.sandbox.root, "servers": self.sandbox.server_pids,
            "isolation": self.sandbox.info, "started": time.time()})
        executor = ThreadPoolExecutor(max_workers=max(1, self.config.workers), thread_name_prefix="evaluator")
        try:
            self._build_library(base_times)
            await self._run_labels(executor)
            if self.config.self_discovery > 0 and not self.state.proposed and not self._out_of_budget():
                await self._self_discovery()
                await self._run_labels(executor)
            if not self.state.finished and not self._out_of_budget():
                self._commit([{"type": "job_done", "elapsed_s": self._elapsed(), "library": str(self.library_out)}])
        finally:
            executor.shutdown(wait=True)
            self.sandbox.close()
            self.sandbox_pids = self.sandbox.pids_seen
            self.sandbox = None
        assert self.lib is not None
        return self.lib.library

    # -------------------------------------------------------- start / resume
    def _remove_stale_sandbox(self) -> None:
        """A session killed with SIGKILL could not remove its sandbox directory (its servers
        remove what they can when they notice); remove what is left once nothing uses it."""
        path = self.log.dir / "session.json"
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        root = old.get("sandbox_root")
        if not root or not Path(root).name.startswith("simpatterns-sandbox-") or not Path(root).is_dir():
            return
        if any(_alive(pid) for pid in old.get("servers", [])):
            return
        import shutil

        shutil.rmtree(root, ignore_errors=True)

    def _job_record(self, base_times: dict[str, float]) -> dict[str, Any]:
        return {
            "format": "simpatterns-evolve-run",
            "version": 1,
            "seed": self.config.seed,
            "config": self.config.to_json(),
            "labels": [s.to_json() for s in self.state.labels],
            "traces": {"count": len(self.traces), "hash": self.traces_id},
            "proposer": getattr(self.proposer, "name", type(self.proposer).__name__),
            "base_library": {"labels": self.base_library.order(),
                             "hashes": {k: self.base_library.entry(k).source_hash or
                                        source_hash(self.base_library.get(k).source)
                                        for k in self.base_library.order()}},
            "base_times": base_times,
            "library_out": str(self.library_out),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }

    def _start_or_resume(self) -> dict[str, float] | None:
        job = self.log.read_job()
        if job is None:
            if self.resume and self.log.samples_path.exists():
                raise JobError(f"{self.log.dir}: has samples.jsonl but no job.json; cannot resume")
            if self.log.samples_path.exists():
                raise JobError(f"{self.log.dir}: already holds a run; pass --resume or choose another run directory")
            return None
        if not self.resume:
            raise JobError(f"{self.log.dir}: already holds a run (job.json); pass --resume to continue it "
                           "or choose another run directory")
        self._check_same_job(job)
        snap = self.log.read_snapshot()
        end = self.log.committed_end(0)
        start = 0
        if snap is not None and int(snap.get("offset", -1)) <= end:
            self.state = JobState.from_json(snap["state"])
            start = int(snap["offset"])
        else:
            self.state = JobState(self.config.seed, [LabelSpec(**s) for s in job["labels"]])
        self.log.truncate(end)
        for _, rec in self.log.records(start):
            self.state.apply(rec)
        self._elapsed_before = self.state.elapsed_s
        return dict(job.get("base_times") or {})

    def _check_same_job(self, job: dict[str, Any]) -> None:
        problems = []
        if job.get("seed") != self.config.seed:
            problems.append(f"seed {job.get('seed')} vs {self.config.seed}")
        if job.get("traces", {}).get("hash") != self.traces_id:
            problems.append("the traces differ")
        labels = [s["label"] for s in job.get("labels", [])]
        if labels != [s.label for s in self.state.labels]:
            problems.append(f"labels {labels} vs {[s.label for s in self.state.labels]}")
        if job.get("base_library", {}).get("labels") != self.base_library.order():
            problems.append("the base library differs")
        if problems:
            raise JobError(f"{self.log.job_path}: cannot resume a different job: " + "; ".join(problems))

    def _elapsed(self) -> float:
        return self._elapsed_before + (time.monotonic() - self._t0)

    # --------------------------------------------------------------- library
    def _build_library(self, base_times: dict[str, float] | None) -> None:
        from simpatterns.annotate.annotator import annotate_many

        lib = self.base_library.copy()
        anns = annotate_many(self.traces, lib)
        errors = {k: v for a in anns for k, v in a.errors.items()}
        if errors:
            label, text = next(iter(errors.items()))
            raise JobError(f"the base library fails on the traces: {text}")
        events = {k: [[(e.frame, e.params) for e in a.by_pattern(k)] for a in anns] for k in lib.order()}
        measured = {k: float(np.mean([a.timings.get(k, 0.0) for a in anns])) for k in lib.order()}
        if base_times is None:  # a fresh job: record them, so a resumed job scores against the same times
            base_times = measured
            self.log.write_job(self._job_record(base_times))
        times = {k: float(base_times.get(k, measured[k])) for k in lib.order()}
        self.lib = LibraryState(lib, events, times)
        self._push_dependencies()
        for rec in self.state.done:  # accepted in an earlier session of this job: events from the sandbox
            if rec.get("accepted"):
                self._add_to_library(rec, rerun=True)
                self._push_dependencies()
        if any(rec.get("accepted") for rec in self.state.done):
            self.lib.library.save(self.library_out)

    def _push_dependencies(self) -> None:
        assert self.lib is not None and self.sandbox is not None
        self.sandbox.set_dependency_events(self.lib.events)

    def _add_to_library(self, rec: dict[str, Any], rerun: bool) -> None:
        assert self.lib is not None and self.sandbox is not None
        source = rec["program"]["source"]
        info = check_candidate(source, rec["label"])
        result = self.sandbox.evaluate(source, info.pattern, info.params, info.depends)
        if not result.ok or result.events is None:
            raise JobError(f"accepted detector {rec['label']!r} failed when run again in the sandbox: "
                           f"{result.reason.short() if result.reason else '?'}")
        det = evolved_detector(source, info)
        provenance = "self-discovered" if rec.get("self_discovered") else "evolved"
        self.lib.library.add(det, provenance, fitness=float(rec["program"]["fitness"]),
                             replace=info.pattern in self.lib.library)
        self.lib.library.entry(info.pattern).extra["evolve"] = rec["provenance"]
        self.lib.events[info.pattern] = result.events
        self.lib.times[info.pattern] = float(rec["provenance"]["mean_time_s"])
        self._fitness = None

    def _fitness_for(self, label: str) -> FitnessContext:
        if self._fitness is not None and self._fitness_label == label:
            return self._fitness
        assert self.lib is not None
        if self._D_T is None:
            cache = str(self.log.dir / "cache") if self.config.trace_distance_cache else None
            self._D_T = dist.trace_distance_matrix(self.traces, cache)
        sub = self.lib.without(label)
        self._fitness = FitnessContext(self.traces, sub.events, sub.times, self.config.fitness, trace_distances=self._D_T)
        self._fitness_label = label
        return self._fitness

    # --------------------------------------------------------------- labels
    async def _run_labels(self, executor: ThreadPoolExecutor) -> None:
        while not self._out_of_budget():
            cur = self.state.current
            if cur is None:
                if self.state.next_label >= len(self.state.labels):
                    return
                await self._start_label(self.state.next_label, executor)
                cur = self.state.current
                if cur is None:  # finished at once (nothing to evolve)
                    continue
            while cur.samples < self.config.samples_per_label and not self._out_of_budget():
                await self._round(cur, executor)
            if cur.samples >= self.config.samples_per_label:
                await self._finish_label(cur, executor)
            else:
                return  # out of budget mid-label: a resume with a larger budget continues here

    def _out_of_budget(self) -> bool:
        c = self.config
        if c.max_total_tokens is not None and self.state.tokens >= c.max_total_tokens:
            return True
        if c.max_wall_s is not None and self._elapsed() >= c.max_wall_s:
            return True
        return False

    def _seed_source(self, spec: LabelSpec) -> tuple[str, str]:
        """(source, origin) of the label's start program."""
        assert self.lib is not None
        if spec.seed:
            if spec.seed.startswith("builtin:"):
                src = PatternLibrary.builtin().get(spec.seed.split(":", 1)[1]).source
            elif spec.seed.startswith("library:"):
                src = self.lib.library.get(spec.seed.split(":", 1)[1]).source
            else:
                src = Path(spec.seed).read_text()
            return _relabel(src, spec), f"seed {spec.seed}"
        if spec.label in self.lib.library:
            return self.lib.library.get(spec.label).source, "library"
        return skeleton(spec), "skeleton"

    async def _start_label(self, index: int, executor: ThreadPoolExecutor) -> None:
        spec = self.state.labels[index]
        ctx = self._fitness_for(spec.label)
        source, origin = self._seed_source(spec)
        loop = asyncio.get_running_loop()
        outcome = await loop.run_in_executor(executor, self._evaluate, source, spec)
        floor = ctx.baseline - 1.0
        if outcome.parts is not None:
            p = outcome.parts
            seed_prog = Program(-1, source, p.fitness, p.signature, p.events_hash, p.lines, -1, p.to_json(), origin)
        else:
            seed_prog = Program(-1, source, floor, (), "seed", count_lines(source), -1,
                                {"fitness": floor, "rejected": outcome.reason.to_json() if outcome.reason else None},
                                origin)
        replaces = spec.label in self.lib.library if self.lib else False
        incumbent = None  # the library's current detector of this label: what a replacement must beat
        if replaces and origin != "library":
            inc = await loop.run_in_executor(executor, self._evaluate, self.lib.library.get(spec.label).source, spec)
            incumbent = inc.parts.fitness if inc.parts is not None else None
        elif replaces:
            incumbent = seed_prog.fitness if outcome.parts is not None else None
        rec = {"type": "label_start", "label": spec.label, "index": index, "spec": spec.to_json(),
               "origin": origin, "seed_program": seed_prog.to_json(),
               "seed_reason": outcome.reason.to_json() if outcome.reason else None,
               "baseline": ctx.baseline, "library_correlation": ctx.library_correlation,
               "library_mean_time_s": ctx.library_mean_time_s, "library": ctx.patterns,
               "database": _asdict(self.config.database), "replaces": replaces, "incumbent_fitness": incumbent,
               "elapsed_s": self._elapsed()}
        self._commit([rec])
        if isinstance(self.proposer, OfflineProposer) and origin == "skeleton":
            cur = self.state.current
            assert cur is not None
            await self._finish_label(cur, executor, note="the offline proposer mutates existing code: give this "
                                     "label a seed program (seed = ... in the labels file) or use an LLM")

    def _available(self, label: str) -> list[str]:
        assert self.lib is not None
        return list(self.lib.without(label).events)

    def _library_info(self, spec: LabelSpec) -> dict[str, dict[str, Any]]:
        assert self.lib is not None
        info = {}
        for k in self._available(spec.label):
            e = self.lib.library.entry(k)
            d: dict[str, Any] = {"description": e.description, "params": list(e.params)}
            if spec.depends is not None and k in spec.depends:
                d["source"] = self.lib.library.get(k).source
            info[k] = d
        return info

    # ---------------------------------------------------------------- rounds
    async def _round(self, cur: LabelState, executor: ThreadPoolExecutor) -> None:
        cfg = self.config
        self._fitness_for(cur.spec.label)  # built here, not concurrently in the evaluator threads
        b = min(cfg.batch_size, cfg.samples_per_label - cur.samples)
        lib_info = self._library_info(cur.spec)
        items: list[RoundItem] = []
        for k in range(b):
            rng = self.state.rng(cur.index, cur.round, k, _PROMPT)
            island = cur.db.choose_island(rng)
            progs = cur.db.sample_programs(island, rng)
            versions = [Version(p.source, p.fitness if p.parts.get("rejected") is None else None, p.id) for p in progs]
            feedback = cur.db.feedback(island)
            prompt = build_prompt(cur.spec, versions, island, cur.db.epoch(island), lib_info, feedback, self._api,
                                  compact=self._compact)
            seed = int(self.state.rng(cur.index, cur.round, k, _PROPOSE).integers(2**31 - 1))
            items.append(RoundItem(k, cur.samples + k, island, cur.db.epoch(island), versions, prompt, seed))

        queue: asyncio.Queue[RoundItem | None] = asyncio.Queue(maxsize=max(1, cfg.queue_size))
        loop = asyncio.get_running_loop()

        async def produce(item: RoundItem) -> None:
            try:
                item.proposal = await self.proposer.propose(item.prompt, cur.spec, item.versions, item.seed)
            except Exception as exc:  # noqa: BLE001 - a proposer bug costs one sample, not the job
                item.proposal = Proposal(None, Reason(R.LLM_ERROR, f"proposer failed: {type(exc).__name__}: {exc}"))
            await queue.put(item)

        async def consume() -> None:
            while True:
                item = await queue.get()
                if item is None:
                    return
                assert item.proposal is not None
                if item.proposal.source is None:
                    item.outcome = Outcome(reason=item.proposal.reason)
                    continue
                try:
                    item.outcome = await loop.run_in_executor(executor, self._evaluate, item.proposal.source, cur.spec)
                except SandboxError:
                    raise  # the sandbox itself is broken (a server that cannot restart): stop the job
                except Exception as exc:  # noqa: BLE001 - a scoring bug costs one sample, not the job
                    item.outcome = Outcome(reason=Reason(R.SANDBOX_ERROR, f"evaluation failed: {type(exc).__name__}: "
                                                                          f"{exc}"))

        consumers = [asyncio.create_task(consume()) for _ in range(max(1, cfg.workers))]
        try:
            await asyncio.gather(*(produce(it) for it in items))
        finally:
            for _ in consumers:
                await queue.put(None)
            await asyncio.gather(*consumers)

        records = [self._sample_record(cur, it) for it in items]
        records.append({"type": "round_end", "label": cur.spec.label, "round": cur.round,
                        "elapsed_s": self._elapsed(), "tokens": self.state.tokens})
        self._commit(records)
        best = cur.db.best_per_island()
        if self.progress:
            self.progress({"label": cur.spec.label, "samples": cur.samples, "budget": cfg.samples_per_label,
                           "best_per_island": best, "baseline": cur.baseline, "round": cur.round})

    def _sample_record(self, cur: LabelState, it: RoundItem) -> dict[str, Any]:
        prop, out = it.proposal, it.outcome
        assert prop is not None and out is not None
        rec: dict[str, Any] = {
            "type": "sample", "label": cur.spec.label, "round": cur.round, "k": it.k, "sample": it.sample,
            "island": it.island, "epoch": it.epoch, "parents": it.prompt.parents, "version": it.prompt.version,
            "prompt_hash": it.prompt.prompt_hash, "seed": it.seed, "model": prop.model, "code": prop.source,
            "prompt_tokens": prop.prompt_tokens, "completion_tokens": prop.completion_tokens,
            "finish_reason": prop.finish_reason, "wall_s": round(out.wall_s, 6),
        }
        if out.parts is not None:
            rec["outcome"] = "scored"
            rec["fitness"] = out.parts.to_json()
            rec["signature"] = list(out.parts.signature)
            rec["reason"] = None
        else:
            rec["outcome"] = "rejected"
            rec["fitness"] = None
            rec["reason"] = (out.reason or Reason(R.SANDBOX_ERROR, "no outcome")).to_json()
        return rec

    def _commit(self, records: list[dict[str, Any]]) -> None:
        """Apply records to the state (the same code replays them), then log them."""
        for rec in records:
            self.state.apply(rec)
        offset = self.log.append(records)
        self._rounds_since_snapshot += 1
        if records[-1]["type"] != "round_end" or self._rounds_since_snapshot >= self.config.snapshot_every:
            self.log.write_snapshot({"offset": offset, "state": self.state.to_json(), "time": time.time()})
            self._rounds_since_snapshot = 0

    # ------------------------------------------------------------ evaluation
    def _evaluate(self, source: str, spec: LabelSpec) -> Outcome:
        """Gate -> sandbox -> fitness. Runs in an evaluator thread."""
        t0 = time.perf_counter()
        assert self.sandbox is not None
        ctx = self._fitness_for(spec.label)
        available = list(ctx.patterns)
        allowed = available if spec.depends is None else [d for d in spec.depends if d in available]
        try:
            info = check_candidate(source, spec.label, allowed, max_lines=2000, safety=self.config.gate)
        except Rejected as exc:
            return Outcome(reason=exc.reason, lines=count_lines(source), wall_s=time.perf_counter() - t0)
        res = self.sandbox.evaluate(source, info.pattern, info.params, info.depends)
        if not res.ok:
            return Outcome(reason=res.reason, lines=info.num_lines, wall_s=time.perf_counter() - t0)
        assert res.events is not None
        scored = ctx.score(res.events, res.times, info.num_lines, res.events_hash)
        if isinstance(scored, Reason):
            return Outcome(reason=scored, lines=info.num_lines, wall_s=time.perf_counter() - t0)
        return Outcome(parts=scored, lines=info.num_lines, wall_s=time.perf_counter() - t0)

    # ------------------------------------------------------------ acceptance
    async def _finish_label(self, cur: LabelState, executor: ThreadPoolExecutor, note: str = "") -> None:
        ctx = self._fitness_for(cur.spec.label)
        best = cur.db.best()
        accepted = False
        why = note
        if best is None or best.parts.get("rejected") is not None or "correlation" not in best.parts:
            why = why or "no program scored"
        elif cur.replaces and cur.incumbent is not None and best.fitness <= cur.incumbent:
            why = why or f"nothing beat the library's current detector (fitness {cur.incumbent:.5f})"
        elif not ctx.accepts(FitnessParts(**{k: v for k, v in best.parts.items()
                                              if k in FitnessParts.__dataclass_fields__})):
            why = why or (f"best gain {best.fitness - ctx.baseline:+.5f} does not exceed "
                          f"theta {self.config.fitness.theta:g}")
        else:
            accepted = True
        rec: dict[str, Any] = {"type": "label_done", "label": cur.spec.label, "index": cur.index,
                               "accepted": accepted, "why": why, "samples": cur.samples,
                               "self_discovered": cur.spec.self_discovered, "elapsed_s": self._elapsed(),
                               "baseline": ctx.baseline, "program": best.to_json() if best else None}
        if accepted and best is not None:
            rec["provenance"] = {
                "label": cur.spec.label, "description": cur.spec.description, "fitness": best.parts,
                "model": best.model, "samples": cur.samples, "sample": best.sample,
                "mean_time_s": float(best.parts.get("mean_time_s", 0.0)), "seed": self.config.seed,
                "run": str(self.log.dir), "origin": "self-discovered" if cur.spec.self_discovered else "guided",
            }
        self._commit([rec])
        if accepted:
            self._add_to_library(rec, rerun=False)
            self._push_dependencies()
            assert self.lib is not None
            self.lib.library.save(self.library_out)

    # -------------------------------------------------------- self-discovery
    async def _self_discovery(self) -> None:
        from simpatterns.evolve.proposers import LLMProposer

        if not isinstance(self.proposer, LLMProposer):
            self._commit([{"type": "proposed_labels", "labels": [], "why": "self-discovery needs an LLM"}])
            return
        assert self.lib is not None
        messages = self_discovery_prompt(self.lib.library, self.reasoning_texts, self.config.self_discovery)
        from simpatterns.llm import ChatRequest, LLMError

        seed = int(self.state.rng(len(self.state.labels), 0, 0, _SELF).integers(2**31 - 1))
        request = ChatRequest(messages, n=1, temperature=self.config.llm_temperature, seed=seed,
                              max_tokens=self.config.llm_max_tokens)
        try:
            [completion] = await self.proposer.client.acomplete([request])
            text = completion.text
        except LLMError as exc:
            self._commit([{"type": "proposed_labels", "labels": [], "why": f"llm_error: {exc}"}])
            return
        taken = set(self.lib.library.order()) | {s.label for s in self.state.labels}
        specs = parse_proposed_labels(text, taken, self.config.self_discovery)
        self._commit([{"type": "proposed_labels", "labels": [s.to_json() for s in specs],
                       "prompt_hash": request.prompt_hash, "answer": text[:4000]}])


def _alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


def _asdict(obj: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(obj)


def _relabel(source: str, spec: LabelSpec) -> str:
    """A seed program under the label's PATTERN and DESCRIPTION (other constants kept)."""
    import ast

    from simpatterns.evolve.gate import AST_LOCK

    with AST_LOCK:
        tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    for node in sorted(tree.body, key=lambda n: n.lineno, reverse=True):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("PATTERN", "DESCRIPTION"):
                value = spec.label if name == "PATTERN" else spec.description
                lines[node.lineno - 1:node.end_lineno] = [f"{name} = {value!r}\n"]
    return "".join(lines)


# ------------------------------------------------------------ self-discovery
def self_discovery_prompt(library: PatternLibrary, reasoning_texts: Sequence[str], k: int) -> list[dict[str, str]]:
    lines = ["The pattern library currently holds these patterns (label: description):"]
    for label, desc in library.descriptions().items():
        lines.append(f"- {label}: {desc}")
    if reasoning_texts:
        lines.append("\nReasoning written while answering questions about simulations with this library:")
        for i, text in enumerate(reasoning_texts):
            lines.append(f"\n[reasoning {i + 1}]\n{text.strip()[:4000]}")
    lines.append(
        f"\nPropose up to {k} NEW patterns that would have helped: events in physics traces that the library "
        "cannot express yet, each detectable from positions, velocities, contacts and the events of existing "
        "patterns. Answer with a JSON list of objects with keys \"label\" (a few lower-case words) and "
        "\"description\" (one or two precise sentences, with thresholds where they matter)."
    )
    return [{"role": "system", "content": "You design event detectors for physics simulation traces."},
            {"role": "user", "content": "\n".join(lines)}]


def parse_proposed_labels(text: str, taken: set[str], k: int) -> list[LabelSpec]:
    """Labels from the LLM's answer (a JSON list, possibly fenced); unknown shapes are skipped."""
    m = re.search(r"\[.*\]", text, re.S)
    items: list[Any] = []
    if m:
        try:
            items = json.loads(m.group(0))
        except json.JSONDecodeError:
            items = []
    if not items:
        items = []
        for obj in re.findall(r"\{[^{}]*\}", text):
            try:
                items.append(json.loads(obj))
            except json.JSONDecodeError:
                continue
    out: list[LabelSpec] = []
    seen = set(taken)
    for it in items if isinstance(items, list) else []:
        if not isinstance(it, dict):
            continue
        label, desc = it.get("label"), it.get("description")
        if not isinstance(label, str) or not isinstance(desc, str) or not label.strip() or not desc.strip():
            continue
        label = normalize_label(label)
        if label in seen or len(label) > 60:
            continue
        seen.add(label)
        out.append(LabelSpec(label=label, description=" ".join(desc.split())[:600], self_discovered=True))
        if len(out) >= k:
            break
    return out


def traces_from_dir(path: str | Path) -> tuple[list[Trace], str]:
    """Load every ``.npz`` trace under ``path`` (sorted); returns traces and a content hash."""
    from simpatterns.annotate.annotator import trace_files

    files = trace_files(path)
    if not files:
        raise JobError(f"{path}: no .npz traces found")
    traces = [Trace.load(f) for f in files]
    h = hashlib.blake2b(digest_size=16)
    for f, t in zip(files, traces):
        h.update(f.name.encode())
    h.update(dist.dataset_hash(traces).encode())
    return traces, h.hexdigest()
