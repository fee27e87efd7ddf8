"""Where work runs and how untrusted code is confined are passed explicitly: the
``--executor``/``--address`` options hand the command a `Backend`, and
``--unsafe-sandbox`` becomes a parameter, never process-wide state."""

from __future__ import annotations

import os

import pytest
import typer
from typer.testing import CliRunner

from simpatterns import parallel
from simpatterns.cli_support import executor_options
from simpatterns.parallel import (
    LOCAL,
    Backend,
    InlineExecutor,
    ProcessExecutor,
    make_executor,
    parallel_map,
)


def _app(seen: list) -> typer.Typer:
    app = typer.Typer()

    def run(n: int = typer.Option(1, "--n"), backend: Backend = LOCAL) -> None:
        seen.append((n, backend))

    app.command("run")(executor_options(run))
    app.command("other")(lambda: None)
    return app


def test_executor_options_hand_the_command_its_backend():
    seen: list = []
    app = _app(seen)
    res = CliRunner().invoke(app, ["run", "--n", "3", "--executor", "local"])
    assert res.exit_code == 0, res.output
    assert seen == [(3, Backend("local"))]
    res = CliRunner().invoke(app, ["run", "--executor", "dask"])
    assert res.exit_code == 2 and "--executor must be one of local, ray, got 'dask'" in res.output
    res = CliRunner().invoke(app, ["run", "--address", "10.0.0.5:6379"])
    assert res.exit_code == 2 and "needs --executor ray" in res.output
    res = CliRunner().invoke(app, ["run", "--backend", "x"])  # the parameter is not an option
    assert res.exit_code == 2 and len(seen) == 1


def test_a_command_without_a_backend_parameter_is_refused():
    with pytest.raises(TypeError, match="must take a 'backend' parameter"):
        executor_options(lambda n=1: None)


def test_no_process_wide_backend():
    assert not hasattr(parallel, "use_backend") and not hasattr(parallel, "default_backend")
    with make_executor(1) as ex:
        assert isinstance(ex, InlineExecutor)
    with make_executor(2, backend=None) as ex:  # None is this machine, whatever ran before
        assert isinstance(ex, ProcessExecutor) and ex.map(abs, [-1, -2, 3]) == [1, 2, 3]
    assert sorted(parallel_map(abs, [-4, 5], workers=2, backend=LOCAL)) == [(0, 4), (1, 5)]


class _Count:
    def __init__(self) -> None:
        self.n = 0

    def advance(self, n: int = 1) -> None:
        self.n += n


def test_parallel_map_advances_any_progress_object():
    count = _Count()
    assert dict(parallel_map(abs, [-1, -2, -3], progress=count)) == {0: 1, 1: 2, 2: 3}
    assert count.n == 3


def test_unsafe_sandbox_is_a_parameter_not_the_environment(tmp_path):
    from simpatterns.annotate import annotate
    from simpatterns.annotate.sandboxed import (
        _SHARED,
        SandboxPolicy,
        close_shared_sandbox,
    )
    from simpatterns.detectors.library import PatternLibrary
    from simpatterns.sandbox.pool import SandboxRefused
    from simpatterns.simulators.phyre import get_template, simulate

    trace = simulate(get_template("00000").variant_scene(0), [0.5, 0.9, 0.5], max_steps=200).trace
    builtin = PatternLibrary.builtin()
    lib = PatternLibrary()  # a built-in detector's code, as if an LLM had written it: it runs in the sandbox
    lib.add(builtin.get("collision start").source, provenance="evolved")
    expected = annotate(trace, builtin.subset(["collision start"])).pattern_events["collision start"]
    before = dict(os.environ)
    try:
        ann = annotate(trace, lib, sandbox=SandboxPolicy(unsafe=True))
        assert _SHARED.sandbox is not None and _SHARED.sandbox.unsafe
        assert expected and ann.pattern_events["collision start"] == expected
        try:  # the next call without it gets a sandbox of its own, not the unsafe one
            annotate(trace, lib, sandbox=SandboxPolicy())
            assert not _SHARED.sandbox.unsafe
        except SandboxRefused as exc:  # this machine is below the stated minimum
            assert "--unsafe-sandbox" in str(exc)
    finally:
        close_shared_sandbox()
    assert dict(os.environ) == before
