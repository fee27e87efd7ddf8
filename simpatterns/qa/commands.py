"""CLI: ``simpatterns qa generate | eval | score | report | library-curve | importance | self-discover``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer
from rich.table import Table

from simpatterns.cli_support import executor_options, fail, interrupted, out as console, print_table, warn
from simpatterns.parallel import LOCAL, Backend

qa_app = typer.Typer(help="The Q&A benchmark: questions about rollouts, asked with or without annotations.",
                     no_args_is_help=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    fail(message, code)


def _library(spec: str, trust_evolved: bool = False) -> Any:
    from simpatterns.detectors.library import LibraryError, PatternLibrary

    try:
        return PatternLibrary.builtin() if spec == "builtin" else PatternLibrary.load(spec, trust_evolved=trust_evolved)
    except LibraryError as exc:
        _fail(str(exc))


def _parse_ids(spec: str) -> tuple[int, ...]:
    """'1-17,22' -> (1, ..., 17, 22); 'A3' and names allowed."""
    from simpatterns.qa.templates import parse_template_ids

    try:
        return parse_template_ids(spec)
    except KeyError as exc:
        _fail(f"--templates: {exc.args[0]}")
    except ValueError as exc:
        _fail(f"--templates {exc}")


# ------------------------------------------------------------------ shared LLM options
LLM = Annotated[str, typer.Option("--llm", help="LLM backend: openai[:MODEL], vllm[:MODEL], replay:FILE, or the "
                                               "local backend (see `simpatterns llm --help`).")]
BASE_URL = Annotated[Optional[str], typer.Option("--base-url", envvar="SIMPATTERNS_LLM_BASE_URL",
                                                 help="OpenAI-compatible server, e.g. http://localhost:8000/v1")]
MODEL = Annotated[Optional[str], typer.Option("--model", envvar="SIMPATTERNS_LLM_MODEL", help="Model name.")]
CONCURRENCY = Annotated[int, typer.Option("--concurrency", min=1, help="Requests in flight.")]
TIMEOUT = Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds per request attempt.")]
MAX_TOKENS_TOTAL = Annotated[Optional[int], typer.Option("--max-total-tokens", min=1,
                                                         help="Tokens of the whole command, at most (prompt + answers).")]
RECORD = Annotated[Optional[Path], typer.Option("--record", help="Transcript file (default: OUT/transcript.jsonl).")]
NO_RECORD = Annotated[bool, typer.Option("--no-record", help="Keep no transcript.")]
CONDITIONS = Annotated[str, typer.Option("--conditions", "-c", help="Comma-separated: annotation, frames, "
                                         "frames+annotation, state, summary, objects.")]
LIBRARY = Annotated[str, typer.Option("--library", "-l", help="'builtin' or a library directory.")]
TRUST = Annotated[bool, typer.Option("--trust-evolved", help="Run LLM-written detectors in this process (only for "
                                                           "code you have read).")]
BUDGET_CHARS = Annotated[int, typer.Option("--max-chars", min=200, help="Characters of annotation (and of raw "
                                                                         "state) text.")]
FPS = Annotated[float, typer.Option("--fps", min=0.01, help="Frames condition: images per second of recording.")]
MAX_IMAGES = Annotated[int, typer.Option("--max-images", min=2, help="Frames condition: at most this many images.")]
IMAGE_SIZE = Annotated[int, typer.Option("--image-size", min=32, help="Frames condition: image side in pixels.")]
TEMPERATURE = Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature.")]
MAX_TOKENS = Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per answer.")]
SEED = Annotated[int, typer.Option("--seed", help="Seed of every random choice (and of the requests).")]
LIMIT = Annotated[Optional[int], typer.Option("--limit", min=1, help="Only the first N questions.")]
WORKERS = Annotated[int, typer.Option("--workers", "-j", min=1, help="Processes for simulation and annotation.")]
QUIET = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


def _client(llm: str, base_url: str | None, model: str | None, concurrency: int, timeout: float,
            max_total_tokens: int | None, transcript: Path | None) -> Any:
    from simpatterns.llm import LLMError, make_client

    try:
        return make_client(llm, base_url=base_url, model=model, concurrency=concurrency, timeout_s=timeout,
                           max_total_tokens=max_total_tokens, transcript=transcript)
    except LLMError as exc:
        _fail(str(exc))


def _require_images(client: Any, conditions: list[str]) -> None:
    """The frames conditions send images: refuse in one line before any question when the model takes none."""
    from simpatterns.llm import LLMError

    shown = [c for c in conditions if "frames" in c]
    if not shown:
        return
    try:
        client.require_images()
    except LLMError as exc:
        client.close()
        _fail(f"--conditions {','.join(shown)}: {exc}")


def _questions(path: Path, limit: int | None) -> list[Any]:
    from simpatterns.qa.questions import QuestionFormatError, read_questions

    try:
        qs = read_questions(path)
    except QuestionFormatError as exc:
        _fail(str(exc))
    if not qs:
        _fail(f"{path}: no questions")
    return qs[:limit] if limit else qs


def _settings(conditions: str, temperature: float, max_tokens: int, seed: int, budget_chars: int, fps: float,
              max_images: int, image_size: int) -> Any:
    from simpatterns.qa.context import ContextOptions, check_conditions
    from simpatterns.qa.runner import EvalSettings

    try:
        conds = check_conditions(conditions.split(","))
    except ValueError as exc:
        _fail(f"--conditions: {exc}")
    return EvalSettings(conds, temperature, max_tokens, seed,
                        ContextOptions(budget_chars=budget_chars, fps=fps, max_images=max_images, image_size=image_size))


def _transcript(out: Path, record: Path | None, no_record: bool) -> Path | None:
    return None if no_record else (record or out / "transcript.jsonl")


def _run_info(questions: Path, llm: str, client: Any, library: str) -> dict[str, Any]:
    from simpatterns.qa.questions import QUESTIONS_FILE

    qpath = questions / QUESTIONS_FILE if questions.is_dir() else questions
    try:
        model = client.model
    except Exception:  # a server that cannot be reached yet: the run fails later with a clear error
        model = "?"
    return {"questions_path": str(qpath.resolve()), "llm": {"spec": llm, "model": model}, "library_source": library}


# ------------------------------------------------------------------ generate
@qa_app.command("generate")
@executor_options
def generate_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Data set directory (questions.jsonl, rollouts/).")],
    scenes: Annotated[int, typer.Option("--scenes", min=1, help="Scene instances (one rollout each).")] = 100,
    per_rollout: Annotated[int, typer.Option("--questions-per-rollout", min=1, max=27, help="Questions asked per rollout.")] = 10,
    templates: Annotated[str, typer.Option("--templates", help="Question templates, e.g. 1-27 or 1-17,22.")]
    = "1-27",
    phyre_templates: Annotated[Optional[str], typer.Option(
        "--phyre-templates", help="PHYRE templates to draw scenes from (comma-separated ids); default all 25.")] = None,
    library: LIBRARY = "builtin",
    stable: Annotated[bool, typer.Option("--stable/--no-stable", help="Check each answer under 1 px nudges of "
                                         "the action (4 extra rollouts per scene).")] = True,
    seed: SEED = 0,
    workers: WORKERS = 1,
    quiet: QUIET = False,
    backend: Backend = LOCAL,
) -> None:
    """Simulate scene instances (solution or near-miss, 50/50) and write seeded questions with gold answers."""
    from collections import Counter

    from simpatterns.qa.generate import GenerateConfig, generate_dataset

    cfg = GenerateConfig(scenes=scenes, questions_per_rollout=per_rollout, seed=seed,
                         question_templates=_parse_ids(templates), stable_check=stable,
                         phyre_templates=tuple(t.strip() for t in phyre_templates.split(",")) if phyre_templates
                         else None)
    lib = _library(library)
    try:
        qs = generate_dataset(out, cfg, lib, workers=workers, progress=not quiet, log=console.print,
                              backend=backend)
    except (ValueError, LookupError) as exc:
        _fail(str(exc))
    fam = Counter(q.family for q in qs)
    yn = Counter(q.answer for q in qs if q.answer_type == "yesno")
    kinds = Counter(q.action_kind for q in qs if q.id.endswith("q00"))
    console.print(f"{len(qs)} questions on {len({q.rollout_id for q in qs})} rollouts "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); families: "
                  f"{', '.join(f'{k} {v}' for k, v in sorted(fam.items()))}; yes/no: {yn.get('yes', 0)}/{yn.get('no', 0)}; "
                  f"stable: {sum(1 for q in qs if q.stable)}")
    console.print(f"written: {str(out / 'questions.jsonl')}")


# ------------------------------------------------------------------ eval
@qa_app.command("eval")
@executor_options
def eval_cmd(
    questions: Annotated[Path, typer.Argument(help="A data set directory or its questions.jsonl.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run directory (resumed if it exists).")],
    llm: LLM = "openai",
    base_url: BASE_URL = None,
    model: MODEL = None,
    conditions: CONDITIONS = "annotation",
    library: LIBRARY = "builtin",
    trust_evolved: TRUST = False,
    budget_chars: BUDGET_CHARS = 4000,
    fps: FPS = 2.0,
    max_images: MAX_IMAGES = 12,
    image_size: IMAGE_SIZE = 256,
    temperature: TEMPERATURE = 0.0,
    max_tokens: MAX_TOKENS = 512,
    seed: SEED = 0,
    concurrency: CONCURRENCY = 8,
    timeout: TIMEOUT = 120.0,
    max_total_tokens: MAX_TOKENS_TOTAL = None,
    record: RECORD = None,
    no_record: NO_RECORD = False,
    limit: LIMIT = None,
    workers: WORKERS = 1,
    quiet: QUIET = False,
    backend: Backend = LOCAL,
) -> None:
    """Ask the questions under each condition; answers are checkpointed, a re-run resumes."""
    from simpatterns.qa.context import ContextBuilder
    from simpatterns.qa.runner import QARunError, run_eval

    qs = _questions(questions, limit)
    settings = _settings(conditions, temperature, max_tokens, seed, budget_chars, fps, max_images, image_size)
    lib = _library(library, trust_evolved)
    builder = ContextBuilder.for_questions(questions, lib, options=settings.options)
    client = _client(llm, base_url, model, concurrency, timeout, max_total_tokens, _transcript(out, record, no_record))
    _require_images(client, settings.conditions)
    try:
        outcome = run_eval(qs, builder, client, out, settings, run_info=_run_info(questions, llm, client, library),
                           progress=not quiet, workers=workers, log=console.print, backend=backend)
    except QARunError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        interrupted(f"answers so far are in {out}")
    finally:
        client.close()
    console.print(f"answered {outcome.answered} (already had {outcome.already}); failed {outcome.failed}"
                  + (f"; stopped: {outcome.stopped}" if outcome.stopped else ""))
    for e in outcome.errors[:5]:
        warn(f"failed {e}")
    _print_scores(out, None)
    if not outcome.complete:
        raise typer.Exit(1)


def _print_scores(run: Path, questions: Path | None) -> None:
    from simpatterns.qa.questions import FAMILIES
    from simpatterns.qa.report import score_run
    from simpatterns.qa.scoring import find

    rs = score_run(run, questions)
    asked = len({g.qid for g in rs.graded})
    table = Table(title=f"accuracy % (95% interval), {asked} questions")
    for col in ("condition", "all", *FAMILIES, "unparsable %"):
        table.add_column(col)
    for c in rs.conditions:
        cells = []
        for g in ["all"] + [f"family:{f}" for f in FAMILIES]:
            s = find(rs.scores, c, g)
            cells.append("-" if s is None else f"{100 * s.accuracy:.1f} ({100 * s.ci[0]:.0f}-{100 * s.ci[1]:.0f})")
        s = find(rs.scores, c, "all")
        table.add_row(c, *cells, f"{100 * s.unparsable:.1f}" if s else "-")
    for name, attr in (("random baseline", "random"), ("majority baseline", "majority")):
        cells = []
        for g in ["all"] + [f"family:{f}" for f in FAMILIES]:
            s = find(rs.scores, rs.conditions[0], g)
            cells.append("-" if s is None else f"{100 * getattr(s, attr):.1f}")
        table.add_row(name, *cells, "")
    print_table(table)


@qa_app.command("score")
def score_cmd(
    run: Annotated[Path, typer.Argument(help="A run directory of `qa eval`.")],
    questions: Annotated[Optional[Path], typer.Option("--questions", help="Questions (default: the run's).")] = None,
) -> None:
    """Grade a run's stored responses (offline); writes scores.json and graded.jsonl."""
    from simpatterns.qa.questions import QuestionFormatError
    from simpatterns.qa.runner import QARunError

    try:
        _print_scores(run, questions)
    except (QARunError, QuestionFormatError) as exc:
        _fail(str(exc))
    console.print(f"written: {str(run / 'scores.json')}")


@qa_app.command("report")
def report_cmd(
    sources: Annotated[list[Path], typer.Argument(help="Run directories and study directories.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Report directory (default: FIRST/report).")]
    = None,
    title: Annotated[str, typer.Option("--title")] = "Q&A benchmark report",
) -> None:
    """A markdown page with plots: accuracy by condition and family, per template, library studies."""
    from simpatterns.qa.questions import QuestionFormatError
    from simpatterns.qa.report import write_report
    from simpatterns.qa.runner import QARunError

    try:
        md = write_report(sources, out, title)
    except (QARunError, QuestionFormatError) as exc:
        _fail(str(exc))
    pngs = sorted(p.name for p in md.parent.glob("*.png"))
    console.print(f"written: {md} ({len(pngs)} plots: {str(', '.join(pngs))})")


# ------------------------------------------------------------------ studies
def _study_setup(questions: Path, out: Path, llm: str, base_url: str | None, model: str | None, condition: str,
                 library: str, trust_evolved: bool, budget_chars: int, temperature: float, max_tokens: int, seed: int,
                 concurrency: int, timeout: float, max_total_tokens: int | None, record: Path | None,
                 no_record: bool, limit: int | None) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    from simpatterns.qa.context import ContextBuilder

    qs = _questions(questions, limit)
    settings = _settings(condition, temperature, max_tokens, seed, budget_chars, 2.0, 12, 256)
    if len(settings.conditions) != 1:
        _fail("--condition: a study uses one condition")
    lib = _library(library, trust_evolved)
    builder = ContextBuilder.for_questions(questions, lib, options=settings.options)
    client = _client(llm, base_url, model, concurrency, timeout, max_total_tokens, _transcript(out, record, no_record))
    _require_images(client, settings.conditions)
    return qs, settings, builder, client, _run_info(questions, llm, client, library)


@qa_app.command("library-curve")
@executor_options
def library_curve_cmd(
    questions: Annotated[Path, typer.Argument(help="A data set directory or its questions.jsonl.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Study directory (resumed if it exists).")],
    sizes: Annotated[str, typer.Option("--sizes", help="Library sizes, e.g. 0,1,2,4,8,16,all.")] = "0,1,2,4,8,16,all",
    trials: Annotated[int, typer.Option("--subsets", min=1, help="Random subsets per size.")] = 3,
    llm: LLM = "openai",
    base_url: BASE_URL = None,
    model: MODEL = None,
    condition: Annotated[str, typer.Option("--condition", help="annotation, frames+annotation or summary.")]
    = "annotation",
    library: LIBRARY = "builtin",
    trust_evolved: TRUST = False,
    budget_chars: BUDGET_CHARS = 4000,
    temperature: TEMPERATURE = 0.0,
    max_tokens: MAX_TOKENS = 512,
    seed: SEED = 0,
    concurrency: CONCURRENCY = 8,
    timeout: TIMEOUT = 120.0,
    max_total_tokens: MAX_TOKENS_TOTAL = None,
    record: RECORD = None,
    no_record: NO_RECORD = False,
    limit: LIMIT = None,
    workers: WORKERS = 1,
    backend: Backend = LOCAL,
) -> None:
    """Accuracy against library size (§4.2): random pattern subsets of growing size, several trials each."""
    from simpatterns.qa.report import plot_library_curve
    from simpatterns.qa.studies import library_curve, parse_sizes

    qs, settings, builder, client, info = _study_setup(questions, out, llm, base_url, model, condition, library,
                                                       trust_evolved, budget_chars, temperature, max_tokens, seed,
                                                       concurrency, timeout, max_total_tokens, record, no_record, limit)
    try:
        size_list = parse_sizes(sizes, len(builder.library))
        curve = library_curve(qs, builder, client, out, size_list, trials, seed, settings, run_info=info,
                              workers=workers, log=console.print, backend=backend)
    except (ValueError, RuntimeError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        interrupted(f"finished work is kept in {out}")
    finally:
        client.close()
    png = plot_library_curve(curve, out / "library_curve.png")
    table = Table(title=f"library-size curve ({curve['condition']}, {len(qs)} questions)")
    for col in ("patterns shown", "trials", "mean accuracy %", "95% interval"):
        table.add_column(col)
    for p in curve["summary"]:
        table.add_row(str(p["size"]), str(p["trials"]), f"{100 * p['mean']:.1f}",
                      f"{100 * p['ci'][0]:.1f}-{100 * p['ci'][1]:.1f}")
    print_table(table)
    console.print(f"written: {str(out / 'curve.json')}, {png}")


@qa_app.command("importance")
@executor_options
def importance_cmd(
    questions: Annotated[Path, typer.Argument(help="A data set directory or its questions.jsonl.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Study directory (resumed if it exists).")],
    labels: Annotated[Optional[str], typer.Option("--hold-out", help="Patterns to hold out (comma-separated); "
                                                  "default all.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Runs per point with different request seeds.")]
    = 1,
    llm: LLM = "openai",
    base_url: BASE_URL = None,
    model: MODEL = None,
    condition: Annotated[str, typer.Option("--condition")] = "annotation",
    library: LIBRARY = "builtin",
    trust_evolved: TRUST = False,
    budget_chars: BUDGET_CHARS = 4000,
    temperature: TEMPERATURE = 0.0,
    max_tokens: MAX_TOKENS = 512,
    seed: SEED = 0,
    concurrency: CONCURRENCY = 8,
    timeout: TIMEOUT = 120.0,
    max_total_tokens: MAX_TOKENS_TOTAL = None,
    record: RECORD = None,
    no_record: NO_RECORD = False,
    limit: LIMIT = None,
    workers: WORKERS = 1,
    backend: Backend = LOCAL,
) -> None:
    """Leave-one-out importance (§4.4): drop a pattern and its dependents; importance = % accuracy drop."""
    from simpatterns.qa.report import plot_importance
    from simpatterns.qa.studies import importance

    qs, settings, builder, client, info = _study_setup(questions, out, llm, base_url, model, condition, library,
                                                       trust_evolved, budget_chars, temperature, max_tokens, seed,
                                                       concurrency, timeout, max_total_tokens, record, no_record, limit)
    try:
        imp = importance(qs, builder, client, out, [s.strip() for s in labels.split(",")] if labels else None,
                         repeats, settings, run_info=info, workers=workers, log=console.print,
                         backend=backend)
    except (ValueError, RuntimeError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        interrupted(f"finished work is kept in {out}")
    finally:
        client.close()
    png = plot_importance(imp, out / "importance.png")
    table = Table(title=f"leave-one-out importance ({imp['condition']}, full library {100 * imp['baseline']:.1f}%)")
    for col in ("pattern", "removed", "accuracy %", "importance %"):
        table.add_column(col)
    for r in sorted(imp["patterns"], key=lambda r: -r["importance"]):
        table.add_row(str(r["label"]), str(len(r["removed"])), f"{100 * r['accuracy']:.1f}",
                      f"{r['importance']:+.1f}")
    print_table(table)
    console.print(f"written: {str(out / 'importance.json')}, {png}")


@qa_app.command("self-discover")
@executor_options
def self_discover_cmd(
    questions: Annotated[Path, typer.Argument(help="A data set directory or its questions.jsonl.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory (resumed if it exists).")],
    k: Annotated[int, typer.Option("--k", min=1, help="Labels the LLM may propose per round.")] = 3,
    margin: Annotated[float, typer.Option("--margin", help="Held-out accuracy gain (0.02 = 2 points) to keep a "
                                          "pattern.")] = 0.02,
    heldout: Annotated[float, typer.Option("--heldout", min=0.05, max=0.95, help="Share of rollouts held out.")]
    = 0.5,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="Propose-evolve-test rounds.")] = 1,
    budget: Annotated[int, typer.Option("--samples", min=1, help="Evolver samples per proposed label.")] = 16,
    evolve_config: Annotated[Optional[Path], typer.Option("--evolve-config", help="TOML overriding evolve "
                                                          "settings.")] = None,
    llm: LLM = "openai",
    base_url: BASE_URL = None,
    model: MODEL = None,
    library: LIBRARY = "builtin",
    trust_evolved: TRUST = False,
    budget_chars: BUDGET_CHARS = 4000,
    temperature: TEMPERATURE = 0.0,
    max_tokens: MAX_TOKENS = 512,
    seed: SEED = 0,
    concurrency: CONCURRENCY = 8,
    timeout: TIMEOUT = 120.0,
    max_total_tokens: MAX_TOKENS_TOTAL = None,
    record: RECORD = None,
    no_record: NO_RECORD = False,
    limit: LIMIT = None,
    backend: Backend = LOCAL,
) -> None:
    """Self-discovery (§4.1): Q&A reasoning -> new labels -> evolved detectors, kept only if held-out Q&A improves."""
    from simpatterns.evolve.config import ConfigError, EvolveConfig, read_toml
    from simpatterns.qa.selfdiscovery import SelfDiscoveryConfig, self_discover

    qs, settings, builder, client, info = _study_setup(questions, out, llm, base_url, model, "annotation", library,
                                                       trust_evolved, budget_chars, temperature, max_tokens, seed,
                                                       concurrency, timeout, max_total_tokens, record, no_record, limit)
    try:
        overrides = read_toml(evolve_config).get("evolve", {}) if evolve_config else {}
        ecfg = EvolveConfig.from_json(overrides, where=str(evolve_config or "defaults"))
    except ConfigError as exc:
        _fail(str(exc))
    ecfg.samples_per_label = budget
    ecfg.seed = seed
    cfg = SelfDiscoveryConfig(k=k, margin=margin, heldout_fraction=heldout, rounds=rounds, seed=seed, evolve=ecfg,
                              settings=settings)
    try:
        record_ = self_discover(qs, builder.root, builder.library, client, out, cfg, run_info=info, log=console.print,
                                backend=backend)
    except (ValueError, RuntimeError) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        interrupted(f"finished work is kept in {out}")
    finally:
        client.close()
    table = Table(title=f"self-discovery: {record_['heldout_questions']} held-out questions, margin "
                        f"{100 * margin:.1f} points")
    for col in ("round", "label", "kept", "why"):
        table.add_column(col)
    for r in record_["rounds"]:
        for d in r["decisions"]:
            table.add_row(str(r["round"]), str(d["label"]), "yes" if d["kept"] else "no", str(d["why"]))
    print_table(table)
    console.print(f"library: {str(record_['library'])}; decisions: {str(out / 'decisions.json')}")


def register(app: typer.Typer) -> None:
    app.add_typer(qa_app, name="qa")
