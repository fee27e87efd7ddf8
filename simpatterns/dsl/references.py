"""Naming bodies by what they are rather than by name: colour classes and roles.

A program may name a body by its name ("green ball"), or by a phrase that is
resolved in each scene from the bodies' colour, shape and role (the `Trace`
records all three), so one program runs on every scene that has such bodies:

| written | means |
|---|---|
| ``"green object"``, ``"a green object"``, ``"the blue body"``, ``"any gray object"`` | the bodies of that colour |
| ``"any ball"``, ``"a gray ball"``, ``"any black bar"`` | the bodies of that shape (and colour): after an article only, since ``"gray ball"`` is a name |
| ``"the goal object"`` | the body that must touch the goal (PHYRE's green body) |
| ``"the goal subject"``, ``"the goal target"`` | the body it must touch (PHYRE's blue or purple body) |
| ``"the agent's ball"``, ``"the agent's body"``, ``"the agent"`` | the body the agent placed (PHYRE's red ball) |
| ``"any wall"``, ``"a wall"``, ``"the walls"``, ``"the boundary"`` | the scene's border (PHYRE: ground, left, right and top wall) |
| ``"any confounder"``, ``"a distractor"`` | the bodies that are neither goal bodies, the agent's nor walls |

A name always wins: in a scene with a body called "green object" the phrase
names that body. A phrase is *existential*: it stands for any of the bodies
it resolves to, so ``TOUCHING("green object", "blue object")`` holds when some
green body touches some blue body, ``{"object_a": "green object"}`` matches an
event of any green body, and a distance to a class is the distance to its
nearest member. A phrase that resolves to no body in a scene (no blue object
in this template) is not an error: a clause about it cannot hold there (no
event matches, nothing touches it, its distance is infinite), and the
explanation says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from simpatterns.annotation import normalize_label as normalize_text

_WILDCARD_WORDS = frozenset({"*", "any", "anything", "any object", "any body", "anybody", "something"})
_PLACEHOLDER = re.compile(r"^(object|body|thing|obj) [a-z]$|^\?[a-z0-9_ ]+$")

ARTICLES = frozenset({"the", "a", "an", "any"})
GENERIC_NOUNS = frozenset({"object", "objects", "body", "bodies", "thing", "things"})
# colour words a program may use without a scene at hand; a scene adds its own
COLOURS = frozenset({"red", "green", "blue", "purple", "gray", "black", "white", "yellow", "orange", "brown",
                     "pink", "cyan", "magenta"})
COLOUR_ALIASES = {"grey": "gray"}
# shape words (PHYRE's body shapes, and common ones of other worlds); a scene adds its own
SHAPES = frozenset({"ball", "bar", "jar", "box", "sphere", "capsule", "cylinder", "rope"})
ROLE_PHRASES: dict[str, str] = {
    "goal object": "goal_object",
    "goal subject": "goal_subject",
    "goal target": "goal_subject",
    "agent's ball": "agent",
    "agent's body": "agent",
    "agent's object": "agent",
    "agent ball": "agent",
    "agent": "agent",
    "wall": "wall",
    "walls": "wall",
    "boundary": "wall",
    "boundaries": "wall",
    "scene boundary": "wall",
    "scene boundaries": "wall",
    "confounder": "confounder",
    "confounders": "confounder",
    "distractor": "confounder",
    "distractors": "confounder",
}
ROLE_WORDS = {"goal_object": "the goal object", "goal_subject": "the goal subject", "agent": "the agent's ball",
              "wall": "any wall", "confounder": "any confounder"}


@dataclass(frozen=True)
class BodyClass:
    """A phrase resolved per scene: the bodies with this colour, shape and role
    (None = any). ``text`` is the phrase as written."""

    text: str
    colour: str | None = None
    shape: str | None = None
    role: str | None = None

    def matches(self, body: "SceneBody") -> bool:
        return ((self.colour is None or body.colour == self.colour)
                and (self.shape is None or body.shape == self.shape)
                and (self.role is None or body.role == self.role))

    def describe(self) -> str:
        parts = [p for p in (self.colour, self.shape) if p]
        role = f"role {self.role}" if self.role else ""
        return " ".join(parts + ([role] if role else [])) or "any body"


def is_wildcard(s: str) -> bool:
    """A placeholder for any body: "*", "any", "anything", "any object", "object X", "?x", ..."""
    n = normalize_text(s)
    return n in _WILDCARD_WORDS or bool(_PLACEHOLDER.match(n))


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def parse_reference(text: str, colours: Iterable[str] = (), shapes: Iterable[str] = ()) -> BodyClass | None:
    """The class a phrase names, or None when it is not a class phrase (a body
    name, a wildcard, or a word this module does not know). ``colours`` and
    ``shapes`` add a scene's own words to the built-in ones."""
    if not isinstance(text, str) or is_wildcard(text):
        return None
    words = normalize_text(text).split()
    article = bool(words) and words[0] in ARTICLES
    if article:
        words = words[1:]
    if not words:
        return None
    joined = " ".join(words)
    if joined in ROLE_PHRASES:
        return BodyClass(text, role=ROLE_PHRASES[joined])
    known_colours = COLOURS | {normalize_text(c) for c in colours}
    known_shapes = SHAPES | {normalize_text(s) for s in shapes}
    *rest, noun = words
    colour = COLOUR_ALIASES.get(rest[0], rest[0]) if len(rest) == 1 else None
    if len(rest) > 1 or (rest and colour not in known_colours):
        return None
    if noun in GENERIC_NOUNS:
        return BodyClass(text, colour=colour) if colour else None
    shape = _singular(noun)
    if article and shape in known_shapes:  # "gray ball" alone is a name; "a gray ball" is a class
        return BodyClass(text, colour=colour, shape=shape)
    return None


@dataclass(frozen=True)
class SceneBody:
    """What a reference can be resolved against: one body's name, colour, shape and role."""

    name: str
    colour: str = ""
    shape: str = ""
    role: str = ""
    dynamic: bool | None = None


class SceneBodies:
    """The bodies of one scene, for resolving references: built from `Body`
    records (a trace's ``bodies``) or from plain names (then only names resolve;
    a class phrase is accepted and resolved when a trace is given)."""

    def __init__(self, bodies: Sequence[Any]):
        self.bodies: list[SceneBody] = [as_scene_body(b) for b in bodies]
        self.names = [b.name for b in self.bodies]
        self.index = {normalize_text(b.name): i for i, b in enumerate(self.bodies)}
        self.described = any(b.colour or b.role or b.shape for b in self.bodies)
        self.colours = sorted({b.colour for b in self.bodies if b.colour})
        self.shapes = sorted({b.shape for b in self.bodies if b.shape})
        self._memo: dict[str, tuple[int, ...] | None] = {}

    def reference(self, text: str) -> BodyClass | None:
        """The class ``text`` names here, or None (a name, a wildcard, unknown words)."""
        if normalize_text(text) in self.index:
            return None
        return parse_reference(text, self.colours, self.shapes)

    def resolve(self, text: str) -> tuple[int, ...] | None:
        """Indices of the bodies ``text`` names: one for a name, the members of a
        class (possibly none); None when it is neither (an unknown body)."""
        out = self._memo.get(text, ())
        if out != ():
            return out
        i = self.index.get(normalize_text(text))
        if i is not None:
            out = (i,)
        else:
            cls = parse_reference(text, self.colours, self.shapes)
            out = None if cls is None else tuple(k for k, b in enumerate(self.bodies) if cls.matches(b))
        self._memo[text] = out
        return out

    def resolve_names(self, text: str) -> tuple[str, ...] | None:
        idx = self.resolve(text)
        return None if idx is None else tuple(self.names[i] for i in idx)

    def references(self) -> list[tuple[str, tuple[str, ...]]]:
        """The role and colour phrases a program can use here, with the bodies each names
        (what ``simpatterns reward check --template`` lists)."""
        out: list[tuple[str, tuple[str, ...]]] = []
        roles = [r for r in ROLE_WORDS if any(b.role == r for b in self.bodies)]
        for role in roles:
            out.append((ROLE_WORDS[role], tuple(b.name for b in self.bodies if b.role == role)))
        for colour in self.colours:
            out.append((f"{colour} object", tuple(b.name for b in self.bodies if b.colour == colour)))
        return out


def as_scene_body(body: Any) -> SceneBody:
    """A `SceneBody` from a `Body` (or anything with ``name``; ``color``/``colour``,
    ``shape``, ``role`` when present), a ``{"name": ...}`` dict, or a plain name."""
    if isinstance(body, SceneBody):
        return body
    if isinstance(body, str):
        return SceneBody(body)
    get = body.get if isinstance(body, dict) else (lambda k, d=None: getattr(body, k, d))
    colour = get("color", None) or get("colour", None) or ""
    return SceneBody(str(get("name")), normalize_text(str(colour)), normalize_text(str(get("shape", "") or "")),
                     str(get("role", "") or ""), get("dynamic", None))


def scene_of(bodies: Sequence[Any] | SceneBodies | None) -> SceneBodies | None:
    if bodies is None or isinstance(bodies, SceneBodies):
        return bodies
    return SceneBodies(list(bodies))
