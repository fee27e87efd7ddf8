"""The `Trace` contract: one simulation rollout as columnar numpy arrays.

Every module downstream (detectors, annotation, distances, reward programs,
environments) reads traces through this class only. Arrays are columnar so
detectors vectorise over frames and bodies. ``D = trace.dim`` is 2 for planar
(PHYRE, pymunk) traces and 3 for MuJoCo traces:

- ``time[T]``: seconds since the start of the rollout, one row per stored frame.
- ``position[T, N, D]``, ``velocity[T, N, D]``: body centres (centre of mass
  for dynamic bodies) and their world-frame linear velocity, in scene units
  (pixels for PHYRE scenes, y up; metres for MuJoCo scenes, up is
  ``-meta["gravity"]``, +z when there is no gravity).
- orientation: 2D ``angle[T, N]`` (radians, counter-clockwise) and
  ``angular_velocity[T, N]`` (rad/s); 3D ``quaternion[T, N, 4]`` (w, x, y, z:
  body frame to world, read-only), ``angular_velocity[T, N, 3]`` (world frame,
  rad/s) and ``angle[T, N]`` = the tilt, the angle in radians between the
  body's own z axis and world +z (0 upright, pi upside down), so a detector
  asking "did it tip over" reads the same field in both worlds.
  ``quaternion`` is None in 2D traces.
- contacts as flat rows, one per touching body pair per stored frame:
  ``contact_frame[K]``, ``contact_a[K]``, ``contact_b[K]`` (body indices,
  ``a < b``), ``contact_point[K, D]``, ``contact_normal[K, D]`` (unit, from a
  towards b), ``contact_impulse[K]`` (impulse applied during that step: the
  normal+tangent impulse magnitude in 2D; in 3D the normal force times the
  physics timestep, summed over the pair's contact points). Rows are sorted by
  (frame, a, b), so ``np.searchsorted(contact_frame, f)`` finds a frame's rows
  and ``contact_row(frame, a, b)`` a pair's row.
- ``events``: raw simulator events, ``RawEvent(kind, frame, params)`` with kinds
  ``CollisionStart``, ``CollisionEnd`` and ``TaskComplete``.
- ``meta``: simulator, template, variant, seed, action, dt, stride, world size,
  success, gravity, ...

Frame indices always index the stored rows. With ``meta["stride"] == k`` a
stored frame ``f`` is physics step ``f * k``.

**The episode and early stops.** A rollout may stop before its episode
ends (PHYRE stops at success by default). Three meta keys say what a reader
may assume about the frames that were never simulated (`Trace.episode`
gathers them into an `Episode`):

- ``horizon``: the number of stored frames of the whole episode, frame 0
  included (PHYRE: ``max_steps // stride + 1`` = 1001 at stride 1), whether
  or not the rollout ran that long. Absent: the stored frames are the
  episode. Times and windows of reward programs are fractions of it.
- ``stopped``: why a rollout shorter than its horizon stopped:
  ``"success"``: the task's success condition held, so the two bodies named
  in ``meta["goal"]`` keep touching to the horizon, and nothing else is
  known; ``"settled"``: every body was at rest, so every position and every
  contact of the last frame holds to the horizon (and nothing new starts)
  -- the settle heuristic's assumption, which a body creeping below the
  settle speed can break (see `simulate`), so reported outcomes come from
  full runs; absent or None: nothing is known about the frames after the last one.
- ``goal``: the two bodies whose contact is the task's success (PHYRE).

On disk (`Trace.save`): one compressed ``.npz`` holding the arrays and a JSON
``header`` with the format name and version. Version 2 added the optional
``quaternion`` array and 3D traces; version-1 files (2D only) still load.
Loading checks the arrays and every header field (bodies, events, meta: the
schema is `simpatterns.trace_header`, docs/reference/trace-format.md) and saving checks the
same, so what ``save`` writes loads.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import struct
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from simpatterns.errors import SimpatternsError
from simpatterns.files import atomic_open
from simpatterns.trace_header import (  # noqa: F401 - the event kinds and stop reasons are the trace's names
    COLLISION_END,
    COLLISION_START,
    HORIZON_KEY,
    RAW_EVENT_KINDS,
    STOP_REASONS,
    STOPPED_KEY,
    STOPPED_SETTLED,
    STOPPED_SUCCESS,
    TASK_COMPLETE,
    HeaderError,
    body_list,
    check_header,
)

FORMAT_NAME = "simpatterns-trace"
FORMAT_VERSION = 2  # 2: 3D traces (quaternion, [T, N, 3] angular velocity); 1 still loads


class TraceFormatError(SimpatternsError, ValueError):
    """A trace file is truncated, foreign, corrupt or from a newer format."""


@dataclass(frozen=True)
class Body:
    """One body of the scene, with the words a person (or an LLM) would use.

    ``parts`` describe the collision geometry in the body's local frame
    (origin = the body's recorded position, unrotated). 2D parts are
    ``{"kind": "circle", "center": [x, y], "radius": r}`` or
    ``{"kind": "poly", "vertices": [[x, y], ...]}``. 3D parts have ``kind``
    (ball, box, capsule, cylinder, ellipsoid, plane, mesh, ...), ``center``
    ``[x, y, z]``, ``quat`` (w, x, y, z, part to body frame) and ``radius``
    (the bounding-sphere radius), plus ``half_size`` (box, ellipsoid) or
    ``half_length`` and ``radius_cross`` (capsule, cylinder). ``size`` holds
    the dimensions that are meaningful for the body's shape (``radius``,
    ``length``, ``thickness``, ``width``, ``height``, ``depth``).
    """

    name: str
    color: str
    shape: str
    dynamic: bool
    role: str = "other"
    size: dict[str, float] = field(default_factory=dict)
    parts: tuple[dict[str, Any], ...] = ()

    @property
    def bounding_radius(self) -> float:
        """Largest distance from the body origin to any point of its geometry."""
        best = 0.0
        for part in self.parts:
            if "vertices" in part:
                for v in part["vertices"]:
                    best = max(best, math.hypot(*v))
            else:
                best = max(best, math.hypot(*part["center"]) + part["radius"])
        return best

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["parts"] = list(self.parts)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Body":
        return Body(
            name=str(d["name"]),
            color=str(d["color"]),
            shape=str(d["shape"]),
            dynamic=bool(d["dynamic"]),
            role=str(d.get("role", "other")),
            size={k: float(v) for k, v in d.get("size", {}).items()},
            parts=tuple(d.get("parts", ())),
        )


@dataclass(frozen=True)
class RawEvent:
    """A raw simulator event: ``CollisionStart``/``CollisionEnd`` carry
    ``{"object_a": name, "object_b": name}``; ``TaskComplete`` carries
    ``{"success": bool}``."""

    kind: str
    frame: int
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Episode:
    """What is known about a rollout's whole episode (see the module doc):
    ``frames`` stored frames were simulated out of ``horizon``; ``stopped``
    says why a shorter rollout stopped (``"success"``, ``"settled"`` or None:
    unknown); ``goal`` names the success pair (empty when there is none).

    After the last stored frame, a reader may assume exactly this: after a
    ``"success"`` stop the ``goal`` pair touches at every frame to the
    horizon; after a ``"settled"`` stop every body stays where it is, every
    contact of the last frame holds and no contact starts or ends (the
    settle heuristic's assumption: a body creeping below the settle speed
    can break it); nothing else."""

    frames: int
    horizon: int
    stopped: str | None = None
    goal: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.frames < 0:
            raise ValueError(f"episode frames must be >= 0, got {self.frames}")
        if self.horizon < self.frames:  # a horizon shorter than what was stored is the stored rollout
            object.__setattr__(self, "horizon", self.frames)
        if self.stopped is not None and self.stopped not in STOP_REASONS:
            raise ValueError(f"episode 'stopped' must be one of {STOP_REASONS} or None, got {self.stopped!r}")

    @property
    def complete(self) -> bool:
        """True when every frame of the episode was simulated."""
        return self.frames >= self.horizon

    @property
    def last(self) -> int:
        """The last simulated frame."""
        return self.frames - 1

    @classmethod
    def of(cls, meta: dict[str, Any] | None, frames: int) -> "Episode":
        """The episode described by a trace's ``meta`` (horizon, stopped, goal) for ``frames`` stored frames."""
        meta = meta if isinstance(meta, dict) else {}
        try:  # a trace read from a file has a checked horizon; one built in memory may not
            horizon = int(meta.get(HORIZON_KEY) or frames)
        except (TypeError, ValueError, OverflowError):
            horizon = frames
        stopped = meta.get(STOPPED_KEY)
        stopped = stopped if stopped in STOP_REASONS else None
        goal = meta.get("goal")
        goal = tuple(str(g) for g in goal) if isinstance(goal, (list, tuple)) else ()
        return cls(frames, max(horizon, frames), stopped if horizon > frames else None, goal)

    def to_json(self) -> dict[str, Any]:
        return {"frames": self.frames, "horizon": self.horizon, "stopped": self.stopped, "goal": list(self.goal)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Episode":
        return cls(int(d["frames"]), int(d["horizon"]), d.get("stopped"), tuple(d.get("goal") or ()))


_ARRAY_FIELDS = (
    "time",
    "position",
    "angle",
    "velocity",
    "angular_velocity",
    "contact_frame",
    "contact_a",
    "contact_b",
    "contact_point",
    "contact_normal",
    "contact_impulse",
)
# arrays only some traces have (None otherwise): 3D orientation
_OPTIONAL_ARRAY_FIELDS = ("quaternion",)
_ALL_ARRAY_FIELDS = _ARRAY_FIELDS + _OPTIONAL_ARRAY_FIELDS
_INDEX_FIELDS = frozenset({"contact_frame", "contact_a", "contact_b"})  # integers; every other array is float
# What a trace file may declare, checked before anything is read: a file cannot make the
# loader allocate more than this (PHYRE traces take ~100 KB, a long 3D rope a few MB).
MAX_TRACE_BYTES = 256 << 20
MAX_HEADER_BYTES = 16 << 20
ARRAY_FIELDS, OPTIONAL_ARRAY_FIELDS = _ARRAY_FIELDS, _OPTIONAL_ARRAY_FIELDS  # what a trace file holds


@dataclass
class Trace:
    """One rollout. See the module docstring for the meaning of each array."""

    bodies: list[Body]
    time: np.ndarray
    position: np.ndarray
    angle: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray
    contact_frame: np.ndarray
    contact_a: np.ndarray
    contact_b: np.ndarray
    contact_point: np.ndarray
    contact_normal: np.ndarray
    contact_impulse: np.ndarray
    events: list[RawEvent] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    quaternion: np.ndarray | None = None  # [T, N, 4] (w, x, y, z) in 3D traces, None in 2D

    def __post_init__(self) -> None:
        if self.quaternion is not None:  # a read-only view: detectors share it (the caller's array is untouched)
            self.quaternion = self.quaternion.view()
            self.quaternion.flags.writeable = False
        names = [b.name for b in self.bodies]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"body names must be unique; repeated: {dup}")
        self._index = {n: i for i, n in enumerate(names)}
        self._names = tuple(names)
        # derived arrays computed on first use; a trace is not changed after construction
        self._touch_cache: np.ndarray | None = None
        self._dynamic_cache: np.ndarray | None = None
        self._speed_cache: np.ndarray | None = None
        self._contact_key_cache: tuple[np.ndarray, np.ndarray | None] | None = None
        self._touch_runs_cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    # ------------------------------------------------------------------ shape
    @property
    def num_frames(self) -> int:
        """T, the number of stored frames."""
        return int(self.time.shape[0])

    @property
    def num_bodies(self) -> int:
        """N, the number of bodies."""
        return len(self.bodies)

    @property
    def dim(self) -> int:
        """D, 2 for planar scenes, 3 for MuJoCo scenes."""
        return int(self.position.shape[2])

    @property
    def dt(self) -> float:
        """Seconds between two stored frames (physics dt times stride)."""
        return float(self.meta.get("dt", 1 / 60)) * int(self.meta.get("stride", 1))

    @property
    def horizon(self) -> int:
        """Stored frames of the whole episode (``meta["horizon"]``; the stored frames when absent)."""
        return self.episode.horizon

    @property
    def episode(self) -> Episode:
        """What is known about the whole episode, including frames never simulated (module doc)."""
        return Episode.of(self.meta, self.num_frames)

    @property
    def names(self) -> list[str]:
        """Body names in index order."""
        return list(self._names)

    @property
    def dynamic_mask(self) -> np.ndarray:
        """Boolean ``[N]``: which bodies can move."""
        if self._dynamic_cache is None:
            self._dynamic_cache = np.array([b.dynamic for b in self.bodies], dtype=bool)
        return self._dynamic_cache.copy()

    def body_index(self, name: str) -> int:
        """Index of the body called ``name`` (case-insensitive); KeyError lists the names."""
        if name in self._index:
            return self._index[name]
        low = name.lower()
        for n, i in self._index.items():
            if n.lower() == low:
                return i
        raise KeyError(f"no body named {name!r}; bodies are {self.names}")

    def body(self, name: str) -> Body:
        return self.bodies[self.body_index(name)]

    def find_bodies(self, color: str | None = None, role: str | None = None) -> list[int]:
        """Indices of bodies with the given colour and/or role."""
        return [
            i
            for i, b in enumerate(self.bodies)
            if (color is None or b.color == color) and (role is None or b.role == role)
        ]

    # ------------------------------------------------------------ kinematics
    def speed(self, body: int | str | None = None) -> np.ndarray:
        """Linear speed: ``[T, N]``, or ``[T]`` for one body (index or name)."""
        if self._speed_cache is None:  # = np.linalg.norm(velocity, axis=-1), without its slow tiny-axis reduce
            square = self.velocity[..., 0] ** 2
            for d in range(1, self.velocity.shape[-1]):
                square = square + self.velocity[..., d] ** 2
            self._speed_cache = np.sqrt(square)
        return (self._speed_cache if body is None else self._speed_cache[:, self._as_index(body)]).copy()

    def kinetic_energy_proxy(self) -> np.ndarray:
        """Per-frame sum of squared speeds of dynamic bodies, ``[T]`` (unit mass)."""
        v = self.velocity[:, self.dynamic_mask]
        return (v**2).sum(axis=(1, 2))

    def _as_index(self, body: int | str) -> int:
        return self.body_index(body) if isinstance(body, str) else int(body)

    # -------------------------------------------------------------- contacts
    @property
    def num_contacts(self) -> int:
        return int(self.contact_frame.shape[0])

    def touching_matrix(self) -> np.ndarray:
        """Boolean ``[T, N, N]`` (symmetric, read-only): bodies i, j touch at frame t."""
        if self._touch_cache is None:
            n = self.num_bodies
            m = np.zeros(self.num_frames * n * n, dtype=bool)
            at = self.contact_frame.astype(np.int64) * n * n
            m[at + self.contact_a * n + self.contact_b] = True
            m[at + self.contact_b * n + self.contact_a] = True
            self._touch_cache = m.reshape(self.num_frames, n, n)
        self._touch_cache.flags.writeable = False  # shared by every caller (also after unpickling)
        return self._touch_cache

    def contact_row(self, frame: Any, a: Any, b: Any) -> np.ndarray:
        """Row index of the contact of bodies a and b (indices, either order) at ``frame``, or -1
        where they do not touch; arguments are ints or equal-length int arrays (vectorised lookup)."""
        if self._contact_key_cache is None:
            key = self._contact_key(self.contact_frame, self.contact_a, self.contact_b)
            order = None
            if key.size > 1 and (key[1:] < key[:-1]).any():  # rows not in the documented order
                order = np.argsort(key, kind="stable")
                key = key[order]
            self._contact_key_cache = (key, order)
        key, order = self._contact_key_cache
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        want = self._contact_key(np.asarray(frame, dtype=np.int64), np.minimum(a, b), np.maximum(a, b))
        pos = np.minimum(np.searchsorted(key, want), max(key.size - 1, 0))
        found = key[pos] == want if key.size else np.zeros(want.shape, dtype=bool)
        rows = pos if order is None else order[pos]
        return np.where(found, rows, -1)

    def _contact_key(self, frame: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        n = self.num_bodies
        return (frame.astype(np.int64) * n + a) * n + b

    def touch_runs(self, gap: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every pair's runs of touching frames: int64 arrays ``(a, b, first, last)`` (bodies as in
        the contact rows, first and last frame inclusive), ordered by pair (a, then b) then frame.
        Frames of a pair at most ``gap`` apart without a contact row join one run. Cached per
        ``gap``, read-only (the touch detectors share them)."""
        runs = self._touch_runs_cache.get(gap)
        if runs is None:
            runs = _pair_runs(self.contact_a, self.contact_b, self.contact_frame, self.num_bodies,
                              self.num_frames, gap)
            self._touch_runs_cache[gap] = runs
        for r in runs:  # shared by every caller (also after unpickling)
            r.flags.writeable = False
        return runs

    def touching(self, frame: int) -> list[tuple[str, str]]:
        """Name pairs in contact at ``frame`` (each pair once, index order)."""
        rows = np.nonzero(self.contact_frame == frame)[0]
        return [(self.names[self.contact_a[k]], self.names[self.contact_b[k]]) for k in rows]

    def pair_touching(self, a: int | str, b: int | str) -> np.ndarray:
        """Boolean ``[T]``: bodies a and b touch at each frame."""
        return self.touching_matrix()[:, self._as_index(a), self._as_index(b)]

    def contact_intervals(self, a: int | str, b: int | str) -> list[tuple[int, int]]:
        """Maximal runs of consecutive touching frames for a pair, as
        ``(first_frame, last_frame)`` inclusive."""
        touch = self.pair_touching(a, b).astype(np.int8)
        return runs_of_true(touch.astype(bool))

    def contacts_of(self, body: int | str) -> np.ndarray:
        """Row indices of the contact rows that involve ``body``."""
        i = self._as_index(body)
        return np.nonzero((self.contact_a == i) | (self.contact_b == i))[0]

    def raw_events(self, kind: str | None = None) -> list[RawEvent]:
        return [e for e in self.events if kind is None or e.kind == kind]

    @property
    def success(self) -> bool:
        return bool(self.meta.get("success", False))

    # --------------------------------------------------------------- file IO
    def header(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "bodies": [b.to_json() for b in self.bodies],
            "events": [[e.kind, int(e.frame), e.params] for e in self.events],
            "meta": self.meta,
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write one compressed ``.npz`` atomically, creating missing folders. The trace is
        checked first (`validate`): a trace that would not load raises `TraceFormatError`
        naming the file and the field, and nothing is written."""
        path = Path(path)
        arrays = {name: getattr(self, name) for name in _ARRAY_FIELDS}
        arrays.update({n: getattr(self, n) for n in _OPTIONAL_ARRAY_FIELDS if getattr(self, n) is not None})
        self.validate(str(path))  # what is written loads: no NaN, no wrong header field
        header = json.dumps(self.header(), default=_json_default, allow_nan=False).encode()
        arrays["header"] = np.frombuffer(header, dtype=np.uint8)
        with atomic_open(path, "wb") as fh:
            np.savez_compressed(fh, **arrays)
        return path

    @staticmethod
    def load(path: str | os.PathLike) -> "Trace":
        """Load a trace; raises `TraceFormatError` naming the file and the problem."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise TraceFormatError(f"{path}: cannot read trace file ({exc})") from exc
        return Trace.from_bytes(raw, source=str(path))

    @staticmethod
    def from_bytes(raw: bytes, source: str = "<bytes>") -> "Trace":
        """Parse a trace file's bytes. Every array's declared dtype and shape are checked
        against the format (and its size against `MAX_TRACE_BYTES`) before any is read,
        and the values (`validate`) before the trace is returned."""
        try:
            npz = _NpzArrays(raw)
        except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
            raise TraceFormatError(
                f"{source}: not a simpatterns trace (.npz could not be opened: {exc}); "
                "the file may be truncated or of another format"
            ) from exc
        return Trace._from_npz(npz, source)

    @staticmethod
    def _from_npz(npz: Any, source: str) -> "Trace":
        files = set(npz.files)
        if "header" not in files:
            raise TraceFormatError(f"{source}: .npz has no 'header' entry; not a simpatterns trace")
        declared = {n: _declared(npz, n, source) for n in files if n == "header" or n in _ALL_ARRAY_FIELDS}
        shape, dtype = declared["header"]
        if dtype != np.uint8 or len(shape) != 1 or shape[0] > MAX_HEADER_BYTES:
            raise TraceFormatError(f"{source}: field 'header' must be at most {MAX_HEADER_BYTES} bytes of JSON")
        try:  # NaN and Infinity (which Python's json reads) stay floats: check_header names their field
            header = json.loads(npz["header"].tobytes().decode(), parse_constant=float)
        except Exception as exc:  # zlib / json / unicode errors from a damaged file
            raise TraceFormatError(f"{source}: trace header is unreadable ({exc})") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
            raise TraceFormatError(
                f"{source}: header field 'format' is {header.get('format') if isinstance(header, dict) else header!r}, "
                f"expected {FORMAT_NAME!r}"
            )
        version = header.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise TraceFormatError(f"{source}: header field 'version' is {version!r}, expected an integer >= 1")
        if version > FORMAT_VERSION:
            raise TraceFormatError(
                f"{source}: trace format version {version!r} is newer than this simpatterns "
                f"reads (<= {FORMAT_VERSION}); upgrade simpatterns"
            )
        missing = [n for n in _ARRAY_FIELDS if n not in files]
        if missing:
            raise TraceFormatError(f"{source}: missing arrays {missing}")
        bodies = _header_bodies(header, source)
        frames, dim = _check_declared(declared, len(bodies), source)
        try:
            arrays = {n: npz[n] for n in _ALL_ARRAY_FIELDS if n in files}
        except Exception as exc:
            raise TraceFormatError(f"{source}: array data is corrupt ({exc})") from exc
        return Trace._checked(header, frames, dim, arrays, source)

    @staticmethod
    def from_header(header: dict[str, Any], arrays: dict[str, np.ndarray], source: str = "<trace>") -> "Trace":
        """A trace from a parsed file header (``bodies``, ``events``, ``meta``) and its arrays,
        both checked against the format first; raises `TraceFormatError` naming the field."""
        if not isinstance(header, dict):
            raise TraceFormatError(f"{source}: the header is {type(header).__name__}, expected an object")
        bodies = _header_bodies(header, source)
        time, position = arrays.get("time"), arrays.get("position")
        if time is None or position is None:
            raise TraceFormatError(f"{source}: missing arrays {[n for n in ('time', 'position') if n not in arrays]}")
        frames, dim = _frames_and_dim(np.shape(time), np.shape(position), len(bodies), source)
        return Trace._checked(header, frames, dim, arrays, source)

    @staticmethod
    def _checked(header: dict[str, Any], frames: int, dim: int, arrays: dict[str, np.ndarray], source: str) -> "Trace":
        """The trace of a header checked against `trace_header` (for arrays of ``frames``
        rows in ``dim`` dimensions) and of arrays checked by `validate`."""
        try:
            check_header(header, frames, dim)
        except HeaderError as exc:
            raise TraceFormatError(f"{source}: {exc}") from exc
        bodies = [Body.from_json(b) for b in header["bodies"]]
        events = [RawEvent(k, f, dict(p)) for k, f, p in header["events"]]
        trace = Trace(bodies=bodies, events=events, meta=header["meta"], **arrays)
        trace._validate_arrays(source)
        return trace

    def validate(self, source: str = "<trace>") -> None:
        """Check the trace against the format: the arrays (shapes agree, dtypes, finite
        values, time increasing, contact rows in range), then bodies, events and meta as
        they would be written (`trace_header`); raises `TraceFormatError` naming the field."""
        self._validate_arrays(source)
        try:  # the header as `save` writes it (numpy scalars and tuples become JSON)
            check_header(json.loads(json.dumps(self.header(), default=_json_default)), self.num_frames, self.dim)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, HeaderError):
                raise TraceFormatError(f"{source}: {exc}") from exc
            raise TraceFormatError(f"{source}: the header cannot be written as JSON ({exc})") from exc

    def _validate_arrays(self, source: str) -> None:
        T, N = self.num_frames, self.num_bodies
        if self.time.ndim != 1 or T < 1:
            raise TraceFormatError(f"{source}: field 'time' has shape {self.time.shape}, expected (T,) with T >= 1")
        if self.position.ndim != 3 or self.position.shape[2] not in (2, 3):
            raise TraceFormatError(
                f"{source}: field 'position' has shape {self.position.shape}, expected (T, N, 2) or (T, N, 3)"
            )
        D = self.dim
        expect = {
            "position": (T, N, D),
            "velocity": (T, N, D),
            "angle": (T, N),
            "angular_velocity": (T, N) if D == 2 else (T, N, 3),
        }
        if D == 3:
            if self.quaternion is None:
                raise TraceFormatError(f"{source}: field 'quaternion' is missing; a 3D trace needs it")
            expect["quaternion"] = (T, N, 4)
        elif self.quaternion is not None:
            raise TraceFormatError(f"{source}: field 'quaternion' is set on a 2D trace; only 3D traces have it")
        for name, shape in expect.items():
            arr = getattr(self, name)
            if arr.shape != shape:
                raise TraceFormatError(f"{source}: field {name!r} has shape {arr.shape}, expected {shape}")
        for name in ("contact_point", "contact_normal"):
            arr = getattr(self, name)
            if arr.ndim != 2 or arr.shape[1] != D:
                raise TraceFormatError(f"{source}: field {name!r} has shape {arr.shape}, expected (K, {D})")
        K = self.contact_frame.shape[0]
        for name in ("contact_frame", "contact_a", "contact_b", "contact_impulse", "contact_point", "contact_normal"):
            arr = getattr(self, name)
            if arr.ndim != (2 if name in ("contact_point", "contact_normal") else 1) or arr.shape[0] != K:
                raise TraceFormatError(f"{source}: field {name!r} has shape {arr.shape}, expected {K} rows")
        for name in _ALL_ARRAY_FIELDS:
            arr = getattr(self, name)
            if arr is None:
                continue
            kind = "iu" if name in _INDEX_FIELDS else "f"
            if arr.dtype.kind not in kind:
                raise TraceFormatError(f"{source}: field {name!r} has dtype {arr.dtype}, expected "
                                       f"{'integers' if name in _INDEX_FIELDS else 'floating point'}")
            if kind == "f" and arr.size and not np.isfinite(arr).all():
                bad = np.argwhere(~np.isfinite(arr))[0]
                raise TraceFormatError(f"{source}: field {name!r} has a non-finite value at {tuple(int(i) for i in bad)}")
        if T > 1 and not (np.diff(self.time) > 0).all():
            i = int(np.flatnonzero(np.diff(self.time) <= 0)[0]) + 1
            raise TraceFormatError(f"{source}: field 'time' does not increase at frame {i}")
        if K and (self.contact_frame.min() < 0 or self.contact_frame.max() >= T):
            raise TraceFormatError(f"{source}: field 'contact_frame' indexes outside [0, {T})")
        for name in ("contact_a", "contact_b"):
            arr = getattr(self, name)
            if K and (arr.min() < 0 or arr.max() >= N):
                raise TraceFormatError(f"{source}: field {name!r} has a body index outside [0, {N})")

    def __eq__(self, other: object) -> bool:
        # `equals`, so that ``==`` works on traces (e.g. in an env's info, which Gymnasium compares)
        return self.equals(other) if isinstance(other, Trace) else NotImplemented

    def equals(self, other: "Trace") -> bool:
        """Bit-exact equality of arrays, bodies, events and meta (also ``==``)."""
        for n in _OPTIONAL_ARRAY_FIELDS:
            mine, theirs = getattr(self, n), getattr(other, n)
            if (mine is None) != (theirs is None) or (
                mine is not None and (mine.dtype != theirs.dtype or not np.array_equal(mine, theirs))
            ):
                return False
        if self.header() != other.header():
            return json.dumps(self.header(), default=_json_default, sort_keys=True) == json.dumps(
                other.header(), default=_json_default, sort_keys=True
            ) and all(np.array_equal(getattr(self, n), getattr(other, n)) for n in _ARRAY_FIELDS)
        return all(
            getattr(self, n).dtype == getattr(other, n).dtype
            and np.array_equal(getattr(self, n), getattr(other, n))
            for n in _ARRAY_FIELDS
        )


_NPY_HEADER = re.compile(
    r"\{'descr': '([<>|=]?[a-zA-Z]\d*)', 'fortran_order': (False|True), 'shape': \(((?:\d+, ?)*\d*)\), \}\s*$")
_NPY_MAX_HEADER = 1 << 20  # numpy writes headers of a few hundred bytes
_NPY_USUAL_HEADER = 128  # what numpy writes for a plain dtype and shape (a multiple of 64): one step


@dataclass(frozen=True)
class _Member:
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    start: int  # where the data begins in the decompressed member
    nbytes: int  # what the header declares


class _NpzArrays:
    """The arrays of an ``.npz`` held in memory, read as ``np.load`` reads them but
    without its per-array costs (a ZipExtFile per member, ``ast.literal_eval`` of each
    header): `declared` decompresses only a member's .npy header, and reading the member
    continues the same ``zlib`` stream (nothing is inflated twice) up to the size its
    header declares, so a small file cannot expand into more than it declared; the
    data is inflated straight into the array's own memory, CRC-checked."""

    def __init__(self, raw: bytes):
        self._raw = raw
        zf = zipfile.ZipFile(io.BytesIO(raw))
        self._info = {i.filename[:-4] if i.filename.endswith(".npy") else i.filename: i for i in zf.infolist()}
        self.files = list(self._info)
        self._members: dict[str, _Member] = {}
        self._started: dict[str, tuple[zipfile.ZipInfo, _Inflater, bytes]] = {}  # header read, data next

    def _body(self, name: str) -> tuple[zipfile.ZipInfo, bytes]:
        info = self._info[name]
        start = info.header_offset
        if self._raw[start:start + 4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"bad local header of {info.filename}")
        name_len, extra_len = struct.unpack("<HH", self._raw[start + 26:start + 30])
        begin = start + 30 + name_len + extra_len
        if info.compress_type not in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED):
            raise ValueError(f"{info.filename} uses an unsupported compression ({info.compress_type})")
        return info, self._raw[begin:begin + info.compress_size]

    def declared(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """Shape and dtype from the member's .npy header (only the header is inflated; the
        data goes on from there when the array is read)."""
        if name not in self._members:
            info, body = self._body(name)
            stream = _Inflater(info, body)
            head = stream.read(_NPY_USUAL_HEADER)
            if head[:6] != b"\x93NUMPY" or len(head) < 12:
                raise ValueError(f"{info.filename} is not a .npy array")
            if head[6] == 1:
                (hlen,), hstart = struct.unpack("<H", head[8:10]), 10
            else:
                (hlen,), hstart = struct.unpack("<I", head[8:12]), 12
            if hlen > _NPY_MAX_HEADER:
                raise ValueError(f"{info.filename} has a {hlen}-byte .npy header")
            if len(head) < hstart + hlen:
                head += stream.read(hstart + hlen - len(head))
            m = _NPY_HEADER.match(head[hstart:hstart + hlen].decode("latin1"))
            if m is not None:
                dtype, fortran = np.dtype(m.group(1)), m.group(2) == "True"
                shape = tuple(int(x) for x in m.group(3).replace(" ", "").split(",") if x)
            else:  # an unusual header (structured dtype, ...): numpy parses it, still only the header
                fh = io.BytesIO(head[:hstart + hlen])
                version = np.lib.format.read_magic(fh)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(fh)
                shape = tuple(int(n) for n in shape)
            count = math.prod(shape)
            self._members[name] = _Member(shape, dtype, bool(fortran), hstart + hlen, count * dtype.itemsize)
            self._started[name] = (info, stream, head)
        m = self._members[name]
        return m.shape, m.dtype

    def __getitem__(self, name: str) -> np.ndarray:
        self.declared(name)
        m = self._members[name]
        if m.dtype.hasobject:
            raise ValueError(f"{name} holds Python objects")
        started = self._started.pop(name, None)
        if started is None:  # read before: inflate it again from the start
            info, body = self._body(name)
            started = (info, _Inflater(info, body), b"")
        info, stream, head = started
        total = m.start + m.nbytes
        if len(head) > total:
            raise ValueError(f"{info.filename} holds more data than its header declares")
        data = bytearray(head)  # the array's own writable memory (np.load's arrays are writable)
        data += stream.read(total - len(head))  # never more than the header declares
        if len(data) < total:
            raise ValueError(f"{info.filename} holds less data than its header declares")
        if not stream.complete():
            raise ValueError(f"{info.filename} holds more data than its header declares")
        if zlib.crc32(data) != info.CRC:
            raise zipfile.BadZipFile(f"bad CRC of {info.filename}")
        flat = np.frombuffer(data, dtype=m.dtype, count=math.prod(m.shape), offset=m.start)
        return flat.reshape(m.shape, order="F" if m.fortran else "C")


class _Inflater:
    """One member's data, inflated in steps of a given size (stored members are sliced)."""

    def __init__(self, info: zipfile.ZipInfo, body: bytes):
        self._body, self._pos = body, 0
        self._zlib = zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None

    def read(self, n: int) -> bytes:
        """The next at most ``n`` bytes."""
        if n <= 0:
            return b""
        if self._zlib is None:
            out = self._body[self._pos:self._pos + n]
            self._pos += len(out)
            return out
        out = self._zlib.decompress(self._body, n)
        self._body = self._zlib.unconsumed_tail
        return out

    def complete(self) -> bool:
        """Whether everything has been read."""
        if self._zlib is None:
            return self._pos >= len(self._body)
        return self._zlib.eof and not self._zlib.unconsumed_tail


def _pair_runs(a: np.ndarray, b: np.ndarray, frame: np.ndarray, n: int, num_frames: int,
               gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`Trace.touch_runs` of contact rows (any row order): one boolean row of frames per pair that
    touches, all rows laid end to end, read for its edges (no sort of the contact rows)."""
    key = a.astype(np.int64) * n + b
    if key.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy(), empty.copy()
    keys = np.flatnonzero(np.bincount(key))  # the pairs that touch, in order: one row each
    slot = np.zeros(keys[-1] + 1, dtype=np.int64)
    slot[keys] = np.arange(keys.size)
    width = num_frames + 2  # a free column at either end of each row
    mask = np.zeros(keys.size * width, dtype=bool)
    mask[slot[key] * width + frame + 1] = True
    edge = np.flatnonzero(mask[1:] != mask[:-1])  # alternately the first frame and the stop of a run
    row = edge[::2] // width
    start, stop = edge[::2] - row * width, edge[1::2] - row * width
    if gap and row.size > 1:  # runs of one pair at most `gap` frames apart join
        keep = np.concatenate(([True], (row[1:] != row[:-1]) | (start[1:] - stop[:-1] > gap)))
        row, start, stop = row[keep], start[keep], stop[np.concatenate((keep[1:], [True]))]
    pair = keys[row]
    return pair // n, pair % n, start, stop - 1


def runs_of_true(mask: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of True in a 1-D boolean array as inclusive (start, end) pairs."""
    m = np.asarray(mask, dtype=bool)
    if m.size == 0:
        return []
    padded = np.concatenate(([False], m, [False])).astype(np.int8)
    edges = np.diff(padded)
    starts = np.nonzero(edges == 1)[0]
    ends = np.nonzero(edges == -1)[0] - 1
    return [(int(s), int(e)) for s, e in zip(starts, ends)]


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, tuple)):
        return list(obj)
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")


def empty_contacts(dim: int = 2) -> dict[str, np.ndarray]:
    """Zero-row contact arrays of the right dtypes."""
    return {
        "contact_frame": np.zeros(0, np.int32),
        "contact_a": np.zeros(0, np.int16),
        "contact_b": np.zeros(0, np.int16),
        "contact_point": np.zeros((0, dim), np.float64),
        "contact_normal": np.zeros((0, dim), np.float64),
        "contact_impulse": np.zeros(0, np.float64),
    }


def collision_events(
    contact_frame: np.ndarray, contact_a: np.ndarray, contact_b: np.ndarray, num_frames: int, names: Iterable[str]
) -> list[RawEvent]:
    """Derive CollisionStart/CollisionEnd from contact rows.

    A pair starts at the first frame of each touching run and ends at the
    first frame after it where it no longer touches; a run still open at the
    last frame has no end event. Sorted by frame, then pair.
    """
    names = list(names)
    if contact_frame.size == 0:
        return []
    n = len(names)
    # one integer per row, ordered by pair, then frame: a plain sort, no argsort and gathers
    f = contact_frame.astype(np.int64)
    lo = int(f.min())
    span = int(f.max()) - lo + 2  # a run's end frame (last + 1) stays inside its pair's span
    pair = contact_a.astype(np.int64) * n + contact_b
    code = np.sort(pair * span + (f - lo))
    new_run = np.ones(code.size, dtype=bool)
    new_run[1:] = code[1:] != code[:-1] + 1
    run_end = np.ones(code.size, dtype=bool)
    run_end[:-1] = new_run[1:]
    ends = code[run_end] + 1
    ends = ends[ends % span + lo < num_frames]  # a run still open at the last frame has no end
    starts = code[new_run]
    # by frame, then pair, an end before a start
    event = np.sort(np.concatenate((((starts % span) * n * n + starts // span) * 2 + 1,
                                    ((ends % span) * n * n + ends // span) * 2)))
    when, pair = np.divmod(event >> 1, n * n)
    return [
        RawEvent(COLLISION_START if start else COLLISION_END, fr + lo, {"object_a": names[p // n], "object_b": names[p % n]})
        for fr, p, start in zip(when.tolist(), pair.tolist(), (event & 1).tolist())
    ]


def _declared(npz: "_NpzArrays", name: str, source: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype an .npz member declares in its .npy header (nothing else is read)."""
    try:
        shape, dtype = npz.declared(name)
    except Exception as exc:  # noqa: BLE001 - any damage to the member is this field's error
        raise TraceFormatError(f"{source}: field {name!r} is not a readable array ({exc})") from exc
    if dtype.hasobject or dtype.fields is not None:
        raise TraceFormatError(f"{source}: field {name!r} has dtype {dtype}, expected plain numbers")
    return shape, dtype


def _check_declared(declared: dict[str, tuple[tuple[int, ...], np.dtype]], n_bodies: int,
                    source: str) -> tuple[int, int]:
    """Shapes agree with the header's bodies and the time axis, and the sizes with
    `MAX_TRACE_BYTES`, before any array is read; returns (T, D)."""
    total = 0
    for name, (shape, dtype) in declared.items():
        if name == "header":
            continue
        if any(n < 0 for n in shape):
            raise TraceFormatError(f"{source}: field {name!r} declares shape {shape}")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if nbytes > MAX_TRACE_BYTES:
            raise TraceFormatError(f"{source}: field {name!r} declares {nbytes} bytes, more than a trace may "
                                   f"hold ({MAX_TRACE_BYTES})")
        total += nbytes
    if total > MAX_TRACE_BYTES:
        raise TraceFormatError(f"{source}: arrays declare {total} bytes, more than a trace may hold ({MAX_TRACE_BYTES})")
    return _frames_and_dim(declared["time"][0], declared["position"][0], n_bodies, source)


def _frames_and_dim(time_shape: tuple[int, ...], pos_shape: tuple[int, ...], n_bodies: int,
                    source: str) -> tuple[int, int]:
    """T and D from the shapes of 'time' (T,) and 'position' (T, N, D) for the header's N bodies."""
    if len(time_shape) != 1 or time_shape[0] < 1:
        raise TraceFormatError(f"{source}: field 'time' has shape {time_shape}, expected (T,) with T >= 1")
    if len(pos_shape) != 3 or pos_shape[:2] != (time_shape[0], n_bodies) or pos_shape[2] not in (2, 3):
        raise TraceFormatError(f"{source}: field 'position' has shape {pos_shape}, expected "
                               f"(T={time_shape[0]}, N={n_bodies}, D=2 or 3) for the header's bodies")
    return int(time_shape[0]), int(pos_shape[2])


def _header_bodies(header: dict[str, Any], source: str) -> list[Any]:
    """The header's ``bodies`` list (its length is checked against the arrays before they are read)."""
    try:
        return body_list(header)
    except HeaderError as exc:
        raise TraceFormatError(f"{source}: {exc}") from exc
