"""Configuration of a discovery job and the labels file.

Labels file (TOML)::

    [[label]]
    label = "bounce"
    description = "An object hits a surface and its velocity along the contact normal flips."
    depends = ["collision start"]      # optional: patterns it may read (default: any in the library)
    params = ["object", "surface"]     # optional: PARAMS of the skeleton (default ["object"])
    seed = "builtin:bounce"            # optional: start program ("builtin:LABEL", "library:LABEL", or a .py path)

An optional ``[evolve]`` table (or a separate ``--config`` TOML file)
overrides `EvolveConfig` fields; nested tables ``[evolve.fitness]``,
``[evolve.database]``, ``[evolve.sandbox]`` override those parts.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from simpatterns.detectors.contract import normalize_label
from simpatterns.errors import SimpatternsError
from simpatterns.evolve.database import DatabaseConfig
from simpatterns.evolve.fitness import FitnessConfig
from simpatterns.evolve.prompt import LabelSpec
from simpatterns.sandbox.limits import SandboxLimits

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None


class ConfigError(SimpatternsError, ValueError):
    """A labels or config file is wrong; the message names the file and the field."""


@dataclass
class EvolveConfig:
    """Everything that shapes a discovery job. ``seed`` drives all randomness."""

    seed: int = 0
    samples_per_label: int = 64  # the budget in samples, per label (--samples)
    max_total_tokens: int | None = None  # LLM tokens for the whole job (prompt + completion)
    max_wall_s: float | None = None  # wall-clock budget for the whole job
    batch_size: int = 8  # samples per round: prompts built from one database state, requests in flight
    workers: int = 2  # sandbox fork servers evaluating in parallel
    queue_size: int = 4  # bounded queue between proposers and evaluators
    snapshot_every: int = 1  # rounds between snapshots
    llm_temperature: float = 0.8
    llm_max_tokens: int = 2048
    prompt: str = "auto"  # full, compact (small local models) or auto (compact when the LLM client prefers it)
    self_discovery: int = 0  # labels the LLM may propose after the guided ones (0: off)
    trace_distance_cache: bool = True  # cache the N x N trace distances in the run directory
    gate: bool = True  # the AST gate in front of the sandbox; false only to test the sandbox alone
    fitness: FitnessConfig = field(default_factory=FitnessConfig)
    database: DatabaseConfig = field(default_factory=DatabaseConfig)
    sandbox: SandboxLimits = field(default_factory=SandboxLimits)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str = "config") -> "EvolveConfig":
        return _build(cls, d, where)


_NESTED = {"fitness": FitnessConfig, "database": DatabaseConfig, "sandbox": SandboxLimits}


def _build(cls: type, d: dict[str, Any], where: str) -> Any:
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a table, got {type(d).__name__}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in d.items():
        if key not in known:
            raise ConfigError(f"{where}: unknown field {key!r}; known: {', '.join(sorted(known))}")
        if cls is EvolveConfig and key in _NESTED:
            kwargs[key] = _build(_NESTED[key], value, f"{where}.{key}")
        else:
            kwargs[key] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def read_toml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if tomllib is None:  # pragma: no cover
        raise ConfigError(f"{path}: reading TOML needs Python >= 3.11 or the 'tomli' package")
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc})") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def load_labels(path: str | Path) -> tuple[list[LabelSpec], dict[str, Any]]:
    """The ``[[label]]`` entries (in file order) and the optional ``[evolve]`` table."""
    data = read_toml(path)
    unknown = set(data) - {"label", "evolve"}
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected [[label]] and [evolve]")
    entries = data.get("label")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: no [[label]] entries")
    specs: list[LabelSpec] = []
    seen: set[str] = set()
    allowed = {"label", "description", "depends", "params", "seed"}
    for i, e in enumerate(entries):
        at = f"{path}: label[{i}]"
        if not isinstance(e, dict):
            raise ConfigError(f"{at}: must be a table")
        extra = set(e) - allowed
        if extra:
            raise ConfigError(f"{at}: unknown field(s) {sorted(extra)}; allowed: {sorted(allowed)}")
        for key in ("label", "description"):
            if not isinstance(e.get(key), str) or not e[key].strip():
                raise ConfigError(f"{at}: field {key!r} must be a non-empty string")
        label = normalize_label(e["label"])
        if label in seen:
            raise ConfigError(f"{at}: label {label!r} is given twice")
        seen.add(label)
        depends = e.get("depends")
        if depends is not None and (not isinstance(depends, list) or not all(isinstance(x, str) for x in depends)):
            raise ConfigError(f"{at} ({label!r}): field 'depends' must be a list of strings")
        params = e.get("params", ["object"])
        if not isinstance(params, list) or not params or not all(isinstance(x, str) and x for x in params):
            raise ConfigError(f"{at} ({label!r}): field 'params' must be a non-empty list of strings")
        seed = e.get("seed")
        if seed is not None and not isinstance(seed, str):
            raise ConfigError(f"{at} ({label!r}): field 'seed' must be a string")
        if seed is not None and not seed.startswith(("builtin:", "library:")):
            seed_path = (Path(path).parent / seed).resolve()
            if not seed_path.is_file():
                raise ConfigError(f"{at} ({label!r}): field 'seed': no file {seed_path}")
            seed = str(seed_path)
        specs.append(LabelSpec(
            label=label,
            description=" ".join(e["description"].split()),
            depends=[normalize_label(d) for d in depends] if depends is not None else None,
            params=list(params),
            seed=seed,
        ))
    evolve = data.get("evolve", {})
    if not isinstance(evolve, dict):
        raise ConfigError(f"{path}: [evolve] must be a table")
    return specs, evolve
