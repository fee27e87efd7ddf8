"""Scene description and a PHYRE-creator-like builder for templates.

A template's ``build`` function receives a `SceneBuilder` and places bodies
with PHYRE's vocabulary (scale, left/right/top/bottom/center, angle in
degrees), then names the goal pair with `SceneBuilder.set_goal`. Colours and
roles follow PHYRE: green = first goal body, blue = second goal body if
dynamic, purple = static goal body, gray = other dynamic, black = other
static and the walls, red = the agent's ball.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from simpatterns.errors import SimpatternsError
from simpatterns.simulators.phyre import geometry as geo
from simpatterns.trace import Body

SCENE_SIZE = geo.SCENE_SIZE

ROLE_AGENT = "agent"
ROLE_GOAL_OBJECT = "goal_object"  # green: the body that must touch the goal
ROLE_GOAL_SUBJECT = "goal_subject"  # blue (dynamic) or purple (static)
ROLE_CONFOUNDER = "confounder"  # gray (dynamic) or black (static)
ROLE_WALL = "wall"

WALL_NAMES = {"bottom": "ground", "left": "left wall", "top": "top wall", "right": "right wall"}


class SkipVariant(SimpatternsError):
    """Raised by a template's build function for parameter sets it rejects
    (overlaps, bodies outside the scene), as PHYRE's templates do."""


@dataclass
class BodySpec:
    """A body being placed. ``x, y`` is the body origin (PHYRE's), ``angle`` radians."""

    kind: str
    dynamic: bool
    parts: tuple[dict[str, Any], ...]
    size: dict[str, float]
    x: float = 0.0
    y: float = 0.0
    angle: float = 0.0
    color: str | None = None
    name: str | None = None
    label: str | None = None  # a word for the name instead of the kind, e.g. "floor"
    velocity: tuple[float, float] = (0.0, 0.0)  # initial, px/s (purpose-built test scenes)
    angular_velocity: float = 0.0  # initial, rad/s

    # ---- PHYRE-style placement (all return self so calls chain) ----
    def _points(self) -> list[tuple[float, float]]:
        return geo.world_points(self.parts, self.x, self.y, self.angle)

    @property
    def left(self) -> float:
        return min(p[0] for p in self._points())

    @property
    def right(self) -> float:
        return max(p[0] for p in self._points())

    @property
    def bottom(self) -> float:
        return min(p[1] for p in self._points())

    @property
    def top(self) -> float:
        return max(p[1] for p in self._points())

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def height(self) -> float:
        return self.top - self.bottom

    @property
    def center_x(self) -> float:
        return (self.left + self.right) / 2

    @property
    def center_y(self) -> float:
        return (self.top + self.bottom) / 2

    def set_left(self, v: float) -> "BodySpec":
        self.x += v - self.left
        return self

    def set_right(self, v: float) -> "BodySpec":
        self.x += v - self.right
        return self

    def set_bottom(self, v: float) -> "BodySpec":
        self.y += v - self.bottom
        return self

    def set_top(self, v: float) -> "BodySpec":
        self.y += v - self.top
        return self

    def set_center_x(self, v: float) -> "BodySpec":
        return self.set_left(v - self.width / 2)

    def set_center_y(self, v: float) -> "BodySpec":
        return self.set_bottom(v - self.height / 2)

    def set_center(self, x: float, y: float) -> "BodySpec":
        return self.set_center_x(x).set_center_y(y)

    def set_angle(self, degrees: float) -> "BodySpec":
        self.angle = math.radians(degrees)
        return self

    def push(self, dx: float, dy: float) -> "BodySpec":
        """Shift in the body's own (rotated) frame."""
        c, s = math.cos(self.angle), math.sin(self.angle)
        self.x += c * dx - s * dy
        self.y += s * dx + c * dy
        return self

    @property
    def outside_play_area(self) -> bool:
        """True if no part reaches into the open scene square (it lies in or beyond the walls)."""
        return self.right <= 0 or self.left >= SCENE_SIZE or self.top <= 0 or self.bottom >= SCENE_SIZE

    def trim_to_walls(self) -> "BodySpec":
        """Shorten a static bar that PHYRE lets run through a wall so that it
        ends inside that wall: the part in the scene is unchanged, the part
        beyond the walls' outer faces (which nothing can reach) is cut off.
        A bar already within the walls is left as it is."""
        if self.kind != "bar" or self.dynamic:
            what = f"{'dynamic ' if self.dynamic else ''}{self.kind}"
            raise ValueError(f"trim_to_walls works on static bars, not a {what}")
        half_len, half_t = self.size["length"] / 2, self.size["thickness"] / 2
        lo, hi = -geo.WALL_THICKNESS, SCENE_SIZE + geo.WALL_THICKNESS
        c, s = math.cos(self.angle), math.sin(self.angle)
        axis, normal = (c, s), (-s, c)
        start, end = -half_len, half_len  # along the bar's axis, from its centre
        for q in (-half_t, half_t):  # both long edges of the bar
            for k, origin in enumerate((self.x, self.y)):
                base = origin + normal[k] * q
                if abs(axis[k]) < 1e-12:
                    if not lo - 1e-9 <= base <= hi + 1e-9:
                        raise ValueError(f"bar {self.label or self.kind!r} runs along a wall, outside the scene")
                    continue
                a, b = (lo - base) / axis[k], (hi - base) / axis[k]
                start, end = max(start, min(a, b)), min(end, max(a, b))
        if end - start <= 0:
            raise ValueError(f"bar {self.label or self.kind!r} lies wholly outside the walls")
        if end - start < 2 * half_len - 1e-9:
            mid = (start + end) / 2
            self.x, self.y = self.x + c * mid, self.y + s * mid
            trimmed = geo.bar(length=end - start, thickness=2 * half_t)
            self.parts, self.size = trimmed.parts, dict(trimmed.size)
        return self

    def set(self, **placement: float) -> "BodySpec":
        """Apply placement keywords in PHYRE's order: angle first, then edges, then centres."""
        for key in ("angle", "left", "right", "top", "bottom", "center_x", "center_y"):
            if key in placement:
                getattr(self, f"set_{key}")(placement.pop(key))
        if placement:
            raise TypeError(f"unknown placement keywords: {sorted(placement)}")
        return self


@dataclass
class Scene:
    """A built scene: bodies in final order (walls first), goal pair, provenance."""

    bodies: list[BodySpec]
    goal: tuple[int, int] | None
    template: str = ""
    variant: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    def trace_bodies(self, parts: Sequence[tuple[dict, ...]] | None = None) -> list[Body]:
        """`Body` records (parts re-centred on the centre of mass). A caller that has
        re-centred the parts already (the simulator's world) passes them as ``parts``,
        one entry per body from the first."""
        out = []
        for i, spec in enumerate(self.bodies):
            if parts is None:
                _, cx, cy = geo.parts_area_centroid(spec.parts)
            out.append(
                Body(
                    name=spec.name or spec.kind,
                    color=spec.color or "black",
                    shape=spec.kind,
                    dynamic=spec.dynamic,
                    role=role_of(self, spec, i),
                    size=dict(spec.size),
                    parts=geo.shift_parts(spec.parts, -cx, -cy) if parts is None else parts[i],
                )
            )
        return out

    @property
    def goal_names(self) -> tuple[str, str] | None:
        if self.goal is None:
            return None
        a, b = (self.bodies[i] for i in self.goal)  # named as `trace_bodies` names them
        return (a.name or a.kind, b.name or b.kind)

    def goal_text(self) -> str:
        if self.goal_names is None:
            return "no goal"
        a, b = self.goal_names
        return f"make the {a} touch the {b}"


def role_of(scene: Scene, spec: BodySpec, i: int) -> str:
    """The role of ``spec``, the ``i``-th body of ``scene`` (by position: two equal specs
    can have different roles, and comparing specs field by field is slow)."""
    if spec.kind == "wall":
        return ROLE_WALL
    if scene.goal is not None and i == scene.goal[0]:
        return ROLE_GOAL_OBJECT
    if scene.goal is not None and i == scene.goal[1]:
        return ROLE_GOAL_SUBJECT
    return ROLE_CONFOUNDER


class SceneBuilder:
    """Places bodies the way PHYRE's task creator does; see module docstring."""

    width = SCENE_SIZE
    height = SCENE_SIZE

    def __init__(self) -> None:
        self.bodies: list[BodySpec] = []
        self.walls: dict[str, BodySpec] = {}
        for side in ("bottom", "left", "top", "right"):
            self.walls[side] = self._add_wall(side)
        self._goal: tuple[BodySpec, BodySpec] | None = None

    @property
    def bottom_wall(self) -> BodySpec:
        return self.walls["bottom"]

    def _add_wall(self, side: str) -> BodySpec:
        t = geo.WALL_THICKNESS
        w, h = (t, SCENE_SIZE) if side in ("left", "right") else (SCENE_SIZE, t)
        spec = BodySpec("wall", False, (geo.rectangle(w, h),), {"width": w, "height": h})
        spec.name = WALL_NAMES[side]
        spec.color = "black"
        if side == "bottom":
            spec.set_left(0).set_top(0)
        elif side == "left":
            spec.set_right(0).set_bottom(0)
        elif side == "top":
            spec.set_left(0).set_bottom(SCENE_SIZE)
        else:
            spec.set_left(SCENE_SIZE).set_bottom(0)
        self.bodies.append(spec)
        return spec

    def add(
        self,
        kind: str,
        scale: float = 0.5,
        dynamic: bool = True,
        label: str | None = None,
        **placement: float,
    ) -> BodySpec:
        """Add a ball, bar, jar, standingsticks or box by PHYRE scale and place it."""
        builders = {
            "ball": lambda: geo.ball(scale),
            "bar": lambda: geo.bar(scale),
            "box": lambda: geo.box(scale),
            "jar": lambda: geo.jar(scale),
            "standingsticks": lambda: geo.standing_sticks(scale),
        }
        if kind not in builders:
            raise ValueError(f"unknown body kind {kind!r}; expected one of {sorted(builders)}")
        if not (scale >= 0 and (kind == "bar" or scale <= 1)):
            raise ValueError(f"{kind} scale must be in [0, 1], got {scale}")
        g = builders[kind]()
        return self._add_geometry(g, dynamic, label, placement)

    def add_ball(self, radius: float, dynamic: bool = True, label: str | None = None, **placement: float) -> BodySpec:
        return self._add_geometry(geo.ball(radius=radius), dynamic, label, placement)

    def add_box(
        self, width: float, height: float, dynamic: bool = True, label: str | None = None, **placement: float
    ) -> BodySpec:
        kind_geo = geo.box(width=width, height=height)
        return self._add_geometry(kind_geo, dynamic, label, placement)

    def add_bar(
        self, length: float, thickness: float = geo.BAR_THICKNESS, dynamic: bool = False,
        label: str | None = None, **placement: float,
    ) -> BodySpec:
        return self._add_geometry(geo.bar(length=length, thickness=thickness), dynamic, label, placement)

    def _add_geometry(self, g: geo.ShapeGeometry, dynamic: bool, label: str | None, placement: dict) -> BodySpec:
        spec = BodySpec(g.kind, dynamic, g.parts, dict(g.size), label=label)
        spec.set(**placement)
        self.bodies.append(spec)
        return spec

    def discard(self, body: BodySpec) -> None:
        """Take a placed body out again: a measuring aid PHYRE adds to its scene
        without effect, or a static body it places wholly in or beyond the walls."""
        if body.kind == "wall" or (self._goal is not None and any(body is g for g in self._goal)):
            raise ValueError("cannot discard a wall or a goal body")
        index = next((i for i, b in enumerate(self.bodies) if b is body), None)
        if index is None:
            raise ValueError("body is not in this scene")
        del self.bodies[index]

    def set_goal(self, body1: BodySpec, body2: BodySpec) -> None:
        """body1 (green, dynamic) must touch body2 (blue if dynamic, else purple)."""
        if not (body1.dynamic or body2.dynamic):
            raise ValueError("at least one goal body must be dynamic")
        self._goal = (body1, body2)

    def build(
        self, template: str = "", params: dict[str, Any] | None = None, description: str = "",
        require_goal: bool = True,
    ) -> Scene:
        """Colour by role, name bodies, freeze. Purpose-built scenes (tests) may
        pass ``require_goal=False`` and set ``color`` on specs themselves."""
        if self._goal is None and require_goal:
            raise ValueError("template did not call set_goal")
        g1, g2 = self._goal if self._goal is not None else (None, None)
        for spec in self.bodies:
            if spec.kind == "wall" or (self._goal is None and spec.color is not None):
                continue
            if spec is g1:
                spec.color = "green" if spec.dynamic else "purple"
            elif spec is g2:
                spec.color = "blue" if spec.dynamic else "purple"
            else:
                spec.color = "gray" if spec.dynamic else "black"
        _assign_names([b for b in self.bodies if b.kind != "wall"])
        bodies = [replace(b) for b in self.bodies]
        goal = (self.bodies.index(g1), self.bodies.index(g2)) if self._goal is not None else None
        return Scene(bodies, goal, template=template, params=dict(params or {}), description=description)


_KIND_WORDS = {"standingsticks": "sticks"}


def _assign_names(specs: list[BodySpec]) -> None:
    """'green ball', 'purple floor'; repeated names are numbered left to right."""
    base = {id(s): f"{s.color} {s.label or _KIND_WORDS.get(s.kind, s.kind)}" for s in specs}
    counts = Counter(base.values())
    seen: Counter[str] = Counter()
    for s in sorted(specs, key=lambda s: (round(s.center_x, 6), round(s.center_y, 6))):
        b = base[id(s)]
        if counts[b] > 1:
            seen[b] += 1
            s.name = f"{b} {seen[b]}"
        else:
            s.name = b
