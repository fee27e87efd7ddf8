"""The Ray backend on a local cluster (``ray.init(num_cpus=2)``): dataset generation,
annotation (library and command), a small discovery and Q&A generation give the same
results as the local pool, and the parallel-map seam behaves the same on both backends.
Skipped where Ray is not installed (it is the optional ``ray`` extra)."""

from __future__ import annotations

import os
import sys

import pytest

ray = pytest.importorskip("ray")

from simpatterns.annotate.annotator import annotate_many  # noqa: E402
from simpatterns.annotation import Annotation  # noqa: E402
from simpatterns.detectors.library import PatternLibrary  # noqa: E402
from simpatterns.evolve.config import EvolveConfig  # noqa: E402
from simpatterns.evolve.discovery import DiscoveryJob  # noqa: E402
from simpatterns.evolve.prompt import LabelSpec  # noqa: E402
from simpatterns.evolve.proposers import OfflineProposer  # noqa: E402
from simpatterns.evolve.runlog import RunLog  # noqa: E402
from simpatterns.parallel import Backend, WorkerSetup, make_executor  # noqa: E402
from simpatterns.parallel.ray_backend import RayExecutor  # noqa: E402
from simpatterns.sandbox.distributed import ExecutorSandbox  # noqa: E402
from simpatterns.sandbox.limits import SandboxLimits  # noqa: E402
from simpatterns.simulators.dataset import build_dataset, plan_jobs  # noqa: E402
from simpatterns.trace import Trace  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    # this test module is not importable on the workers: its functions travel by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.shutdown()


def _build(offset: int) -> dict:
    return {"offset": offset, "pid": os.getpid()}


def _shift(state: dict, x: int) -> tuple[int, int, int]:
    return x + state["offset"], state["pid"], os.getpid()


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError(f"item {x} is bad")
    return x


def test_map_submit_and_errors_match_the_local_pool(cluster):
    setup = WorkerSetup(_build, (100,))
    expected = [x + 100 for x in range(40)]
    for backend, workers in (("local", 1), ("local", 2), ("ray", 1), ("ray", 2)):
        with make_executor(workers, setup, backend=backend) as ex:
            got = ex.map(_shift, range(40), chunksize=3)
            assert [v for v, _, _ in got] == expected, (backend, workers)
            # the setup was built in the worker that uses it: at most one per worker
            assert all(built == ran for _, built, ran in got)
            assert len({built for _, built, _ in got}) <= workers
            assert [f.result()[0] for f in [ex.submit(_shift, k) for k in range(5)]] == expected[:5]
    with make_executor(2, backend="ray") as ex:
        assert isinstance(ex, RayExecutor)
        with pytest.raises(ValueError, match="item 3 is bad"):  # the item's own exception, unwrapped
            ex.map(_fail_on_three, range(8), chunksize=1)
        with pytest.raises(ValueError, match="item 3 is bad"):
            ex.submit(_fail_on_three, 3).result()


def test_stopping_a_ray_map_keeps_what_arrived_and_stops_the_actors(cluster):
    ex = make_executor(2, WorkerSetup(_build, (0,)), backend="ray")
    results = ex.imap(_shift, range(200), chunksize=1)
    first = next(results)
    results.close()  # the caller stops iterating (as on Ctrl-C): pending chunks cancelled, actors killed
    assert first[1][0] == first[0] and first[1][1] == first[1][2]
    assert ex._actors is None
    with make_executor(2, WorkerSetup(_build, (0,)), backend="ray") as again:  # the cluster is still up
        assert [v for v, _, _ in again.map(_shift, range(4))] == [0, 1, 2, 3]


def test_backend_options_are_checked():
    with pytest.raises(ValueError, match="--executor must be one of local, ray"):
        Backend.from_options("dask")
    with pytest.raises(ValueError, match="needs --executor ray"):
        Backend.from_options("local", "10.0.0.1:6379")


def test_an_unreachable_ray_address_is_one_line_before_any_work(tmp_path):
    import socket

    from typer.testing import CliRunner

    from simpatterns.cli import app
    from simpatterns.parallel import check_ray_address

    with socket.socket() as free:  # a port nothing listens on once this socket closes
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(ValueError, match=f"cannot reach a Ray cluster at 127.0.0.1:{port}"):
        Backend.from_options("ray", f"127.0.0.1:{port}")
    with pytest.raises(ValueError, match="is not host:port"):
        Backend.from_options("ray", "10.0.0")
    with socket.socket() as listening:  # something listens: the check passes (Ray itself says the rest)
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        check_ray_address(f"127.0.0.1:{listening.getsockname()[1]}")
        check_ray_address(f"ray://127.0.0.1:{listening.getsockname()[1]}")
    check_ray_address(None)
    check_ray_address("auto")
    res = CliRunner().invoke(app, ["dataset", "-o", str(tmp_path / "ds"), "--templates", "00000", "--variants", "1",
                                   "-j", "2", "--executor", "ray", "--address", f"127.0.0.1:{port}"])
    assert res.exit_code == 2
    assert res.output.strip() == f"error: cannot reach a Ray cluster at 127.0.0.1:{port}: Connection refused"
    assert not (tmp_path / "ds").exists()  # nothing was simulated


@pytest.fixture(scope="module")
def datasets(cluster, tmp_path_factory):
    """The same 12 rollouts (6 templates, 2 random actions each) built by the local pool
    (1 worker) and by Ray (2 workers)."""
    jobs = plan_jobs(["00000", "00002", "00004", "00006", "00010", "00014"], 1, "random:2", seed=5)
    local, remote = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("ray")
    rows_local = build_dataset(jobs, local, workers=1)
    rows_ray = build_dataset(jobs, remote, workers=2, backend=Backend("ray"))
    return jobs, (local, rows_local), (remote, rows_ray)


def test_dataset_on_ray_equals_the_local_pool(datasets):
    jobs, (local, rows_local), (remote, rows_ray) = datasets
    assert rows_local == rows_ray and len(rows_local) == len(jobs)
    for row in rows_local:
        assert Trace.load(local / row["file"]).equals(Trace.load(remote / row["file"]))


def test_annotation_on_ray_equals_the_local_pool(datasets):
    _, (local, rows), _ = datasets
    paths = [local / r["file"] for r in rows]
    lib = PatternLibrary.builtin()
    serial = annotate_many(paths, lib, workers=1)
    pooled = annotate_many(paths, lib, workers=2)
    on_ray = annotate_many(paths, lib, workers=2, backend=Backend("ray"))
    assert sum(len(a.events) for a in serial) > 0
    for a, b, c in zip(serial, pooled, on_ray):
        assert a.equals(b) and a.equals(c) and a.trace_id == c.trace_id


def _discover(traces, base, run_dir, lib_dir, seed_file, backend=None):
    spec = LabelSpec("high energy impact", "a hard collision", depends=["collision start"],
                     params=["object_a", "object_b", "speed"], seed=str(seed_file))
    cfg = EvolveConfig(samples_per_label=8, batch_size=4, workers=2, seed=3,
                       sandbox=SandboxLimits(timeout_s=5.0, smoke_timeout_s=1.0, memory_mb=512))
    job = DiscoveryJob(traces, [spec], base, run_dir, lib_dir, OfflineProposer(), cfg, backend=backend)
    job.run()
    return job


def test_a_small_discovery_on_ray_equals_the_local_one(datasets, tmp_path):
    _, (local, rows), _ = datasets
    traces = [Trace.load(local / r["file"]) for r in rows]
    builtin = PatternLibrary.builtin()
    base = builtin.subset(["collision start", "collision end", "task complete"])
    seed_file = tmp_path / "mistuned.py"
    seed_file.write_text(builtin.get("high energy impact").source.replace("HIGH_SPEED = 100.0", "HIGH_SPEED = 40.0"))
    here = _discover(traces, base, tmp_path / "run-local", tmp_path / "lib-local", seed_file)
    there = _discover(traces, base, tmp_path / "run-ray", tmp_path / "lib-ray", seed_file, Backend("ray"))
    assert isinstance(there.evaluator.sandbox, ExecutorSandbox)  # each Ray worker ran its own sandbox

    def samples(run_dir):
        keep = ("k", "sample", "island", "code", "outcome", "fitness", "signature", "reason")
        out = []
        for _, r in RunLog(run_dir).records():
            if r["type"] == "sample":
                out.append({k: r.get(k) for k in keep})  # the time penalty counts steps: no clock
        return sorted(out, key=lambda s: (s["k"], s["sample"]))

    got_local, got_ray = samples(tmp_path / "run-local"), samples(tmp_path / "run-ray")
    assert len(got_local) == 8 and got_local == got_ray
    assert any(s["outcome"] == "scored" for s in got_local)
    a, b = here.state.done[0], there.state.done[0]
    assert a.accepted == b.accepted and a.program.fitness == b.program.fitness
    if a.accepted:
        assert (PatternLibrary.load(tmp_path / "lib-local").get("high energy impact").source
                == PatternLibrary.load(tmp_path / "lib-ray").get("high energy impact").source)


def test_the_annotate_command_on_ray_writes_what_the_local_pool_writes(datasets, tmp_path):
    from typer.testing import CliRunner

    from simpatterns.cli import app

    _, (local, _), _ = datasets
    runner = CliRunner()
    outs = {}
    for name, extra in (("local", ["-j", "2"]), ("ray", ["-j", "2", "--executor", "ray"])):
        outs[name] = tmp_path / name
        res = runner.invoke(app, ["annotate", str(local), "--out", str(outs[name]), *extra])
        assert res.exit_code == 0, res.output
    files = sorted(p.name for p in outs["local"].glob("*.annotation.jsonl"))
    assert len(files) == 12
    for f in files:  # the same events (the files also hold wall-clock timings)
        assert Annotation.load(outs["local"] / f).equals(Annotation.load(outs["ray"] / f))
    res = runner.invoke(app, ["annotate", str(local), "--executor", "dask"])
    assert res.exit_code == 2 and "--executor must be one of local, ray" in res.output


def test_qa_generation_on_ray_equals_the_local_one(cluster, tmp_path):
    from simpatterns.qa.generate import GenerateConfig, generate_dataset

    cfg = GenerateConfig(scenes=3, seed=4, stable_check=False, question_templates=(1, 5, 18, 22, 27))
    lib = PatternLibrary.builtin()
    here = generate_dataset(tmp_path / "local", cfg, lib, workers=1)
    there = generate_dataset(tmp_path / "ray", cfg, lib, workers=2, backend=Backend("ray"))
    assert here and len(here) == len(there)
    assert (tmp_path / "local" / "questions.jsonl").read_bytes() == (tmp_path / "ray" / "questions.jsonl").read_bytes()
