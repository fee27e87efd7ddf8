"""Discovery jobs (paper Algorithm 1): evolve a detector per label, accept, grow the library.

For each label of a labels file, in order:

1. seed the programs database with the label's start program (the skeleton
   of Algorithm 1, a detector given as ``seed``, or the library's current
   detector of that label) -- once; a resumed job never re-adds it;
2. run rounds until the sample budget is spent (`simpatterns.evolve.rounds`:
   prompts from one database state, proposals concurrently, evaluation by a
   pool of sandbox evaluators, results registered in sample order);
3. accept the best program when its fitness clears theta and, for the
   evidence fitness, its events pass the timing and body checks (the program
   runs once more in the sandbox for them): it is written into the library
   (atomically) with its provenance (`simpatterns.evolve.growth`).

Then, optionally, a self-discovery round (`simpatterns.evolve.selfdiscovery`):
the LLM proposes new labels from the library and from reasoning texts the
user supplies, each evolved like a guided label.

This module runs the job: the sandbox's life cycle, the labels loop and the
log. Every state change is a typed record (`simpatterns.evolve.records`)
applied by one function (`simpatterns.evolve.state.JobState.apply`) both live
and when replaying the log; records are appended in groups ending with a
commit record, and resume loads the last snapshot, replays the committed
records after it, cuts off a torn tail and redoes the interrupted round from
the same seeds. The same seed gives the same library and log: the time
penalty reads a candidate's Python steps (`simpatterns.detectors.cost`), not
its run time; the CPU time the sandbox measures goes to ``timings.jsonl``
(for reports), and no record carries a clock (the snapshot keeps the elapsed
time for ``--max-wall-s``). A replayed program is parsed again when a
prompt or the library needs what it declares (a live one never is).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from simpatterns.annotate import distances as dist
from simpatterns.annotate.annotator import trace_files
from simpatterns.detectors.contract import AST_LOCK, Declarations, Detector, count_lines, source_hash
from simpatterns.detectors.library import PatternLibrary
from simpatterns.evolve.config import EvolveConfig
from simpatterns.evolve.database import DetectorProgram
from simpatterns.evolve.evidence import TraceSalience
from simpatterns.evolve.fitness import FitnessContext, FitnessParts
from simpatterns.evolve.growth import LibraryState
from simpatterns.evolve.prompt import LabelSpec, skeleton, trace_api
from simpatterns.evolve.proposers import LLMProposer, OfflineProposer
from simpatterns.evolve.records import JobDone, LabelDone, LabelStart, ProposedLabels, Record, RoundEnd
from simpatterns.evolve.rounds import CandidateEvaluator, plan_round, run_round, safe_sample_record
from simpatterns.evolve.runlog import RunLog
from simpatterns.evolve.selfdiscovery import propose_labels
from simpatterns.evolve.state import SELF_STREAM, JobError, JobState, LabelState, open_job
from simpatterns.files import atomic_write_json
from simpatterns.llm.client import resolve_prompt_mode
from simpatterns.parallel import Backend
from simpatterns.sandbox.distributed import ExecutorSandbox, open_sandbox
from simpatterns.sandbox.pool import Sandbox
from simpatterns.trace import Trace

__all__ = ["DiscoveryJob", "JobError", "traces_from_dir"]

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
        sandbox_factory: Callable[..., Sandbox | ExecutorSandbox] | None = None,
        backend: Backend | None = None,
        unsafe: bool = False,
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
        # the sandbox on ``backend`` (None: this machine); ``unsafe``: what --unsafe-sandbox asks
        self.sandbox_factory = sandbox_factory or partial(open_sandbox, backend=backend, unsafe=unsafe)
        self.traces_id = traces_id or dist.dataset_hash(self.traces)
        self.labels = list(labels)
        self.state = JobState(self.config.seed, self.labels)
        self.sandbox: Sandbox | ExecutorSandbox | None = None
        self.sandbox_root: str | None = None
        self.sandbox_pids: set[int] = set()
        self.lib: LibraryState | None = None
        self.evaluator: CandidateEvaluator | None = None
        self._fitness: FitnessContext | None = None
        self._fitness_label: str | None = None
        self._D_T: np.ndarray | None = None
        self._salience: TraceSalience | None = None
        self._api = trace_api()
        self._compact = resolve_prompt_mode(self.config.prompt, getattr(self.proposer, "client", None)) == "compact"
        self._t0 = time.monotonic()
        self._elapsed_before = 0.0
        self._rounds_since_snapshot = 0
        self.stop_reason = ""  # which budget ended this session, in words (the CLI's last line)

    # ----------------------------------------------------------- entry point
    def run(self) -> PatternLibrary:
        return asyncio.run(self.arun())

    async def arun(self) -> PatternLibrary:
        self.state, base_steps = open_job(self.log, self.config.seed, self.labels, self.traces_id,
                                          self.base_library.order(), self.resume)
        self._elapsed_before = self.state.elapsed_s
        self._remove_stale_sandbox()
        self.sandbox = self.sandbox_factory(self.traces, workers=self.config.workers, limits=self.config.sandbox)
        self.sandbox_root = self.sandbox.root
        self.evaluator = CandidateEvaluator(self.sandbox, self._fitness_for, self.config.gate)
        self.log.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.log.dir / "session.json", {  # which processes belong to this run, for operators
            "pid": os.getpid(), "sandbox_root": self.sandbox.root, "servers": self.sandbox.server_pids,
            "isolation": self.sandbox.info, "started": time.time()})
        executor = ThreadPoolExecutor(max_workers=max(1, self.config.workers), thread_name_prefix="evaluator")
        try:
            self._build_library(base_steps)
            await self._run_labels(executor)
            if self.config.self_discovery > 0 and not self.state.proposed and not self._out_of_budget():
                await self._self_discovery()
                await self._run_labels(executor)
            if not self.state.finished and not self._out_of_budget():
                self._commit([JobDone(None, str(self.library_out))])
            if not self.stop_reason:
                self.stop_reason = (f"sample budget: every label ran its {self.config.samples_per_label} samples "
                                    f"(--samples)")
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
        shutil.rmtree(root, ignore_errors=True)

    def _job_record(self, base_steps: dict[str, float]) -> dict[str, Any]:
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
            "base_steps": base_steps,
            "library_out": str(self.library_out),
        }  # no clock: the same seed writes the same job.json (session.json says when it started)

    def _elapsed(self) -> float:
        return self._elapsed_before + (time.monotonic() - self._t0)

    # --------------------------------------------------------------- library
    def _build_library(self, base_steps: dict[str, float] | None) -> None:
        self.lib, counted = LibraryState.from_base(self.base_library, self.traces)
        if base_steps is None:  # a fresh job: record them (a resumed job scores against what it logged)
            base_steps = counted
            self.log.write_job(self._job_record(base_steps))
        self.lib.steps = {k: float(base_steps.get(k, counted[k])) for k in self.lib.library.order()}
        self._push_dependencies()
        accepted = [rec for rec in self.state.done if rec.accepted]
        for rec in accepted:  # accepted in an earlier session of this job: events from the sandbox
            self._accept(rec)
        if accepted:
            self.lib.library.save(self.library_out)

    def _push_dependencies(self) -> None:
        assert self.lib is not None and self.sandbox is not None
        self.sandbox.set_dependency_events(self.lib.events)

    def _accept(self, rec: LabelDone, program: DetectorProgram | None = None) -> None:
        assert self.lib is not None and self.sandbox is not None
        self.lib.accept(rec, self.sandbox, program)
        self._fitness = None
        self._push_dependencies()

    def _fitness_for(self, label: str) -> FitnessContext:
        if self._fitness is not None and self._fitness_label == label:
            return self._fitness
        assert self.lib is not None
        if self.config.fitness.kind == "paper" and self._D_T is None:
            cache = str(self.log.dir / "cache") if self.config.trace_distance_cache else None
            self._D_T = dist.trace_distance_matrix(self.traces, cache)
        if self.config.fitness.kind == "evidence" and self._salience is None:
            self._salience = TraceSalience(self.traces)
        sub = self.lib.without(label)
        self._fitness = FitnessContext(self.traces, sub.events, sub.steps, self.config.fitness,
                                       trace_distances=self._D_T, salience=self._salience)
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
                self._finish_label(cur)
            else:
                return  # out of budget mid-label: a resume with a larger budget continues here

    def _out_of_budget(self) -> bool:
        """Whether a budget other than the samples' is spent; `stop_reason` then names it."""
        c = self.config
        if c.max_total_tokens is not None and self.state.tokens >= c.max_total_tokens:
            self.stop_reason = f"token budget: {self.state.tokens} of {c.max_total_tokens} tokens used " \
                               f"(--max-total-tokens)"
        elif c.max_wall_s is not None and self._elapsed() >= c.max_wall_s:
            self.stop_reason = f"wall-clock budget: {self._elapsed():.0f} s of {c.max_wall_s:g} s (--max-wall-s)"
        elif getattr(self.proposer, "exhausted", None):
            self.stop_reason = f"LLM {self.proposer.exhausted}"
        else:
            return False
        return True

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
        assert self.lib is not None and self.evaluator is not None
        spec = self.state.labels[index]
        ctx = self._fitness_for(spec.label)
        source, origin = self._seed_source(spec)
        loop = asyncio.get_running_loop()
        outcome = await loop.run_in_executor(executor, self.evaluator.evaluate, source, spec)
        floor = ctx.baseline - 1.0
        if outcome.parts is not None:
            p = outcome.parts
            seed_prog = DetectorProgram(-1, source, p.fitness, p.signature, p.events_hash, p.lines, -1, p.to_json(), origin,
                                constants=outcome.constants)
        else:
            seed_prog = DetectorProgram(-1, source, floor, (), "seed", count_lines(source), -1,
                                {"fitness": floor, "rejected": outcome.reason.to_json() if outcome.reason else None},
                                origin)
        replaces = spec.label in self.lib.library
        incumbent = None  # the library's current detector of this label: what a replacement must beat
        if replaces and origin != "library":
            inc = await loop.run_in_executor(executor, self.evaluator.evaluate,
                                             self.lib.library.get(spec.label).source, spec)
            incumbent = inc.parts.fitness if inc.parts is not None else None
        elif replaces:
            incumbent = seed_prog.fitness if outcome.parts is not None else None
        self._commit([LabelStart(spec.label, index, spec, origin, seed_prog, outcome.reason, ctx.baseline,
                                 ctx.library_correlation, ctx.step_reference, ctx.patterns,
                                 self.config.database, replaces, incumbent)])
        if isinstance(self.proposer, OfflineProposer) and origin == "skeleton":
            cur = self.state.current
            assert cur is not None
            self._finish_label(cur, note="the offline proposer mutates existing code: give this label a seed "
                                         "program (seed = ... in the labels file) or use an LLM")

    # ---------------------------------------------------------------- rounds
    async def _round(self, cur: LabelState, executor: ThreadPoolExecutor) -> None:
        assert self.lib is not None and self.evaluator is not None
        cfg = self.config
        self._fitness_for(cur.spec.label)  # built here, not concurrently in the evaluator threads
        batch = min(cfg.batch_size, cfg.samples_per_label - cur.samples)
        items = plan_round(self.state, cur, batch, self.lib.prompt_info(cur.spec), self._api,
                           compact=self._compact)
        await run_round(items, cur.spec, self.proposer, self.evaluator, executor, cfg)
        records: list[Record] = [safe_sample_record(cur, it, self.log.quarantine) for it in items]
        records.append(RoundEnd(cur.spec.label, cur.round, None, self.state.tokens))
        self._commit(records)
        self.log.write_timings([{"label": cur.spec.label, "round": cur.round - 1, "sample": it.sample,
                                 "cpu_s": round(it.outcome.cpu_s, 6)} for it in items if it.outcome is not None])
        if self.progress:
            self.progress({"label": cur.spec.label, "samples": cur.samples, "budget": cfg.samples_per_label,
                           "best_per_island": cur.db.best_per_island(), "baseline": cur.baseline,
                           "round": cur.round})

    def _commit(self, records: list[Record]) -> None:
        """Apply records to the state (the same code replays them), then log them."""
        for rec in records:
            self.state.apply(rec)
        self.state.elapsed_s = self._elapsed()  # kept in the snapshot, not in the log
        offset = self.log.append([rec.to_json() for rec in records])
        self._rounds_since_snapshot += 1
        if not isinstance(records[-1], RoundEnd) or self._rounds_since_snapshot >= self.config.snapshot_every:
            self.log.write_snapshot({"offset": offset, "state": self.state.to_json()})
            self._rounds_since_snapshot = 0

    # ------------------------------------------------------------ acceptance
    def _acceptance_problems(self, ctx: FitnessContext, best: DetectorProgram) -> list[str]:
        """The fitness's event checks on the best program (`FitnessContext.acceptance_problems`):
        its events come from the sandbox again, once per label (they are not kept per sample)."""
        if ctx.config.kind != "evidence" or not ctx.config.checks:
            return []
        assert self.sandbox is not None
        declared = best.declared()
        if declared is None:
            return ["the best program no longer parses as a detector"]
        program = Detector.from_declarations(Declarations.from_constants(declared), best.source, None,
                                             filename="<evolved>", trusted=False)
        res = self.sandbox.evaluate(program)
        if not res.ok or res.events is None:
            return [f"the best program failed when run again: {res.reason.short() if res.reason else '?'}"]
        return ctx.acceptance_problems(res.events)

    def _finish_label(self, cur: LabelState, note: str = "") -> None:
        ctx = self._fitness_for(cur.spec.label)
        best = cur.db.best()
        accepted = False
        why = note
        if best is None or best.parts.get("rejected") is not None or "gain" not in best.parts:
            why = why or "no program scored"
        elif cur.replaces and cur.incumbent is not None and best.fitness <= cur.incumbent:
            why = why or f"nothing beat the library's current detector (fitness {cur.incumbent:.5f})"
        elif not ctx.accepts(FitnessParts(**{k: v for k, v in best.parts.items()
                                              if k in FitnessParts.__dataclass_fields__})):
            why = why or (f"best gain {best.fitness - ctx.baseline:+.5f} does not exceed "
                          f"theta {ctx.config.theta:g}")
        else:
            problems = self._acceptance_problems(ctx, best)
            if problems:
                why = why or "; ".join(problems)
            else:
                accepted = True
        rec = LabelDone(cur.spec.label, cur.index, accepted, why, cur.samples, cur.spec.self_discovered,
                        None, ctx.baseline, DetectorProgram.from_json(best.to_json()) if best else None)
        if accepted and best is not None:
            rec.provenance = {
                "label": cur.spec.label, "description": cur.spec.description, "fitness": best.parts,
                "model": best.model, "samples": cur.samples, "sample": best.sample,
                "mean_steps": float(best.parts.get("mean_steps", 0.0)), "seed": self.config.seed,
                "run": str(self.log.dir), "origin": "self-discovered" if cur.spec.self_discovered else "guided",
            }
        self._commit([rec])
        if accepted:
            self._accept(rec, best)
            assert self.lib is not None
            self.lib.library.save(self.library_out)

    # -------------------------------------------------------- self-discovery
    async def _self_discovery(self) -> None:
        if not isinstance(self.proposer, LLMProposer):
            self._commit([ProposedLabels([], why="self-discovery needs an LLM")])
            return
        assert self.lib is not None
        cfg = self.config
        seed = int(self.state.rng(len(self.state.labels), 0, 0, SELF_STREAM).integers(2**31 - 1))
        taken = set(self.lib.library.order()) | {s.label for s in self.state.labels}
        self._commit([await propose_labels(self.proposer.client, self.lib.library, taken, self.reasoning_texts,
                                           cfg.self_discovery, seed, cfg.llm_temperature, cfg.llm_max_tokens)])


def _alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


def _relabel(source: str, spec: LabelSpec) -> str:
    """A seed program under the label's PATTERN and DESCRIPTION (other constants kept)."""
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


def traces_from_dir(path: str | Path) -> tuple[list[Trace], str]:
    """Load every ``.npz`` trace under ``path`` (sorted); returns traces and a content hash."""
    files = trace_files(path)
    if not files:
        raise JobError(f"{path}: no .npz traces found")
    traces = [Trace.load(f) for f in files]
    h = hashlib.blake2b(digest_size=16)
    for f in files:
        h.update(f.name.encode())
    h.update(dist.dataset_hash(traces).encode())
    return traces, h.hexdigest()
