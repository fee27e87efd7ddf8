"""Dataset building over the parallel-map seam: same traces for any worker count, written as they finish."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simpatterns.files import WriteError
from simpatterns.simulators.dataset import INDEX_NAME, build_dataset, plan_jobs
from simpatterns.trace import Trace


def _index(folder):
    return [json.loads(line) for line in (folder / INDEX_NAME).read_text().splitlines()]


def test_one_and_two_workers_write_the_same_traces_in_job_order(tmp_path):
    jobs = plan_jobs(["0"], 2, "random:2,solution", seed=3)
    seen: dict[int, list[str]] = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}" / "deeper"  # missing folders are created
        finished = seen.setdefault(workers, [])

        def on_done(row, out=out, finished=finished):
            # each trace is on disk, complete, when its row is reported
            Trace.load(out / row["file"])
            finished.append(row["file"])

        rows = build_dataset(jobs, out, workers=workers, on_done=on_done)
        assert [r["file"] for r in rows] == [j.filename for j in jobs] == [r["file"] for r in _index(out)]
        assert sorted(finished) == sorted(j.filename for j in jobs)
    one, two = _index(tmp_path / "w1" / "deeper"), _index(tmp_path / "w2" / "deeper")
    assert one == two
    for row in one:
        a = Trace.load(tmp_path / "w1" / "deeper" / row["file"])
        b = Trace.load(tmp_path / "w2" / "deeper" / row["file"])
        assert a.meta["action"] == b.meta["action"]
        np.testing.assert_array_equal(a.position, b.position)


def test_an_interrupted_build_indexes_what_finished_and_resumes(tmp_path):
    jobs = plan_jobs(["0"], 1, "random:3", seed=1)

    def stop_after_first(row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_dataset(jobs, tmp_path, workers=2, on_done=stop_after_first)
    partial = _index(tmp_path)
    assert len(partial) == 1 and (tmp_path / partial[0]["file"]).is_file()
    rows = build_dataset(jobs, tmp_path, workers=1)
    assert [r["file"] for r in rows] == [j.filename for j in jobs]
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_a_file_in_the_way_is_named(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(WriteError, match="taken"):
        build_dataset(plan_jobs(["0"], 1, "solution"), tmp_path / "taken" / "data")


def test_a_settled_looking_run_can_still_succeed():
    """Why a near-miss is decided by the full run: this action's bodies 'settle' at
    frame 150 (the green ball creeps at < 0.5 px/s) and the full run succeeds."""
    from simpatterns.simulators.phyre import load_scene, simulate

    scene, action = load_scene("00017", 1), [0.8997, 0.2029, 0.2286]
    assert not simulate(scene, action, stop_when_settled=True).trace.success
    assert simulate(scene, action).trace.success


def test_near_misses_fail_in_the_saved_run_which_is_simulated_once(tmp_path, monkeypatch):
    import simpatterns.simulators.dataset as dataset

    calls: list[tuple[list[float], bool, dict]] = []
    real = dataset.simulate

    def counting(scene, action, **kw):
        rollout = real(scene, action, **kw)
        calls.append(([float(v) for v in action], bool(rollout.trace.success), kw))
        return rollout

    monkeypatch.setattr(dataset, "simulate", counting)
    jobs = plan_jobs(["17"], 2, "near-miss:2", seed=0)
    rows = build_dataset(jobs, tmp_path, workers=1)
    assert len(rows) == 4 and all(r["file"] for r in rows)
    for row in rows:
        trace = Trace.load(tmp_path / row["file"])
        assert row["success"] is False and trace.success is False and trace.meta["action_kind"] == "near-miss"
        # the saved run is the only failed simulation of that action, and it ran to the end
        failed = [c for c in calls if c[0] == trace.meta["action"] and not c[1]]
        assert len(failed) == 1 and "stop_when_settled" not in failed[0][2]
    assert sum(not ok for _, ok, _ in calls) == len(rows)  # every failure was kept: none simulated twice
