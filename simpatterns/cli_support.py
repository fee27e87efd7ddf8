"""The command line's conventions, in one place.

Every ``simpatterns`` command (each package's ``commands.py``) prints and
fails through this module, so all of them behave alike:

- **Two consoles.** `out` (stdout: results, tables) and `err` (stderr:
  errors, warnings, progress, what was written). Both have markup off: user
  text (file names, labels, goals) is printed as it is, never read as Rich
  markup, so ``[x]`` in a name stays ``[x]``. Style goes through ``style=``.
- **One error path.** `fail(message)` raises `CommandError`; the command
  group prints it as one line, ``error: MESSAGE``, on stderr, and exits with
  `EXIT_USAGE` (2, bad input: nothing was done) or the code given
  (`EXIT_PARTIAL`, 1: the command ran but some items failed). Usage errors
  (a bad option value, an unknown option, ``--full true``) and unexpected
  exceptions are printed the same way; a traceback only with ``--debug`` (or
  ``SIMPATTERNS_DEBUG=1``).
- **Interrupts.** Ctrl-C (and SIGTERM) stops a command; commands that keep
  finished work say what was done and the command that resumes
  (`interrupted`), and exit with `EXIT_INTERRUPTED` (130).
- **Tables keep their columns whole and fit 80 columns.** `new_table` makes
  every column no-wrap except the free-text ones named in ``wrap``;
  `print_table` folds wrapping columns instead of cutting them with "…", drops
  the vertical rules and then the less important columns a command names
  when the terminal is narrow, and only then prints wider than the terminal.
- **Option names.** The same thing has the same name everywhere:
  ``-o/--out`` (where results go), ``-j/--workers``, ``-q/--quiet`` (no
  progress bar), ``--json`` (print JSON on stdout instead of a table),
  ``--force`` (redo what is up to date); boolean options come in pairs
  (``--full/--no-full``); defaults are shown in ``--help``.
  ``tests/core/test_cli_conventions.py`` checks these over every command,
  and that one option name has one type and one unit everywhere
  (``--max-chars``, ``--samples``, ``--rollouts``, ``--attempts``). A
  renamed option (`RENAMED_OPTIONS`) is refused with a hint naming the new one.

- **Where work runs.** `executor_options` gives a command ``--executor`` and
  ``--address`` and hands it the checked `simpatterns.parallel.Backend`, which
  the command passes to the library function it calls. `ProgressBar` is the
  progress bar every long job draws on stderr (`progress_map`: a parallel map
  with one).

This module sits just above ``files`` and ``parallel`` (the only modules of
ours it imports), so every package may use it: commands for their output, the
library for `ProgressBar` and `progress_map`.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn, Optional, Sequence

import typer
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text
from typer.core import TyperGroup

from simpatterns.errors import SimpatternsError
from simpatterns.parallel import Backend, parallel_map

try:  # typer >= 0.22 vendors its own copy of click
    from typer._click import exceptions as click_exceptions  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

_EXITS = tuple({typer.Exit, getattr(click_exceptions, "Exit", typer.Exit)})
_ABORTS = tuple({KeyboardInterrupt, typer.Abort, getattr(click_exceptions, "Abort", typer.Abort)})

EXIT_OK = 0
EXIT_PARTIAL = 1  # the command ran; some items failed (each was reported)
EXIT_USAGE = 2  # bad input or an unusable environment: nothing (more) was done
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGTERM (128 + SIGINT, the shell's convention)

# soft_wrap: messages are never hard-wrapped at the terminal's width (a long path stays on
# its line); markup off: user text is printed as it is.
out = Console(soft_wrap=True, markup=False, highlight=False)
err = Console(stderr=True, soft_wrap=True, markup=False, highlight=False)

class CommandError(SimpatternsError, click_exceptions.ClickException):
    """A user-facing failure: printed as one ``error:`` line on stderr, exit `code`
    (a click exception, so any Typer app, not only ours, prints it that way)."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(one_line(message))
        self.message = one_line(message)
        self.exit_code = code

    def show(self, file: Any = None) -> None:
        err.print(f"error: {self.message}", style="red")


PROG = "simpatterns"
_state: dict[str, Any] = {"debug": bool(os.environ.get("SIMPATTERNS_DEBUG")), "args": None}


def one_line(message: str) -> str:
    """``message`` on one line: line breaks become "; " (so an error is one line)."""
    parts = [p.strip() for p in str(message).splitlines() if p.strip()]
    return "; ".join(parts)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Stop the command: ``error: MESSAGE`` on stderr, exit ``code`` (2: bad input)."""
    raise CommandError(message, code)


def warn(message: str) -> None:
    """``warning: MESSAGE`` on stderr (the command goes on)."""
    err.print(f"warning: {one_line(message)}", style="yellow")


def note(message: str) -> None:
    """A status line on stderr (what was written, what happens next)."""
    err.print(message)


def is_debug() -> bool:
    return bool(_state["debug"])


def set_debug(on: bool) -> None:
    _state["debug"] = bool(on)


# --------------------------------------------------------------- tables
def new_table(title: str | None, columns: Sequence[str], *, wrap: Sequence[str] = (),
              right: Sequence[str] = ()) -> Table:
    """A table whose columns are never folded or cut ("…"), except the free-text
    columns named in ``wrap``, which wrap; ``right`` columns are right-aligned."""
    table = Table(title=title)
    for name in columns:
        table.add_column(name, no_wrap=name not in wrap, justify="right" if name in right else "left")
    return table


def add_rows(table: Table, rows: Sequence[Sequence[str]]) -> None:
    """Add ``rows`` of plain one-line cells to ``table``. Where no column wraps and rows
    have no rules between them, they go in as one row of multi-line cells: it prints the
    same characters, and rich's cost per row (about 1 ms, most of the annotate command's
    summary of hundreds of traces) is paid once."""
    stack = (len(rows) > 1 and not table.show_lines and not table.row_styles
             and all(c.no_wrap for c in table.columns)
             and all("\n" not in cell and "[" not in cell for row in rows for cell in row))  # "[": markup
    if not stack:
        for row in rows:
            table.add_row(*row)
        return
    table.add_row(*("\n".join(column) for column in zip(*rows)))


def print_table(table: Table, console: Console | None = None, *, drop: Sequence[str] = ()) -> None:
    """Print ``table`` so its key cells are never cut ("…"). Wrapping columns fold
    rather than cut; when the table is still wider than the terminal, it loses its
    vertical rules, then the columns named in ``drop`` (least important first: a
    note on stderr says which), and only then is printed wider than the terminal
    (a terminal folds the long lines; a pipe keeps them whole)."""
    c = console or out
    if isinstance(table.title, str) and cell_len(table.title) > c.width:
        # a soft-wrapping console would print a long title (a path) as one line: fold it here
        c.print(Text(table.title, overflow="fold"), soft_wrap=False)
        table.title = None
    if not table.columns:
        c.print(table)
        return
    table.columns[0].no_wrap = True  # the first column names the row (a trace, a pattern): never cut
    for column in table.columns:
        if not column.no_wrap:
            column.overflow = "fold"
    if _min_width(table) > c.width:  # no vertical rules, one space between columns
        table.box, table.show_edge, table.padding = box.SIMPLE_HEAD, False, (0, 1, 0, 0)
    dropped = []
    for name in drop:
        if _min_width(table) <= c.width:
            break
        for column in list(table.columns):
            if column.header == name:
                table.columns.remove(column)
                dropped.append(name)
    if dropped:
        note(f"(left out at {c.width} columns: {', '.join(dropped)}; a wider terminal shows them)")
    width = _min_width(table)
    if width <= c.width:
        _share_width(table, c.width)
        c.print(table)
        return
    old = c.width
    c.width = width
    try:
        c.print(table)
    finally:
        c.width = old


def _bounds(column: Column) -> tuple[int, int]:
    """(narrowest, widest) text width of ``column`` without cutting a cell: a no-wrap
    column its widest line both ways, a wrapping one from its longest word."""
    texts = [t.plain if isinstance(t, Text) else str(t) for t in (column.header, *column._cells)]
    widest = max((cell_len(line) for t in texts for line in t.splitlines()), default=0)
    if column.no_wrap:
        return widest, widest
    return max((cell_len(word) for t in texts for word in t.split()), default=0), widest


def _min_width(table: Table) -> int:
    """The narrowest ``table`` prints without cutting a cell, padding and rules included."""
    _, right, _, left = table.padding
    return table._extra_width + sum(_bounds(column)[0] + left + right for column in table.columns)


def _share_width(table: Table, width: int) -> None:
    """Fix the column widths of a table narrower at its narrowest than ``width`` but wider
    at its widest: each column gets its narrowest, and the wrapping columns share what is
    left in proportion to how much more they could use (Rich, left to itself, may narrow a
    column below its longest word and fold it)."""
    _, right, _, left = table.padding
    bounds = [_bounds(column) for column in table.columns]
    fixed = table._extra_width + (left + right) * len(bounds)
    if fixed + sum(hi for _, hi in bounds) <= width:
        return  # it fits as it is
    spare, want = width - fixed - sum(lo for lo, _ in bounds), sum(hi - lo for lo, hi in bounds)
    for column, (lo, hi) in zip(table.columns, bounds):
        column.width = lo + (spare * (hi - lo)) // max(want, 1)


# --------------------------------------------------------------- progress and interrupts
class ProgressBar:
    """A progress bar on stderr with done/total, elapsed and remaining time.

    Use as a context manager; `advance` after each finished item and `log` for
    a line above the bar. ``enabled=False`` makes every call a no-op. ``console``:
    a Rich console (default: `err`, stderr)."""

    def __init__(self, description: str, total: int | None, enabled: bool = True, console: Any = None):
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                  console=console or err, transient=False,
                                  auto_refresh=False)  # no refresh thread: a pool forks safely
        self._last_refresh = 0.0
        self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> "ProgressBar":
        if self._progress is not None:
            self._progress.start()
            self._progress.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.refresh()
            self._progress.stop()

    def advance(self, n: int = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, n)
            now = time.monotonic()
            if now - self._last_refresh > 0.1:  # redrawn as items finish, at most 10 times a second
                self._last_refresh = now
                self._progress.refresh()

    def log(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(message, markup=False, highlight=False)
            self._progress.refresh()


def progress_map(fn: Callable[..., Any], items: Sequence[Any], *, progress: str | None = None,
                 **kwargs: Any) -> Iterator[tuple[int, Any]]:
    """`simpatterns.parallel.parallel_map` (same keywords: ``workers``, ``setup``,
    ``backend``, ...) with a `ProgressBar` labelled ``progress`` on stderr when given."""
    with ProgressBar(progress or "", len(items), enabled=progress is not None) as bar:
        yield from parallel_map(fn, items, progress=bar, **kwargs)


# --------------------------------------------------------------- where work runs
EXECUTOR_HELP = "where work runs: 'local' (this machine's processes) or 'ray' (a Ray cluster; needs the ray extra)"
ADDRESS_HELP = "with --executor ray: the address of an existing Ray cluster (default: start a local one)"


def executor_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give a typer command that maps work the ``--executor`` and ``--address`` options
    (named and explained the same on every command) in place of its ``backend``
    parameter: the command gets the checked `Backend` as ``backend=`` and passes it to
    what it runs. A bad value or a missing Ray install exits with one line."""
    import functools
    import inspect

    signature = inspect.signature(command, eval_str=True)
    if "backend" not in signature.parameters:
        raise TypeError(f"{command.__name__} must take a 'backend' parameter to use --executor")
    extra = [
        inspect.Parameter("executor", inspect.Parameter.KEYWORD_ONLY, annotation=str,
                          default=typer.Option("local", "--executor", help=EXECUTOR_HELP)),
        inspect.Parameter("address", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
                          default=typer.Option(None, "--address", help=ADDRESS_HELP)),
    ]

    @functools.wraps(command)
    def run(*args: Any, executor: str = "local", address: str | None = None, **kwargs: Any) -> Any:
        try:
            backend = Backend.from_options(executor, address)
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        return command(*args, backend=backend, **kwargs)

    params = [p for p in signature.parameters.values() if p.name != "backend"]
    tail = [p for p in params if p.kind == inspect.Parameter.VAR_KEYWORD]
    run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in params if p.kind != inspect.Parameter.VAR_KEYWORD] + extra + tail)
    run.__annotations__ = {**{k: v for k, v in command.__annotations__.items() if k != "backend"},
                           "executor": str, "address": Optional[str]}
    return run


def command_line(drop: Sequence[str] = ()) -> str:
    """The command being run, as a shell line (to repeat it: resume); ``drop`` removes
    these flags (e.g. ``--force``)."""
    args = _state["args"]
    if args is None:
        args = sys.argv[1:]
    return shlex.join([PROG, *[a for a in args if a not in drop]])


def interrupted(done: str, *, resume: bool = True) -> NoReturn:
    """After Ctrl-C: say what was done (kept) and how to resume (the same command,
    without ``--force``: what is done is not redone); exit 130."""
    line = f"interrupted: {one_line(done)}"
    if resume:
        line += f"; run the same command to resume: {command_line(drop=('--force',))}"
    err.print(line, style="yellow")
    raise typer.Exit(EXIT_INTERRUPTED)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves as Ctrl-C while the block runs (finished work is kept, temporary
    files are removed), and neither is lost inside a ``__del__`` (`_interrupt_again`); in
    the main thread only."""
    if sys.platform == "win32" or not _is_main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("terminated")

    previous = signal.signal(signal.SIGTERM, handler)
    hook, sys.unraisablehook = sys.unraisablehook, _interrupt_again
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = hook


def _interrupt_again(unraisable: Any) -> None:
    """A Ctrl-C (or SIGTERM) that lands inside a ``__del__`` or a weakref callback cannot
    unwind there: Python prints it as "Exception ignored" and goes on, and the command
    would run to its end. Deliver it again to the main thread, from another thread a moment
    later (raised here, it would be swallowed in this hook); one that lands in a callback
    again comes back here and goes round once more."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        import _thread
        import threading

        again = threading.Timer(0.02, _thread.interrupt_main)  # after this hook has returned
        again.daemon = True
        again.start()
        return
    sys.__unraisablehook__(unraisable)


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


# --------------------------------------------------------------- the command group
# Retired spellings -> their new name, per command path: ``--budget`` meant six things.
RENAMED_OPTIONS: dict[str, dict[str, str]] = {
    "annotate": {"--budget": "--max-chars", "--gif": "--captioned-gif", "--no-gif": "--no-captioned-gif"},
    "discover": {"--budget": "--samples", "--library": "--out"},
    "optimize": {"--budget": "--rollouts", "--json": "--out"},
    "demo": {"--budget": "--rollouts"},
    "reward check": {"--format": "--canonical"},
    "reward compile": {"--report": "--attempts-log", "--prompt-budget": "--max-prompt-tokens"},
    "qa eval": {"--budget-chars": "--max-chars"},
    "qa library-curve": {"--budget-chars": "--max-chars", "--trials": "--subsets"},
    "qa importance": {"--budget-chars": "--max-chars", "--labels": "--hold-out"},
    "qa self-discover": {"--budget-chars": "--max-chars", "--budget": "--samples"},
    "agent eval": {"--budget-chars": "--max-chars", "--budget": "--attempts"},
    "agent library-curve": {"--budget-chars": "--max-chars", "--budget": "--attempts", "--trials": "--subsets"},
    "agent importance": {"--budget-chars": "--max-chars", "--budget": "--attempts", "--labels": "--hold-out"},
    "agent phyre-cache": {"--actions": "--action-count"},
    "mujoco rope-dataset": {"--actions": "--actions-per-episode"},
}


def _renamed_hint(exc: click_exceptions.UsageError) -> str | None:
    """For an unknown option that was renamed: "--budget is now --max-chars" (else None)."""
    if not isinstance(exc, click_exceptions.NoSuchOption) or exc.ctx is None:
        return None
    path = exc.ctx.command_path.split(" ", 1)[1] if " " in exc.ctx.command_path else ""
    new = RENAMED_OPTIONS.get(path, {}).get(exc.option_name)
    if new is None:
        return None
    return f"{exc.ctx.command_path}: {exc.option_name} was renamed; use {new}"


_HINT_VALUES = {"true", "false", "yes", "no", "on", "off", "1", "0"}


def _usage_message(exc: click_exceptions.UsageError) -> str:
    renamed = _renamed_hint(exc)
    if renamed is not None:
        return renamed
    ctx = exc.ctx
    where = ctx.command_path if ctx is not None else PROG
    msg = one_line(exc.format_message())
    if "unexpected extra argument" in msg and ctx is not None:
        # `--full true`: boolean options take no value
        extra = [a for a in (ctx.args or []) + list(getattr(ctx, "protected_args", []) or [])]
        extra = extra or msg.rsplit("(", 1)[-1].rstrip(")").split()
        if any(a.lower() in _HINT_VALUES for a in extra):
            msg += " (boolean options take no value: write --full or --no-full, not --full true)"
    return f"{where}: {msg}"


def _report(exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr and return the exit code."""
    if isinstance(exc, CommandError):
        err.print(f"error: {exc.message}", style="red")
        return exc.exit_code
    no_args = getattr(click_exceptions, "NoArgsIsHelpError", None)
    if no_args is not None and isinstance(exc, no_args):
        return EXIT_USAGE  # the help is already printed
    if isinstance(exc, click_exceptions.UsageError):
        err.print(f"error: {_usage_message(exc)}", style="red")
        return EXIT_USAGE
    if isinstance(exc, click_exceptions.ClickException):
        err.print(f"error: {one_line(exc.format_message())}", style="red")
        return exc.exit_code
    if isinstance(exc, _ABORTS):
        err.print("interrupted", style="yellow")
        return EXIT_INTERRUPTED
    if is_debug():
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    hint = "" if is_debug() else " (run with --debug for the traceback)"
    if isinstance(exc, (OSError, ValueError, LookupError)):
        # what our code raises for bad input names the file or value
        err.print(f"error: {one_line(str(exc)) or type(exc).__name__}{hint}", style="red")
        return EXIT_USAGE
    err.print(f"error: internal error, please report it: {type(exc).__name__}: {one_line(str(exc))}{hint}",
              style="red")
    return EXIT_PARTIAL


class ConventionGroup(TyperGroup):
    """The top-level group: runs a command and turns every failure into one line."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        _state["args"] = args
        _tidy_flags(self)
        try:
            with sigterm_as_interrupt():
                rv = super().main(args=args, prog_name=prog_name or PROG, complete_var=complete_var,
                                  standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else EXIT_OK
        except _EXITS as exc:
            code = exc.exit_code
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_PARTIAL)
        except BaseException as exc:  # noqa: BLE001 - every failure ends as one line
            code = _report(exc)
        if not standalone_mode:
            return code
        sys.exit(code)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # typer would turn it into a silent exit 130
            err.print("interrupted", style="yellow")
            raise typer.Exit(EXIT_INTERRUPTED) from None


def _tidy_flags(command: Any) -> None:
    """Flags take no value, so help shows none (typer would show ``<bool>``)."""
    if getattr(command, "_flags_tidy", False):
        return
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    help_option = getattr(command, "get_help_option", None)
    if help_option is not None:
        def get_help_option(ctx: Any, _original: Any = help_option) -> Any:
            option = _original(ctx)
            if option is not None and option.metavar is None:
                option.metavar = ""
            return option

        command.get_help_option = get_help_option
    command._flags_tidy = True
    for sub in getattr(command, "commands", {}).values():
        _tidy_flags(sub)


def version_callback(value: bool) -> None:
    if value:
        out.print(f"{PROG} {package_version()}")
        raise typer.Exit(EXIT_OK)


def package_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version(PROG)
    except PackageNotFoundError:  # running from a source tree
        import simpatterns

        return simpatterns.__version__


def existing_file(path: Path, what: str = "file") -> Path:
    """``path`` if it is a readable file; else `fail` naming it."""
    if not path.exists():
        fail(f"{path}: no such {what}")
    if path.is_dir():
        fail(f"{path}: is a folder; give a {what}")
    return path
