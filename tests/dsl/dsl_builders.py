"""Builders for hand-made annotations and small traces used across the DSL tests."""

from __future__ import annotations

from typing import Iterable

import numpy as np

from simpatterns.annotation import Annotation, PatternEvent
from simpatterns.trace import Body, Trace

BODIES = ("ground", "left wall", "right wall", "top wall", "green ball", "blue ball", "red ball")


def collide(frame: int, a: str, b: str) -> PatternEvent:
    return PatternEvent("collision start", frame, {"object_a": a, "object_b": b})


def separate(frame: int, a: str, b: str) -> PatternEvent:
    return PatternEvent("collision end", frame, {"object_a": a, "object_b": b})


def touch(frame: int, a: str, b: str) -> PatternEvent:
    return PatternEvent("touch start", frame, {"object_a": a, "object_b": b})


def described(names: Iterable[str] = BODIES) -> list[Body]:
    """Bodies as an annotation lists them: colour = the name's first word ("green ball": green)."""
    return [Body(n, n.split()[0], n.split()[-1], True) for n in names]


def annotation(events: Iterable[PatternEvent], num_frames: int = 101, patterns: list[str] | None = None,
               bodies: list[Body] | None = None) -> Annotation:
    events = list(events)
    pats = patterns if patterns is not None else sorted({e.pattern for e in events})
    return Annotation.from_events(events, num_frames=num_frames, patterns=pats, dt=1 / 60, bodies=bodies)


def make_trace(
    positions: dict[str, np.ndarray | tuple[float, float]],
    num_frames: int = 101,
    contacts: Iterable[tuple[int, str, str]] = (),
    radius: float = 5.0,
    world: float | None = 256.0,
) -> Trace:
    """A trace whose bodies sit at fixed points (a tuple) or follow ``[T, 2]`` paths;
    every body is a circle of ``radius``; ``contacts`` are (frame, a, b) rows."""
    names = list(positions)
    T, N = num_frames, len(names)
    pos = np.zeros((T, N, 2))
    for i, n in enumerate(names):
        p = np.asarray(positions[n], dtype=float)
        pos[:, i] = p if p.ndim == 2 else p[None, :]
    rows = sorted((f, *sorted((names.index(a), names.index(b)))) for f, a, b in contacts)
    bodies = [
        Body(n, n.split()[0], "ball", True, parts=({"kind": "circle", "center": [0.0, 0.0], "radius": radius},))
        for n in names
    ]
    k = len(rows)
    meta = {"dt": 1 / 60, "stride": 1}
    if world is not None:
        meta["world_size"] = [world, world]
    return Trace(
        bodies=bodies,
        time=np.arange(T) / 60.0,
        position=pos,
        angle=np.zeros((T, N)),
        velocity=np.zeros((T, N, 2)),
        angular_velocity=np.zeros((T, N)),
        contact_frame=np.array([r[0] for r in rows], dtype=np.int32),
        contact_a=np.array([r[1] for r in rows], dtype=np.int16),
        contact_b=np.array([r[2] for r in rows], dtype=np.int16),
        contact_point=np.zeros((k, 2)),
        contact_normal=np.zeros((k, 2)),
        contact_impulse=np.zeros(k),
        meta=meta,
    )


SIGNATURES = {
    "collision start": ["object_a", "object_b"],
    "collision end": ["object_a", "object_b"],
    "bounce": ["object", "surface"],
    "airborne": ["object", "frames"],
    "grid cell path": ["object", "path", "directions"],
    "near collision": ["object_a", "object_b", "gap"],
    "support relationship": ["object_a", "object_b", "frames"],
    "collision relay": ["object_a", "object_b", "via"],
    "opposing motion": ["object_a", "object_b", "lever"],
    "touch start": ["object_a", "object_b"],
    "touch end": ["object_a", "object_b"],
    "comes to rest": ["object", "surface", "frames"],
}


# ---------------------------------------------------------------- random programs
import random as _random  # noqa: E402

GEN_BODIES = ("green ball", "blue ball", "red ball", "ground")
GEN_PATTERNS = ("collision start", "collision end", "bounce", "airborne")
GEN_WILDCARDS = ("*", "object X", "any")
GEN_CLASSES = ("green object", "a blue ball", "any red object", "the goal object")  # resolved per scene
PAIR_PATTERNS = ("collision start", "collision end")


class ProgramGenerator:
    """Seeded generator of valid reward programs over GEN_BODIES/GEN_PATTERNS
    (every predicate, nested logic, comparisons, windows, wildcards), used by
    the property tests, the fuzzer and the benchmark."""

    def __init__(self, seed: int | _random.Random = 0):
        self.r = seed if isinstance(seed, _random.Random) else _random.Random(seed)

    def q(self, s: str) -> str:
        return '"' + s + '"'

    def body(self, wildcard: bool = False) -> str:
        if wildcard and self.r.random() < 0.25:
            return self.q(self.r.choice(GEN_WILDCARDS))
        if self.r.random() < 0.15:
            return self.q(self.r.choice(GEN_CLASSES))
        return self.q(self.r.choice(GEN_BODIES))

    def frac(self) -> str:
        return self.r.choice(["0", "1", "1.0", "0.5", "0.2", f"{self.r.random():.3f}"])

    def window(self) -> str:
        a, b = sorted(self.r.random() for _ in range(2))
        return self.r.choice([f"({a:.2f}, {b:.2f})", "(0, 0.2)", "(0.5, 1.0)", f"[{a:.3f}, {b:.3f}]"])

    def pattern_params(self) -> tuple[str, str]:
        p = self.r.choice(GEN_PATTERNS)
        label = self.r.choice([p, p.replace(" ", "_"), p.upper()])
        if self.r.random() < 0.3:
            return self.q(label), ""
        if p in PAIR_PATTERNS:
            items = [f'"object_a": {self.body(True)}']
            if self.r.random() < 0.6:
                b = self.body(True) if self.r.random() < 0.7 else f"[{self.body()}, {self.body()}]"
                items.append(f'"object_b": {b}')
        elif p == "bounce":
            items = [f'"object": {self.body(True)}']
        else:
            items = [f'"object": {self.body(True)}'] + ([f'"frames": {self.r.randint(1, 30)}'] if self.r.random() < 0.3 else [])
        return self.q(label), "{" + ", ".join(items) + "}"

    def event_args(self) -> str:
        label, params = self.pattern_params()
        args = [label] + ([params] if params else [])
        if self.r.random() < 0.4:
            args.append(f"window={self.window()}")
        return ", ".join(args)

    def count(self) -> str:
        return f"COUNT({self.event_args()})"

    def touch_pair(self) -> str:
        a, b = self.r.sample(GEN_BODIES, 2)
        if self.r.random() < 0.25:
            b = self.r.choice(GEN_WILDCARDS)
        elif self.r.random() < 0.15:
            b = self.r.choice(GEN_CLASSES)
        return f"{self.q(a)}, {self.q(b)}"

    def state(self) -> str:
        if self.r.random() < 0.6:
            return f"TOUCHING({self.touch_pair()})"
        return f"NEARBY_AT({self.body()}, x={self.r.randint(0, 256)}, y={self.r.randint(0, 256)}, radius={self.r.randint(1, 60)})"

    def clause(self, depth: int = 0) -> str:
        kinds = ["EVENT", "COUNT", "AFTER", "BEFORE", "FIRST", "LAST", "NEVER", "ALWAYS", "TOUCHING", "NEARBY_AT",
                 "DISTANCE"]
        if depth < 3:
            kinds += ["AND", "OR", "NOT"] * 2
        k = self.r.choice(kinds)
        if k == "EVENT":
            return f"EVENT({self.event_args()})"
        if k == "COUNT":
            op = self.r.choice(["==", "!=", "<", "<=", ">", ">="])
            rhs = self.count() if self.r.random() < 0.3 else str(self.r.randint(0, 4))
            return f"{self.count()} {op} {rhs}"
        if k in ("AFTER", "BEFORE"):
            (a, pa), (b, pb) = self.pattern_params(), self.pattern_params()
            args = [a, b] + ([f"first_params={pa}"] if pa else []) + ([f"second_params={pb}"] if pb else [])
            if self.r.random() < 0.3:
                args.append(f"window={self.window()}")
            return f"{k}({', '.join(args)})"
        if k in ("FIRST", "LAST"):
            label, params = self.pattern_params()
            args = [label] + ([params] if params else [])
            if self.r.random() < 0.4:
                args.append(f"window={self.window()}")
            if self.r.random() < 0.4:
                args.append(f'among={{"object_a": {self.body(True)}}}' if "collision" in label.lower()
                            else f'among={{"object": {self.body(True)}}}')
            return f"{k}({', '.join(args)})"
        if k in ("NEVER", "ALWAYS"):
            if self.r.random() < 0.5:
                return f"{k}({self.state()}" + (f", window={self.window()})" if self.r.random() < 0.5 else ")")
            return f"{k}({self.event_args()})"
        if k == "TOUCHING":
            hold = f", hold={self.frac()}" if self.r.random() < 0.3 else ""
            return f"TOUCHING({self.touch_pair()}, t={self.frac()}{hold})"
        if k == "NEARBY_AT":
            if self.r.random() < 0.3:
                return f"NEARBY_AT({self.body()}, target={self.body()}, window={self.window()})"
            return f"NEARBY_AT({self.body()}, x={self.r.randint(0, 256)}, y={self.r.randint(0, 256)}, t={self.frac()})"
        if k == "DISTANCE":
            a, b = self.r.sample(GEN_BODIES, 2)
            when = f"window={self.window()}" if self.r.random() < 0.5 else f"t={self.frac()}"
            lhs = f"DISTANCE({self.q(a)}, {self.q(b)}, {when})"
            op = self.r.choice(["<", "<=", ">", ">="])
            return f"{lhs} {op} {self.r.choice(['0', '5', '12.5', '80'])}"
        if k == "NOT":
            return f"NOT({self.clause(depth + 1)})"
        n = self.r.randint(1, 4)
        return f"{k}(" + ", ".join(self.clause(depth + 1) for _ in range(n)) + ("," if self.r.random() < 0.3 else "") + ")"

    def program(self) -> str:
        n = self.r.randint(1, 5)
        return "AND(\n" + "".join(f"    {self.clause(1)},\n" for _ in range(n)) + ")"

    def annotation(self, num_frames: int = 61):
        events = []
        for _ in range(self.r.randint(0, 25)):
            p = self.r.choice(GEN_PATTERNS)
            f = self.r.randrange(num_frames)
            if p in PAIR_PATTERNS:
                a, b = self.r.sample(GEN_BODIES, 2)
                events.append(PatternEvent(p, f, {"object_a": a, "object_b": b}))
            else:
                params = {"object": self.r.choice(GEN_BODIES)}
                if p == "airborne":
                    params["frames"] = self.r.randint(1, 20)
                events.append(PatternEvent(p, f, params))
        return annotation(events, num_frames, patterns=list(GEN_PATTERNS))

    def trace(self, num_frames: int = 61):
        pos = {b: np.cumsum(np.array([[self.r.uniform(0, 256), self.r.uniform(0, 256)]] +
                                     [[self.r.gauss(0, 3), self.r.gauss(0, 3)] for _ in range(num_frames - 1)]), axis=0)
               for b in GEN_BODIES}
        contacts = set()
        for _ in range(self.r.randint(0, 40)):
            a, b = self.r.sample(GEN_BODIES, 2)
            contacts.add((self.r.randrange(num_frames), a, b) if a < b else (self.r.randrange(num_frames), b, a))
        return make_trace(pos, num_frames=num_frames, contacts=sorted(contacts))
