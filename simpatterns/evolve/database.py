"""The programs database (FunSearch's, adapted): islands of clustered programs.

- Islands evolve independently: a prompt is built from one island's programs
  and its result is registered in that island only.
- Within an island, programs with the same (rounded) per-trace score
  signature form a cluster. A prompt samples clusters by softmax of their
  scores (min-max normalised within the island) at a temperature that decays
  linearly over each period of registrations; within a cluster, shorter
  programs are more likely.
- Every ``reset_period`` registered programs (a count, never wall-clock
  time), the weaker half of the islands is emptied and each is reseeded
  with the best program of a randomly chosen surviving island.
- Duplicates (same hash of the events a program emits over the traces) are
  dropped per island; so are samples whose island was reset after their
  prompt was built (``epoch`` changed).

All randomness comes from generators the caller passes in (derived from the
job seed and counters), and the whole state round-trips through JSON, so a
resumed job continues exactly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from simpatterns.detectors.contract import Candidate, DetectorError
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.reasons import Reason


@dataclass
class DatabaseConfig:
    num_islands: int = 4
    functions_per_prompt: int = 2  # versions shown in a prompt (detect_v0, detect_v1)
    reset_period: int = 40  # registered programs between island resets
    cluster_temperature_init: float = 0.1  # softmax over min-max normalised cluster scores
    cluster_temperature_period: int = 100  # registrations per linear decay of the temperature
    length_temperature: float = 1.0  # within a cluster: softmax of -normalised length
    feedback_size: int = 5  # recent rejection reasons kept per island for prompts

    def __post_init__(self) -> None:
        if self.num_islands < 1:
            raise ValueError(f"num_islands must be >= 1, got {self.num_islands}")
        if self.functions_per_prompt < 1:
            raise ValueError(f"functions_per_prompt must be >= 1, got {self.functions_per_prompt}")
        if self.reset_period < 1:
            raise ValueError(f"reset_period must be >= 1, got {self.reset_period}")


_UNSET: Any = object()


@dataclass
class DetectorProgram:
    """A registered detector program and how it scored.

    ``constants``: what its source declares, as written (`Candidate.constants`), kept in
    memory (never in the JSON) so prompts show it without parsing the source again; a
    program read back from a snapshot or a log reads it from its source when first asked
    (`declared`), as does one whose source is not a detector (a rejected seed: None)."""

    id: int
    source: str
    fitness: float
    signature: tuple[float, ...]
    events_hash: str
    lines: int
    sample: int = -1  # the sample that produced it (-1: the seed program)
    parts: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    constants: Any = field(default=_UNSET, repr=False, compare=False)

    def declared(self) -> dict[str, Any] | None:
        """The module constants as written; None when the source is not a detector."""
        if self.constants is _UNSET:
            try:
                self.constants = Candidate.parse(self.source).constants  # replayed: parsed again
            except DetectorError:
                self.constants = None
        return self.constants

    def to_json(self) -> dict[str, Any]:
        d = asdict(replace(self, constants=None))
        del d["constants"]
        d["signature"] = list(self.signature)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "DetectorProgram":
        d = dict(d)
        d["signature"] = tuple(d["signature"])
        return cls(**d)


def _sig_key(signature: tuple[float, ...]) -> str:
    return ",".join(f"{x:g}" for x in signature)


@dataclass
class Cluster:
    signature: tuple[float, ...]
    programs: list[DetectorProgram] = field(default_factory=list)

    @property
    def score(self) -> float:
        return max(p.fitness for p in self.programs)

    def sample(self, rng: np.random.Generator, temperature: float) -> DetectorProgram:
        lengths = np.array([p.lines for p in self.programs], dtype=np.float64)
        norm = (lengths - lengths.min()) / (lengths.max() - lengths.min() + 1e-6)
        return self.programs[int(rng.choice(len(self.programs), p=_softmax(-norm, temperature)))]


@dataclass
class Island:
    index: int
    epoch: int = 0  # bumped at every reset
    clusters: dict[str, Cluster] = field(default_factory=dict)
    hashes: set[str] = field(default_factory=set)
    num_programs: int = 0
    feedback: list[dict[str, str]] = field(default_factory=list)  # recent rejections, newest last

    @property
    def best(self) -> DetectorProgram | None:
        best = None
        for c in self.clusters.values():
            for p in c.programs:
                if best is None or p.fitness > best.fitness or (p.fitness == best.fitness and p.id < best.id):
                    best = p
        return best

    @property
    def best_score(self) -> float:
        b = self.best
        return b.fitness if b is not None else -np.inf

    def add(self, program: DetectorProgram) -> None:
        key = _sig_key(program.signature)
        if key not in self.clusters:
            self.clusters[key] = Cluster(program.signature)
        self.clusters[key].programs.append(program)
        self.hashes.add(program.events_hash)
        self.num_programs += 1

    def clear(self) -> None:
        self.clusters = {}
        self.hashes = set()
        self.num_programs = 0
        self.feedback = []
        self.epoch += 1


def _softmax(x: np.ndarray, temperature: float) -> np.ndarray:
    z = x / max(temperature, 1e-9)
    z = z - z.max()
    e = np.exp(z)
    return e / e.sum()


class ProgramsDatabase:
    """Islands of programs for one label."""

    def __init__(self, config: DatabaseConfig | None = None):
        self.config = config or DatabaseConfig()
        self.islands = [Island(i) for i in range(self.config.num_islands)]
        self.registered = 0  # programs registered from samples (drives resets)
        self.resets = 0
        self.next_id = 0
        self.seeded = False

    # --------------------------------------------------------------- seeding
    def seed(self, program: DetectorProgram) -> None:
        """Put the seed program in every island (once per label run)."""
        if self.seeded:
            raise RuntimeError("the database is already seeded; a resumed job must not re-add the seed")
        for isl in self.islands:
            isl.add(self._copy(program))
        self.seeded = True

    def _copy(self, program: DetectorProgram) -> DetectorProgram:
        p = DetectorProgram.from_json(program.to_json())
        p.constants = program.constants
        p.id = self.next_id
        self.next_id += 1
        return p

    # --------------------------------------------------------------- prompts
    def choose_island(self, rng: np.random.Generator) -> int:
        return int(rng.integers(len(self.islands)))

    def sample_programs(self, island: int, rng: np.random.Generator) -> list[DetectorProgram]:
        """Programs for a prompt from ``island``, sorted by ascending fitness."""
        isl = self.islands[island]
        clusters = list(isl.clusters.values())
        if not clusters:
            raise RuntimeError(f"island {island} is empty")
        cfg = self.config
        scores = np.array([c.score for c in clusters])
        spread = scores.max() - scores.min()
        norm = (scores - scores.min()) / spread if spread > 0 else np.zeros_like(scores)
        period = cfg.cluster_temperature_period
        temperature = cfg.cluster_temperature_init * (1 - (isl.num_programs % period) / period)
        k = min(len(clusters), cfg.functions_per_prompt)
        idx = rng.choice(len(clusters), size=k, replace=False, p=_softmax(norm, temperature))
        chosen = [clusters[int(i)].sample(rng, cfg.length_temperature) for i in idx]
        return sorted(chosen, key=lambda p: (p.fitness, -p.id))

    def feedback(self, island: int) -> list[dict[str, str]]:
        return list(self.islands[island].feedback)

    # ----------------------------------------------------------- registering
    def epoch(self, island: int) -> int:
        return self.islands[island].epoch

    def note_rejection(self, island: int, epoch: int, reason: Reason) -> None:
        isl = self.islands[island]
        if isl.epoch != epoch:
            return
        isl.feedback.append(reason.to_json())
        del isl.feedback[: max(0, len(isl.feedback) - self.config.feedback_size)]

    def check(self, program: DetectorProgram, island: int, epoch: int) -> Reason | None:
        """Why ``program`` would be dropped from ``island`` (None: it can be registered)."""
        isl = self.islands[island]
        if isl.epoch != epoch:
            return Reason(R.STALE_ISLAND, f"island {island} was reset after the prompt was built")
        if program.events_hash in isl.hashes:
            return Reason(R.DUPLICATE, f"same events as a program already in island {island}")
        return None

    def register(self, program: DetectorProgram, island: int, epoch: int, reset_rng: np.random.Generator | None = None
                 ) -> Reason | None:
        """Register a scored program; returns the drop reason instead when it is
        stale or a duplicate. May trigger a reset (``reset_rng`` breaks ties)."""
        why = self.check(program, island, epoch)
        if why is not None:
            return why
        program.id = self.next_id
        self.next_id += 1
        self.islands[island].add(program)
        self.registered += 1
        if self.registered % self.config.reset_period == 0 and len(self.islands) > 1:
            self.reset_islands(reset_rng or np.random.default_rng(self.resets))
        return None

    def reset_islands(self, rng: np.random.Generator) -> list[int]:
        """Empty the weaker half of the islands; reseed each from the best of a random survivor."""
        n = len(self.islands)
        scores = np.array([isl.best_score for isl in self.islands])
        noise = rng.standard_normal(n) * 1e-9  # FunSearch's tie-break
        order = np.argsort(scores + noise, kind="stable")
        reset = sorted(int(i) for i in order[: n // 2])
        keep = [int(i) for i in order[n // 2:]]
        for i in reset:
            founder_island = keep[int(rng.integers(len(keep)))]
            founder = self.islands[founder_island].best
            self.islands[i].clear()
            if founder is not None:
                self.islands[i].add(self._copy(founder))
        self.resets += 1
        return reset

    # ----------------------------------------------------------------- views
    def best(self) -> DetectorProgram | None:
        best = None
        for isl in self.islands:
            b = isl.best
            if b is not None and (best is None or b.fitness > best.fitness or (b.fitness == best.fitness and b.id < best.id)):
                best = b
        return best

    def best_per_island(self) -> list[float]:
        return [float(isl.best_score) for isl in self.islands]

    # ----------------------------------------------------------- persistence
    def to_json(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "registered": self.registered,
            "resets": self.resets,
            "next_id": self.next_id,
            "seeded": self.seeded,
            "islands": [
                {
                    "index": isl.index,
                    "epoch": isl.epoch,
                    "num_programs": isl.num_programs,
                    "feedback": isl.feedback,
                    "programs": [p.to_json() for c in isl.clusters.values() for p in c.programs],
                }
                for isl in self.islands
            ],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ProgramsDatabase":
        db = cls(DatabaseConfig(**d["config"]))
        db.registered = int(d["registered"])
        db.resets = int(d["resets"])
        db.next_id = int(d["next_id"])
        db.seeded = bool(d["seeded"])
        for isl, rec in zip(db.islands, d["islands"]):
            isl.epoch = int(rec["epoch"])
            for p in rec["programs"]:
                isl.add(DetectorProgram.from_json(p))
            isl.num_programs = int(rec["num_programs"])
            isl.feedback = list(rec["feedback"])
        return db
