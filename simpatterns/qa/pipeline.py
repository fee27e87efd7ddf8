"""The pipeline a user runs end to end, per rollout: simulate a PHYRE action, annotate
the trace with the built-in library, list the Q&A questions it can be asked (the
templates' instances with their gold answers, `simpatterns.qa.generate`) and label
it with reward programs; then pick the questions (``questions_per_rollout`` a
rollout, balanced over all of them: `select_questions`, in this process).

What travels to a worker is small: a `PipelineItem` (template, variant, action
kind), and once per worker the programs' texts; the library and the scenes are read
from the installed package there. What comes back is plain data (`RolloutOutcome`:
counts, candidate questions, verdicts, the CPU seconds of each stage and the
worker's peak memory), never a trace: nothing is written to disk.

>>> report = run_pipeline(pipeline_items(["00000", "00001"], variants=1), SHIPPED_GOALS)  # doctest: +SKIP
>>> len(report.outcomes), len(report.questions)  # doctest: +SKIP
(2, 20)
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from simpatterns.detectors.library import PatternLibrary
from simpatterns.dsl.program import RewardProgram
from simpatterns.parallel import Backend, WorkerSetup, make_executor
from simpatterns.qa.generate import GenerateConfig, select_questions
from simpatterns.qa.questions import Question
from simpatterns.qa.templates import TEMPLATES, QuestionRules

# three shipped goals that read every PHYRE scene (by colour and walls): events, distances, contacts
SHIPPED_GOALS = ("a01_touch_at_end_red_never_green.rwd", "a06_near_miss.rwd", "a10_no_boundary_contacts.rwd")
STAGES = ("simulate", "annotate", "facts", "questions", "labels")


@dataclass(frozen=True)
class PipelineItem:
    """One rollout to run: a shipped variant and an action kind (``solution``,
    ``random`` or ``near-miss``, as `simpatterns.simulators.dataset` draws them)."""

    template: str
    variant: int
    kind: str = "solution"
    seed: int = 0


@dataclass
class RolloutOutcome:
    """What one rollout gave: ``candidates`` maps a question template's id to its
    instances (slots, gold answer, ...); ``labels`` is one (success, score,
    determined) per program; ``cpu_s`` the CPU seconds of each of `STAGES`."""

    item: PipelineItem
    frames: int = 0
    duration: float = 0.0
    success: bool | None = None
    events: int = 0
    candidates: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    labels: list[tuple[bool, float, bool]] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)
    maxrss_kb: int = 0
    error: str | None = None


@dataclass
class PipelineReport:
    """Every rollout's outcome (input order) and the questions picked over all of them;
    ``select_s``: CPU seconds of the picking (this process)."""

    outcomes: list[RolloutOutcome]
    questions: list[Question]
    select_s: float = 0.0

    def stage_seconds(self) -> dict[str, float]:
        """CPU seconds of each stage, summed over the rollouts (the picking included)."""
        total = {s: sum(o.cpu_s.get(s, 0.0) for o in self.outcomes) for s in STAGES}
        total["select questions"] = self.select_s
        return total


def pipeline_items(templates: Sequence[str], variants: int, seed: int = 0) -> list[PipelineItem]:
    """``variants`` shipped variants of each template (fewer where fewer ship); even
    variants take the stored solution, odd ones a random valid action."""
    from simpatterns.simulators.phyre import get_template

    out = []
    for tid in templates:
        t = get_template(tid)
        out += [
            PipelineItem(t.id, v, "solution" if v % 2 == 0 else "random", seed)
            for v in range(min(variants, t.num_variants))
        ]
    return out


@dataclass(frozen=True)
class _Worker:
    """Built once per worker: the library and the compiled programs."""

    library: PatternLibrary
    programs: tuple[RewardProgram, ...]
    rules: QuestionRules

    @classmethod
    def build(cls, program_texts: tuple[tuple[str, str], ...], rules: QuestionRules) -> _Worker:
        library = PatternLibrary.builtin()
        programs = tuple(RewardProgram.from_text(text, library, filename=name) for name, text in program_texts)
        return cls(library, programs, rules)


def _run_item(worker: _Worker, item: PipelineItem) -> RolloutOutcome:
    from simpatterns.annotate.annotator import annotate
    from simpatterns.detectors.thresholds import THRESHOLDS
    from simpatterns.qa.facts import TraceFacts
    from simpatterns.qa.templates import RolloutFacts
    from simpatterns.simulators.dataset import RolloutJob, job_rollout

    out = RolloutOutcome(item)
    clock = time.thread_time  # this thread's CPU: the work itself, whatever else the worker runs
    marks = [clock()]
    rollout = job_rollout(RolloutJob(item.template, item.variant, item.kind, 0, item.seed))
    marks.append(clock())
    if rollout is None or rollout.trace is None:
        out.error = f"no {item.kind} action found"
        out.cpu_s["simulate"] = marks[1] - marks[0]
        return out
    trace = rollout.trace
    annotation = annotate(trace, worker.library)
    marks.append(clock())
    rf = RolloutFacts(TraceFacts(trace, THRESHOLDS), annotation, worker.rules)  # what the templates read
    marks.append(clock())
    out.candidates = {
        t.id: [
            {
                "slots": inst.slots,
                "answer": inst.answer,
                "cut_frame": inst.cut_frame,
                "choices": None if inst.choices is None else list(inst.choices),
                "max_count": inst.max_count,
                "stable": None,
            }
            for inst in t.instances(rf)
        ]
        for t in TEMPLATES
    }
    marks.append(clock())
    for program in worker.programs:
        res = program.evaluate(annotation, trace)
        out.labels.append((bool(res.success), float(res.score), bool(res.determined)))
    marks.append(clock())
    out.cpu_s = {stage: b - a for stage, a, b in zip(STAGES, marks, marks[1:])}
    out.frames, out.duration, out.success = trace.num_frames, rf.duration, bool(trace.success)
    out.events = annotation.num_events
    out.maxrss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out


def run_pipeline(
    items: Sequence[PipelineItem],
    programs: Sequence[str] = SHIPPED_GOALS,
    *,
    questions_per_rollout: int = 10,
    seed: int = 0,
    workers: int = 1,
    backend: Backend | None = None,
    chunksize: int = 2,
) -> PipelineReport:
    """Run every item through the pipeline (see the module docstring) over ``workers``
    on ``backend`` (None: this machine's processes); ``programs`` are shipped goal
    names (`simpatterns.examples`) or program texts. Rollouts go to the workers
    ``chunksize`` at a time (a rollout is tens of ms: small chunks keep both workers
    busy to the end). Results do not depend on the backend or the number of workers."""
    from simpatterns.examples import path as example_path

    texts = tuple(
        (p, example_path("goals", p).read_text()) if p.endswith(".rwd") else (f"<program {k}>", p)
        for k, p in enumerate(programs)
    )
    rules = QuestionRules()
    setup = WorkerSetup(_Worker.build, (texts, rules))
    outcomes: list[RolloutOutcome | None] = [None] * len(items)
    with make_executor(workers, setup, backend=backend) as executor:
        for i, outcome in executor.imap(_run_item, list(items), chunksize=chunksize):
            outcomes[i] = outcome
    done = [o for o in outcomes if o is not None]
    t0 = time.thread_time()
    cfg = GenerateConfig(
        scenes=len(items), questions_per_rollout=questions_per_rollout, seed=seed, stable_check=False, rules=rules
    )
    questions = select_questions([_as_result(k, o) for k, o in enumerate(done) if o.error is None], cfg)
    return PipelineReport(done, questions, time.thread_time() - t0)


def _as_result(index: int, o: RolloutOutcome) -> dict[str, Any]:
    """An outcome as `select_questions` reads a rollout of `generate_dataset`."""
    it = o.item
    name = f"T{it.template}_V{it.variant:03d}_{it.kind.replace('-', '')}0.npz"
    return {
        "index": index,
        "rollout_id": f"r{index:05d}",
        "candidates": o.candidates,
        "duration": o.duration,
        "row": {"file": name, "kind": it.kind, "success": o.success},
    }


__all__ = [
    "SHIPPED_GOALS",
    "STAGES",
    "PipelineItem",
    "PipelineReport",
    "RolloutOutcome",
    "pipeline_items",
    "run_pipeline",
]
