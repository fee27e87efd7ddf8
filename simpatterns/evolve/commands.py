"""CLI: ``simpatterns discover ...`` and ``simpatterns evolve report RUN_DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer
from rich.table import Table
from simpatterns.cli_support import fail, out as console, print_table

from simpatterns.parallel import executor_options

evolve_app = typer.Typer(help="Inspect pattern-discovery runs.", no_args_is_help=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    fail(message, code)


class _ProgressView:
    """A rich progress bar per label; the description shows the best fitness per island."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> "_ProgressView":
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=console)
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, info: dict[str, Any]) -> None:
        if self._progress is None:
            return
        label = info["label"]
        if label not in self._tasks:
            self._tasks[label] = self._progress.add_task(label, total=info["budget"])
        best = " ".join(f"{b - info['baseline']:+.4f}" if b > -1e300 else "-" for b in info["best_per_island"])
        self._progress.update(self._tasks[label], completed=info["samples"],
                              description=f"{label} gain per island: {best}")


def discover_cmd(
    traces: Annotated[Path, typer.Option("--traces", help="Directory of .npz traces (searched recursively).")],
    labels: Annotated[Path, typer.Option("--labels", help="Labels file (TOML, [[label]] entries).")],
    library: Annotated[Path, typer.Option("--out", "-o", help="Output library directory (written atomically).")],
    base_library: Annotated[str, typer.Option(
        "--base-library", help="'builtin', 'builtin:3d' (MuJoCo and rope traces), 'none' or a library directory.")]
    = "builtin",
    llm: Annotated[Optional[str], typer.Option(
        "--llm", help="LLM backend: openai[:MODEL], vllm[:MODEL], local[:MODEL] (in-process llama.cpp), "
        "replay:FILE. Omit with --offline.")] = None,
    offline: Annotated[bool, typer.Option("--offline", help="No LLM: mutate seed programs' constants.")] = False,
    base_url: Annotated[Optional[str], typer.Option("--base-url", envvar="SIMPATTERNS_LLM_BASE_URL")] = None,
    model: Annotated[Optional[str], typer.Option("--model", envvar="SIMPATTERNS_LLM_MODEL")] = None,
    record: Annotated[Optional[Path], typer.Option("--record", help="Record LLM traffic to this transcript.")] = None,
    budget: Annotated[Optional[int], typer.Option("--samples", help="Samples per label.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of all randomness.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --run-dir.")] = False,
    run_dir: Annotated[Optional[Path], typer.Option("--run-dir", help="Log and snapshots (default: OUT.run).")]
    = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML overriding evolve settings.")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", "-j", help="Sandbox evaluator processes.")] = None,
    batch: Annotated[Optional[int], typer.Option("--batch", help="Samples per round (requests in flight).")] = None,
    fitness: Annotated[Optional[str], typer.Option(
        "--fitness", help="Fitness kind: evidence (default; standard deviations above chance) or paper "
        "(Algorithm 2 as published).")] = None,
    theta: Annotated[Optional[float], typer.Option(
        "--theta", help="Acceptance threshold over the baseline (default: 3 for evidence, 0 for paper).")] = None,
    self_discovery: Annotated[Optional[int], typer.Option(
        "--self-discovery", help="Labels the LLM may propose after the guided ones.")] = None,
    reasoning: Annotated[Optional[list[Path]], typer.Option(
        "--reasoning", help="Reasoning texts for self-discovery (repeatable).")] = None,
    timeout: Annotated[Optional[float], typer.Option(
        "--timeout", help="Seconds per LLM request [default: 600 for llama.cpp and in-process models, else 120].",
        show_default=False)] = None,
    concurrency: Annotated[Optional[int], typer.Option(
        "--concurrency", help="LLM requests in flight [default: 1 for llama.cpp and in-process models, "
        "else --batch].", show_default=False)] = None,
    prompt: Annotated[Optional[str], typer.Option(
        "--prompt", help="auto (compact for llama.cpp and in-process models), full, compact.",
        show_default=False)] = None,
    max_total_tokens: Annotated[Optional[int], typer.Option("--max-total-tokens", help="Hard cap on tokens used.")] = None,
    max_wall_s: Annotated[Optional[float], typer.Option("--max-wall-s", help="Hard cap on seconds of wall time.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    unsafe_sandbox: Annotated[bool, typer.Option(
        "--unsafe-sandbox", help="Run LLM-written candidates even where this machine cannot give the sandbox its "
        "stated minimum (namespaces and seccomp; see docs/sandbox.md).")] = False,
) -> None:
    """Discover detectors for the labels in a labels file (evolve, score, accept) and write a library."""
    from simpatterns.detectors.library import LibraryError, resolve_library
    from simpatterns.evolve.config import ConfigError, EvolveConfig, load_labels, read_toml
    from simpatterns.evolve.discovery import DiscoveryJob, JobError, traces_from_dir
    from simpatterns.evolve.fitness import FITNESS_KINDS
    from simpatterns.evolve.proposers import LLMProposer, OfflineProposer
    from simpatterns.sandbox.pool import SandboxError, allow_unsafe
    from simpatterns.trace import TraceFormatError

    if offline == (llm is not None):
        _fail("give exactly one of --llm SPEC or --offline")
    if unsafe_sandbox:
        allow_unsafe()
    try:
        specs, evolve_table = load_labels(labels)
        overrides = dict(evolve_table)
        if config is not None:
            overrides.update(read_toml(config).get("evolve", read_toml(config)))
        cfg = EvolveConfig.from_json(overrides, where=str(config or labels))
    except ConfigError as exc:
        _fail(str(exc))
    for name, value in (("seed", seed), ("samples_per_label", budget), ("workers", workers),
                        ("batch_size", batch), ("self_discovery", self_discovery),
                        ("max_total_tokens", max_total_tokens), ("max_wall_s", max_wall_s)):
        if value is not None:
            setattr(cfg, name, value)
    if fitness is not None:
        if fitness not in FITNESS_KINDS:
            _fail(f"--fitness must be one of {', '.join(FITNESS_KINDS)}; got {fitness!r}")
        cfg.fitness.kind = fitness
    if theta is not None:
        cfg.fitness.theta = theta
    if prompt is not None:
        cfg.prompt = prompt
    if cfg.prompt not in ("auto", "full", "compact"):
        _fail(f"prompt mode must be auto, full or compact, got {cfg.prompt!r}")
    if concurrency is not None and concurrency < 1:
        _fail(f"--concurrency must be >= 1, got {concurrency}")
    if timeout is not None and timeout <= 0:
        _fail(f"--timeout must be > 0 seconds, got {timeout:g}")
    try:
        trace_list, traces_id = traces_from_dir(traces)
    except (JobError, TraceFormatError, FileNotFoundError) as exc:
        _fail(str(exc))
    try:
        base = resolve_library(base_library)
    except LibraryError as exc:
        _fail(str(exc))
    texts = []
    for p in reasoning or []:
        try:
            texts.append(p.read_text())
        except OSError as exc:
            _fail(f"{p}: cannot read reasoning text ({exc})")
    client = None
    if offline:
        proposer: Any = OfflineProposer()
    else:
        from simpatterns.llm import LLMError, make_client

        try:
            client = make_client(llm, base_url=base_url, model=model, transcript=record,
                                 concurrency="auto" if concurrency is None else concurrency,
                                 default_concurrency=max(1, cfg.batch_size),
                                 timeout_s="auto" if timeout is None else timeout,
                                 max_total_tokens=cfg.max_total_tokens)
        except LLMError as exc:
            _fail(str(exc))
        proposer = LLMProposer(client, temperature=cfg.llm_temperature, max_tokens=cfg.llm_max_tokens)
    rdir = run_dir or library.with_name(library.name + ".run")
    try:
        with _ProgressView(not quiet) as view:
            job = DiscoveryJob(trace_list, specs, base, rdir, library, proposer, cfg, resume=resume,
                               reasoning_texts=texts, traces_id=traces_id, progress=view)
            job.run()
    except (JobError, LibraryError, SandboxError) as exc:
        _fail(str(exc))
    finally:
        if client is not None:
            client.close()
    table = Table(title=f"discovery: {len(trace_list)} traces, run {rdir}")
    for col in ("label", "samples", "accepted", "fitness", "gain", "note"):
        table.add_column(col, no_wrap=col != "note")  # the note wraps; the numbers stay whole
    for rec in job.state.done:
        scored = rec.program is not None and "gain" in rec.program.parts
        fit = rec.program.fitness if scored and rec.program is not None else None
        gain = "-" if fit is None else f"{fit - rec.baseline:+.5g}"
        table.add_row(str(rec.label), str(rec.samples), "yes" if rec.accepted else "no",
                      "-" if fit is None else f"{fit:.5g}", gain, str(rec.why or ""))
    print_table(table)
    if job.state.rejections:
        console.print("rejections: " + ", ".join(f"{k} {v}" for k, v in sorted(job.state.rejections.items(),
                                                                               key=lambda kv: -kv[1])))
    accepted = sum(1 for r in job.state.done if r.accepted)
    console.print(f"library: {library} ({accepted} accepted this run); report: "
                  f"simpatterns evolve report {rdir}")
    console.print(f"stopped: {job.stop_reason}")  # the last line: which budget ended it


@evolve_app.command("report")
def report_cmd(run_dir: Annotated[Path, typer.Argument(help="A discovery run directory.")]) -> None:
    """Fitness curves per island (PNG), accepted programs and rejection reasons of a run."""
    from simpatterns.evolve.report import build_report
    from simpatterns.evolve.runlog import RunLogError

    try:
        report = build_report(run_dir)
    except (FileNotFoundError, RunLogError) as exc:
        _fail(str(exc))
    table = Table(title=f"run {run_dir}")
    for col in ("label", "samples", "accepted", "best fitness", "registered", "plot"):
        table.add_column(col, no_wrap=col != "plot")
    for lab in report.labels:
        fit = lab.best.fitness if lab.best is not None else None
        table.add_row(str(lab.label), str(lab.samples), "yes" if lab.accepted else "no",
                      "-" if fit is None else f"{fit:.5f}", str(lab.statuses.get("registered", 0)),
                      str(lab.plot) if lab.plot else "-")
    print_table(table, drop=("plot",))  # the plots are listed in the report too
    reasons = Table(title="rejection reasons")
    reasons.add_column("reason")
    reasons.add_column("count", justify="right")
    for code, n in report.reasons.most_common():
        reasons.add_row(code, str(n))
    print_table(reasons)
    console.print(f"written: {report.markdown}")


def register(app: typer.Typer) -> None:
    app.command("discover")(executor_options(discover_cmd))
    app.add_typer(evolve_app, name="evolve")
