"""Labelled action sets: (task, action, label) rows from our simulator, stored as Parquet.

Each task's scene is simulated with ``actions`` valid actions sampled
uniformly in the unit cube (PHYRE's action space; invalid samples, balls that
leave the scene or overlap a body, are redrawn) through `simpatterns.parallel`.
The label of a rollout comes from a `Labeler`:

* ``"success"``: PHYRE's task success (1 or 0);
* a reward program (a ``.rwd`` path or program text, compiled once per worker):
  its success as the label, its dense score and per-clause scores stored beside;
* a Python function ``trace -> float`` given by ``module:function``
  (hand-written rewards, e.g. `simpatterns.value.handwritten`).

Rollouts stop at PHYRE's success only for the ``"success"`` label; programs and
functions see the whole episode.

Columns: ``task`` (``TTTTT:VVV``), ``x``, ``y``, ``r`` (the action), ``label``
(the training target, in [0, 1]), ``success`` (bool), ``score`` (dense, in
[0, 1]) and ``clauses`` (list of per-clause scores, empty without a program).
The file's schema metadata records the labeler.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_open
from simpatterns.parallel import Backend, Progress, parallel_map
from simpatterns.simulators.phyre import check_action, get_template, simulate

COLUMNS = ("task", "x", "y", "r", "label", "success", "score", "clauses")


class DataError(SimpatternsError, ValueError):
    """A dataset cannot be built or read; the message names the file or field."""


@dataclass(frozen=True)
class Labeler:
    """What turns a rollout into a label: ``"success"``, a program, or ``module:function``."""

    spec: str = "success"

    def _kind(self) -> str:
        if self.spec == "success":
            return "success"
        head = self.spec.split(":", 1)
        if len(head) == 2 and head[0].replace(".", "").replace("_", "").isalnum() and "\n" not in self.spec \
                and not Path(self.spec).exists() and "(" not in self.spec:
            return "function"
        return "program"

    def load(self) -> Callable[[Any], tuple[float, bool, float, list[float]]]:
        """``trace -> (label, success, score, clause scores)``; raises DataError for a bad spec."""
        kind = self._kind()
        if kind == "success":
            return lambda tr: (float(tr.success), bool(tr.success), float(tr.success), [])
        if kind == "function":
            mod, name = self.spec.split(":", 1)
            try:
                fn = getattr(importlib.import_module(mod), name)
            except (ImportError, AttributeError) as e:
                raise DataError(f"label {self.spec!r}: cannot load the function ({e})") from None

            def call(tr: Any) -> tuple[float, bool, float, list[float]]:
                v = float(np.clip(fn(tr), 0.0, 1.0))
                return v, v >= 1.0, v, []
            return call
        from simpatterns.dsl import RewardProgram

        try:
            prog = RewardProgram.coerce(self.spec)
        except Exception as e:  # noqa: BLE001 - any compile error is the user's program
            raise DataError(f"label program {self.spec!r}: {e}") from None

        def score(tr: Any) -> tuple[float, bool, float, list[float]]:
            res = prog.evaluate(trace=tr)
            return float(res.success), bool(res.success), float(res.score), [float(c.score) for c in res.clauses]
        return score


def parse_task(tid: str) -> tuple[str, int]:
    """``"00007:042"`` -> ``("00007", 42)`` (DataError when malformed)."""
    try:
        t, v = str(tid).split(":")
        return f"{int(t):05d}", int(v)
    except ValueError:
        raise DataError(f"task id {tid!r} is not TEMPLATE:VARIANT (e.g. 00007:042)") from None


def task_scene(tid: str):
    template, variant = parse_task(tid)
    try:
        return get_template(template).variant_scene(variant)
    except (KeyError, IndexError) as e:
        raise DataError(f"task {tid!r}: no such shipped variant ({e})") from None


def sample_valid_actions(scene: Any, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` valid actions, uniform in the unit cube (invalid draws redrawn), shape (n, 3)."""
    out: list[np.ndarray] = []
    for _ in range(200):
        cand = rng.random((max(n, 16) * 2, 3))
        out.extend(a for a in cand if check_action(scene, a) is None)
        if len(out) >= n:
            return np.asarray(out[:n])
    raise DataError("could not sample enough valid actions (the scene leaves no room for the ball)")


def _label_task(item: tuple[str, list[list[float]], str]) -> list[dict[str, Any]]:
    tid, actions, spec = item
    label = _labelers.get(spec) or _labelers.setdefault(spec, Labeler(spec).load())
    scene = task_scene(tid)
    rows = []
    for a in actions:
        # a goal other than PHYRE's may be judged after PHYRE's success: run to the horizon
        tr = simulate(scene, a, stop_on_success=spec == "success").trace
        lab, ok, sc, clauses = label(tr)
        rows.append({"task": tid, "x": a[0], "y": a[1], "r": a[2], "label": lab, "success": ok,
                     "score": sc, "clauses": clauses})
    return rows


_labelers: dict[str, Callable] = {}  # compiled once per worker process


def build_dataset(tasks: Sequence[str], actions: int, label: str = "success", *, seed: int = 0,
                  workers: int = 1, backend: Backend | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Columns (see the module docstring) of ``actions`` rollouts per task, in task order, simulated
    by ``workers`` processes on ``backend`` (None: this machine); ``progress`` advances per task."""
    Labeler(label).load()  # fail early, in this process, with one clear message
    items = []
    for k, tid in enumerate(tasks):
        rng = np.random.default_rng([seed, k])
        items.append((tid, sample_valid_actions(task_scene(tid), actions, rng).tolist(), label))
    by_task: dict[int, list[dict[str, Any]]] = {}
    for i, rows in parallel_map(_label_task, items, workers=workers, progress=progress, chunksize=1,
                                 backend=backend):
        by_task[i] = rows
    rows = [r for i in range(len(items)) for r in by_task[i]]
    return {c: [r[c] for r in rows] for c in COLUMNS}


def write_parquet(path: str | Path, columns: dict[str, Any], meta: dict[str, Any] | None = None) -> Path:
    """Write the columns atomically, with ``meta`` as JSON in the schema metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "task": pa.array(columns["task"], pa.string()),
        **{c: pa.array(columns[c], pa.float64()) for c in ("x", "y", "r", "label", "score")},
        "success": pa.array(columns["success"], pa.bool_()),
        "clauses": pa.array(columns["clauses"], pa.list_(pa.float64())),
    }).replace_schema_metadata({"simpatterns": json.dumps(meta or {})})
    path = Path(path)
    with atomic_open(path, "wb", encoding=None) as f:
        pq.write_table(table, f)
    return path


def read_parquet(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(columns as numpy arrays / lists, metadata) of a dataset file."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not a readable Parquet dataset ({e})") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    cols: dict[str, Any] = {c: table.column(c).to_pylist() for c in ("task", "clauses")}
    for c in ("x", "y", "r", "label", "score", "success"):
        cols[c] = table.column(c).to_numpy()
    label = cols["label"]
    if not np.all((label >= 0) & (label <= 1)):
        raise DataError(f"{path}: field label must lie in [0, 1]")
    raw = (table.schema.metadata or {}).get(b"simpatterns", b"{}")
    return cols, json.loads(raw)


def select_tasks(spec: str, per_template: int | None = None) -> list[str]:
    """Task ids from a comma list of ``TTTTT:VVV`` and/or template ids (a template
    stands for its first ``per_template`` variants, all when None); ``all``: every template."""
    from simpatterns.simulators.phyre import TEMPLATES

    out: list[str] = []
    items = sorted(TEMPLATES) if spec.strip() == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    for item in items:
        if ":" in item:
            t, v = parse_task(item)
            task_scene(f"{t}:{v}")
            out.append(f"{t}:{v:03d}")
            continue
        try:
            template = get_template(f"{int(item):05d}")
        except (KeyError, ValueError):
            raise DataError(f"task list: {item!r} is neither a template id nor TEMPLATE:VARIANT") from None
        n = template.num_variants if per_template is None else min(per_template, template.num_variants)
        out.extend(f"{int(item):05d}:{v:03d}" for v in range(n))
    if not out:
        raise DataError("task list: no tasks given")
    return list(dict.fromkeys(out))
