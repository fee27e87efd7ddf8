"""``simpatterns view``: a trace (or a dataset folder) as a self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import typer

from simpatterns.cli_support import fail, note


def view_cmd(
    source: Path = typer.Argument(..., help="a trace (.npz) or a dataset folder of traces"),
    out: Path = typer.Option(Path("view.html"), "--out", "-o",
                             help="the page (.html); for a folder the index, its trace pages in <name>_files/"),
    annotation: Path | None = typer.Option(
        None, "--annotation",
        help="the trace's annotation (.jsonl; default: the one beside the trace, else the built-in library's)"),
    program: Path | None = typer.Option(None, "--program", help="a reward program (.rwd) to show over time"),
    qa: Path | None = typer.Option(None, "--qa", help="a Q&A run folder: the questions about the trace"),
    agent: Path | None = typer.Option(None, "--agent", help="an agent run folder: the attempts on the trace's task"),
    max_frames: int = typer.Option(1000, "--max-frames", min=2, help="frames drawn per page (events keep every frame)"),
) -> None:
    """Write an HTML page to scrub a rollout and click its events (opens offline in any browser)."""
    from simpatterns.annotation import AnnotationFormatError
    from simpatterns.dsl import DSLError, DSLErrors
    from simpatterns.trace import TraceFormatError
    from simpatterns.viewer import dataset_pages, trace_page
    from simpatterns.viewer.runs import RunReadError

    if not source.exists():
        fail(f"{source}: no such trace or folder")
    companions = {"program": program, "qa_run": qa, "agent_run": agent}
    try:
        if source.is_dir():
            if annotation is not None:
                fail("--annotation names one trace's annotation; a folder's are read beside each trace")
            written = dataset_pages(source, out, max_frames=max_frames, **companions)
            note(f"{len(written) - 1} trace page(s) -> {written[0].parent}; index -> {out}")
        else:
            page = trace_page(source, annotation=annotation, max_frames=max_frames, **companions)
            page.write(out)
            note(f"{source} -> {out} ({out.stat().st_size / 1024:.0f} kB)")
    except DSLErrors as exc:
        fail(str(exc).splitlines()[0] if str(exc) else "the reward program has errors")
    except (TraceFormatError, AnnotationFormatError, RunReadError, DSLError, ValueError, OSError) as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    app.command("view")(view_cmd)
