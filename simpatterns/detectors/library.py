"""`PatternLibrary`: a directory of detector files plus a ``library.json`` manifest.

Layout on disk::

    my_library/
        library.json
        bounce.py
        collision_start.py
        ...

``library.json``::

    {"format": "simpatterns-library", "version": 1,
     "patterns": [{"label": "bounce", "file": "bounce.py", "description": "...",
                   "depends": ["collision start"], "params": ["object", "surface"],
                   "body_params": ["object", "surface"], "directed": false,
                   "duration": "instant", "provenance": "guided", "fitness": null,
                   "source_hash": "<contract.source_hash(source)>"}, ...]}

``provenance`` is one of ``guided``, ``self-discovered``, ``hand-written``,
``evolved``. Loading checks every record against its file (missing file,
source hash, label, depends, params, body_params, directed, duration: the
record must say what the file declares; a manifest written before
``body_params``/``directed``/``duration`` existed lacks them and the file's
declarations are used) and the dependency graph (missing dependencies,
cycles) and raises `LibraryError` naming the file, field or patterns at fault.
Patterns run in a topological order that keeps manifest order among independent patterns, so the order is deterministic.

Trust. Code written by an LLM is untrusted and runs only in the sandbox
(`simpatterns.sandbox`). A record is *untrusted* when its provenance is
``evolved`` or it carries the ``evolve`` record the discovery driver writes (an
LLM wrote the code, whatever the label's origin). Loading never executes an
untrusted source: it is checked statically (`contract.untrusted_detector`: the
declared names and the imports) and held as a `Detector` with ``detect=None,
trusted=False``; the annotator puts it through the sandbox's AST gate
(`simpatterns.sandbox.gate.check_untrusted`) and then runs it in the sandbox.
Everything else is *trusted* and executed in-process by `load_detector`: the
built-in library shipped with the package (guided and self-discovered
detectors reviewed into it) and ``guided``/``self-discovered``/``hand-written``
records of a user's library. ``hand-written`` means the user vouches for the
code: editing a manifest's provenance is a statement of trust.
``PatternLibrary.load(path, trust_evolved=True)`` (CLI ``--trust-evolved``)
opts in to running untrusted code in-process, faster and with full access to
the files, network and credentials of the process: use it only for code you
have read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

from simpatterns.detectors.contract import (
    Candidate,
    Declarations,
    Detector,
    DetectorError,
    load_detector,
    normalize_label,
    source_hash,
    untrusted_detector,
)
from simpatterns.errors import SimpatternsError
from simpatterns.files import WriteError, sweep_stale, temporary_sibling

LIBRARY_FORMAT = "simpatterns-library"
LIBRARY_VERSION = 1
MANIFEST = "library.json"
PROVENANCES = ("guided", "self-discovered", "hand-written", "evolved")
UNTRUSTED_PROVENANCES = frozenset({"evolved"})  # written by an LLM: sandbox only
EVOLVE_RECORD = "evolve"  # manifest key the discovery driver adds to every detector it accepted


def is_untrusted_record(rec: dict[str, Any]) -> bool:
    """True for a manifest record of LLM-written code (see the module docstring)."""
    return rec.get("provenance") in UNTRUSTED_PROVENANCES or EVOLVE_RECORD in rec
BUILTIN_PACKAGE = "simpatterns.detectors.builtin"
# the built-in libraries by world: PHYRE's 2D patterns (the default) and the 3D/rope patterns
BUILTIN_LIBRARIES = {"phyre": BUILTIN_PACKAGE, "3d": "simpatterns.detectors.builtin3d"}
SPEC_TRUSTED = "__trusted__"  # in `PatternLibrary.to_spec` records only


class LibraryError(SimpatternsError, ValueError):
    """A library is inconsistent; ``patterns`` lists the labels at fault."""

    def __init__(self, message: str, patterns: list[str] | None = None):
        self.patterns = list(patterns or [])
        super().__init__(message)


@dataclass
class PatternEntry:
    """One manifest record."""

    label: str
    file: str
    description: str
    depends: list[str]
    params: list[str]
    provenance: str
    fitness: float | None = None
    source_hash: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # unknown keys, kept on save
    body_params: list[str] = field(default_factory=list)
    directed: bool = False
    duration: str = "instant"

    def to_json(self) -> dict[str, Any]:
        d = {
            "label": self.label,
            "file": self.file,
            "description": self.description,
            "depends": list(self.depends),
            "params": list(self.params),
            "body_params": list(self.body_params),
            "directed": self.directed,
            "duration": self.duration,
            "provenance": self.provenance,
            "fitness": self.fitness,
            "source_hash": self.source_hash,
        }
        d.update(self.extra)
        return d


_DECLARED_KEYS = ("body_params", "directed", "duration")


def _declared_fields(det: Detector) -> dict[str, Any]:
    return {"body_params": list(det.body_params or []), "directed": bool(det.directed),
            "duration": str(det.duration)}


def _check_provenance(provenance: str, where: str) -> str:
    if provenance not in PROVENANCES:
        raise LibraryError(f"{where}: provenance {provenance!r} is not one of {', '.join(PROVENANCES)}")
    return provenance


_DETECTOR_CACHE: dict[tuple[str, str, bool], Detector] = {}
_DETECTOR_CACHE_SIZE = 4096


def _load_cached(source: str, filename: str, trusted: bool = True) -> Detector:
    """`load_detector` (or `untrusted_detector`, which executes nothing) memoised on
    (file name, full source hash, trust): parsing and checking the built-in library's
    sources costs about 20 ms a file, and libraries are loaded often (every worker,
    every evolver step). Detectors are programs that do not change once loaded, so
    libraries may share them."""
    key = (filename, hashlib.sha256(source.encode()).hexdigest(), trusted)
    det = _DETECTOR_CACHE.get(key)
    if det is None:
        det = load_detector(source, filename=filename) if trusted else untrusted_detector(source, filename)
        if len(_DETECTOR_CACHE) >= _DETECTOR_CACHE_SIZE:
            _DETECTOR_CACHE.pop(next(iter(_DETECTOR_CACHE)))
        _DETECTOR_CACHE[key] = det
    return det


def _file_name(label: str, taken: set[str]) -> str:
    stem = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "pattern"
    name, k = f"{stem}.py", 2
    while name in taken:
        name, k = f"{stem}_{k}.py", k + 1
    return name


class PatternLibrary:
    """Detectors keyed by normalised label, with manifest records and a run order.

    Build one with `PatternLibrary.load`, `PatternLibrary.builtin` or
    `PatternLibrary.from_detectors`; change it with `add` / `remove`; write it
    with `save` (atomic).
    """

    def __init__(self) -> None:
        self._detectors: dict[str, Detector] = {}
        self._entries: dict[str, PatternEntry] = {}
        self._order: list[str] | None = None
        self.path: Path | None = None
        # True: untrusted (LLM-written) detectors run in-process too (the user opted in)
        self.trust_evolved = False

    # ----------------------------------------------------------- construction
    @classmethod
    def load(cls, path: str | os.PathLike, trust_evolved: bool = False) -> "PatternLibrary":
        """Load a library directory (or its ``library.json``).

        Untrusted (LLM-written) detectors are checked statically, never executed;
        ``trust_evolved=True`` loads them in-process like trusted code: only for code
        you have read (it runs with this process's files, network and credentials)."""
        path = Path(path)
        if not path.exists():
            raise LibraryError(f"{path}: no such library directory or manifest")
        if not path.is_dir() and path.name != MANIFEST:
            raise LibraryError(f"{path}: not a pattern library (a folder with {MANIFEST}, as "
                               f"`simpatterns discover --library DIR` writes)")
        manifest_path = path / MANIFEST if path.is_dir() else path
        directory = manifest_path.parent
        try:
            text = manifest_path.read_text()
        except OSError as exc:
            raise LibraryError(f"{manifest_path}: cannot read library manifest ({exc.strerror or exc})") from exc
        try:
            manifest = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LibraryError(f"{manifest_path}:{exc.lineno}:{exc.colno}: manifest is not JSON ({exc.msg})") from exc
        lib = cls._from_manifest(manifest, str(manifest_path), lambda name: (directory / name).read_text(),
                                 trust_evolved=trust_evolved)
        lib.path = directory
        return lib

    @classmethod
    def builtin(cls, world: str = "phyre") -> "PatternLibrary":
        """A library shipped with the package: ``"phyre"`` (default) the guided 2D library in
        ``simpatterns/detectors/builtin``; ``"3d"`` the 3D and rope library in
        ``simpatterns/detectors/builtin3d``."""
        package = BUILTIN_LIBRARIES.get(world)
        if package is None:
            raise LibraryError(f"no built-in library {world!r}; the built-in libraries are "
                               f"{', '.join(sorted(BUILTIN_LIBRARIES))}")
        root = resources.files(package)
        manifest_res = root.joinpath(MANIFEST)
        if not manifest_res.is_file():
            raise LibraryError(f"the built-in library has no {MANIFEST} (package {package})")
        where = f"{package}/{MANIFEST}"
        try:
            manifest = json.loads(manifest_res.read_text())
        except json.JSONDecodeError as exc:
            raise LibraryError(f"{where}:{exc.lineno}:{exc.colno}: manifest is not JSON ({exc.msg})") from exc
        # package code, reviewed before it shipped: trusted whatever its provenance
        lib = cls._from_manifest(manifest, where, lambda name: root.joinpath(name).read_text(), trust_evolved=True)
        lib.trust_evolved = False  # but what is added to it later is judged on its own
        try:
            lib.path = Path(str(root))
        except TypeError:  # a zipped install has no directory
            lib.path = None
        return lib

    @classmethod
    def from_detectors(
        cls, detectors: list[Detector | str], provenance: str = "hand-written"
    ) -> "PatternLibrary":
        """A library from detectors (or their sources) in the given order; checks the graph.
        Sources with an untrusted ``provenance`` are checked statically, not executed."""
        lib = cls()
        for d in detectors:
            det = d if isinstance(d, Detector) else lib._detector_from_source(d, provenance, "<detector>")
            if det.pattern in lib._detectors:
                raise LibraryError(f"pattern {det.pattern!r} is given twice", [det.pattern])
            lib._put(det, provenance, None)
        lib._check_graph()
        return lib

    @classmethod
    def _from_manifest(cls, manifest: Any, where: str, read: Any, trust_evolved: bool = False,
                       trusted_labels: frozenset[str] = frozenset()) -> "PatternLibrary":
        if not isinstance(manifest, dict) or manifest.get("format") != LIBRARY_FORMAT:
            raise LibraryError(f"{where}: field 'format' must be {LIBRARY_FORMAT!r}")
        version = manifest.get("version")
        if not isinstance(version, int) or version > LIBRARY_VERSION:
            raise LibraryError(
                f"{where}: field 'version' is {version!r}; this simpatterns reads <= {LIBRARY_VERSION}"
            )
        records = manifest.get("patterns")
        if not isinstance(records, list):
            raise LibraryError(f"{where}: field 'patterns' must be a list")
        lib = cls()
        lib.trust_evolved = trust_evolved
        known = {"label", "file", "description", "depends", "params", "provenance", "fitness", "source_hash",
                 *_DECLARED_KEYS}
        for k, rec in enumerate(records):
            at = f"{where}: patterns[{k}]"
            if not isinstance(rec, dict):
                raise LibraryError(f"{at} must be an object")
            for key, typ in (("label", str), ("file", str), ("provenance", str)):
                if not isinstance(rec.get(key), typ) or not rec[key].strip():
                    raise LibraryError(f"{at}: field {key!r} must be a non-empty string, got {rec.get(key)!r}")
            at = f"{where}: patterns[{k}] ({rec['label']!r}, file {rec['file']!r})"
            _check_provenance(rec["provenance"], at)
            fitness = rec.get("fitness")
            if fitness is not None and (isinstance(fitness, bool) or not isinstance(fitness, (int, float))):
                raise LibraryError(f"{at}: field 'fitness' must be a number or null, got {fitness!r}")
            file = rec["file"]
            if Path(file).is_absolute() or ".." in Path(file).parts or not file.endswith(".py"):
                raise LibraryError(f"{at}: field 'file' must be a relative .py path inside the library")
            try:
                source = read(file)
            except (OSError, FileNotFoundError) as exc:
                raise LibraryError(f"{at}: field 'file': cannot read {file!r} ({exc})", [rec["label"]]) from exc
            digest = source_hash(source)
            if rec.get("source_hash") not in (None, "", digest):
                raise LibraryError(
                    f"{at}: field 'source_hash' is {rec['source_hash']!r} but {file} hashes to {digest!r}; "
                    "the file was edited without updating the manifest",
                    [rec["label"]],
                )
            trusted = trust_evolved or not is_untrusted_record(rec) or normalize_label(rec["label"]) in trusted_labels
            try:
                det = _load_cached(source, file, trusted)
            except DetectorError as exc:
                raise LibraryError(f"{at}: {exc}", [rec["label"]]) from exc
            label = normalize_label(rec["label"])
            if det.pattern != label:
                raise LibraryError(
                    f"{at}: field 'label' is {rec['label']!r} but {file} declares PATTERN = {det.pattern!r}",
                    [label],
                )
            for key, declared in (("depends", det.depends), ("params", det.params),
                                  ("body_params", det.body_params), ("directed", det.directed),
                                  ("duration", det.duration)):
                value = rec.get(key, declared)  # an older manifest without the key: the file's declaration
                norm = [normalize_label(v) for v in value] if key == "depends" and isinstance(value, list) else value
                if norm != declared or type(norm) is not type(declared):
                    raise LibraryError(
                        f"{at}: field {key!r} is {value!r} but {file} declares "
                        f"{key.upper()} = {declared!r}", [label],
                    )
            if label in lib._detectors:
                raise LibraryError(f"{at}: label {label!r} appears twice in the manifest", [label])
            description = rec.get("description", det.description)
            if not isinstance(description, str):
                raise LibraryError(f"{at}: field 'description' must be a string")
            entry = PatternEntry(
                label=label,
                file=file,
                description=description.strip() or det.description,
                depends=list(det.depends),
                params=list(det.params),
                provenance=rec["provenance"],
                fitness=None if fitness is None else float(fitness),
                source_hash=digest,
                extra={key: v for key, v in rec.items() if key not in known},
                **_declared_fields(det),
            )
            lib._detectors[label] = det
            lib._entries[label] = entry
        lib._check_graph(where)
        return lib

    # ---------------------------------------------------------------- queries
    def __len__(self) -> int:
        return len(self._detectors)

    def __contains__(self, label: object) -> bool:
        return isinstance(label, str) and normalize_label(label) in self._detectors

    def __iter__(self) -> Iterator[str]:
        return iter(self.order())

    def __repr__(self) -> str:
        return f"PatternLibrary({len(self)} patterns{', ' + str(self.path) if self.path else ''})"

    @property
    def labels(self) -> list[str]:
        """Labels in run (topological) order."""
        return self.order()

    def _key(self, label: str) -> str:
        if label in self._detectors:  # already a key (the labels of `order()`): keys are normalized
            return label
        key = normalize_label(label)
        if key not in self._detectors:
            raise KeyError(f"no pattern {label!r} in the library; patterns are {sorted(self._detectors)}")
        return key

    def get(self, label: str) -> Detector:
        return self._detectors[self._key(label)]

    def is_trusted(self, label: str) -> bool:
        """False for LLM-written code that runs only in the sandbox."""
        return self._detectors[self._key(label)].trusted

    def untrusted_labels(self) -> list[str]:
        """Patterns whose detectors run only in the sandbox (run order)."""
        return [k for k in self.order() if not self._detectors[k].trusted]

    def entry(self, label: str) -> PatternEntry:
        return self._entries[self._key(label)]

    def entries(self) -> list[PatternEntry]:
        """Manifest records in run order."""
        return [self._entries[k] for k in self.order()]

    def signatures(self) -> dict[str, list[str]]:
        """Label -> the param keys its events carry (run order)."""
        return {k: list(self._detectors[k].params) for k in self.order()}

    def declarations(self) -> dict[str, Declarations]:
        """Label -> what its detector declares: params, which of them name bodies, whether
        ``object_a``/``object_b`` are ordered, instants or intervals (run order)."""
        return {k: self._detectors[k].declarations for k in self.order()}

    def descriptions(self) -> dict[str, str]:
        return {k: self._entries[k].description for k in self.order()}

    def dependencies(self, label: str) -> list[str]:
        return list(self._detectors[self._key(label)].depends)

    def dependents(self, label: str, transitive: bool = True) -> list[str]:
        """Patterns that read ``label`` (directly, or through others when transitive), in run order."""
        key = self._key(label)
        found: set[str] = set()
        frontier = [key]
        while frontier:
            cur = frontier.pop()
            for k, det in self._detectors.items():
                if cur in det.depends and k not in found:
                    found.add(k)
                    if transitive:
                        frontier.append(k)
        return [k for k in self.order() if k in found]

    def order(self) -> list[str]:
        """Topological order; among patterns whose dependencies are met, manifest order."""
        if self._order is None:
            self._order = self._toposort()
        return list(self._order)

    def _toposort(self) -> list[str]:
        insertion = list(self._detectors)
        remaining = {k: set(self._detectors[k].depends) for k in insertion}
        done: list[str] = []
        placed: set[str] = set()
        while len(done) < len(insertion):
            ready = [k for k in insertion if k not in placed and remaining[k] <= placed]
            if not ready:
                break
            # one at a time, earliest in manifest order, so the order is stable and readable
            done.append(ready[0])
            placed.add(ready[0])
        if len(done) < len(insertion):
            self._raise_graph_error(list(self._detectors))
        return done

    def _check_graph(self, where: str = "library") -> None:
        self._order = None
        missing = [
            (k, d) for k, det in self._detectors.items() for d in det.depends if d not in self._detectors
        ]
        if missing:
            text = "; ".join(f"{k!r} depends on {d!r}" for k, d in missing)
            raise LibraryError(
                f"{where}: missing dependencies: {text}, which {'is' if len(missing) == 1 else 'are'} "
                "not in the library",
                sorted({k for k, _ in missing}),
            )
        self._order = self._toposort()

    def _raise_graph_error(self, labels: list[str]) -> None:
        cycles = _cycles({k: [d for d in self._detectors[k].depends if d in self._detectors] for k in labels})
        text = "; ".join(" -> ".join(c + [c[0]]) for c in cycles)
        raise LibraryError(f"dependency cycle (A -> B: A depends on B): {text}", sorted({k for c in cycles for k in c}))

    # ---------------------------------------------------------------- changes
    def _detector_from_source(self, source: str | Candidate, provenance: str, filename: str) -> Detector:
        """A `Candidate` is not parsed again; an untrusted one is not executed either."""
        if provenance in UNTRUSTED_PROVENANCES and not self.trust_evolved:
            return untrusted_detector(source, filename=filename)
        return load_detector(source, filename=filename)

    def _put(self, det: Detector, provenance: str, fitness: float | None, file: str | None = None) -> None:
        if det.trusted and provenance in UNTRUSTED_PROVENANCES and not self.trust_evolved:
            # LLM-written code entering the library: keep its record, never its function
            det = replace(det, detect=None, trusted=False)
        taken = {e.file for k, e in self._entries.items() if k != det.pattern}
        self._detectors[det.pattern] = det
        self._entries[det.pattern] = PatternEntry(
            label=det.pattern,
            file=file if file and file not in taken else _file_name(det.pattern, taken),
            description=det.description,
            depends=list(det.depends),
            params=list(det.params),
            provenance=_check_provenance(provenance, f"pattern {det.pattern!r}"),
            fitness=None if fitness is None else float(fitness),
            source_hash=det.source_hash,
            **_declared_fields(det),
        )
        self._order = None

    def add(
        self,
        detector_or_source: Detector | Candidate | str,
        provenance: str,
        fitness: float | None = None,
        replace: bool = False,
    ) -> Detector:
        """Add a detector, a parsed `Candidate` (not parsed again) or source text. Its
        dependencies must be in the library; an existing label needs ``replace=True``.
        The library is unchanged when this raises. With an untrusted ``provenance``
        ("evolved") a source or candidate is checked statically, not executed, and a
        given `Detector` is stored without its ``detect`` (unless ``trust_evolved``):
        it runs in the sandbox."""
        if isinstance(detector_or_source, Detector):
            det = detector_or_source
        else:
            _check_provenance(provenance, "added pattern")
            det = self._detector_from_source(detector_or_source, provenance, "<added>")
        _check_provenance(provenance, f"pattern {det.pattern!r}")
        if det.pattern in self._detectors and not replace:
            raise LibraryError(
                f"pattern {det.pattern!r} is already in the library; pass replace=True to replace it",
                [det.pattern],
            )
        old_det = self._detectors.get(det.pattern)
        old_entry = self._entries.get(det.pattern)
        self._put(det, provenance, fitness, old_entry.file if old_entry else None)
        try:
            self._check_graph(f"adding {det.pattern!r}")
        except LibraryError:
            if old_det is None:
                del self._detectors[det.pattern]
                del self._entries[det.pattern]
            else:
                self._detectors[det.pattern] = old_det
                self._entries[det.pattern] = old_entry  # type: ignore[assignment]
            self._order = None
            raise
        return det

    def remove(self, label: str, cascade: bool = True) -> list[str]:
        """Remove ``label``; with ``cascade`` also every pattern that (transitively)
        depends on it, else raise if any does. Returns the removed labels, run order."""
        key = self._key(label)
        deps = self.dependents(key)
        if deps and not cascade:
            raise LibraryError(
                f"cannot remove {key!r}: {', '.join(repr(d) for d in deps)} depend on it "
                "(pass cascade=True to remove them too)",
                deps,
            )
        removed = [k for k in self.order() if k == key or k in deps]
        for k in removed:
            del self._detectors[k]
            del self._entries[k]
        self._order = None
        return removed

    def set_fitness(self, label: str, fitness: float | None) -> None:
        self._entries[self._key(label)].fitness = None if fitness is None else float(fitness)

    def subset(self, labels: list[str]) -> "PatternLibrary":
        """A copy holding ``labels`` and everything they depend on."""
        keep: set[str] = set()
        frontier = [self._key(k) for k in labels]
        while frontier:
            k = frontier.pop()
            if k not in keep:
                keep.add(k)
                frontier.extend(self._detectors[k].depends)
        lib = self.copy()
        for k in list(lib._detectors):
            if k not in keep:
                del lib._detectors[k]
                del lib._entries[k]
        lib._order = None
        return lib

    def copy(self) -> "PatternLibrary":
        """An independent library (detectors are shared: they are immutable programs)."""
        lib = PatternLibrary()
        lib._detectors = dict(self._detectors)
        lib._entries = {k: replace(e, depends=list(e.depends), params=list(e.params), extra=dict(e.extra),
                                   body_params=list(e.body_params))
                        for k, e in self._entries.items()}
        lib._order = None if self._order is None else list(self._order)
        lib.path = self.path
        lib.trust_evolved = self.trust_evolved
        return lib

    # -------------------------------------------------------------- transport
    def to_spec(self) -> list[tuple[dict[str, Any], str]]:
        """Plain data (manifest records + sources, run order) to rebuild the library
        in another process: detectors hold functions, which do not pickle. Each record
        also says whether its detector is trusted (``SPEC_TRUSTED``), so trust survives
        the trip; that key is honoured only here, never in a manifest on disk."""
        return [({**self._entries[k].to_json(), SPEC_TRUSTED: self._detectors[k].trusted}, self._detectors[k].source)
                for k in self.order()]

    def __reduce__(self) -> tuple[Any, ...]:
        # detectors hold functions: a library pickles as its spec (RL libraries pickle
        # environments, and a reward wrapper holds its program's library)
        return (_library_from_pickle, (self.to_spec(), None if self.path is None else str(self.path),
                                       self.trust_evolved))

    @classmethod
    def from_spec(cls, spec: list[tuple[dict[str, Any], str]]) -> "PatternLibrary":
        sources = {rec["file"]: src for rec, src in spec}
        records = [{k: v for k, v in rec.items() if k != SPEC_TRUSTED} for rec, _ in spec]
        trusted = frozenset(normalize_label(rec["label"]) for rec, _ in spec if rec.get(SPEC_TRUSTED) is True)
        manifest = {"format": LIBRARY_FORMAT, "version": LIBRARY_VERSION, "patterns": records}
        return cls._from_manifest(manifest, "<library spec>", lambda name: sources[name], trusted_labels=trusted)

    def manifest(self) -> dict[str, Any]:
        return {
            "format": LIBRARY_FORMAT,
            "version": LIBRARY_VERSION,
            "patterns": [self._entries[k].to_json() for k in self.order()],
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write the library to directory ``path``, atomically: everything goes to a
        temporary sibling directory first, which then replaces ``path`` by rename
        (an existing ``path`` is moved aside and removed only after the swap)."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WriteError(f"{path}: cannot create its folder {path.parent} ({exc.strerror or exc})") from None
        if path.exists() and not path.is_dir():
            raise LibraryError(f"{path}: is a file; a library is a folder")
        sweep_stale(path.parent)  # what a killed save left behind
        tmp = temporary_sibling(path)
        tmp.mkdir()
        try:
            for k in self.order():
                (tmp / self._entries[k].file).write_text(self._detectors[k].source)
            (tmp / MANIFEST).write_text(json.dumps(self.manifest(), indent=2) + "\n")
            if path.exists():
                if not (path / MANIFEST).is_file() and any(path.iterdir()):
                    raise LibraryError(f"{path}: exists and is not a pattern library (no {MANIFEST}); not replacing it")
                old = temporary_sibling(path, "old")
                old.mkdir()
                os.rename(path, old / "lib")
                try:
                    os.rename(tmp, path)
                except OSError:
                    os.rename(old / "lib", path)
                    raise
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.path = path
        return path


def resolve_library(spec: str | os.PathLike, trust_evolved: bool = False) -> PatternLibrary:
    """The library a command-line ``--library`` value names: ``builtin`` (PHYRE's),
    ``builtin:WORLD`` (``builtin:3d``), ``none`` (empty) or a library directory."""
    text = str(spec)
    if text == "none":
        return PatternLibrary()
    if text == "builtin" or text.startswith("builtin:"):
        return PatternLibrary.builtin(text.split(":", 1)[1] if ":" in text else "phyre")
    return PatternLibrary.load(text, trust_evolved=trust_evolved)


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components with a cycle (Tarjan), each as a list of labels
    in dependency order, sorted for stable messages."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, []):
                out.append(_cycle_path(comp, graph))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _cycle_path(component: list[str], graph: dict[str, list[str]]) -> list[str]:
    """A shortest cycle through the component's smallest label (breadth-first)."""
    members = set(component)
    start = min(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for cur in frontier:
            for w in sorted(graph.get(cur, [])):
                if w not in members:
                    continue
                if w == start:
                    path = [cur]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return path[::-1]
                if w not in parent:
                    parent[w] = cur
                    nxt_frontier.append(w)
        frontier = nxt_frontier
    return sorted(component)


def _library_from_pickle(spec: list[tuple[dict[str, Any], str]], path: str | None,
                         trust_evolved: bool) -> PatternLibrary:
    lib = PatternLibrary.from_spec(spec)
    lib.path = None if path is None else Path(path)
    lib.trust_evolved = trust_evolved
    return lib
