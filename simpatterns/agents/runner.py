"""Evaluations: conditions × seeds × test tasks, an attempt log on disk, resume after a stop.

A run directory holds

- ``run.json``: what was evaluated (setup, seeds, the test tasks of each
  seed, budget, grid, conditions) and each test task's menu size and number
  of solving choices (for the expected score of random choice);
- ``episodes.jsonl``: one line per finished (condition, seed, task) episode
  with every attempt in it (`episode.AgentEpisode`), appended and flushed as each
  finishes, so Ctrl-C or a kill loses only the episodes in flight; running
  the same command again skips what is done. When a run ends (or stops) the
  file is rewritten in (condition, seed, task) order;
- ``memory-seed{S}.json``: the memory agent's counts trained for seed S.

A *condition* is an agent with its settings under one name: ``random``,
``memory``, ``oracle``, ``anneal``, or ``llm/<feedback>`` (e.g.
``llm/frames+annotation``). Agents that only simulate run over worker
processes (`simpatterns.parallel`); language-model episodes run in this
process, one at a time, against the client given.

For seed S of a setup, the test tasks are the fold's test split (optionally
the first ``per_template`` of each template, in id order) and the memory
agent trains on the fold's train + dev split (optionally
``train_per_template`` of each). Episode randomness (the random agent's
order, the annealer's seed, the model's request seeds) derives from (S,
task, condition), so results do not depend on the number of workers.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from simpatterns.agents.baselines import AnnealAgent, MemoryAgent, MemoryTable, OracleAgent, RandomAgent, train_memory
from simpatterns.agents.episode import Agent, AgentEpisode, TaskContext, run_episode
from simpatterns.agents.feedback import FeedbackOptions
from simpatterns.agents.folds import check_setup, get_fold
from simpatterns.agents.menu import DEFAULT_BINS, Menu, MenuStore
from simpatterns.agents.metrics import MAX_TEST_ATTEMPTS
from simpatterns.agents.tasks import Task, normalize_task_id, template_of
from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_write_json, atomic_write_lines
from simpatterns.cli_support import ProgressBar, progress_map
from simpatterns.parallel import Backend, WorkerSetup

RUN_FORMAT = "simpatterns-agent-run"
RUN_VERSION = 1
RUN_FILE = "run.json"
EPISODES_FILE = "episodes.jsonl"
TRANSCRIPT_FILE = "transcript.jsonl"
BASELINES = ("random", "memory", "oracle", "anneal", "anneal-continuous")
AGENTS = BASELINES + ("llm",)
VALUE_PREFIX = "value:"  # value:PATH, a trained value model (simpatterns.value)
LLM_SAMPLING = ("temperature", "max_tokens", "sample_seed", "choice_grammar")  # llm options, not FeedbackOptions


class RunError(SimpatternsError, RuntimeError):
    """The run cannot start or resume; the message says why."""


@dataclass(frozen=True)
class Condition:
    """An agent kind and its settings, under the name the report shows."""

    name: str
    agent: str
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "agent": self.agent, "options": self.options}


def make_conditions(agents: Sequence[str], feedback: Sequence[str] = ("annotation",),
                    llm_options: dict[str, Any] | None = None,
                    anneal_programs: dict[str, str] | None = None) -> list[Condition]:
    """Conditions for agent names (``llm`` gives one condition per feedback)."""
    out: list[Condition] = []
    for a in agents:
        a = a.strip()
        if a.startswith(VALUE_PREFIX):
            model = Path(a[len(VALUE_PREFIX):]).expanduser()
            if not model.is_file():
                raise ValueError(f"agent {a!r}: no model file {model} (train one with `simpatterns value train`)")
            out.append(Condition(a, "value", {"model": str(model.resolve())}))
            continue
        if a not in AGENTS:
            raise ValueError(f"unknown agent {a!r}; agents are {', '.join(AGENTS)}")
        if a == "llm":
            given = dict(llm_options or {})
            sampling = {k: given.pop(k) for k in LLM_SAMPLING if k in given}
            for fb in feedback:
                opts = FeedbackOptions(**{**given, "feedback": fb})
                out.append(Condition(f"llm/{fb}", "llm", {**opts.to_json(), **sampling}))
        elif a == "anneal":
            out.append(Condition("anneal", "anneal", {"programs": dict(anneal_programs or {})}))
        elif a == "anneal-continuous":
            out.append(Condition(a, "anneal", {"programs": dict(anneal_programs or {}), "bins": None}))
        else:
            out.append(Condition(a, a))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"conditions repeat: {', '.join(names)}")
    return out


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate on (see the module docstring)."""

    setup: str | None = "ball_within_template"
    seeds: tuple[int, ...] = (0,)
    tasks: tuple[str, ...] | None = None  # explicit test tasks instead of a fold's
    per_template: int | None = None
    train_per_template: int | None = None
    budget: int = MAX_TEST_ATTEMPTS
    bins: int = DEFAULT_BINS
    scan: str = "full"

    def __post_init__(self) -> None:
        if self.setup is None and self.tasks is None:
            raise ValueError("give an eval setup (a fold) or a list of tasks")
        if self.setup is not None:
            check_setup(self.setup)
        if not 1 <= self.budget <= MAX_TEST_ATTEMPTS:
            raise ValueError(f"budget must be in 1..{MAX_TEST_ATTEMPTS} (PHYRE's cap), got {self.budget}")
        for name in ("per_template", "train_per_template"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise ValueError(f"{name} must be >= 1")
        if not self.seeds:
            raise ValueError("give at least one seed")
        if self.tasks is not None:
            if not self.tasks:
                raise ValueError("the task list is empty")
            object.__setattr__(self, "tasks", tuple(normalize_task_id(t) for t in self.tasks))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["seeds"] = list(self.seeds)
        d["tasks"] = None if self.tasks is None else list(self.tasks)
        return d


def _per_template(ids: Iterable[str], k: int | None) -> list[str]:
    if k is None:
        return sorted(ids)
    groups: dict[str, list[str]] = defaultdict(list)
    for t in sorted(ids):
        groups[template_of(t)].append(t)
    return [t for g in groups.values() for t in g[:k]]


def test_tasks(config: EvalConfig, seed: int) -> list[str]:
    if config.tasks is not None:
        return _per_template(config.tasks, config.per_template)
    return _per_template(get_fold(config.setup, seed).test, config.per_template)


def train_tasks(config: EvalConfig, seed: int) -> list[str]:
    if config.setup is None:
        raise RunError("the memory agent trains on a fold's training tasks: give an eval setup, not --tasks")
    return _per_template(get_fold(config.setup, seed).train_all, config.train_per_template)


def episode_rng(seed: int, task: str, condition: str) -> np.random.Generator:
    h = hashlib.blake2b(f"{seed}\0{task}\0{condition}".encode(), digest_size=8).digest()
    return np.random.default_rng([seed, int.from_bytes(h, "big")])


# ------------------------------------------------------------------ the log
class EpisodeLog:
    """``episodes.jsonl``: one JSON line per episode; a torn last line (a kill) is dropped."""

    def __init__(self, path: Path):
        self.path = path
        self.records: dict[tuple[str, int, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._fh: Any = None
        if path.exists():
            lines = path.read_text(encoding="utf-8").splitlines()
            for lineno, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    key = (rec["condition"], int(rec["seed"]), rec["task"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    if lineno == len(lines):
                        continue  # torn by a kill: that episode runs again
                    raise RunError(f"{path}:{lineno}: not an episode record ({exc})") from None
                self.records[key] = rec

    def __contains__(self, key: tuple[str, int, str]) -> bool:
        return key in self.records

    def append(self, rec: dict[str, Any]) -> None:
        line = json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n"
        with self._lock:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "a", encoding="utf-8")
            self._fh.write(line)
            self._fh.flush()
            self.records[(rec["condition"], int(rec["seed"]), rec["task"])] = rec

    def finalize(self) -> None:
        """Close, and rewrite the file in (condition, seed, task) order."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            if self.records:
                recs = [self.records[k] for k in sorted(self.records)]
                atomic_write_lines(self.path, (json.dumps(r, ensure_ascii=False, sort_keys=True) for r in recs))


def read_run(run_dir: str | os.PathLike) -> tuple[dict[str, Any], list[AgentEpisode]]:
    """``run.json`` and the episodes of a run directory."""
    run_dir = Path(run_dir)
    path = run_dir / RUN_FILE
    try:
        run = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunError(f"{path}: not an agent run directory (no {RUN_FILE}); run `simpatterns agent eval` first") \
            from None
    except json.JSONDecodeError as exc:
        raise RunError(f"{path}:{exc.lineno}:{exc.colno}: not JSON ({exc.msg})") from None
    if run.get("format") != RUN_FORMAT:
        raise RunError(f"{path}: not an agent run (format {run.get('format')!r})")
    log = EpisodeLog(run_dir / EPISODES_FILE)
    return run, [AgentEpisode.from_json(log.records[k]) for k in sorted(log.records)]


# ------------------------------------------------------------------ agents
def build_agent(cond: Condition, memory: MemoryTable | None = None, test_templates: Iterable[str] = (),
                client=None, library=None) -> Agent:
    if cond.agent == "random":
        return RandomAgent()
    if cond.agent == "oracle":
        return OracleAgent()
    if cond.agent == "memory":
        if memory is None:
            raise RunError("the memory agent has no training data")
        return MemoryAgent(memory, test_templates=test_templates)
    if cond.agent == "anneal":
        return AnnealAgent(programs=cond.options.get("programs") or None, bins=cond.options.get("bins", -1))
    if cond.agent == "value":
        from simpatterns.agents.value_agent import ValueAgent

        return ValueAgent(cond.options["model"])
    if cond.agent == "llm":
        from simpatterns.agents.llm_agent import LLMAgent

        if client is None:
            raise RunError(f"condition {cond.name} needs a language model (--llm)")
        opts = dict(cond.options)
        patterns = opts.pop("patterns", None)
        sampling = {k: opts.pop(k) for k in LLM_SAMPLING if k in opts}
        return LLMAgent(client, FeedbackOptions(**opts), library=library, patterns=patterns, condition=cond.name,
                        **sampling)
    raise RunError(f"unknown agent {cond.agent!r}")


def _worker_state(menus: dict[str, Menu], memory: dict[int, MemoryTable], conditions: list[Condition],
                  templates: dict[int, list[str]], budget: int) -> dict[str, Any]:
    return {"menus": menus, "memory": memory, "conditions": {c.name: c for c in conditions},
            "templates": templates, "budget": budget, "agents": {}}


def _run_item(state: dict[str, Any], item: tuple[str, int, str]) -> dict[str, Any]:
    name, seed, tid = item
    cond = state["conditions"][name]
    key = (name, seed)
    if key not in state["agents"]:
        state["agents"][key] = build_agent(cond, state["memory"].get(seed), state["templates"][seed])
    ctx = TaskContext(Task.from_id(tid), state["menus"][tid], state["budget"], seed, episode_rng(seed, tid, name))
    return run_episode(state["agents"][key], ctx, name).to_json()


@dataclass
class EvalOutcome:
    run_dir: Path
    done: int = 0  # episodes this call
    already: int = 0  # found in the run directory
    episodes: list[AgentEpisode] = field(default_factory=list)


def evaluate(
    run_dir: str | os.PathLike,
    config: EvalConfig,
    conditions: Sequence[Condition],
    *,
    workers: int = 1,
    backend: Backend | None = None,
    cache_dir: str | os.PathLike | None = None,
    client_factory: Callable[[Path], Any] | None = None,
    library=None,
    progress: bool = False,
    log: Callable[[str], None] = lambda s: None,
) -> EvalOutcome:
    """Run every (condition, seed, test task) episode not yet in ``run_dir``.

    ``client_factory(run_dir)`` returns the `LLMClient` for ``llm/*`` conditions
    (called once, only if such episodes are pending). ``backend``: where menus and
    simulated episodes run (None: this machine's processes). ``library``: the pattern
    library the annotations come from (default: the built-in one).
    """
    run_dir = Path(run_dir)
    conditions = list(conditions)
    if not conditions:
        raise RunError("no conditions to evaluate")
    store = MenuStore(cache_dir, config.bins, config.scan)
    seeds = list(config.seeds)
    tests = {s: test_tasks(config, s) for s in seeds}
    if not any(tests.values()):
        raise RunError("no test tasks")
    needs_memory = any(c.agent == "memory" for c in conditions)
    if needs_memory and config.scan != "full":
        raise RunError("the memory agent needs full-scan menus (scan='full')")
    if any(c.agent == "oracle" for c in conditions) and config.scan != "full":
        log("note: with scan='first' the oracle knows one solving choice per task, which is all it needs")
    trains = {s: train_tasks(config, s) for s in seeds} if needs_memory else {}

    run = {
        "format": RUN_FORMAT, "version": RUN_VERSION, "config": config.to_json(),
        "conditions": [c.to_json() for c in conditions], "test_tasks": {str(s): tests[s] for s in seeds},
    }
    old = None
    if (run_dir / RUN_FILE).exists():
        old, _ = read_run(run_dir)
        for key in ("config", "test_tasks"):
            if old.get(key) != run[key]:
                raise RunError(f"{run_dir} holds a run with a different {key.replace('_', ' ')} (see "
                               f"{run_dir / RUN_FILE}); use another --out directory, or delete it to start over")
        known = {c["name"]: c for c in old["conditions"]}
        for c in conditions:
            if c.name in known and known[c.name] != c.to_json():
                raise RunError(f"{run_dir}: condition {c.name} ran with other settings before; give it another name "
                               "or use another --out directory")
        run["conditions"] = list(old["conditions"]) + [c.to_json() for c in conditions if c.name not in known]

    all_tasks = sorted({t for ts in tests.values() for t in ts} | {t for ts in trains.values() for t in ts})
    missing = [t for t in all_tasks if store.cached(t) is None]
    if missing:
        log(f"building menus of {len(missing)} tasks ({config.bins}^3 grid, scan {config.scan}) in {store.dir}")
    menus = store.get_many(all_tasks, workers=workers, progress="menus" if progress else None,
                           backend=backend)
    run["menus"] = {t: {"choices": len(menus[t]), "solving": len(menus[t].solving), "known": menus[t].known,
                        "added_solution": menus[t].added_solution} for t in sorted({t for ts in tests.values()
                                                                                     for t in ts})}
    if old is not None and "menus" in old:
        run["menus"] = {**old["menus"], **run["menus"]}
    atomic_write_json(run_dir / RUN_FILE, run)

    memory: dict[int, MemoryTable] = {}
    for s in trains:
        memory[s] = train_memory(menus[t] for t in trains[s])
        atomic_write_json(run_dir / f"memory-seed{s}.json", memory[s].to_json(), indent=None)

    episodes = EpisodeLog(run_dir / EPISODES_FILE)
    outcome = EvalOutcome(run_dir)
    units = [(c.name, s, t) for c in conditions for s in seeds for t in tests[s]]
    pending = [u for u in units if u not in episodes]
    outcome.already = len(units) - len(pending)
    by_name = {c.name: c for c in conditions}
    templates = {s: sorted({template_of(t) for t in tests[s]}) for s in seeds}
    try:
        sim_units = [u for u in pending if by_name[u[0]].agent != "llm"]
        llm_units = [u for u in pending if by_name[u[0]].agent == "llm"]
        if sim_units:
            test_menus = {t: menus[t] for s in seeds for t in tests[s]}
            setup = WorkerSetup(_worker_state, (test_menus, memory, conditions, templates, config.budget))
            for _, rec in progress_map(_run_item, sim_units, workers=workers, setup=setup, backend=backend,
                                       progress="episodes" if progress else None, chunksize=1):
                episodes.append(rec)
                outcome.done += 1
        if llm_units:
            if client_factory is None:
                raise RunError("llm conditions need a language model: pass --llm (and --base-url)")
            client = client_factory(run_dir)
            agents: dict[str, Agent] = {}
            with ProgressBar("llm episodes", len(llm_units), enabled=progress) as bar:
                for name, s, tid in llm_units:
                    if name not in agents:
                        agents[name] = build_agent(by_name[name], client=client, library=library)
                    ctx = TaskContext(Task.from_id(tid), menus[tid], config.budget, s, episode_rng(s, tid, name))
                    episodes.append(run_episode(agents[name], ctx, name).to_json())
                    outcome.done += 1
                    bar.advance()
    finally:
        episodes.finalize()
    outcome.episodes = [AgentEpisode.from_json(episodes.records[k]) for k in sorted(episodes.records)]
    return outcome
