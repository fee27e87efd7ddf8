"""The whole hostile corpus through a real `simpatterns discover` process, served by the scripted
LLM server, with the AST gate switched off: only the kernel stands.

After the job: no new SysV IPC objects, no process left with the job's uids, nothing new under
/tmp or /dev/shm owned by them, sentinels of other processes alive, and the parent's peak RSS
under the bound docs/design/sandbox.md states.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from evolve_fixtures import alive
from evolve_hostile import CORPUS, KERNEL, NUMPY, RESULTS, program
from test_sandbox_kernel import owned_by, processes_of, sysv_objects

from simpatterns.evolve.runlog import RunLog
from simpatterns.llm.testing import Reply, ScriptedLLMServer
from simpatterns.sandbox import kernel

PARENT_RSS_BOUND_MB = 300  # docs/design/sandbox.md: the discovery process's peak RSS during this job

CONFIG = """[evolve]
gate = false
workers = 2
[evolve.sandbox]
timeout_s = 60.0
smoke_timeout_s = 40.0
cpu_s = 2.0
memory_mb = 512
"""


def _peak_rss_mb(pid: int) -> float:
    try:
        line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0.0
    return int(line.split()[1]) / 1024


@pytest.mark.skipif(os.geteuid() != 0, reason="sentinels of other uids need root")
def test_hostile_discovery_job_leaves_nothing_behind(traces, small_library, tmp_path):
    tdir = tmp_path / "traces"
    tdir.mkdir()
    for i, t in enumerate(traces[:6]):
        t.save(tdir / f"t{i}.npz")
    base = small_library.save(tmp_path / "base")
    labels = tmp_path / "labels.toml"
    labels.write_text('[[label]]\nlabel = "probe"\ndescription = "hostile corpus"\nparams = ["object"]\n')
    (tmp_path / "evolve.toml").write_text(CONFIG)
    outside = tmp_path / "outside"
    outside.mkdir()
    sentinels = [subprocess.Popen(["sleep", "300"], user=65534), subprocess.Popen(["sleep", "300"])]
    pids = [p.pid for p in sentinels]
    corpus = [(n, b) for n, b, _, _ in CORPUS + KERNEL + NUMPY + RESULTS]
    good = program("probe", "    return [(int(np.argmax(trace.speed()[:, -1])), {'object': trace.names[-1]})]", "",
                   "good")
    sources = [good] + [program("probe", body, str(outside / "marker"), name, pids) for name, body in corpus]
    ipc_before = sysv_objects()
    env = dict(os.environ, OPENAI_API_KEY="sk-test-secret-123")
    run = tmp_path / "lib.run"
    peak = 0.0
    try:
        with ScriptedLLMServer(replies=[Reply("```python\n" + src + "```") for src in sources]) as server:
            cmd = [sys.executable, "-m", "simpatterns.cli", "discover", "--traces", str(tdir), "--labels", str(labels),
                   "--config", str(tmp_path / "evolve.toml"), "--out", str(tmp_path / "lib"), "--run-dir",
                   str(run), "--base-library", str(base), "--llm", "openai", "--base-url", server.base_url,
                   "--samples", str(len(sources)), "--batch", str(len(sources)), "--seed", "1", "-q"]
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            servers: list[int] = []
            deadline = time.time() + 400
            while proc.poll() is None and time.time() < deadline:
                peak = max(peak, _peak_rss_mb(proc.pid))
                if not servers and (run / "session.json").is_file():
                    try:
                        servers = json.loads((run / "session.json").read_text())["servers"]
                    except (ValueError, KeyError):
                        pass
                time.sleep(0.05)
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()[-2000:]
        recs = [r for _, r in RunLog(run).records() if r["type"] == "sample"]
        assert len(recs) == len(sources)  # the job went through every program and finished
        names = {r["code"].split("# hostile: ")[1].split()[0] for r in recs}
        assert names == {"good"} | {n for n, _ in corpus}
        text = json.dumps(recs)
        assert "sk-test-secret" not in text and "root:x:0" not in text
        # what the kernel must have held
        assert alive(pids) == pids, "a sentinel was killed"
        assert sysv_objects() == ipc_before
        uids = set().union(*(set(kernel.uid_range(s)) for s in servers)) | {65534}
        uids.discard(65534)
        deadline = time.time() + 5
        while processes_of(uids) and time.time() < deadline:
            time.sleep(0.1)
        assert processes_of(uids) == []
        # by owner: other processes of the machine make entries meanwhile (multiprocessing's sem.mp-*)
        assert owned_by("/tmp", uids) == [] and owned_by("/dev/shm", uids | {65534}) == []
        assert list(outside.iterdir()) == []
        assert 0 < peak <= PARENT_RSS_BOUND_MB, f"parent peak RSS {peak:.0f} MB"
        print(f"parent peak RSS {peak:.0f} MB")
    finally:
        for p in sentinels:
            p.kill()
            p.wait()
        shutil.rmtree(tmp_path / "lib", ignore_errors=True)
