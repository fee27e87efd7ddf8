"""A search from files: what ``simpatterns optimize`` does, from Python.

`resolve_scene` picks the scene (a PHYRE template's variant or a named
scene); `optimize_scene` checks the outputs can be written, compiles the goal
(a reward program's text, or the PHYRE task), runs simulated annealing or
random search with a checkpoint beside the JSON output (a second call with the
same settings replays it and goes on), writes the best rollout's JSON, trace
and GIF, and returns an `OptimizeReport`. Ctrl-C is not raised: the report
says ``interrupted`` and how many evaluations the checkpoint kept.

Examples:
    >>> from simpatterns.optimize.run import SearchSettings, optimize_scene
    >>> report = optimize_scene(template="00000", variant=0, settings=SearchSettings(budget=20))  # doctest: +SKIP
    >>> report.result.best_success, report.result.samples  # doctest: +SKIP
    (True, 7)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simpatterns.errors import SimpatternsError
from simpatterns.files import WriteError, atomic_write_json, check_target
from simpatterns.optimize.objective import (
    CheckpointError,
    EvaluationLog,
    Objective,
    RolloutPool,
)
from simpatterns.optimize.search import (
    AnnealConfig,
    SearchResult,
    anneal,
    random_search,
)
from simpatterns.parallel import Backend
from simpatterns.simulators.phyre import Scene

METHODS = ("anneal", "random")


class OptimizeError(SimpatternsError):
    """Settings or files `optimize_scene` cannot use: one line naming the option or the path."""


def resolve_scene(template: str | None = None, variant: int | None = None, scene: str | None = None) -> Scene:
    """A template's variant (default 0) or a named scene (``buckets``); `OptimizeError` when
    neither or both are given, or the template or variant does not exist."""
    from simpatterns.simulators.phyre import get_template

    if scene is not None:
        if template is not None:
            raise OptimizeError("give --scene or --template, not both")
        from simpatterns.envs.scenes import named_scene

        try:
            return named_scene(scene)
        except KeyError as exc:
            raise OptimizeError(str(exc.args[0])) from None
    if template is None:
        raise OptimizeError("give --template T --variant V, or --scene NAME (e.g. --scene buckets)")
    try:
        t = get_template(template)
    except KeyError as exc:
        raise OptimizeError(str(exc.args[0])) from None
    if t.num_variants == 0:
        raise OptimizeError(f"template {t.id} has no shipped variants")
    v = 0 if variant is None else variant
    if not 0 <= v < t.num_variants:
        raise OptimizeError(f"template {t.id} has variants 0..{t.num_variants - 1}, not {v}")
    return t.variant_scene(v)


@dataclass(frozen=True)
class SearchSettings:
    """How the search runs: ``method`` (anneal or random), ``budget`` simulated rollouts,
    ``sparse`` (the program's 0/1 success instead of its dense score), the quantised
    ``bins``^3 action grid, the annealing schedule (``anneal``), ``settle`` (end rollouts
    once everything rests; None: on for scenes without a PHYRE goal) and ``keep_going``
    (spend the whole budget after a success)."""

    method: str = "anneal"
    budget: int = 100
    seed: int = 0
    sparse: bool = False
    bins: int | None = None
    workers: int = 1
    anneal: AnnealConfig = field(default_factory=AnnealConfig)
    settle: bool | None = None
    keep_going: bool = False


@dataclass(frozen=True)
class Outputs:
    """Files to write: the result (with the curve) as JSON, whose checkpoint
    (``<stem>.evaluations.jsonl``) sits beside it; the best rollout's trace; its GIF
    (the scene ``gif_size`` pixels a side)."""

    json: Path | None = None
    trace: Path | None = None
    gif: Path | None = None
    gif_size: int = 256


@dataclass
class OptimizeReport:
    """What `optimize_scene` did: the scene, the reward it optimised (``task``, ``score``
    or ``success``), the search's result (None when interrupted), evaluations replayed
    from the checkpoint, the explanation of the best rollout's program score, and the
    files written (``(what, path)``)."""

    scene: Scene
    reward: str
    objective: Objective
    result: SearchResult | None = None
    replayed: int = 0
    checkpoint: Path | None = None
    kept: int = 0
    interrupted: bool = False
    explain: str | None = None
    written: list[tuple[str, Path]] = field(default_factory=list)

    def header(self, settings: SearchSettings, goal: str | os.PathLike | None) -> str:
        """The two lines that say what is searched."""
        sc = self.scene
        where = f"scene {sc.template}" + (f" variant {sc.variant}" if sc.variant is not None else "")
        return (f"{settings.method} on {where}: {str(goal) if goal else 'PHYRE task success'} "
                f"({'sparse 0/1' if self.reward != 'score' else 'dense score'})\n"
                f"{settings.budget} rollouts at most, seed {settings.seed}")


ProgressFn = Callable[[int, int, float], None]


def optimize_scene(
    scene: Scene | str | None = None,
    goal: str | os.PathLike | None = None,
    *,
    template: str | None = None,
    variant: int | None = None,
    settings: SearchSettings = SearchSettings(),
    outputs: Outputs = Outputs(),
    backend: Backend | None = None,
    on_start: Callable[[OptimizeReport], None] = lambda report: None,
    progress: ProgressFn | None = None,
) -> OptimizeReport:
    """Search an action for ``scene`` (a `Scene`, a named scene such as ``"buckets"``, or
    None with ``template`` and ``variant``: see `resolve_scene`) that achieves ``goal`` (a
    reward program file; None: the PHYRE task's success) and write ``outputs``.

    ``on_start`` sees the report before the search (its `header`); ``progress(done,
    total, best)`` after each batch; ``backend``: where the batches run (None: this
    machine's processes). Raises `OptimizeError` (bad settings, an output that cannot be
    written, a goal file that cannot be read, a checkpoint from other settings), and
    ValueError or `DSLErrors` for an annealing schedule or a program that does not fit.
    """
    _check(settings, goal)
    name = scene if isinstance(scene, str) else None
    if not isinstance(scene, Scene):
        scene = resolve_scene(template, variant, name)
    try:  # before the search: a bad output path fails now, not after it (losing the result)
        for target in (outputs.json, outputs.gif, outputs.trace):
            if target is not None:
                check_target(target)
    except WriteError as exc:
        raise OptimizeError(str(exc)) from None
    program_text = None
    if goal is not None:
        try:
            program_text = Path(goal).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise OptimizeError(f"{goal}: cannot read ({exc})") from None
    if program_text is None and scene.goal is None:
        raise OptimizeError("this scene has no PHYRE goal; give --goal PROGRAM.rwd")
    reward = "task" if program_text is None else ("success" if settings.sparse else "score")
    objective = Objective(scene, program=program_text, reward=reward,
                          stop_when_settled=(scene.goal is None) if settings.settle is None else settings.settle)
    report = OptimizeReport(scene, reward, objective)
    on_start(report)
    checkpoint = _checkpoint(outputs.json, name, scene, program_text, reward, objective)
    report.checkpoint = checkpoint.path if checkpoint is not None else None
    parallel = settings.method == "random" or settings.anneal.batch_size > 1  # one proposal at a time: nothing to share
    try:
        with RolloutPool(objective, settings.workers if parallel else 1, checkpoint=checkpoint,
                         backend=backend) as pool:
            report.result = _search(objective, settings, pool, progress)
    except KeyboardInterrupt:
        report.interrupted = True
        report.kept = len(checkpoint.known) if checkpoint is not None else 0
        return report
    report.replayed = pool.replayed
    _write(report, goal, settings, outputs)
    return report


def _check(settings: SearchSettings, goal: Any) -> None:
    if settings.method not in METHODS:
        raise OptimizeError(f"--method must be anneal or random, got {settings.method!r}")
    if settings.budget < 1:
        raise OptimizeError("--rollouts must be >= 1")
    if settings.sparse and goal is None:
        raise OptimizeError("--sparse needs --goal (without a goal the PHYRE task reward is already sparse)")


def _checkpoint(out_json: Path | None, name: str | None, scene: Scene, program_text: str | None, reward: str,
                objective: Objective) -> EvaluationLog | None:
    """Every evaluation kept as it finishes, beside the JSON: a re-run replays them and goes on."""
    if out_json is None:
        return None
    settings = {"scene": name, "template": scene.template, "variant": scene.variant, "program": program_text,
                "reward": reward, "settle": objective.stop_when_settled, "max_steps": objective.max_steps}
    try:
        return EvaluationLog(out_json.with_name(out_json.stem + ".evaluations.jsonl"), settings)
    except CheckpointError as exc:
        raise OptimizeError(str(exc)) from None


def _search(objective: Objective, settings: SearchSettings, pool: RolloutPool,
            progress: ProgressFn | None) -> SearchResult:
    if settings.method == "anneal":
        return anneal(objective, settings.budget, seed=settings.seed, config=settings.anneal, bins=settings.bins,
                      pool=pool, stop_on_success=not settings.keep_going, progress=progress)
    return random_search(objective, settings.budget, seed=settings.seed, bins=settings.bins,
                         batch_size=max(settings.anneal.batch_size, settings.workers), pool=pool,
                         stop_on_success=not settings.keep_going, progress=progress)


def _write(report: OptimizeReport, goal: Any, settings: SearchSettings, outputs: Outputs) -> None:
    res = report.result
    assert res is not None
    trace = res.best_trace
    assert trace is not None
    program = report.objective.reward_program
    if program is not None:
        report.explain = str(program.evaluate(None, trace, explain=True).explain_text())
    if outputs.json is not None:
        data = {"scene": report.scene.template, "variant": report.scene.variant, "goal": str(goal) if goal else None,
                "reward": report.reward, "seed": settings.seed, **res.to_json()}
        _written(report, "result", outputs.json, lambda: atomic_write_json(outputs.json, data))
    if outputs.trace is not None:
        _written(report, "best trace", outputs.trace, lambda: trace.save(outputs.trace))
    if outputs.gif is not None:
        from simpatterns.annotate.annotator import annotate
        from simpatterns.annotate.plots import captioned_gif
        from simpatterns.dsl import builtin_library

        _written(report, "best rollout", outputs.gif,
                 lambda: captioned_gif(trace, annotate(trace, builtin_library()), outputs.gif, stride=4,
                                               size=outputs.gif_size))


def _written(report: OptimizeReport, what: str, path: Path, write: Callable[[], Any]) -> None:
    try:
        write()
    except OSError as exc:  # a WriteError names the user's path
        raise OptimizeError(str(exc)) from None
    report.written.append((what, path))
