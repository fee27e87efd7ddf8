"""Nothing an LLM says crashes or hangs a job, and ``--resume`` always finishes after it.

Each poison answer goes through a real discovery job (the scripted server, the openai client,
the sandbox, the log); the job is then resumed with a larger budget, so the next prompts are
built from a database that holds the poison's feedback (where a lone surrogate used to crash
every resume at the same place).
"""

from __future__ import annotations

import json
import time

import pytest
from evolve_hostile import program

from simpatterns.evolve.config import EvolveConfig
from simpatterns.evolve.discovery import DiscoveryJob
from simpatterns.evolve.prompt import LabelSpec, Version, assemble, build_prompt, extract_code, skeleton
from simpatterns.evolve.runlog import RunLog
from simpatterns.evolve.selfdiscovery import parse_proposed_labels
from simpatterns.llm import make_client
from simpatterns.llm.testing import Reply, ScriptedLLMServer
from simpatterns.sandbox.limits import SandboxLimits
from simpatterns.sandbox.reasons import Rejected

N = 300_000
GOOD = program("probe", "    return [(int(np.argmax(trace.speed()[:, -1])), {'object': trace.names[-1]})]", "")


def fenced(src: str) -> str:
    return "```python\n" + src + "```\n"


POISON = {
    # a lone surrogate in the exception message: it comes back as the rejection's detail and
    # goes into the next prompt's feedback
    "surrogate_in_exception": fenced(GOOD.replace("    return [", "    raise ValueError('bad \\ud800 value')\n"
                                                               "    return [")),
    "surrogate_in_answer": fenced(GOOD + "# \ud800\udfff\ud800\n") + "\udc80",
    "newlines": "\n" * N + "x",
    "newlines_in_fence": "```python\n" + "\n" * N + "x\n```",
    "spaces_after_fence": "```" + " " * N + "x",
    "tabs_after_fence": "```" + "\t" * N + "python",
    "carriage_returns": "def detect_v1(\r" * (N // 15),
    "brackets": "[" * (N // 2),
    "huge": "x" * 5_000_000,
    "nul_bytes": fenced(GOOD.replace("def detect", "\x00def detect")),
    "unicode_mix": fenced(GOOD.replace("# hostile", "# \u202e\u0301\U0001f600 \ufeff")) + "\u2028" * 1000,
}


def test_answer_scanning_is_linear():
    """The answer handling scans in linear time: doubling a pathological answer at most about
    doubles the time (it was quadratic on runs of whitespace). CPU time of this process, best
    of 3: other jobs on a loaded machine stretch wall time unevenly between the two sizes."""
    spec = LabelSpec("probe", "x", params=["object"])
    prompt = build_prompt(spec, [Version(skeleton(spec), None, 0)], 0, 0, {}, [], "")

    def cost(text: str) -> float:
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            try:
                assemble(text, prompt, spec)
            except Rejected:
                pass
            extract_code(text)
            parse_proposed_labels(text, set(), 3)
            best = min(best, time.process_time() - t0)
        return best

    for make in (lambda n: "\n" * n + "x", lambda n: "```" + " " * n + "x", lambda n: "```" + "\t" * n + "x\n```",
                 lambda n: "[" * n, lambda n: "```python\n" + "\n" * n + "y = 1\n```"):
        small, large = cost(make(40_000)), cost(make(160_000))
        assert large < 0.5 or large < 8 * max(small, 1e-3), (make(3)[:12], small, large)


@pytest.mark.parametrize("name", sorted(POISON))
def test_a_poison_answer_neither_crashes_nor_hangs_the_job_and_resume_finishes(name, traces, small_library,
                                                                                 tmp_path):
    spec = LabelSpec("probe", "poison", params=["object"])
    limits = SandboxLimits(timeout_s=30.0, smoke_timeout_s=20.0, cpu_s=2.0, memory_mb=512)
    # the first run stops after its first round (out of tokens), as a crash there would have
    cfg = EvolveConfig(samples_per_label=6, batch_size=2, workers=1, seed=3, sandbox=limits, max_total_tokens=1)
    t0 = time.perf_counter()
    with ScriptedLLMServer(replies=[Reply(POISON[name]), Reply(POISON[name])], default=Reply(fenced(GOOD))) as srv:
        client = make_client("openai", base_url=srv.base_url, concurrency=2)
        try:
            from simpatterns.evolve.proposers import LLMProposer

            DiscoveryJob(traces[:4], [spec], small_library, tmp_path / "run", tmp_path / "lib", LLMProposer(client),
                         cfg).run()
            assert len([r for _, r in RunLog(tmp_path / "run").records() if r["type"] == "sample"]) == 2
            cfg.max_total_tokens = None  # resume past the poison: the next prompts carry its feedback
            job = DiscoveryJob(traces[:4], [spec], small_library, tmp_path / "run", tmp_path / "lib",
                               LLMProposer(client), cfg, resume=True)
            job.run()
        finally:
            client.close()
    assert time.perf_counter() - t0 < 120
    recs = [r for _, r in RunLog(tmp_path / "run").records() if r["type"] == "sample"]
    assert len(recs) == 6 and job.state.done
    for r in recs[:2]:
        assert r["outcome"] == "rejected" or name in ("surrogate_in_answer", "unicode_mix"), r
    # every record is plain, encodable JSON
    for line in (tmp_path / "run" / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        json.loads(line)


@pytest.mark.parametrize("extra, words", [
    (["--max-total-tokens", "3000"], "token budget"),
    ([], "sample budget"),
], ids=["tokens", "samples"])
def test_the_last_line_names_the_budget_that_ended_the_run(extra, words, traces, small_library, tmp_path):
    import os
    import subprocess
    import sys

    tdir = tmp_path / "traces"
    tdir.mkdir()
    for i, t in enumerate(traces[:4]):
        t.save(tdir / f"t{i}.npz")
    base = small_library.save(tmp_path / "base")
    labels = tmp_path / "labels.toml"
    labels.write_text('[[label]]\nlabel = "probe"\ndescription = "budget"\nparams = ["object"]\n')
    with ScriptedLLMServer(default=Reply(fenced(GOOD))) as server:
        cmd = [sys.executable, "-m", "simpatterns.cli", "discover", "--traces", str(tdir), "--labels", str(labels),
               "--out", str(tmp_path / "lib"), "--base-library", str(base), "--llm", "openai", "--base-url",
               server.base_url, "--samples", "8", "--batch", "2", "--seed", "1", "-q", *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, OPENAI_API_KEY="sk-x", COLUMNS="200"))
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("stopped: ") and words in last, done.stdout[-500:]
