"""Build datasets of PHYRE rollouts: random, solution and near-miss actions.

A dataset directory holds one ``.npz`` trace per rollout, named
``T<template>_V<variant>_<kind><k>.npz``, and ``index.jsonl`` with one line
per trace (file, template, variant, kind, action, success, frames). Traces
are written atomically as they finish (work is mapped over processes by
`simpatterns.parallel`); the index lists them in job order. A re-run skips
files that already load, so an interrupted build resumes where it stopped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from simpatterns.cli_support import progress_map
from simpatterns.files import WriteError, atomic_write_lines
from simpatterns.parallel import Backend
from simpatterns.simulators.phyre import Rollout, check_action, get_template, load_scene, simulate
from simpatterns.simulators.phyre.variants import random_valid_action
from simpatterns.trace import Trace, TraceFormatError

INDEX_NAME = "index.jsonl"
NEAR_MISS_SIGMA = 0.05  # action-space std of the perturbation around a solution
NEAR_MISS_TRIES = 200


@dataclass(frozen=True)
class RolloutJob:
    template: str
    variant: int
    kind: str  # "random" | "solution" | "near-miss"
    k: int
    seed: int
    stride: int = 1

    @property
    def filename(self) -> str:
        return f"T{self.template}_V{self.variant:03d}_{self.kind.replace('-', '')}{self.k}.npz"


def parse_actions(spec: str) -> list[tuple[str, int]]:
    """'random:5' -> [('random', 5)]; 'solution,near-miss:2' -> [...]."""
    out = []
    for part in spec.split(","):
        part = part.strip()
        name, _, count = part.partition(":")
        if name not in ("random", "solution", "near-miss"):
            raise ValueError(f"--actions: unknown kind {name!r} in {spec!r}; use random:N, solution, near-miss[:N]")
        try:
            n = int(count) if count else 1
        except ValueError:
            raise ValueError(f"--actions: count {count!r} in {part!r} is not an integer") from None
        if n < 1:
            raise ValueError(f"--actions: count must be >= 1 in {part!r}")
        out.append((name, n))
    return out


def plan_jobs(templates: Iterable[str], variants: int, actions: str, seed: int = 0, stride: int = 1) -> list[RolloutJob]:
    jobs = []
    for tid in templates:
        t = get_template(tid)
        n = min(variants, t.num_variants)
        if n == 0:
            raise LookupError(f"template {t.id} has no shipped variants")
        for v in range(n):
            for kind, count in parse_actions(actions):
                for k in range(count):
                    jobs.append(RolloutJob(t.id, v, kind, k, seed, stride))
    return jobs


def job_rollout(job: RolloutJob) -> Rollout | None:
    """The rollout of ``job``, simulated once; None when no action of its kind is found.

    A near-miss is a perturbed solution whose full run fails: the run that
    decides the kind is the one saved (no early-stop shortcut decides it,
    since a body creeping below the settle threshold can still reach the
    goal)."""
    scene = load_scene(job.template, job.variant)
    rng = np.random.default_rng([job.seed, int(job.template), job.variant, job.k, hash_kind(job.kind)])

    def run(action: Any) -> Rollout:
        return simulate(scene, action, stride=job.stride, seed=job.seed)

    if job.kind == "solution":
        return run(get_template(job.template).solution(job.variant))
    if job.kind == "random":
        try:
            return run(random_valid_action(scene, lambda: rng.random(3)).tolist())
        except RuntimeError:  # no valid action in 1000 draws
            return None
    solution = np.asarray(get_template(job.template).solution(job.variant))
    for _ in range(NEAR_MISS_TRIES):
        a = np.clip(solution + rng.normal(0, NEAR_MISS_SIGMA, 3), 0, 1)
        if check_action(scene, a) is not None:
            continue
        rollout = run(a.tolist())
        if rollout.trace is not None and not rollout.trace.success:
            return rollout
    return None


def hash_kind(kind: str) -> int:
    return {"random": 1, "solution": 2, "near-miss": 3}[kind]


def run_job(job: RolloutJob, out_dir: str) -> dict[str, Any]:
    path = Path(out_dir) / job.filename
    if path.exists():
        try:
            tr = Trace.load(path)
            return _index_row(job, tr, resumed=True)
        except TraceFormatError:
            path.unlink()
    rollout = job_rollout(job)
    if rollout is None:
        return {"file": None, "template": job.template, "variant": job.variant, "kind": job.kind, "k": job.k,
                "error": f"no {job.kind} action found"}
    assert rollout.trace is not None, rollout.invalid_reason
    rollout.trace.meta["action_kind"] = job.kind
    rollout.trace.save(path)
    return _index_row(job, rollout.trace)


def _index_row(job: RolloutJob, trace: Trace, resumed: bool = False) -> dict[str, Any]:
    return {
        "file": job.filename,
        "template": job.template,
        "variant": job.variant,
        "kind": job.kind,
        "k": job.k,
        "action": trace.meta.get("action"),
        "success": trace.success,
        "frames": trace.num_frames,
        "stride": trace.meta.get("stride", 1),
    }


def build_dataset(
    jobs: list[RolloutJob],
    out_dir: str | os.PathLike,
    workers: int = 1,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    progress: bool = False,
    backend: Backend | None = None,
) -> list[dict[str, Any]]:
    """Run ``jobs`` over ``workers`` processes; each trace is written as it finishes.

    Returns the index rows in job order (also written to ``index.jsonl``). On
    Ctrl-C the index lists the traces finished so far and a re-run resumes.
    ``on_done`` sees each row as its trace is written; ``progress`` shows a bar; ``backend``:
    where the rollouts run (None: this machine's processes)."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"{out}: cannot create the dataset folder ({exc.strerror or exc})") from None
    rows: list[dict[str, Any] | None] = [None] * len(jobs)
    try:
        # one rollout per message: a rollout costs far more than the message
        for i, row in progress_map(partial(run_job, out_dir=str(out)), jobs, workers=workers, backend=backend,
                                   progress="dataset" if progress else None, chunksize=1):
            rows[i] = row
            if on_done:
                on_done(row)
    finally:
        done = [r for r in rows if r is not None]
        atomic_write_lines(out / INDEX_NAME, (json.dumps(r) for r in done))
    return done
