"""`IncrementalAnnotator`: annotate a trace that grows step by step (the episode
of a multi-step environment) without redoing the earlier frames' per-frame work.

Every call annotates the whole trace it is given, and the result equals
`simpatterns.annotate.annotate` on that trace, event for event: each
detector still runs in its plain whole-trace form, since its events may
depend on the whole history (a crossing is "formed" relative to the last
count that held long enough, however long ago). What is kept between calls
is the work underneath. A trusted detector whose module defines one of the
built-in helpers of `HELPERS`, as an exact copy of the built-in's source,
runs with that helper memoised:

- ``frame_crossings`` (the crossings of the rope's top view at every frame,
  about 95% of the crossing detectors' time on a whole trace) by frame
  (`FrameRows`): when its per-frame argument extends the one of the previous
  call (the earlier frames are equal), only the new frames are computed and
  their rows appended to the cached ones; otherwise (a new episode, another
  rope) it is computed whole and cached afresh;
- ``unmatched`` (which crossings of two frames have no counterpart, asked
  again at every step for every earlier change of the count) by its
  arguments' values (`ByArguments`).

Detectors sharing a helper share its memo, so the three crossing detectors
find the crossings once per step.

Helpers are recognised by their source, not their name: an edited copy is
simply run whole, so a detector can never be given another function's
results. Untrusted detectors run in the sandbox as `annotate` runs them.
"""

from __future__ import annotations

import ast
import copy
import functools
import types
from dataclasses import replace
from importlib import resources
from typing import Any, Callable

import numpy as np

from simpatterns.annotate.annotator import annotate_state
from simpatterns.annotate.sandboxed import SandboxPolicy
from simpatterns.annotation import Annotation
from simpatterns.detectors.contract import Detector
from simpatterns.detectors.library import BUILTIN_LIBRARIES, PatternLibrary
from simpatterns.sandbox.gate import check_untrusted
from simpatterns.trace import Trace

__all__ = ["HELPERS", "ByArguments", "FrameRows", "IncrementalAnnotator"]


@functools.cache
def _reference_source(name: str) -> str:
    module = resources.files(BUILTIN_LIBRARIES["3d"]).joinpath(HELPER_SOURCES[name]).read_text()
    return _function_source(module, name) or ""


@functools.cache
def _function_source(module: str, name: str) -> str | None:
    """The source text of the top-level function ``name`` of ``module`` (None if absent)."""
    try:
        tree = ast.parse(module)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(module, node)
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - not comparable: not the same
        return False


class FrameRows:
    """A per-frame helper (see `HELPERS`) memoised by frame: a call whose first
    argument extends the previous call's (same other arguments, equal earlier frames)
    computes only the new frames. Returns fresh arrays each call (a detector may
    change what it is given)."""

    def __init__(self, fn: Callable[..., tuple[np.ndarray, ...]]):
        self.fn = fn
        self.frames_computed = 0  # frames given to ``fn`` so far, over all calls
        self.clear()

    def clear(self) -> None:
        self._store: np.ndarray | None = None  # the series seen, in a buffer that grows by doubling
        self._seen = 0  # frames of it
        self._rest: tuple[Any, ...] = ()
        self._rows: tuple[np.ndarray, ...] = ()

    def __call__(self, series: Any, *rest: Any) -> tuple[np.ndarray, ...]:
        series = np.asarray(series)
        old = None if self._store is None else self._store[: self._seen]
        n = 0
        if (
            old is not None
            and series.shape[1:] == old.shape[1:]
            and series.dtype == old.dtype
            and len(series) >= len(old)
            and len(rest) == len(self._rest)
            and all(_same(a, b) for a, b in zip(rest, self._rest))
            and np.array_equal(series[: len(old)], old)
        ):
            n = len(old)
        if n == 0 or n < len(series):
            new = self.fn(series[n:], *rest)
            self.frames_computed += len(series) - n
            if n == 0:
                rows = tuple(new)
            else:
                rows = tuple(
                    np.concatenate((a, b + n if k == 0 else b)) for k, (a, b) in enumerate(zip(self._rows, new))
                )
            self._keep(series, n)
            self._rest, self._rows = rest, rows
        return tuple(r.copy() for r in self._rows)

    def _keep(self, series: np.ndarray, n: int) -> None:
        """Store ``series``, whose first ``n`` frames are stored already (copying only the rest)."""
        store = self._store
        if n == 0 or store is None or len(series) > len(store):
            grown = np.empty((max(2 * len(series), 8),) + series.shape[1:], dtype=series.dtype)
            grown[:n] = series[:n]
            store = self._store = grown
        store[n : len(series)] = series[n:]
        self._seen = len(series)


class ByArguments:
    """A pure helper memoised on its arguments' values (arrays by content): the same
    call on a later step returns what it returned then (a copy). Calls whose
    arguments cannot be keyed run as they are."""

    LIMIT = 4096  # results kept (all are dropped when full)

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.calls_computed = 0
        self.clear()

    def clear(self) -> None:
        self._results: dict[tuple[Any, ...], Any] = {}

    def __call__(self, *args: Any) -> Any:
        try:
            key = tuple(_value_key(a) for a in args)
            hash(key)
        except TypeError:
            return self.fn(*args)
        if key not in self._results:
            if len(self._results) >= self.LIMIT:
                self._results.clear()
            self.calls_computed += 1
            self._results[key] = self.fn(*args)
        return _fresh(self._results[key])


def _fresh(x: Any) -> Any:
    """A copy of ``x`` its receiver may change (immutable parts shared)."""
    if isinstance(x, (int, float, bool, str, bytes, type(None), np.generic)):
        return x
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, (list, tuple)):
        return type(x)(_fresh(v) for v in x) if type(x) in (list, tuple) else copy.deepcopy(x)
    if type(x) is dict:
        return {k: _fresh(v) for k, v in x.items()}
    return copy.deepcopy(x)


def _value_key(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return (a.dtype.str, a.shape, a.tobytes())
    return (type(a), a)


# Helpers of the built-in detectors that are memoised, by name: how, and the built-in module
# (of the 3D library) whose copy is the reference. FrameRows: maps a per-frame array [T, ...]
# (and other arguments) to rows keyed by frame (a tuple of equal-length arrays, the first the
# frame of each row, rows in frame order, a frame's rows depending only on that frame's
# slice). ByArguments: a pure function of its arguments' values.
HELPERS: dict[str, type[FrameRows] | type[ByArguments]] = {"frame_crossings": FrameRows, "unmatched": ByArguments}
HELPER_SOURCES = {"frame_crossings": "crossing_formed.py", "unmatched": "crossing_formed.py"}


class IncrementalAnnotator:
    """Annotate the growing trace of an episode with ``library`` (see the module
    docstring): `annotate` equals `simpatterns.annotate.annotate` on the same trace;
    `reset` drops what is kept (call it when an episode starts, to free it; a trace
    that does not extend the last one is recognised anyway). Pickles as its library
    and settings, without what it keeps."""

    def __init__(self, library: PatternLibrary, *, trace_id: str = "", sandbox: SandboxPolicy | None = None):
        check_untrusted(library)
        self.library = library
        self.trace_id = trace_id
        self.sandbox = sandbox
        self._memos: dict[tuple[Any, ...], FrameRows | ByArguments] = {}
        self.detectors: dict[str, Detector] = {}
        for label in library.order():
            det = library.get(label)
            memoised = self._memoised(det)
            if memoised is not None:
                self.detectors[label] = memoised

    def _memoised(self, det: Detector) -> Detector | None:
        """``det`` with its recognised helpers memoised, or None if it has none."""
        detect = det.detect
        if not det.trusted or not isinstance(detect, types.FunctionType):
            return None
        found = {}
        for name, memo in HELPERS.items():
            fn = detect.__globals__.get(name)
            if (
                name in detect.__code__.co_names
                and isinstance(fn, types.FunctionType)
                and _function_source(det.source, name) == _reference_source(name)
            ):
                # copies of one source reading the same globals (np, constants) are one function: one memo
                key = (name, *(id(fn.__globals__.get(g)) for g in fn.__code__.co_names))
                found[name] = self._memos.setdefault(key, memo(fn))
        if not found:
            return None
        scope = {**detect.__globals__, **found}
        bound = types.FunctionType(detect.__code__, scope, detect.__name__, detect.__defaults__, detect.__closure__)
        return replace(det, detect=bound)

    def annotate(self, trace: Trace) -> Annotation:
        """The annotation of ``trace`` with every pattern of the library (as `annotate`)."""
        return annotate_state(
            trace, self.library, trace_id=self.trace_id, sandbox=self.sandbox, detectors=self.detectors
        )

    def reset(self) -> None:
        for memo in self._memos.values():
            memo.clear()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (self.library, self.trace_id, self.sandbox))


def _rebuilt(library: PatternLibrary, trace_id: str, sandbox: SandboxPolicy | None) -> IncrementalAnnotator:
    return IncrementalAnnotator(library, trace_id=trace_id, sandbox=sandbox)
