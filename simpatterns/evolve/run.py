"""A discovery run from files: what ``simpatterns discover`` does, from Python.

`discover` reads a labels file (TOML ``[[label]]`` entries and an optional
``[evolve]`` table), applies a settings file and `Overrides` over it, loads the
traces and the base library, runs a `DiscoveryJob` (resuming one when asked)
and returns a `DiscoverReport`: one `LabelRow` per label done, the sandbox's
rejection counts and which budget ended the session.

Examples:
    >>> from simpatterns.evolve.run import Overrides, discover
    >>> report = discover("runs/ds", "labels.toml", "runs/lib", overrides=Overrides(samples_per_label=8))  # doctest: +SKIP
    >>> [(r.label, r.accepted) for r in report.rows], report.stop_reason  # doctest: +SKIP
    ([('high energy impact', True)], 'sample budget: every label ran its 8 samples (--samples)')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from simpatterns.errors import SimpatternsError
from simpatterns.detectors.library import resolve_library
from simpatterns.evolve.config import (
    ConfigError,
    EvolveConfig,
    LabelSpec,
    load_labels,
    read_toml,
)
from simpatterns.evolve.discovery import DiscoveryJob, traces_from_dir
from simpatterns.evolve.fitness import FITNESS_KINDS
from simpatterns.evolve.proposers import LLMProposer, OfflineProposer
from simpatterns.parallel import Backend

ProgressFn = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Overrides:
    """Settings given on top of the labels file and the settings file (None: keep theirs)."""

    seed: int | None = None
    samples_per_label: int | None = None
    workers: int | None = None
    batch_size: int | None = None
    self_discovery: int | None = None
    max_total_tokens: int | None = None
    max_wall_s: float | None = None
    fitness: str | None = None  # a kind of `FITNESS_KINDS`
    theta: float | None = None
    prompt: str | None = None  # auto, full or compact


def load_settings(labels: str | os.PathLike, config: str | os.PathLike | None = None,
                  overrides: Overrides = Overrides()) -> tuple[list[LabelSpec], EvolveConfig]:
    """The labels of ``labels`` and the settings: its ``[evolve]`` table, then ``config``'s
    (its ``[evolve]`` table or the whole file), then ``overrides``. `ConfigError` names
    the file and the setting that is wrong."""
    specs, evolve_table = load_labels(Path(labels))
    settings = dict(evolve_table)
    if config is not None:
        table = read_toml(Path(config))
        settings.update(table.get("evolve", table))
    cfg = EvolveConfig.from_json(settings, where=str(config or labels))
    for f in fields(Overrides):
        value = getattr(overrides, f.name)
        if value is not None and f.name not in ("fitness", "theta", "prompt"):
            setattr(cfg, f.name, value)
    if overrides.fitness is not None:
        if overrides.fitness not in FITNESS_KINDS:
            raise ConfigError(f"--fitness must be one of {', '.join(FITNESS_KINDS)}; got {overrides.fitness!r}")
        cfg.fitness.kind = overrides.fitness
    if overrides.theta is not None:
        cfg.fitness.theta = overrides.theta
    if overrides.prompt is not None:
        cfg.prompt = overrides.prompt
    if cfg.prompt not in ("auto", "full", "compact"):
        raise ConfigError(f"prompt mode must be auto, full or compact, got {cfg.prompt!r}")
    return specs, cfg


@dataclass(frozen=True)
class LabelRow:
    """One label done this run: samples spent, accepted or not, the best program's
    fitness and its gain over the baseline (None: nothing scored), and why."""

    label: str
    samples: int
    accepted: bool
    fitness: float | None
    gain: float | None
    note: str

    def cells(self) -> tuple[str, ...]:
        return (self.label, str(self.samples), "yes" if self.accepted else "no",
                "-" if self.fitness is None else f"{self.fitness:.5g}",
                "-" if self.gain is None else f"{self.gain:+.5g}", self.note)


@dataclass
class DiscoverReport:
    """What `discover` did: ``traces`` read, where the run log and the library are, one
    row per label done, rejection reasons with their counts (most first) and which
    budget ended the session, in words."""

    traces: int
    run_dir: Path
    library: Path
    rows: list[LabelRow] = field(default_factory=list)
    rejections: list[tuple[str, int]] = field(default_factory=list)
    stop_reason: str = ""

    @property
    def accepted(self) -> int:
        return sum(1 for r in self.rows if r.accepted)


def discover(
    traces: str | os.PathLike,
    labels: str | os.PathLike,
    library: str | os.PathLike,
    *,
    base_library: str = "builtin",
    config: str | os.PathLike | None = None,
    overrides: Overrides = Overrides(),
    client_factory: Callable[[EvolveConfig], Any] | None = None,
    run_dir: str | os.PathLike | None = None,
    resume: bool = False,
    reasoning: Sequence[str | os.PathLike] = (),
    progress: ProgressFn | None = None,
    backend: Backend | None = None,
    unsafe: bool = False,
) -> DiscoverReport:
    """Discover detectors for the labels of ``labels`` on the traces under ``traces`` and
    write the library to ``library`` (the run log to ``run_dir``, default
    ``LIBRARY.run``).

    ``client_factory(config)`` makes the LLM client (None: offline, mutating the seed
    programs' constants); it is closed when the run ends. ``reasoning``: files of
    reasoning texts for self-discovery. ``progress`` gets the job's progress records.
    ``backend``: where the sandbox runs (None: this machine); ``unsafe``: run candidates
    even below the sandbox's stated minimum. Raises `ConfigError`, `JobError`,
    `TraceFormatError`, FileNotFoundError, `LibraryError`, `SandboxError`, an `LLMError`
    from the factory, or `DiscoverError` (a reasoning file that cannot be read).
    """
    specs, cfg = load_settings(labels, config, overrides)
    trace_list, traces_id = traces_from_dir(Path(traces))
    base = resolve_library(base_library)
    texts = []
    for p in reasoning:
        try:
            texts.append(Path(p).read_text())
        except OSError as exc:
            raise DiscoverError(f"{p}: cannot read reasoning text ({exc})") from None
    out = Path(library)
    rdir = Path(run_dir) if run_dir is not None else out.with_name(out.name + ".run")
    client = client_factory(cfg) if client_factory is not None else None
    try:
        proposer = (OfflineProposer() if client is None else
                    LLMProposer(client, temperature=cfg.llm_temperature, max_tokens=cfg.llm_max_tokens))
        job = DiscoveryJob(trace_list, specs, base, rdir, out, proposer, cfg, resume=resume, reasoning_texts=texts,
                           traces_id=traces_id, progress=progress, backend=backend, unsafe=unsafe)
        job.run()
    finally:
        if client is not None:
            client.close()
    return _report(job, len(trace_list), rdir, out)


class DiscoverError(SimpatternsError):
    """An input of `discover` that cannot be read: one line naming the file."""


def _report(job: DiscoveryJob, n_traces: int, run_dir: Path, library: Path) -> DiscoverReport:
    report = DiscoverReport(n_traces, run_dir, library, stop_reason=job.stop_reason)
    for rec in job.state.done:
        scored = rec.program is not None and "gain" in rec.program.parts
        fit = rec.program.fitness if scored and rec.program is not None else None
        report.rows.append(LabelRow(str(rec.label), rec.samples, bool(rec.accepted), fit,
                                    None if fit is None else fit - rec.baseline, str(rec.why or "")))
    report.rejections = sorted(job.state.rejections.items(), key=lambda kv: -kv[1])
    return report
