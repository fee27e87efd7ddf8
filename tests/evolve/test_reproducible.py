"""The same seed gives the same library and the same log, byte for byte.

Two `simpatterns discover` processes (different hash seeds, so set order differs too) run the
same job against the scripted LLM server, one after the other into the same paths, the
second beside a process that keeps a core busy. The time penalty reads a candidate's Python
steps (`simpatterns.detectors.cost`), not its run time; the CPU time the sandbox measures
goes to ``timings.jsonl`` only, so no timing reaches the library, the log
(``samples.jsonl``) or ``job.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from test_discovery import labels_file, scripted_server


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_discover_twice_with_the_same_seed_is_byte_identical(trace_dir, builtin, small_library, tmp_path):
    base = small_library.save(tmp_path / "base")
    labels = labels_file(tmp_path / "labels.toml")
    lib, run = tmp_path / "lib", tmp_path / "lib.run"
    outputs = []
    with scripted_server(builtin) as server:
        for hash_seed in ("1", "2"):
            cmd = [sys.executable, "-m", "simpatterns.cli", "discover", "--traces", str(trace_dir), "--labels",
                   str(labels), "--out", str(lib), "--run-dir", str(run), "--base-library", str(base), "--llm",
                   "openai", "--base-url", server.base_url, "--samples", "8", "--batch", "4", "--seed", "0", "-q"]
            env = dict(os.environ, OPENAI_API_KEY="sk-scripted", PYTHONHASHSEED=hash_seed)
            load = None if hash_seed == "1" else subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            finally:
                if load is not None:
                    load.kill()
                    load.wait()
            assert done.returncode == 0, done.stderr[-2000:]
            outputs.append((_files(lib), {n: (run / n).read_bytes() for n in ("samples.jsonl", "job.json")}))
            timings = [json.loads(line) for line in (run / "timings.jsonl").read_text().splitlines()]
            assert timings and all(t["cpu_s"] >= 0 for t in timings)  # measured, reported, not scored
            shutil.move(str(lib), str(tmp_path / f"lib{hash_seed}"))
            shutil.move(str(run), str(tmp_path / f"run{hash_seed}"))
    (lib_a, log_a), (lib_b, log_b) = outputs
    assert any(name.endswith(".py") and name not in _files(base) for name in lib_a)  # something was accepted
    assert lib_a == lib_b
    assert log_a == log_b
    assert b"elapsed_s" not in log_a["samples.jsonl"] and b"wall_s" not in log_a["samples.jsonl"]
