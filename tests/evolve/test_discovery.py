"""Discovery jobs end to end: offline tuning, a scripted LLM, the hostile corpus inside a job,
and SIGKILL + resume against an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from evolve_fixtures import alive, processes_mentioning
from process_tree import descendants, kill_mid_run, wait_gone
from evolve_hostile import CORPUS, KERNEL, NUMPY, RESULTS, program

from simpatterns.detectors.library import PatternLibrary
from simpatterns.sandbox import reasons as R
from simpatterns.evolve.config import EvolveConfig, load_labels
from simpatterns.evolve.discovery import DiscoveryJob, JobError
from simpatterns.evolve.prompt import LabelSpec
from simpatterns.evolve.proposers import LLMProposer, OfflineProposer
from simpatterns.evolve.report import build_report
from simpatterns.evolve.runlog import RunLog
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, Rule, ScriptedLLMServer


def fast_config(**kw) -> EvolveConfig:
    cfg = EvolveConfig(samples_per_label=8, batch_size=4, workers=2,
                       sandbox=SandboxLimits(timeout_s=5.0, smoke_timeout_s=1.0, memory_mb=512))
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


def samples(run_dir: Path) -> list[dict]:
    return [r for _, r in RunLog(run_dir).records() if r["type"] == "sample"]


# ------------------------------------------------------------------ offline
def test_offline_proposer_improves_a_mistuned_detector(traces, builtin, small_library, tmp_path):
    seed_file = tmp_path / "mistuned.py"
    seed_file.write_text(builtin.get("high energy impact").source.replace("HIGH_SPEED = 100.0", "HIGH_SPEED = 40.0"))
    spec = LabelSpec("high energy impact", "a hard collision", depends=["collision start"],
                     params=["object_a", "object_b", "speed"], seed=str(seed_file))
    job = DiscoveryJob(traces, [spec], small_library, tmp_path / "run", tmp_path / "lib", OfflineProposer(),
                       fast_config(samples_per_label=24, seed=2))
    lib = job.run()
    start = next(r for _, r in RunLog(tmp_path / "run").records() if r["type"] == "label_start")
    seed_fitness = start["seed_program"]["fitness"]
    assert start["seed_reason"] is None  # the mis-tuned seed fires and is scored
    done = job.state.done[0]
    assert done.accepted, done.why
    assert done.program.fitness > seed_fitness
    assert "HIGH_SPEED = 40.0" not in lib.get("high energy impact").source
    entry = PatternLibrary.load(tmp_path / "lib").entry("high energy impact")
    assert entry.provenance == "evolved" and entry.extra["evolve"]["model"] == "offline-mutation"
    assert entry.extra["evolve"]["samples"] == 24 and entry.fitness == pytest.approx(done.program.fitness)


def test_offline_without_seed_code_says_so(traces, small_library, tmp_path):
    spec = LabelSpec("fast mover", "moves fast")
    job = DiscoveryJob(traces, [spec], small_library, tmp_path / "run", tmp_path / "lib", OfflineProposer(),
                       fast_config())
    job.run()
    done = job.state.done[0]
    assert not done.accepted and "seed program" in done.why and done.samples == 0


# ---------------------------------------------------------- scripted LLM
def _fence(src: str) -> str:
    return "Here is the improved detector.\n```python\n" + src + "```\n"


def scripted_answers(builtin) -> dict[str, list[tuple[str, set[str]]]]:
    """Per label: (answer, acceptable outcomes). The good answer is the built-in detector."""
    answers = {}
    for label in ("airborne", "brief tap"):
        good = builtin.get(label).source
        params = builtin.get(label).params
        key = params[0]
        answers[label] = [
            (_fence(good), {"registered"}),
            # subtly wrong: a misspelt key, fractional frames, a body that does not exist, constant output
            (_fence(good.replace(f'"{key}":', '"obj":', 1)), {R.UNKNOWN_PARAMS}),
            (_fence(good.replace("def detect(trace, events):",
                                 "def detect(trace, events):\n    return [(0.5, {k: 0 for k in PARAMS})]\n")),
             {R.INVALID_EVENTS}),
            (_fence(good.replace("def detect(trace, events):",
                                 "def detect(trace, events):\n    return [(2, {k: 'the ball' for k in PARAMS})]\n")),
             {R.UNKNOWN_OBJECT}),
            # broken: not Python, wrong function, crashes
            ("```python\ndef detect(trace, events)\n    return [\n```", {R.SYNTAX_ERROR}),
            ("```python\ndef detect_v9(trace, events):\n    return []\n```", {R.NO_FUNCTION}),
            ("I would look at the velocities.", {R.NO_FUNCTION, R.SYNTAX_ERROR}),
            (_fence(good.replace("def detect(trace, events):",
                                 "def detect(trace, events):\n    return trace.no_such_thing\n")), {R.EXCEPTION}),
            # hostile
            (_fence(good.replace("import numpy as np", "import numpy as np\nimport os")), {R.FORBIDDEN_IMPORT}),
        ]
    return answers


def scripted_server(builtin, delay_s: float = 0.0) -> ScriptedLLMServer:
    answers = scripted_answers(builtin)
    rules = []
    for label, items in answers.items():
        for j, (text, _) in enumerate(items):
            rules.append(Rule(replies=[Reply(text, delay_s=delay_s)], match=(
                lambda body, label=label, j=j, n=len(items):
                f"Pattern to detect: {label!r}" in body["messages"][-1]["content"] and body["seed"] % n == j)))
    return ScriptedLLMServer(rules=rules)


def labels_file(path: Path) -> Path:
    path.write_text(
        '[[label]]\nlabel = "airborne"\ndescription = "A dynamic body touches nothing for a while."\n'
        'params = ["object", "frames"]\n\n'
        '[[label]]\nlabel = "brief tap"\ndescription = "Two bodies touch for a very short time."\n'
        'depends = ["collision start", "collision end"]\nparams = ["object_a", "object_b", "frames"]\n'
    )
    return path


def test_scripted_llm_job_accepts_the_good_detectors(traces, builtin, small_library, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-candidates")
    answers = scripted_answers(builtin)
    specs, _ = load_labels(labels_file(tmp_path / "labels.toml"))
    with scripted_server(builtin, delay_s=0.2) as server:  # answers that take a while overlap, however loaded
        client = make_client("openai", base_url=server.base_url, concurrency=4)
        job = DiscoveryJob(traces, specs, small_library, tmp_path / "run", tmp_path / "lib",
                           LLMProposer(client), fast_config(samples_per_label=16, seed=4))
        lib = job.run()
        client.close()
        assert server.max_in_flight >= 2  # several requests in flight
    for label in ("airborne", "brief tap"):
        assert lib.get(label).source.split("def detect")[1] == builtin.get(label).source.split("def detect")[1]
        assert lib.entry(label).provenance == "evolved"
    by_code = {}
    for rec in samples(tmp_path / "run"):
        outcome = "registered" if rec["status"] == "registered" else rec["reason"]["code"]
        by_code.setdefault(rec["label"], set()).add(outcome)
    for label, items in answers.items():
        expected = set().union(*(ok for _, ok in items)) | {R.DUPLICATE}
        assert by_code[label] <= expected, by_code[label] - expected
        assert "registered" in by_code[label]
    # the seeds are derived from the job seed, so which answers were drawn is fixed; across both
    # labels every kind of failure shows up
    assert {R.UNKNOWN_PARAMS, R.INVALID_EVENTS, R.UNKNOWN_OBJECT, R.SYNTAX_ERROR, R.NO_FUNCTION, R.EXCEPTION,
            R.FORBIDDEN_IMPORT} <= set().union(*by_code.values())
    saved = PatternLibrary.load(tmp_path / "lib")
    assert saved.order()[:3] == small_library.order() and {"airborne", "brief tap"} <= set(saved.order())
    report = build_report(tmp_path / "run")
    assert report.markdown.is_file() and all(lab.plot and lab.plot.is_file() for lab in report.labels)
    assert report.reasons[R.FORBIDDEN_IMPORT] >= 1
    # the plots draw the acceptance threshold: the run's theta over each label's baseline
    theta = fast_config(samples_per_label=16, seed=4).fitness.resolved().theta
    assert all(lab.theta == theta and lab.baseline is not None for lab in report.labels)


# ------------------------------------------------------------ hostile jobs
# What an "ok" from the sandbox alone becomes inside a job
JOB_OK = {"registered", "duplicate", "degenerate_never", "degenerate_always", "degenerate_constant"}


@pytest.mark.parametrize("gate", [True, False])
def test_hostile_corpus_inside_a_job(traces, small_library, tmp_path, monkeypatch, gate):
    """Every hostile program comes from the (scripted) LLM into a running job: with the gate it is
    mostly stopped statically; without it (root only) the sandbox alone contains it.

    The wall clocks are generous and a 2 s CPU limit stops the loops, so a loaded machine (a
    slow child) changes no outcome: each program must still end with its own reason."""
    if not gate and os.geteuid() != 0:
        pytest.skip("the gate-free boundary (chroot, nobody) needs root")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123")
    marker = tmp_path / "outside" / "marker"
    marker.parent.mkdir()
    label = "probe"
    corpus = CORPUS + KERNEL + NUMPY + RESULTS
    expected = {name: set(ok_gate if gate else ok_bare) for name, _, ok_gate, ok_bare in corpus}
    for ok in expected.values():
        if "ok" in ok:
            ok |= JOB_OK
    expected["good"] = {"registered"}
    good = program(label, "    return [(int(np.argmax(trace.speed()[:, -1])), {'object': trace.names[-1]})]", "", "good")
    sources = [good] + [program(label, body, str(marker), name) for name, body, _, _ in corpus]
    spec = LabelSpec(label, "hostile corpus", params=["object"])
    limits = SandboxLimits(timeout_s=60.0, smoke_timeout_s=40.0, cpu_s=2.0, memory_mb=512)
    with ScriptedLLMServer(replies=[Reply("```python\n" + src + "```") for src in sources]) as server:
        client = make_client("openai", base_url=server.base_url, concurrency=8)
        cfg = fast_config(samples_per_label=len(sources), batch_size=len(sources), gate=gate, seed=1, sandbox=limits)
        job = DiscoveryJob(traces[:8], [spec], small_library, tmp_path / "run", tmp_path / "lib",
                           LLMProposer(client), cfg)
        job.run()
        client.close()
    recs = samples(tmp_path / "run")
    assert len(recs) == len(sources)  # the job went through every program and finished
    seen = set()
    for rec in recs:
        name = rec["code"].split("# hostile: ")[1].split()[0]
        outcome = "registered" if rec["status"] == "registered" else rec["reason"]["code"]
        assert outcome in expected[name], f"{name}: {rec['reason']}"
        assert "sk-test-secret" not in json.dumps(rec) and "root:x:0" not in json.dumps(rec), name
        seen.add(name)
    assert seen == set(expected)
    assert job.state.done[0].accepted
    # nothing on disk, nothing running
    assert list(marker.parent.iterdir()) == []
    assert job.sandbox_root and not Path(job.sandbox_root).exists()
    ran = sum(1 for r in recs if not r["reason"] or not r["reason"]["code"].startswith("forbidden"))
    assert len(job.sandbox_pids) >= ran + 2  # servers and every candidate child that ran
    deadline = time.time() + 5
    while alive(job.sandbox_pids) and time.time() < deadline:
        time.sleep(0.1)
    assert alive(job.sandbox_pids) == []


def test_job_refuses_to_overwrite_or_resume_another(traces, small_library, builtin, tmp_path):
    seed_file = tmp_path / "seed.py"
    seed_file.write_text(builtin.get("airborne").source)
    spec = LabelSpec("airborne", "x", params=["object", "frames"], seed=str(seed_file))
    cfg = fast_config(samples_per_label=4, seed=3)
    DiscoveryJob(traces, [spec], small_library, tmp_path / "run", tmp_path / "lib", OfflineProposer(), cfg).run()
    with pytest.raises(JobError, match="--resume"):
        DiscoveryJob(traces, [spec], small_library, tmp_path / "run", tmp_path / "lib", OfflineProposer(), cfg).run()
    with pytest.raises(JobError, match="seed"):
        DiscoveryJob(traces, [spec], small_library, tmp_path / "run", tmp_path / "lib", OfflineProposer(),
                     fast_config(samples_per_label=4, seed=4), resume=True).run()
    # resuming a finished job changes nothing
    before = (tmp_path / "run" / "samples.jsonl").read_bytes()
    DiscoveryJob(traces, [spec], small_library, tmp_path / "run", tmp_path / "lib", OfflineProposer(), cfg,
                 resume=True).run()
    assert (tmp_path / "run" / "samples.jsonl").read_bytes() == before


# -------------------------------------------------------- SIGKILL + resume
# The time penalty is the one input that differs between two runs (measured run times); it is
# off here so that the killed-and-resumed job must match the uninterrupted one bit for bit.
RESUME_CONFIG = "[evolve]\nbatch_size = 4\nworkers = 2\n[evolve.fitness]\nw_time = 0.0\n"


def _cli(trace_dir, labels, config, base_dir, out, run_dir, url, extra=()):
    return [sys.executable, "-m", "simpatterns.cli", "discover", "--traces", str(trace_dir), "--labels", str(labels),
            "--config", str(config), "--out", str(out), "--run-dir", str(run_dir), "--base-library",
            str(base_dir), "--llm", "openai", "--base-url", url, "--samples", "8", "--seed", "6", "-q", *extra]


def _in_process(trace_dir, labels, config, base_dir, out, run_dir, url, resume=False):
    from simpatterns.evolve.config import read_toml
    from simpatterns.evolve.discovery import traces_from_dir

    specs, table = load_labels(labels)
    cfg = EvolveConfig.from_json({**table, **read_toml(config)["evolve"]})
    cfg.seed, cfg.samples_per_label = 6, 8  # seed 6 draws the good answer for both labels within 8 samples
    traces, traces_id = traces_from_dir(trace_dir)
    client = make_client("openai", base_url=url, concurrency=cfg.batch_size)
    try:
        job = DiscoveryJob(traces, specs, PatternLibrary.load(base_dir), run_dir, out,
                           LLMProposer(client, cfg.llm_temperature, cfg.llm_max_tokens), cfg, resume=resume,
                           traces_id=traces_id)
        job.run()
    finally:
        client.close()
    return job


def _library_view(path: Path) -> dict:
    lib = PatternLibrary.load(path)
    return {k: (lib.get(k).source, lib.entry(k).provenance, lib.entry(k).fitness) for k in lib.order()}


def test_sigkill_and_resume_ends_with_the_uninterrupted_library(trace_dir, builtin, small_library, tmp_path):
    base_dir = small_library.save(tmp_path / "base")
    labels = labels_file(tmp_path / "labels.toml")
    config = tmp_path / "evolve.toml"
    config.write_text(RESUME_CONFIG)
    env = dict(os.environ, OPENAI_API_KEY="sk-scripted")
    kill_after = float(np.random.default_rng().uniform(0.0, 2.0))  # an arbitrary moment, not a chosen one
    with scripted_server(builtin) as server:
        run = tmp_path / "cut.run"
        proc = subprocess.Popen(_cli(trace_dir, labels, config, base_dir, tmp_path / "cut", run, server.base_url),
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 120  # wait until the job is inside its first label, then kill it
        while time.time() < deadline and proc.poll() is None:
            if (run / "samples.jsonl").is_file() and (run / "samples.jsonl").stat().st_size > 0:
                break
            time.sleep(0.02)
        time.sleep(kill_after)
        killed = proc.poll() is None
        session = json.loads((run / "session.json").read_text())
        job = descendants(proc.pid)  # its sandbox servers (and their namespaces' processes)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert killed or proc.returncode == 0, proc.stderr.read().decode()
        if killed:  # the killed session's servers and candidate children notice and exit
            assert not wait_gone(job, 10.0)[1]
            deadline = time.time() + 10
            while processes_mentioning(session["sandbox_root"]) and time.time() < deadline:
                time.sleep(0.1)
            assert not processes_mentioning(session["sandbox_root"])
            deadline = time.time() + 5  # and removed their sandbox directory on the way out
            while Path(session["sandbox_root"]).exists() and time.time() < deadline:
                time.sleep(0.05)
            assert not Path(session["sandbox_root"]).exists()
        resumed = _in_process(trace_dir, labels, config, base_dir, tmp_path / "cut", run, server.base_url, resume=True)
        ref = _in_process(trace_dir, labels, config, base_dir, tmp_path / "ref", tmp_path / "ref.run", server.base_url)
    assert _library_view(tmp_path / "cut") == _library_view(tmp_path / "ref")
    assert [r.accepted for r in resumed.state.done] == [r.accepted for r in ref.state.done] == [True, True]
    recs = [r for _, r in RunLog(run).records()]
    ref_recs = [r for _, r in RunLog(tmp_path / "ref.run").records()]
    # the seed was registered once per label, and the same samples were drawn, scored and registered
    assert [r["label"] for r in recs if r["type"] == "label_start"] == ["airborne", "brief tap"]
    key = lambda r: (r["label"], r["sample"], r["island"], r["seed"], r["prompt_hash"], r["status"],  # noqa: E731
                     (r["fitness"] or {}).get("fitness"))
    assert [key(r) for r in recs if r["type"] == "sample"] == [key(r) for r in ref_recs if r["type"] == "sample"]


def test_killed_discover_leaves_no_sandbox_process_and_resumes(trace_dir, builtin, small_library, tmp_path):
    base_dir = small_library.save(tmp_path / "base")
    labels = labels_file(tmp_path / "labels.toml")
    config = tmp_path / "evolve.toml"
    config.write_text(RESUME_CONFIG)  # two sandbox evaluators
    run = tmp_path / "cut.run"
    with scripted_server(builtin) as server:
        argv = _cli(trace_dir, labels, config, base_dir, tmp_path / "cut", run, server.base_url)
        started = lambda: (run / "samples.jsonl").is_file() and (run / "samples.jsonl").stat().st_size > 0  # noqa
        env = dict(os.environ, OPENAI_API_KEY="sk-scripted")
        killed = kill_mid_run(argv, tmp_path, started, env=env)
        print(f"discover: {killed.workers} processes under the job at the kill, all gone {killed.seconds:.2f} s later")
        assert killed.workers >= 2 and not killed.left, killed
        assert not Path(json.loads((run / "session.json").read_text())["sandbox_root"]).exists()  # cleaned up
        again = subprocess.run([*argv, "--resume"], env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert [r["label"] for _, r in RunLog(run).records() if r["type"] == "label_start"] == ["airborne", "brief tap"]
    assert sorted(PatternLibrary.load(tmp_path / "cut").order()) == sorted([*small_library.order(), "airborne",
                                                                             "brief tap"])


def test_torn_log_tail_is_cut_on_resume(tmp_path):
    log = RunLog(tmp_path)
    log.append([{"type": "label_start", "label": "x"}])
    end = log.append([{"type": "sample", "label": "x"}, {"type": "round_end", "label": "x"}])
    log.append([{"type": "sample", "label": "x", "sample": 9}])  # a group without its commit
    with open(log.samples_path, "ab") as fh:
        fh.write(b'{"type": "sam')  # torn mid-line by kill -9
    assert log.committed_end() == end
    log.truncate(log.committed_end())
    assert [r["type"] for _, r in log.records()] == ["label_start", "sample", "round_end"]
