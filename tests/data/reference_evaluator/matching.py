# Frozen reference: simpatterns/dsl/matching.py before issue 32's speed-up (imports made relative). Do not edit.
"""How a program's params constrain pattern events.

- Strings compare after normalisation (case, ``_`` vs space, repeated
  spaces): ``"Green_Ball"`` matches ``"green ball"``.
- A wildcard (``"*"``, ``"any"``, ``"anything"``, ``"any object"``, ``"any
  body"``, or a placeholder such as ``"object X"`` / ``"?x"``) matches any
  value, but the key must be present.
- A list of alternatives matches a scalar equal to any of them; against a
  list-valued param (a ``path``) a list compares element by element (tuples
  and lists are the same).
- Numbers compare with a relative tolerance of 1e-9.
- Symmetric pairs: keys ``K_a``/``K_b`` (``object_a``/``object_b``) match in
  either order, so ``{"object_a": "green ball"}`` is "a collision involving
  the green ball", unless the pattern is directed: its detector declares
  ``DIRECTED = True`` (read from the library the program is compiled with),
  or it is among the ``directed`` labels given when compiling.
- Body params (the keys a pattern's detector declares in ``BODY_PARAMS``;
  ``object`` and ``object_*`` by default) may name bodies by colour class or
  role (``"green object"``, ``"the goal object"``, see
  `simpatterns.dsl.references`): such a value stands for any of the bodies it
  resolves to in the scene evaluated, as a list of alternatives would.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Collection, Mapping, Sequence

from simpatterns.annotation import normalize_label
from simpatterns.detectors.contract import is_default_body_param
from simpatterns.dsl.references import is_wildcard, parse_reference

MISSING = object()

_NORM_CACHE: dict[str, str] = {}


def normalize_text(s: str) -> str:
    """`simpatterns.annotation.normalize_label` ('Green_Ball ' -> 'green ball'), memoised:
    event params repeat a few names."""
    out = _NORM_CACHE.get(s)
    if out is None:
        out = normalize_label(s)
        if len(_NORM_CACHE) < 100_000:
            _NORM_CACHE[s] = out
    return out


class _Wildcard:
    def __repr__(self) -> str:
        return "ANY"


WILDCARD = _Wildcard()


def canonical_constraint(value: Any) -> Any:
    """A program's param value in matching form: normalised strings, WILDCARD,
    tuples for sequences, dicts kept."""
    if isinstance(value, str):
        return WILDCARD if is_wildcard(value) else normalize_text(value)
    if isinstance(value, (list, tuple)):
        return tuple(canonical_constraint(v) for v in value)
    if isinstance(value, dict):
        return {k: canonical_constraint(v) for k, v in value.items()}
    return value


def _norm(v: str) -> str:
    out = _NORM_CACHE.get(v)
    return out if out is not None else normalize_text(v)


def value_matches(v: Any, c: Any) -> bool:
    """Does the event value ``v`` (as the detector wrote it) satisfy the
    canonical constraint ``c``? Strings are normalised lazily: detectors
    usually write canonical body names, so plain equality decides most cases."""
    if c is WILDCARD:
        return v is not MISSING
    if isinstance(c, str):
        return v == c or (type(v) is str and _norm(v) == c)
    if isinstance(c, tuple):
        if isinstance(v, (list, tuple)):
            if _seq_equal(v, c):
                return True
            return any(isinstance(a, tuple) and _seq_equal(v, a) for a in c)
        return any(value_matches(v, a) for a in c)
    if isinstance(c, bool) or isinstance(v, bool):
        return v is c or v == c and type(v) is type(c)
    if isinstance(c, (int, float)):
        if not isinstance(v, (int, float)):
            return False
        return v == c or math.isclose(v, c, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(c, dict):
        return isinstance(v, dict) and all(value_matches(v.get(k, MISSING), cv) for k, cv in c.items())
    return v == c


def _seq_equal(v, c: tuple) -> bool:
    return len(v) == len(c) and all(value_matches(a, b) for a, b in zip(v, c))


def _present(v: Any) -> bool:
    return v is not MISSING


def _compile_test(c: Any) -> Callable[[Any], bool]:
    """A fast test for one constraint (a string, or string alternatives, are
    the common cases; everything else goes through `value_matches`)."""
    if c is WILDCARD:
        return _present
    if isinstance(c, str):
        def equals(v: Any) -> bool:
            return v == c or (type(v) is str and _norm(v) == c)
        return equals
    if isinstance(c, tuple) and c and all(isinstance(a, str) for a in c):
        options = frozenset(c)

        def one_of(v: Any) -> bool:
            if type(v) is str:
                return v in options or _norm(v) in options
            return value_matches(v, c)
        return one_of
    return functools.partial(_matches_constraint, c)


def _matches_constraint(c: Any, v: Any) -> bool:
    return value_matches(v, c)


def swapped_key(key: str) -> str | None:
    if key.endswith("_a"):
        return key[:-2] + "_b"
    if key.endswith("_b"):
        return key[:-2] + "_a"
    return None


class ParamMatcher:
    """Callable ``event params -> bool`` for one program params dict (see the
    module doc). ``refs`` are the class phrases among its body params, which
    `bind` resolves in a scene before it matches anything."""

    __slots__ = ("raw", "symmetric", "body_keys", "refs", "items", "tests", "swapped", "key", "__weakref__")

    def __init__(self, constraints: Mapping[str, Any] | None, symmetric: bool = True,
                 body_keys: Collection[str] | None = None):
        self.raw = dict(constraints or {})
        self.symmetric = symmetric
        self.body_keys = frozenset(body_keys) if body_keys is not None else None
        self.refs = frozenset(
            s for k, v in self.raw.items() if self._is_body_key(k)
            for s in (v if isinstance(v, (list, tuple)) else (v,))
            if isinstance(s, str) and parse_reference(s) is not None
        )
        cons = {k: canonical_constraint(v) for k, v in self.raw.items()}
        self.items: tuple[tuple[str, Any], ...] = tuple(cons.items())
        self.tests = tuple((k, _compile_test(c)) for k, c in cons.items())
        self.swapped: tuple[tuple[str, Callable[[Any], bool]], ...] | None = None
        if symmetric and any(swapped_key(k) for k in cons):
            self.swapped = tuple((swapped_key(k) or k, t) for k, t in self.tests)
        self.key = (repr(self.items), symmetric)  # memo key inside one evaluation

    def __call__(self, params: Mapping[str, Any]) -> bool:
        get = params.get
        for k, test in self.tests:
            if not test(get(k, MISSING)):
                break
        else:
            return True
        if self.swapped is None:
            return False
        for k, test in self.swapped:
            if not test(get(k, MISSING)):
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.items

    def _is_body_key(self, key: str) -> bool:
        return key in self.body_keys if self.body_keys is not None else is_default_body_param(key)

    def bind(self, resolve: Callable[[str], Sequence[str] | None]) -> "ParamMatcher":
        """This matcher with each class phrase replaced by the body names ``resolve``
        gives it in a scene (none: it matches no event); itself when it has none."""
        if not self.refs:
            return self

        def one(v: Any) -> list[Any]:
            names = resolve(v) if isinstance(v, str) and v in self.refs else None
            return [v] if names is None else list(names)

        bound: dict[str, Any] = {}
        for k, v in self.raw.items():
            if not self._is_body_key(k):
                bound[k] = v
            elif isinstance(v, (list, tuple)):
                bound[k] = tuple(x for item in v for x in one(item))
            else:
                alts = one(v)
                bound[k] = alts[0] if len(alts) == 1 else tuple(alts)
        return ParamMatcher(bound, self.symmetric, self.body_keys)


MatchFn = Callable[[Mapping[str, Any]], bool]
