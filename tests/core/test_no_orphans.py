"""No process outlives its job: each parallel command, SIGKILLed mid-run with two workers
(as ``kill -9`` or the OOM killer would end it), leaves no process of the job running, and
the same command then resumes from what was on disk. The agents' and discovery's own
commands are tested beside their other tests (test_agent_no_orphans, test_discover_no_orphans)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_tree import Killed, descendants, kill_mid_run, wait_gone

CLI = [sys.executable, "-m", "simpatterns.cli"]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _gone(killed: Killed, what: str) -> None:
    print(f"{what}: {killed.workers} processes under the job at the kill, all gone {killed.seconds:.2f} s later")
    assert killed.workers >= 2 and not killed.left, (what, killed)


def _stamps(folder: Path, pattern: str) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.glob(pattern)}


def test_killed_dataset_leaves_no_worker_and_resumes(tmp_path):
    out = tmp_path / "ds"
    args = ["dataset", "--templates", "0,1,2", "--variants", "4", "--actions", "random:2", "--out", str(out),
            "-j", "2", "--stride", "4", "-q"]
    _gone(kill_mid_run([*CLI, *args], tmp_path, lambda: any(out.glob("*.npz"))), "dataset")
    kept = _stamps(out, "*.npz")
    assert 1 <= len(kept) < 24
    res = _run(args, tmp_path)
    assert res.returncode == 0, res.stderr
    assert len(list(out.glob("*.npz"))) == 24 and len((out / "index.jsonl").read_text().splitlines()) == 24
    assert {k: v for k, v in _stamps(out, "*.npz").items() if k in kept} == kept  # not redone


def test_killed_dataset_on_a_local_ray_cluster_it_started_leaves_no_ray_process(tmp_path):
    """``--address local``: a cluster of the job's own even when another runs on this machine."""
    pytest.importorskip("ray")
    out = tmp_path / "ds"
    args = ["dataset", "--templates", "0,1,2", "--variants", "4", "--actions", "random:2", "--out", str(out),
            "-j", "2", "--stride", "4", "-q", "--executor", "ray", "--address", "local"]
    # the cluster's own processes, its two actors among them, then a finished trace
    # Ray's own processes notice their parent's death by polling: on a loaded 2-core machine
    # that took over 30 s once, so the grace is generous (the test is that they all go)
    killed = kill_mid_run([*CLI, *args], tmp_path, lambda: any(out.glob("*.npz")), workers=4, grace=180.0)
    _gone(killed, "dataset --executor ray")
    kept = _stamps(out, "*.npz")
    res = _run(args[:-4], tmp_path)  # resumed on the local pool: a second cluster start costs ~15 s here
    assert res.returncode == 0, res.stderr
    assert len(list(out.glob("*.npz"))) == 24
    assert {k: v for k, v in _stamps(out, "*.npz").items() if k in kept} == kept


def test_killed_annotate_leaves_no_worker_and_resumes(tmp_path):
    traces = tmp_path / "traces"
    res = _run(["dataset", "--templates", "0,1", "--variants", "3", "--actions", "random:1", "--out", str(traces),
                "-j", "2", "-q"], tmp_path)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "ann"
    args = ["annotate", str(traces), "-o", str(out), "-j", "2", "--plot", "-q"]
    _gone(kill_mid_run([*CLI, *args], tmp_path, lambda: any(out.glob("*.annotation.jsonl"))), "annotate")
    kept = _stamps(out, "*.annotation.jsonl")
    res = _run(args, tmp_path)
    assert res.returncode == 0, res.stderr
    assert len(list(out.glob("*.annotation.jsonl"))) == 6
    assert {k: v for k, v in _stamps(out, "*.annotation.jsonl").items() if k in kept} == kept


def test_killed_optimize_leaves_no_worker_and_resumes(tmp_path):
    args = ["optimize", "-t", "00000", "--rollouts", "200", "--batch-size", "4", "--keep-going", "--seed", "3", "-j", "2",
            "-o", "cut/best.json"]
    log = tmp_path / "cut" / "best.evaluations.jsonl"
    started = lambda: log.exists() and len(log.read_text().splitlines()) > 10  # noqa: E731
    _gone(kill_mid_run([*CLI, *args], tmp_path, started), "optimize")
    kept = len(log.read_text().splitlines()) - 1  # a header line, then one per evaluation
    res = _run(args, tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"resumed: {kept} evaluation(s) replayed" in res.stderr


def test_killed_qa_generate_and_eval_leave_no_worker_and_resume(tmp_path):
    from simpatterns.llm.testing import Reply, ScriptedLLMServer

    data = tmp_path / "data"
    args = ["qa", "generate", "--out", str(data), "--scenes", "6", "--questions-per-rollout", "3", "--seed", "2",
            "-j", "2", "-q"]
    rollouts = data / "rollouts"
    _gone(kill_mid_run([*CLI, *args], tmp_path, lambda: rollouts.is_dir() and any(rollouts.iterdir())),
          "qa generate")
    kept = _stamps(rollouts, "[!.]*")  # not a temporary file the kill cut short
    res = _run(args, tmp_path)
    assert res.returncode == 0, res.stderr
    assert {k: v for k, v in _stamps(rollouts, "[!.]*").items() if k in kept} == kept  # rollouts reused
    assert len((data / "questions.jsonl").read_text().splitlines()) == 18

    run = tmp_path / "run"
    with ScriptedLLMServer(default=Reply("ANSWER: yes", delay_s=0.05)) as server:
        args = ["qa", "eval", str(data), "--out", str(run), "--llm", "openai", "--base-url", server.base_url,
                "--conditions", "annotation", "--concurrency", "1", "-j", "2", "-q"]
        _gone(kill_mid_run([*CLI, *args], tmp_path, lambda: True), "qa eval")
        res = _run(args, tmp_path)
    assert res.returncode == 0, res.stderr
    answers = [json.loads(line) for line in (run / "responses.jsonl").read_text().splitlines()]
    assert len(answers) == 18


def test_a_worker_ends_with_its_job_whichever_thread_started_it(tmp_path):
    """The job's pool forked from its only thread (fork: the parent-death signal), or from a
    thread that then ends while the job lives on (forkserver): the worker lives as long as the
    job, and no longer."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import os, sys, threading, time
        from simpatterns.parallel import ProcessExecutor

        def pid(_):
            return os.getpid()

        if __name__ == "__main__":
            box = []
            if sys.argv[1] == "thread":  # a second thread: the pool uses the fork server
                t = threading.Thread(target=lambda: box.append(ProcessExecutor(2, start=True)))
                t.start(); t.join()  # the thread that made the pool has ended
            else:
                box.append(ProcessExecutor(2, start=True))
            print(*sorted(set(box[0].map(pid, range(8), chunksize=1))), flush=True)
            time.sleep(1.0)  # a thread that ended has not taken the workers with it
            print(*sorted(set(box[0].map(pid, range(8), chunksize=1))), flush=True)
            time.sleep(600)
    """))
    for how in ("fork", "thread"):
        proc = subprocess.Popen([sys.executable, str(script), how], stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))
        first = proc.stdout.readline().split()
        second = proc.stdout.readline().split()
        job = descendants(proc.pid)  # the workers; with "thread" also the fork server and resource tracker
        running = {str(p.pid) for p in job}
        # the workers that answered first still live a second later (which of them takes the
        # items of a map is up to the scheduler), and so do those that answered since
        assert first and set(first) <= running and set(second) <= running, (how, first, second, job)
        assert len(job) >= (2 if how == "fork" else 3), (how, job)
        proc.kill()
        proc.wait()
        took, left = wait_gone(job, 30.0)
        print(f"{how}: {len(job)} processes under the job, gone {took:.2f} s after it")
        assert not left, how


def test_end_with_job_ends_at_once_when_the_job_is_already_gone():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    code = (f"from simpatterns.parallel import end_with_job; import time; end_with_job({int(dead.stdout)}); "
            "time.sleep(60)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == -9  # killed at once, not the sleep's end (exit 0)


def test_a_failed_or_timed_out_test_takes_its_processes_with_it(tmp_path):
    """The suite's own guard (tests/process_tree.py), run on two tests that start a child and
    an orphan (its parent exits at once: re-parented to init), then fail or time out."""
    tests_dir = Path(__file__).resolve().parents[1]
    (tmp_path / "conftest.py").write_text(f"import sys\nsys.path.insert(0, {str(tests_dir)!r})\n"
                                          "from process_tree import no_process_outlives_its_test  # noqa\n")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent("""
        import subprocess, time
        import pytest

        def _start(name):
            child = subprocess.Popen(["sleep", "300"])
            orphan = subprocess.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"],
                                    capture_output=True, text=True).stdout
            with open(name + ".pids", "w") as fh:
                fh.write(f"{child.pid} {orphan}")

        def test_fails():
            _start("fails")
            assert False

        @pytest.mark.timeout(3)
        def test_times_out():
            _start("times_out")
            time.sleep(60)
    """))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "2 failed" in res.stdout and "Timeout" in res.stdout, res.stdout[-3000:]
    pids = [int(x) for name in ("fails", "times_out") for x in (tmp_path / f"{name}.pids").read_text().split()]
    assert len(pids) == 4
    running = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0300"):
                running.append(pid)
        except OSError:
            pass
    assert not running


def test_the_ci_check_lists_a_process_left_with_the_suite_token(tmp_path):
    tests_dir = Path(__file__).resolve().parents[1]
    token = f"check-{os.getpid()}-{time.monotonic_ns()}"
    left = subprocess.Popen(["sleep", "300"], env=dict(os.environ, SIMPATTERNS_TEST_JOB=f"{token}/7"))
    try:
        found = subprocess.run([sys.executable, str(tests_dir / "process_tree.py"), token, "0"],
                               env=dict(os.environ, SIMPATTERNS_TEST_JOB=token), capture_output=True, text=True,
                               timeout=120)
        assert found.returncode == 1 and f"pid {left.pid} ({token}/7): sleep 300" in found.stderr
    finally:
        left.kill()
        left.wait()
    clean = subprocess.run([sys.executable, str(tests_dir / "process_tree.py"), token, "0"], capture_output=True,
                           text=True, timeout=120)
    assert clean.returncode == 0 and clean.stderr == ""
