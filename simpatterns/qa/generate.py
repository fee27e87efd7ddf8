"""Build a Q&A data set (paper §4.1): PHYRE rollouts and seeded questions about them.

1. Scene instances: ``scenes`` distinct (PHYRE template, variant) pairs drawn
   from the shipped variants; each gets its stored solution or a near-miss (a
   perturbed solution that fails, `simulators.dataset`), 50/50. A near-miss is
   recorded with its real outcome.
2. Per rollout (in parallel): simulate, annotate with the library (for the
   {PATTERN} templates), and list every valid instance of every template with
   its gold answer (`templates`). With ``stable_check`` each instance is also
   answered on four rollouts of the action nudged by 1 px (x+-1, y+-1): it is
   *stable* when no answer flips (percentages within the scoring tolerance).
3. Selection (serial, seeded): ``questions_per_rollout`` different templates
   per rollout, the least used templates first, so every template is asked
   about as often. Answers are balanced per template (`answer_class`): a
   yes/no template takes an instance of its scarcer answer so far, a
   percentage template alternates zero and non-zero answers, a template that
   allows "none" alternates "none" and an object; a template whose scarcer
   class a rollout cannot give waits for a rollout that can.

Rollouts are written as they finish and reused by a re-run, so an interrupted
build resumes; the questions file is written once, atomically, at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from simpatterns.detectors.library import PatternLibrary
from simpatterns.detectors.thresholds import THRESHOLDS
from simpatterns.files import atomic_write_json
from simpatterns.cli_support import progress_map
from simpatterns.parallel import Backend, WorkerSetup
from simpatterns.qa.facts import TraceFacts
from simpatterns.qa.questions import (
    DATASET_FILE,
    NONE,
    PERCENT_TOLERANCE,
    QUESTIONS_FILE,
    ROLLOUTS_DIR,
    Question,
    write_questions,
)
from simpatterns.qa.templates import TEMPLATES, Instance, QuestionRules, RolloutFacts, get_template

DATASET_FORMAT = "simpatterns-qa-dataset"
DATASET_VERSION = 1
NUDGES_PX = ((1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0))


@dataclass
class GenerateConfig:
    scenes: int = 100
    questions_per_rollout: int = 10
    seed: int = 0
    question_templates: tuple[int, ...] = tuple(t.id for t in TEMPLATES)
    phyre_templates: tuple[str, ...] | None = None  # None: all 25
    solution_fraction: float = 0.5
    stable_check: bool = True
    stride: int = 1
    rules: QuestionRules = field(default_factory=QuestionRules)

    def to_json(self) -> dict[str, Any]:
        return {"scenes": self.scenes, "questions_per_rollout": self.questions_per_rollout, "seed": self.seed,
                "question_templates": list(self.question_templates),
                "phyre_templates": None if self.phyre_templates is None else list(self.phyre_templates),
                "solution_fraction": self.solution_fraction, "stable_check": self.stable_check,
                "stride": self.stride, "rules": self.rules.to_json()}


def same_answer(answer_type: str, a: Any, b: Any) -> bool:
    """Whether two gold answers agree (percentages within the scoring tolerance)."""
    if a is None or b is None:
        return False
    if answer_type == "percent":
        return abs(float(a) - float(b)) <= PERCENT_TOLERANCE
    return a == b


# ------------------------------------------------------------------ scenes
def sample_scenes(cfg: GenerateConfig) -> list[tuple[str, int, str]]:
    """(PHYRE template, variant, action kind) per scene instance, seeded."""
    from simpatterns.simulators.phyre import TEMPLATES as PHYRE
    from simpatterns.simulators.phyre import get_template as phyre_template

    ids = list(cfg.phyre_templates) if cfg.phyre_templates else sorted(PHYRE)
    pool = []
    for tid in ids:
        t = phyre_template(tid)
        pool += [(t.id, v) for v in range(t.num_variants)]
    if not pool:
        raise ValueError("no shipped PHYRE variants to sample scenes from")
    if cfg.scenes > len(pool):
        raise ValueError(f"--scenes {cfg.scenes} exceeds the {len(pool)} shipped variants of the chosen templates")
    rng = np.random.default_rng([cfg.seed, 1])
    picks = rng.choice(len(pool), size=cfg.scenes, replace=False)
    kinds = rng.random(cfg.scenes) < cfg.solution_fraction
    return [(pool[p][0], pool[p][1], "solution" if k else "near-miss") for p, k in zip(picks.tolist(), kinds)]


# ------------------------------------------------------------------ per rollout (workers)
@dataclass(frozen=True)
class RolloutItem:
    index: int
    template: str
    variant: int
    kind: str
    out_dir: str
    cfg: GenerateConfig

    @property
    def rollout_id(self) -> str:
        return f"r{self.index:03d}"


def rollout_facts(trace: Any, library: PatternLibrary, rules: QuestionRules) -> RolloutFacts:
    from simpatterns.annotate import annotate

    return RolloutFacts(TraceFacts(trace, THRESHOLDS), annotate(trace, library), rules)


def _simulate_item(item: RolloutItem) -> tuple[dict[str, Any], Any]:
    from simpatterns.simulators.dataset import RolloutJob, run_job
    from simpatterns.trace import Trace

    rollouts = Path(item.out_dir) / ROLLOUTS_DIR
    rollouts.mkdir(parents=True, exist_ok=True)
    kind = item.kind
    row = run_job(RolloutJob(item.template, item.variant, kind, 0, item.cfg.seed, item.cfg.stride), str(rollouts))
    if row.get("file") is None and kind == "near-miss":  # no failing perturbation found: use the solution
        kind = "solution"
        row = run_job(RolloutJob(item.template, item.variant, kind, 0, item.cfg.seed, item.cfg.stride), str(rollouts))
        row["fallback"] = "no near-miss found; solution used"
    if row.get("file") is None:
        return row, None
    return row, Trace.load(rollouts / row["file"])


def _nudged(trace: Any, stride: int) -> list[Any]:
    from simpatterns.simulators.phyre import check_action, load_scene, simulate
    from simpatterns.simulators.phyre.physics import ACTION_POSITION_SCALE

    scene = load_scene(trace.meta["template"], trace.meta["variant"])
    action = np.asarray(trace.meta["action"], dtype=float)
    out = []
    for dx, dy in NUDGES_PX:
        a = action + np.array([dx, dy, 0.0]) / ACTION_POSITION_SCALE
        if (a < 0).any() or (a > 1).any() or check_action(scene, a) is not None:
            continue
        r = simulate(scene, a, stride=stride)
        if r.trace is not None:
            out.append(r.trace)
    return out


def rollout_candidates(library: PatternLibrary, item: RolloutItem) -> dict[str, Any]:
    """Simulate one scene instance and list every template instance on it (plain data)."""
    row, trace = _simulate_item(item)
    result: dict[str, Any] = {"index": item.index, "rollout_id": item.rollout_id, "row": row, "candidates": {}}
    if trace is None:
        return result
    rules = item.cfg.rules
    rf = rollout_facts(trace, library, rules)
    nudged = [rollout_facts(t, library, rules) for t in _nudged(trace, item.cfg.stride)] if item.cfg.stable_check \
        else []
    result["duration"] = rf.duration
    result["nudges"] = len(nudged)
    for tid in item.cfg.question_templates:
        t = get_template(tid)
        cands = []
        for inst in t.instances(rf):
            stable = None
            if item.cfg.stable_check:
                stable = bool(nudged) and all(_answer_on(t, other, inst) for other in nudged)
            cands.append({"slots": inst.slots, "answer": inst.answer, "cut_frame": inst.cut_frame,
                          "choices": None if inst.choices is None else list(inst.choices),
                          "max_count": inst.max_count, "stable": stable})
        result["candidates"][t.id] = cands
    return result


def _answer_on(t: Any, rf: RolloutFacts, inst: Instance) -> bool:
    if inst.cut_frame is not None and inst.cut_frame >= rf.facts.T - 1:
        return False
    try:
        return same_answer(t.answer_type, t.answer(rf, inst.slots, inst.cut_frame), inst.answer)
    except (KeyError, IndexError):
        return False


# ------------------------------------------------------------------ selection
def balance_classes(t: Any) -> tuple[str, ...]:
    """The classes a template's answers are balanced over: yes / no; a percentage of zero or not;
    "none" or an object where "none" is allowed; () when not balanced."""
    if t.answer_type == "yesno":
        return ("yes", "no")
    if t.answer_type == "percent":
        return ("zero", "nonzero")
    if t.answer_type == "object" and t.allow_none:
        return ("none", "object")
    return ()


def answer_class(t: Any, answer: Any) -> str | None:
    if t.answer_type == "yesno":
        return str(answer)
    if t.answer_type == "percent":
        return "zero" if float(answer) == 0.0 else "nonzero"
    if t.answer_type == "object" and t.allow_none:
        return "none" if answer == NONE else "object"
    return None


def select_questions(results: Sequence[dict[str, Any]], cfg: GenerateConfig) -> list[Question]:
    """Pick the questions from the candidates of every rollout (see the module docstring)."""
    used = {t: 0 for t in cfg.question_templates}
    seen: dict[int, dict[str, int]] = {t: {} for t in cfg.question_templates}
    questions: list[Question] = []

    for res in sorted(results, key=lambda r: r["index"]):
        if not res["candidates"]:
            continue
        rng = np.random.default_rng([cfg.seed, 2, res["index"]])
        jitter = rng.random(len(cfg.question_templates))
        flip = rng.random() < 0.5  # which class wins a tie here: so any prefix of the data set is balanced too

        def wanted(t: int) -> str | None:
            """The class this template has been given least so far (None: not balanced)."""
            classes = balance_classes(get_template(t))
            if not classes:
                return None
            return min(classes, key=lambda c: (seen[t].get(c, 0), classes.index(c) != flip))

        def priority(t: int) -> tuple[float, float]:
            # a balanced template whose scarcer class this rollout cannot give waits for one that can
            want, cands = wanted(t), res["candidates"].get(t)
            lacks = bool(cands) and want is not None and not any(
                answer_class(get_template(t), c["answer"]) == want for c in cands)
            return (used[t] + (1.0 if lacks else 0.0), jitter[cfg.question_templates.index(t)])

        order = sorted(cfg.question_templates, key=priority)
        picked = [t for t in order if res["candidates"].get(t)][: cfg.questions_per_rollout]
        for k, tid in enumerate(sorted(picked)):
            t, cands, want = get_template(tid), res["candidates"][tid], wanted(tid)
            pool = [c for c in cands if answer_class(t, c["answer"]) == want] or cands
            c = pool[int(rng.integers(len(pool)))]
            cls = answer_class(t, c["answer"])
            if cls is not None:
                seen[tid][cls] = seen[tid].get(cls, 0) + 1
            used[tid] += 1
            questions.append(_question(res, t, c, k))
    return questions


def _question(res: dict[str, Any], t: Any, c: dict[str, Any], k: int) -> Question:
    row = res["row"]
    end = c["slots"]["tc"] if c["cut_frame"] is not None else round(res["duration"], 2)
    return Question(
        id=f"{res['rollout_id']}-q{k:02d}", rollout=f"{ROLLOUTS_DIR}/{row['file']}", rollout_id=res["rollout_id"],
        template=t.id, name=t.name, family=t.family, answer_type=t.answer_type, slots=c["slots"],
        text=t.render(c["slots"]), answer=c["answer"], window=[0.0, float(end)], cut_frame=c["cut_frame"],
        choices=c["choices"], max_count=c["max_count"], stable=c["stable"], action_kind=row["kind"],
        success=row.get("success"),
    )


# ------------------------------------------------------------------ the whole build
def library_digest(library: PatternLibrary) -> str:
    h = hashlib.blake2b(digest_size=8)
    for rec, source in library.to_spec():
        h.update(rec["label"].encode())
        h.update(source.encode())
    return h.hexdigest()


def generate_dataset(
    out_dir: str | os.PathLike,
    cfg: GenerateConfig | None = None,
    library: PatternLibrary | None = None,
    *,
    workers: int = 1,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    backend: Backend | None = None,
) -> list[Question]:
    """Build the data set in ``out_dir`` (see the module docstring); returns the questions.
    ``backend``: where the rollouts run (None: this machine's processes)."""
    cfg = cfg or GenerateConfig()
    library = library if library is not None else PatternLibrary.builtin()
    for tid in cfg.question_templates:
        get_template(tid)
    out = Path(out_dir)
    scenes = sample_scenes(cfg)
    items = [RolloutItem(i, t, v, k, str(out), cfg) for i, (t, v, k) in enumerate(scenes)]
    setup = WorkerSetup(PatternLibrary.from_spec, (library.to_spec(),))
    results: list[dict[str, Any]] = []
    for _, res in progress_map(rollout_candidates, items, workers=workers, setup=setup, backend=backend,
                               progress="rollouts" if progress else None):
        results.append(res)
        if log and res["row"].get("error"):
            log(f"{res['rollout_id']}: {res['row']['error']}")
    results.sort(key=lambda r: r["index"])
    questions = select_questions(results, cfg)
    write_questions(out / QUESTIONS_FILE, questions)
    atomic_write_json(out / DATASET_FILE, {
        "format": DATASET_FORMAT, "version": DATASET_VERSION, "config": cfg.to_json(),
        "thresholds": THRESHOLDS.to_json(), "percent_tolerance": PERCENT_TOLERANCE,
        "library": {"labels": library.order(), "digest": library_digest(library),
                    "path": str(library.path) if library.path else None},
        "rollouts": [dict(r["row"], rollout_id=r["rollout_id"], nudges=r.get("nudges")) for r in results],
        "questions": len(questions),
        "templates": {str(t): sum(1 for q in questions if q.template == t) for t in cfg.question_templates},
    })
    return questions


def read_dataset_info(path: str | os.PathLike) -> dict[str, Any]:
    p = Path(path)
    p = p / DATASET_FILE if p.is_dir() else p.parent / DATASET_FILE
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
