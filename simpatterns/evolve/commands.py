"""CLI: ``simpatterns discover ...`` and ``simpatterns evolve report RUN_DIR``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer
from rich.table import Table

from simpatterns.cli_support import executor_options, fail, out as console, print_table
from simpatterns.parallel import LOCAL, Backend

evolve_app = typer.Typer(help="Inspect pattern-discovery runs.", no_args_is_help=True)


def _fail(message: str, code: int = 2) -> NoReturn:
    fail(message, code)


class _ProgressView:
    """A rich progress bar per label; the description shows the best fitness per island.
    Drawn from the first progress record on: a run refused before it starts prints nothing."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> "_ProgressView":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, info: dict[str, Any]) -> None:
        if not self.enabled:
            return
        if self._progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=console)
            self._progress.start()
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
        "stated minimum (namespaces and seccomp; see docs/design/sandbox.md).")] = False,
    backend: Backend = LOCAL,
) -> None:
    """Discover detectors for the labels in a labels file (evolve, score, accept) and write a library."""
    from simpatterns.detectors.library import LibraryError
    from simpatterns.evolve.config import ConfigError
    from simpatterns.evolve.discovery import JobError
    from simpatterns.evolve.run import DiscoverError, Overrides, discover
    from simpatterns.llm import LLMError, make_client
    from simpatterns.sandbox.pool import SandboxError
    from simpatterns.trace import TraceFormatError

    if offline == (llm is not None):
        _fail("give exactly one of --llm SPEC or --offline")
    if concurrency is not None and concurrency < 1:
        _fail(f"--concurrency must be >= 1, got {concurrency}")
    if timeout is not None and timeout <= 0:
        _fail(f"--timeout must be > 0 seconds, got {timeout:g}")

    def client_for(cfg):
        return make_client(llm, base_url=base_url, model=model, transcript=record, max_total_tokens=cfg.max_total_tokens,
                           concurrency="auto" if concurrency is None else concurrency,
                           default_concurrency=max(1, cfg.batch_size), timeout_s="auto" if timeout is None else timeout)

    overrides = Overrides(seed, budget, workers, batch, self_discovery, max_total_tokens, max_wall_s, fitness, theta,
                          prompt)
    try:
        with _ProgressView(not quiet) as view:
            report = discover(traces, labels, library, base_library=base_library, config=config, overrides=overrides,
                              client_factory=None if offline else client_for, run_dir=run_dir, resume=resume,
                              reasoning=reasoning or [], progress=view, backend=backend, unsafe=unsafe_sandbox)
    except (ConfigError, JobError, TraceFormatError, FileNotFoundError, LibraryError, SandboxError, LLMError,
            DiscoverError) as exc:
        _fail(str(exc))
    table = Table(title=f"discovery: {report.traces} traces, run {report.run_dir}")
    for col in ("label", "samples", "accepted", "fitness", "gain", "note"):
        table.add_column(col, no_wrap=col != "note")  # the note wraps; the numbers stay whole
    for row in report.rows:
        table.add_row(*row.cells())
    print_table(table)
    if report.rejections:
        console.print("rejections: " + ", ".join(f"{k} {v}" for k, v in report.rejections))
    console.print(f"library: {library} ({report.accepted} accepted this run); report: "
                  f"simpatterns evolve report {report.run_dir}")
    console.print(f"stopped: {report.stop_reason}")  # the last line: which budget ended it


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
