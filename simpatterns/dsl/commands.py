"""CLI: ``simpatterns reward check PROGRAM``, ``simpatterns reward eval
PROGRAM TRACES...`` and ``simpatterns reward compile GOAL`` (a goal in words
-> a checked program, with an LLM; its LLM options are the ones every
command that talks to a model shares, from `simpatterns.llm.commands`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from simpatterns.dsl.compact import DEFAULT_BUDGET_TOKENS
from simpatterns.cli_support import EXIT_PARTIAL, err, fail, new_table, one_line, out as console, print_table
from simpatterns.llm.commands import (
    APIKey,
    BaseURL,
    Concurrency,
    Grammar,
    LLMSpec,
    MaxRequests,
    MaxTotalTokens,
    Model,
    Record,
    Retries,
    Timeout,
    client_from_options,
)


reward_app = typer.Typer(
    name="reward",
    help="Reward programs (the DSL of paper §3.3): check them, evaluate them on traces.",
    no_args_is_help=True,
)

LIBRARY_HELP = "'builtin', 'builtin:3d', a library directory, or 'none' to skip pattern checks"


def _library(spec: str):
    if spec.lower() == "none":
        return None
    from simpatterns.detectors.commands import open_library

    return open_library(spec)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{path}: cannot read ({exc})")


def _print_errors(errors) -> None:
    # on stderr, as every error; plain print: the messages carry carets that rich markup must not touch
    typer.echo(str(errors), err=True)


@reward_app.command("check")
def check_cmd(
    program: Path = typer.Argument(..., help="reward program file (.rwd)"),
    library: str = typer.Option("builtin", "--library", "-l", help=LIBRARY_HELP),
    bodies: Optional[str] = typer.Option(None, "--bodies", help="comma-separated body names to check against"),
    trace: Optional[Path] = typer.Option(None, "--trace", help="check body names against this trace (.npz)"),
    template: Optional[str] = typer.Option(
        None, "--template", "-t", help="a PHYRE template: list the bodies, roles and colour classes a program "
        "can name there, and check the program against every shipped variant"),
    variant: Optional[int] = typer.Option(None, "--variant", help="with --template: only this variant"),
    as_json: bool = typer.Option(False, "--json", help="print errors as JSON lines"),
    canonical: bool = typer.Option(False, "--canonical", help="print the canonical form of a valid program"),
) -> None:
    """Parse and check a program; print every error with its position. Exit 1 on errors."""
    from simpatterns.dsl import DSLError, DSLErrors, check, format_program, parse

    text = _read(program)
    names: list | None = [b.strip() for b in bodies.split(",") if b.strip()] if bodies else None
    if trace is not None:
        names = (names or []) + list(_load_trace(trace).bodies)
    lib = _library(library)
    scenes = _template_scenes(template, variant) if template is not None else []
    try:
        parsed = parse(text, filename=str(program))
        errors = check(parsed, lib, names)
        if scenes and not errors:
            errors = _check_scenes(parsed, lib, scenes)
    except DSLError as exc:
        parsed, errors = None, [exc]
    if scenes and not as_json:
        _print_scene(scenes[0], parsed)
    if as_json:
        for e in errors:
            typer.echo(json.dumps(e.to_json()))
    elif errors:
        _print_errors(DSLErrors(errors))
    if errors:
        raise typer.Exit(1)
    assert parsed is not None
    if canonical:
        typer.echo(format_program(parsed), nl=False)
    elif not as_json:
        n = len(parsed.clauses)
        fits = f"; fits {len(scenes)} variant{'s' if len(scenes) != 1 else ''} of template {template}" if scenes else ""
        console.print(f"ok {program}: {n} clause{'s' if n != 1 else ''}{fits}")


def _template_scenes(template: str, variant: int | None) -> list[tuple[str, list]]:
    """(label, bodies with the agent's ball) of a template's shipped variants (or one)."""
    from simpatterns.dsl.synthesize import phyre_scene_bodies
    from simpatterns.simulators.phyre import get_template

    try:
        t = get_template(template)
        variants = range(t.num_variants) if variant is None else [variant]
        out = [(f"template {t.id} variant {v}", phyre_scene_bodies(f"{t.id}:{v}")) for v in variants]
    except (LookupError, IndexError, ValueError) as exc:
        fail(f"--template {template}" + (f" --variant {variant}" if variant is not None else "") + f": {exc}", 2)
    if not out:
        fail(f"--template {template}: no shipped variants", 2)
    return out


def _check_scenes(parsed, lib, scenes: list[tuple[str, list]]) -> list:
    """The body errors of ``parsed`` in each scene, each distinct error once, naming the first scene."""
    from simpatterns.dsl.program import RewardProgram

    reward = RewardProgram.from_parsed(parsed, lib)
    seen: dict[tuple, object] = {}
    for label, body_list in scenes:
        for e in reward.check_bodies(body_list):
            key = (e.line, e.column, e.message)
            if key not in seen:
                e.message = f"{e.message} (in {label})"
                seen[key] = e
    return list(seen.values())


def _print_scene(scene: tuple[str, list], parsed) -> None:
    """The bodies of one scene and what each role and colour phrase names there (fixed layout)."""
    from simpatterns.dsl.references import SceneBodies
    from simpatterns.dsl.syntax import Str, walk

    label, body_list = scene
    sc = SceneBodies(body_list)
    typer.echo(f"{label}: {len(sc.bodies)} bodies")
    width = max(len(b.name) for b in sc.bodies)
    typer.echo(f"  {'body':<{width}}  {'colour':<7} {'shape':<6} role")
    for b in sc.bodies:
        typer.echo(f"  {b.name:<{width}}  {b.colour:<7} {b.shape:<6} {b.role}")
    typer.echo("names by role and colour (any of the bodies listed):")
    refs = sc.references()
    width = max(len(r) for r, _ in refs) + 2
    for phrase, members in refs:
        typer.echo(f"  {chr(34) + phrase + chr(34):<{width}}  {', '.join(members)}")
    if parsed is None:
        return
    phrases = sorted({n.value for n in walk(parsed.root) if isinstance(n, Str) and sc.reference(n.value) is not None})
    for phrase in phrases:
        members = sc.resolve_names(phrase) or ()
        typer.echo(f'program: "{phrase}" names ' + (", ".join(members) if members else
                                                      "no body here: clauses about it cannot hold"))


def _load_trace(path: Path):
    from simpatterns.trace import Trace, TraceFormatError

    try:
        return Trace.load(path)
    except TraceFormatError as exc:
        fail(f"{exc}")


def _eval_inputs(paths: list[Path]) -> list[Path]:
    """Files as given; a folder gives its traces (``*.npz``) and annotations (``*.jsonl``), recursively."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith(".")
                           and (q.name.endswith(".npz") or q.name.endswith(".jsonl")) and q.name != "index.jsonl")
            if not found:
                fail(f"{p}: no traces (.npz) or annotations (.jsonl) in this folder")
            files += found
        elif not p.exists():
            fail(f"{p}: no such file or folder")
        else:
            files.append(p)
    return files


@reward_app.command("eval")
def eval_cmd(
    program: Path = typer.Argument(..., help="reward program file (.rwd)"),
    traces: list[Path] = typer.Argument(..., help="traces (.npz, annotated with --library), annotations (.jsonl) "
                                                  "or folders of them"),
    library: str = typer.Option("builtin", "--library", "-l", help=LIBRARY_HELP),
    explain: bool = typer.Option(False, "--explain", "-e", help="per-clause success, score and why"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per trace"),
) -> None:
    """Evaluate a program on traces: success and dense score per trace (and per clause).

    A trace is annotated with the patterns the program reads (and their
    dependencies) from --library; an annotation (.jsonl) is read as it is. A
    file that cannot be read or evaluated is reported and skipped (exit 1)."""
    from simpatterns.annotation import Annotation, AnnotationFormatError
    from simpatterns.dsl import DSLError, DSLErrors, RewardProgram
    from simpatterns.trace import Trace, TraceFormatError

    lib = _library(library)
    text = _read(program)
    try:
        reward = RewardProgram.from_text(text, lib, filename=str(program))
    except DSLErrors as exc:
        _print_errors(exc)
        raise typer.Exit(1) from None
    files = _eval_inputs(traces)
    if lib is None and reward.patterns and any(not f.name.endswith(".jsonl") for f in files):
        fail("annotating a trace needs a library (--library builtin|PATH)")
    table = new_table(f"{program} on {len(files)} trace(s)",
                      ("trace", "success", "score", *[f"c{k + 1}" for k in range(len(reward.clauses))]))
    scores: list[float] = []
    n_success = 0
    bad: list[str] = []
    for path in files:
        ann, trace = None, None
        try:
            if path.name.endswith(".jsonl"):
                ann = Annotation.load(path)
            else:
                trace = Trace.load(path)
                body_errors = reward.check_bodies(trace.names)
                if body_errors:
                    _print_errors(DSLErrors(body_errors))
                    bad.append(str(path))
                    continue
            res = reward.evaluate(ann, trace, explain=explain or as_json)
        except (TraceFormatError, AnnotationFormatError, DSLError) as exc:
            err.print(f"error: {path}: {one_line(str(exc))}" if str(path) not in str(exc) else
                      f"error: {one_line(str(exc))}")
            bad.append(str(path))
            continue
        scores.append(res.score)
        n_success += bool(res.success)
        if as_json:
            typer.echo(json.dumps({"trace": str(path), **res.to_json()}))
            continue
        if explain:
            typer.echo(f"== {path}")
            typer.echo(res.explain_text())
        table.add_row(str(path), "yes" if res.success else "no", f"{res.score:.3f}",
                      *[f"{c.score:.2f}" for c in res.clauses])
    if not as_json:
        print_table(table)
        for k, t in enumerate(reward.clauses, start=1):
            console.print(f"  c{k}: {t}", soft_wrap=False)  # wrapped at the terminal's width
        if scores:
            console.print(f"{len(scores)} trace(s): {n_success} succeeded, mean score {sum(scores) / len(scores):.3f}"
                          + (f"; {len(bad)} could not be evaluated" if bad else ""))
    if bad:
        raise typer.Exit(EXIT_PARTIAL)


def _scene_bodies(spec: str):
    """``TEMPLATE:VARIANT`` -> the scene's `Body` records (with the action ball)."""
    from simpatterns.dsl.synthesize import phyre_scene_bodies

    try:
        return phyre_scene_bodies(spec)
    except ValueError as exc:
        fail(f"--scene: {exc}", 2)
    except Exception as exc:  # unknown template / variant: say which
        fail(f"cannot load scene {spec!r}: {type(exc).__name__}: {exc}", 2)


@reward_app.command("compile")
def compile_cmd(
    goal: Annotated[str, typer.Argument(help="The goal in words, e.g. \"Make the green ball touch the blue bar\".")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write the program here (.rwd).")] = None,
    scene: Annotated[Optional[str], typer.Option(
        "--scene", help="TEMPLATE:VARIANT: name the scene's bodies in the prompt and check them.")] = None,
    bodies: Annotated[Optional[str], typer.Option(
        "--bodies", help="Comma-separated body names (instead of --scene).")] = None,
    library: Annotated[str, typer.Option(
        "--library", "-l", help="'builtin' or a library directory.")] = "builtin",
    examples: Annotated[Optional[Path], typer.Option(
        "--examples", help="Directory of few-shot *.rwd goals (default: examples/goals).")] = None,
    no_examples: Annotated[bool, typer.Option("--no-examples", help="No few-shot examples.")] = False,
    n: Annotated[int, typer.Option("--samples", "-n", help="Candidate programs sampled per attempt (samples).")] = 4,
    attempts: Annotated[int, typer.Option("--attempts", "-k", help="Attempts (1 + repairs).")] = 3,
    temperature: Annotated[float, typer.Option("--temperature", help="Sampling temperature.")] = 0.7,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per answer.")] = 1024,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the requests.")] = 0,
    report: Annotated[Optional[Path], typer.Option(
        "--attempts-log", help="Write every attempt, candidate and error as JSON.")] = None,
    llm: LLMSpec = "openai",
    base_url: BaseURL = None,
    model: Model = None,
    api_key: APIKey = None,
    grammar: Grammar = "auto",
    grammar_kind: Annotated[str, typer.Option(
        "--grammar-kind", help="specialised (the library's patterns and the scene's bodies, so programs "
        "check by construction) or generic (the DSL grammar).")] = "specialised",
    prompt: Annotated[str, typer.Option(
        "--prompt", help="auto (compact for llama.cpp and in-process models), full, compact.")] = "auto",
    prompt_budget: Annotated[int, typer.Option(
        "--max-prompt-tokens", help="Compact prompt size limit in tokens (about 4 characters each).")] = DEFAULT_BUDGET_TOKENS,
    record: Record = None,
    timeout: Timeout = None,
    concurrency: Concurrency = None,
    retries: Retries = 4,
    max_requests: MaxRequests = None,
    max_total_tokens: MaxTotalTokens = None,
) -> None:
    """Compile a goal in words into a checked reward program with an LLM (parse, check, repair)."""
    from simpatterns.detectors.library import LibraryError, PatternLibrary
    from simpatterns.dsl.synthesize import (
        SynthesisConfig, SynthesisFailed, load_goal_examples, save_goal_program, synthesize_reward,
    )
    from simpatterns.files import atomic_write
    from simpatterns.llm.errors import LLMError

    if scene and bodies:
        fail("give --scene or --bodies, not both", 2)
    try:
        lib = PatternLibrary.builtin() if library == "builtin" else PatternLibrary.load(library)
    except LibraryError as exc:
        fail(str(exc), 2)
    scene_bodies = _scene_bodies(scene) if scene else (
        [b.strip() for b in bodies.split(",") if b.strip()] if bodies else None)
    shots = [] if no_examples else load_goal_examples(examples, library=lib)
    if examples is not None and not no_examples and not examples.is_dir():
        fail(f"--examples {examples}: no such directory", 2)
    try:
        config = SynthesisConfig(n=n, max_attempts=attempts, temperature=temperature, max_tokens=max_tokens,
                                 seed=seed, grammar="none" if grammar == "off" else grammar_kind,
                                 prompt=prompt, prompt_budget=prompt_budget)
    except ValueError as exc:
        fail(str(exc), 2)
    try:
        client = client_from_options(llm, base_url, model, api_key, grammar, record, timeout, retries,
                                     max_requests, max_total_tokens, concurrency)
    except LLMError as exc:
        fail(str(exc), 2)
    result = None
    try:
        # a spinner on a terminal (nothing when stderr is a file): a local model takes a minute
        with client, err.status(f"asking the model: attempt 1 of {attempts}") as status:
            result = synthesize_reward(goal, client, library=lib, bodies=scene_bodies, examples=shots,
                                       config=config, on_attempt=lambda k: status.update(
                                           f"asking the model: attempt {k} of {attempts}"))
    except SynthesisFailed as exc:
        result = exc.result
    finally:
        if report is not None and result is not None:
            atomic_write(report, json.dumps(result.to_json(), indent=1, ensure_ascii=False) + "\n")
    s = result.stats()
    constrained = f"yes ({s['grammar']} grammar)" if s["constrained"] else "no"
    summary = (f"{s['attempts']} attempt(s), {s['candidates']} candidate(s), parse rate {s['parse_rate']:.0%}, "
               f"check rate {s['check_rate']:.0%}, grammar-constrained: {constrained}, {s['prompt']} prompt, "
               f"tokens {s['usage']['prompt_tokens']}+{s['usage']['completion_tokens']} ({s['model']})")
    if not result.ok:
        typer.echo(f"error: {result.failure}", err=True)
        typer.echo(summary, err=True)
        raise typer.Exit(1)
    if out is not None:
        save_goal_program(result, out)
    typer.echo(result.text, nl=not result.text.endswith("\n"))
    typer.echo(f"ok: {summary}" + (f"; wrote {out}" if out is not None else ""), err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(reward_app, name="reward")
