"""The 27 question templates of the paper's Appendix C, with their deterministic answers.

Each `QuestionTemplate` knows its text, family, answer type, how to fill its
slots on one rollout (`QuestionTemplate.instances`: every valid filling with
its gold answer) and how to answer a filling (`QuestionTemplate.answer`).
Slots: ``a``/``b`` are bodies named by colour role (red = the agent's ball,
green = the first goal body, blue = the second goal body, blue or purple),
``pattern`` a label of the library, ``t0``/``t1`` a time window in seconds,
``tc`` the cut time of a prediction question.

Answers read only `TraceFacts` (the shared thresholds) and, for the two
pattern templates, the library's annotation of the whole trace. Rules for
ties and "none" (`QuestionRules`): identification questions whose best and
runner-up are too close to call are not asked; "none" is an answer only
where the template says "(if any)" or the event may never happen.
Prediction questions cut where the answer is not decided yet (the event is
not in progress at the cut) and leave at least ``min_future_s`` to come.
docs/reference/qa.md lists every rule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from simpatterns.qa.facts import TraceFacts
from simpatterns.qa.geometry import segment_entry
from simpatterns.qa.questions import NONE

COUNTS, IDENTIFICATION, PREDICTION = "counts", "identification", "prediction"


@dataclass(frozen=True)
class QuestionRules:
    """How slots are filled, ties broken and cuts chosen (recorded in dataset.json)."""

    tie_px: float = 1.0  # closest-at-start: runner-up nearer than this to the best is a tie
    tie_ratio: float = 0.02  # greatest distance / highest speed: runner-up within 2 % is a tie
    window_step_s: float = 0.5  # A1 windows start on this grid
    window_lengths_s: tuple[float, ...] = (1.0, 2.0, 3.0, 5.0)
    cut_range: tuple[float, float] = (0.2, 0.7)  # prediction cut between these fractions of the rollout
    cut_step_s: float = 0.25
    min_future_s: float = 1.0  # at least this much rollout after the cut
    cross_tolerance_px: float = 1.0  # a body this close to the line at the cut is "on" it: not asked
    cuts_per_answer: int = 2  # per slot filling, up to this many cuts with answer yes and as many with no

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["window_lengths_s"] = list(self.window_lengths_s)
        d["cut_range"] = list(self.cut_range)
        return d


@dataclass
class RolloutFacts:
    """What a template reads about one rollout: trace facts and the library's annotation."""

    facts: TraceFacts
    annotation: Any  # simpatterns Annotation of the whole trace (for {PATTERN})
    rules: QuestionRules = field(default_factory=QuestionRules)

    @property
    def duration(self) -> float:
        return (self.facts.T - 1) * self.facts.dt


@dataclass(frozen=True)
class Instance:
    """One valid filling of a template on one rollout, with its gold answer."""

    slots: dict[str, Any]
    answer: Any
    cut_frame: int | None = None
    choices: tuple[str, ...] | None = None
    max_count: int | None = None


AnswerFn = Callable[[RolloutFacts, dict[str, Any], "int | None"], Any]


@dataclass(frozen=True)
class QuestionTemplate:
    id: int
    name: str
    family: str
    answer_type: str
    text: str
    answer_fn: AnswerFn
    instances_fn: Callable[["QuestionTemplate", RolloutFacts], list[Instance]]
    allow_none: bool = False
    rule: str = ""  # the answer rule in words (docs, report)

    def render(self, slots: dict[str, Any]) -> str:
        return self.text.format(**{k: _fmt_slot(k, v) for k, v in slots.items()})

    def answer(self, rf: RolloutFacts, slots: dict[str, Any], cut_frame: int | None = None) -> Any:
        return self.answer_fn(rf, slots, cut_frame)

    def instances(self, rf: RolloutFacts) -> list[Instance]:
        return self.instances_fn(self, rf)


def _fmt_slot(key: str, value: Any) -> str:
    if key in ("t0", "t1"):
        return f"{value:.1f}"
    if key == "tc":
        return f"{value:.2f}"
    return str(value)


# ------------------------------------------------------------------ slot helpers
def _colour_bodies(rf: RolloutFacts, dynamic_only: bool = False) -> list[tuple[str, int]]:
    out = []
    for colour in ("red", "green", "blue"):
        i = rf.facts.role_body(colour)
        if i is not None and (rf.facts.dynamic[i] or not dynamic_only):
            out.append((colour, i))
    return out


def _colour_pairs(rf: RolloutFacts) -> list[tuple[int, int]]:
    bodies = [i for _, i in _colour_bodies(rf)]
    return [(a, b) for k, a in enumerate(bodies) for b in bodies[k + 1:]]


def _name(rf: RolloutFacts, i: int) -> str:
    return rf.facts.names[i]


def _idx(rf: RolloutFacts, slots: dict[str, Any], key: str) -> int:
    return rf.facts.index(slots[key])


def _cut_frames(rf: RolloutFacts) -> np.ndarray:
    """Candidate cut frames: on the cut grid, inside cut_range, leaving min_future_s."""
    r, f = rf.rules, rf.facts
    lo, hi = r.cut_range[0] * rf.duration, min(r.cut_range[1] * rf.duration, rf.duration - r.min_future_s)
    if hi < lo:
        return np.zeros(0, dtype=int)
    times = np.arange(np.ceil(lo / r.cut_step_s) * r.cut_step_s, hi + 1e-9, r.cut_step_s)
    return np.unique(np.round(times / f.dt).astype(int))


def _after(mask: np.ndarray) -> np.ndarray:
    """``after[c]``: mask holds at some frame > c."""
    suffix = np.logical_or.accumulate(mask[::-1])[::-1]
    return np.concatenate([suffix[1:], [False]])


# ------------------------------------------------------------------ counts / statistics
def _touch_count(rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> int:
    f = rf.facts
    a = _idx(rf, s, "a")
    f0, f1 = f.frame_of(s["t0"]), f.frame_of(s["t1"])
    touched = f.touch[f0:f1 + 1, a, :].any(axis=0)
    touched[a] = False
    return int(touched.sum())


def _touch_count_instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
    r, out = rf.rules, []
    starts = np.arange(0.0, max(0.0, rf.duration - min(r.window_lengths_s)) + 1e-9, r.window_step_s)
    for _, a in _colour_bodies(rf, dynamic_only=True):
        for t0 in starts:
            for length in r.window_lengths_s:
                t1 = t0 + length
                if t1 > rf.duration + 1e-9:
                    continue
                slots = {"a": _name(rf, a), "t0": round(float(t0), 2), "t1": round(float(t1), 2)}
                out.append(Instance(slots, t.answer(rf, slots), max_count=rf.facts.N - 1))
    return out


def _pct(mask_of: Callable[[TraceFacts, dict[str, int]], np.ndarray]) -> AnswerFn:
    def answer(rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> float:
        ids = {k: rf.facts.index(v) for k, v in s.items() if k in ("a", "b")}
        return rf.facts.percent(mask_of(rf.facts, ids))
    return answer


def _subject_instances(dynamic_only: bool) -> Callable[[QuestionTemplate, RolloutFacts], list[Instance]]:
    def instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
        out = []
        for _, a in _colour_bodies(rf, dynamic_only):
            slots = {"a": _name(rf, a)}
            out.append(Instance(slots, t.answer(rf, slots)))
        return out
    return instances


def _pair_instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
    out = []
    for a, b in _colour_pairs(rf):
        slots = {"a": _name(rf, a), "b": _name(rf, b)}
        out.append(Instance(slots, t.answer(rf, slots)))
    return out


def _no_slot_instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
    return [Instance({}, t.answer(rf, {}))]


# ------------------------------------------------------------------ identification
def _body_names_in(params: dict[str, Any], names: set[str]) -> set[str]:
    found = set()
    for v in params.values():
        vals = v if isinstance(v, (list, tuple)) else [v]
        found.update(x for x in vals if isinstance(x, str) and x in names)
    return found


def _pattern_objects(rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> list[str]:
    names = set(rf.facts.names)
    found: set[str] = set()
    for e in rf.annotation.by_pattern(s["pattern"]):
        found |= _body_names_in(e.params, names)
    return sorted(found)


def _pattern_objects_instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
    out = []
    for label in rf.annotation.patterns:
        slots = {"pattern": label}
        ans = t.answer(rf, slots)
        if ans:
            out.append(Instance(slots, ans, choices=tuple(rf.facts.names)))
    return out


def _ranked(values: dict[int, float]) -> list[tuple[int, float]]:
    return sorted(values.items(), key=lambda kv: kv[1])


def _closest(rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> str | None:
    f, a = rf.facts, _idx(rf, s, "a")
    p = f.trace.position[0]
    d = {j: float(np.linalg.norm(p[j] - p[a])) for j in f.objects() if j != a}
    ranked = _ranked(d)
    if not ranked or (len(ranked) > 1 and ranked[1][1] - ranked[0][1] < rf.rules.tie_px):
        return None  # a tie: not asked
    return f.names[ranked[0][0]]


def _closest_instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
    out = []
    for _, a in _colour_bodies(rf):
        slots = {"a": _name(rf, a)}
        ans = t.answer(rf, slots)
        if ans is not None:
            choices = tuple(rf.facts.names[j] for j in rf.facts.objects() if j != a)
            out.append(Instance(slots, ans, choices=choices))
    return out


def _blockers(rf: RolloutFacts, a: int, b: int) -> list[int]:
    f = rf.facts
    tr = f.trace
    p0, p1 = tr.position[0, a], tr.position[0, b]
    return [j for j in f.objects() if j not in (a, b)
            and segment_entry(p0, p1, tr.bodies[j].parts, *tr.position[0, j], float(tr.angle[0, j])) is not None]


def _blocking(rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> str | None:
    found = _blockers(rf, _idx(rf, s, "a"), _idx(rf, s, "b"))
    if len(found) > 1:
        return None  # several objects block: ambiguous, not asked
    return rf.facts.names[found[0]] if found else NONE


def _blocking_instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
    out = []
    for a, b in _colour_pairs(rf):
        slots = {"a": _name(rf, a), "b": _name(rf, b)}
        ans = t.answer(rf, slots)
        if ans is not None:
            choices = tuple(rf.facts.names[j] for j in rf.facts.objects() if j not in (a, b)) + (NONE,)
            out.append(Instance(slots, ans, choices=choices))
    return out


def _argmax_fn(values_of: Callable[[TraceFacts], np.ndarray]) -> AnswerFn:
    def answer(rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> str | None:
        f = rf.facts
        vals = values_of(f)
        dyn = np.flatnonzero(f.dynamic)
        if dyn.size < 2:
            return None
        order = dyn[np.argsort(-vals[dyn], kind="stable")]
        best, second = vals[order[0]], vals[order[1]]
        if best <= 0 or second >= best * (1 - rf.rules.tie_ratio):
            return None  # a tie: not asked
        return f.names[order[0]]
    return answer


def _argmax_instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
    ans = t.answer(rf, {})
    if ans is None:
        return []
    return [Instance({}, ans, choices=tuple(rf.facts.names[j] for j in np.flatnonzero(rf.facts.dynamic)))]


def _first_collision(rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> str | None:
    f, a = rf.facts, _idx(rf, s, "a")
    starts = f.contact_starts(a)
    if not starts:
        return NONE
    first = starts[0][0]
    partners = {j for fr, j in starts if fr == first}
    if len(partners) > 1:
        return None  # two bodies hit in the same frame: a tie, not asked
    return f.names[partners.pop()]


def _first_collision_instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
    out = []
    for _, a in _colour_bodies(rf, dynamic_only=True):
        slots = {"a": _name(rf, a)}
        ans = t.answer(rf, slots)
        if ans is not None:
            choices = tuple(n for j, n in enumerate(rf.facts.names) if j != a) + (NONE,)
            out.append(Instance(slots, ans, choices=choices))
    return out


# ------------------------------------------------------------------ prediction
@dataclass(frozen=True)
class Prediction:
    """A yes/no event after the cut: ``event(rf, ids)`` -> [T] frames where it happens;
    ``decided(rf, ids)`` -> [T] cut frames where the answer is already decided (not asked)."""

    event: Callable[[RolloutFacts, dict[str, Any]], np.ndarray]
    decided: Callable[[RolloutFacts, dict[str, Any]], np.ndarray]


def _prediction_fn(pred: Prediction) -> AnswerFn:
    def answer(rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> str:
        assert cut is not None, "a prediction question needs a cut frame"
        ev = pred.event(rf, s)
        return "yes" if ev[cut + 1:].any() else "no"
    return answer


def _cut_instances(rf: RolloutFacts, slots: dict[str, Any], cuts: np.ndarray, yes_at: np.ndarray) -> list[Instance]:
    """Up to ``cuts_per_answer`` of ``cuts`` whose answer (``yes_at[cut]``) is yes and as many that are no,
    spread evenly over the cut range (deterministic)."""
    out = []
    for want in (True, False):
        chosen = cuts[yes_at[cuts] == want]
        n = min(chosen.size, rf.rules.cuts_per_answer)
        for c in chosen[np.linspace(0, chosen.size - 1, n).astype(int)].tolist() if n else []:
            out.append(Instance(dict(slots, tc=round(c * rf.facts.dt, 2)), "yes" if want else "no", cut_frame=int(c)))
    return out


def _prediction_instances(pred: Prediction, fillings: Callable[[RolloutFacts], list[dict[str, Any]]]
                          ) -> Callable[[QuestionTemplate, RolloutFacts], list[Instance]]:
    def instances(t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
        cuts = _cut_frames(rf)
        out = []
        if cuts.size == 0:
            return out
        for slots in fillings(rf):
            ev, decided = pred.event(rf, slots), pred.decided(rf, slots)
            after = _after(ev)
            out += _cut_instances(rf, slots, cuts[~decided[cuts]], after)
        return out
    return instances


def _pair_event(rf: RolloutFacts, s: dict[str, Any]) -> np.ndarray:
    return rf.facts.touch[:, _idx(rf, s, "a"), _idx(rf, s, "b")]


def _with_mask(mask_of: Callable[[TraceFacts], np.ndarray]) -> Callable[[RolloutFacts, dict[str, Any]], np.ndarray]:
    def event(rf: RolloutFacts, s: dict[str, Any]) -> np.ndarray:
        return rf.facts.contact_with(_idx(rf, s, "a"), mask_of(rf.facts))
    return event


def _pair_fillings(rf: RolloutFacts) -> list[dict[str, Any]]:
    return [{"a": _name(rf, a), "b": _name(rf, b)} for a, b in _colour_pairs(rf)]


def _touch_role_fillings(target: str) -> Callable[[RolloutFacts], list[dict[str, Any]]]:
    def fillings(rf: RolloutFacts) -> list[dict[str, Any]]:
        b = rf.facts.role_body(target)
        if b is None:
            return []
        return [{"a": _name(rf, a), "b": _name(rf, b)} for _, a in _colour_bodies(rf) if a != b]
    return fillings


def _subject_fillings(dynamic_only: bool, exclude: str | None = None) -> Callable[[RolloutFacts], list[dict[str, Any]]]:
    def fillings(rf: RolloutFacts) -> list[dict[str, Any]]:
        skip = rf.facts.role_body(exclude) if exclude else None
        if exclude and skip is None:
            return []
        out = []
        for _, a in _colour_bodies(rf, dynamic_only):
            if a != skip:
                s = {"a": _name(rf, a)}
                if exclude:
                    s["b"] = _name(rf, skip)
                out.append(s)
        return out
    return fillings


def _no_fillings(rf: RolloutFacts) -> list[dict[str, Any]]:
    return [{}]


def _pattern_fillings(rf: RolloutFacts) -> list[dict[str, Any]]:
    return [{"pattern": p} for p in rf.annotation.patterns if p not in rf.annotation.errors]


def _pattern_event(rf: RolloutFacts, s: dict[str, Any]) -> np.ndarray:
    ev = np.zeros(rf.facts.T, dtype=bool)
    for e in rf.annotation.by_pattern(s["pattern"]):
        if 0 <= e.frame < rf.facts.T:
            ev[e.frame] = True
    return ev


def _pattern_active(rf: RolloutFacts, s: dict[str, Any]) -> np.ndarray:
    """Frames covered by an activation (an event, or the interval of an event with a ``frames`` length)."""
    active = np.zeros(rf.facts.T, dtype=bool)
    for e in rf.annotation.by_pattern(s["pattern"]):
        n = e.params.get("frames")
        length = n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1
        active[max(0, e.frame):min(rf.facts.T, e.frame + length)] = True
    return active


def _first_ground_decided(rf: RolloutFacts, s: dict[str, Any]) -> np.ndarray:
    # once it has touched the ground, "for the first time in the future" is decided (no)
    g = rf.facts.contact_with(_idx(rf, s, "a"), rf.facts.ground)
    return np.logical_or.accumulate(g)


@dataclass(frozen=True)
class LineCrossing:
    """Crossing the line through b's initial centre (axis 0: vertical line, 1: horizontal) after the cut."""

    axis: int

    def offset(self, rf: RolloutFacts, s: dict[str, Any]) -> np.ndarray:
        """``[T]``: a's centre minus the line's coordinate (b's initial centre), along the axis."""
        pos = rf.facts.trace.position
        return pos[:, _idx(rf, s, "a"), self.axis] - pos[0, _idx(rf, s, "b"), self.axis]

    def answer(self, rf: RolloutFacts, s: dict[str, Any], cut: int | None) -> str:
        assert cut is not None
        d = self.offset(rf, s)
        return "yes" if (np.sign(d[cut + 1:]) == -np.sign(d[cut])).any() else "no"

    def instances(self, t: QuestionTemplate, rf: RolloutFacts) -> list[Instance]:
        cuts = _cut_frames(rf)
        out: list[Instance] = []
        if cuts.size == 0:
            return out
        fill = _subject_fillings(True, exclude="green" if self.axis == 0 else "blue")
        for slots in fill(rf):
            d = self.offset(rf, slots)
            ok = cuts[np.abs(d[cuts]) > rf.rules.cross_tolerance_px]
            # later frames on the other side of the line than at each cut
            crosses = np.where(d > 0, _after(d < 0), _after(d > 0))
            out += _cut_instances(rf, slots, ok, crosses)
        return out


PRED_PAIR = Prediction(_pair_event, _pair_event)
PRED_DYNAMIC = Prediction(lambda rf, s: rf.facts.dynamic_pair_contact(), lambda rf, s: rf.facts.dynamic_pair_contact())
PRED_PATTERN = Prediction(_pattern_event, _pattern_active)
PRED_GROUND = Prediction(_with_mask(lambda f: f.ground), _first_ground_decided)
PRED_WALL = Prediction(_with_mask(lambda f: f.wall), _with_mask(lambda f: f.wall))
PRED_REST = Prediction(lambda rf, s: rf.facts.no_motion, lambda rf, s: rf.facts.no_motion)
CROSS_X, CROSS_Y = LineCrossing(0), LineCrossing(1)

_HEAD = "Given the first part of the recording (up to {tc} s), "


def _t(id: int, name: str, family: str, answer_type: str, text: str, answer_fn: AnswerFn,
       instances_fn: Callable[[QuestionTemplate, RolloutFacts], list[Instance]], rule: str,
       allow_none: bool = False) -> QuestionTemplate:
    return QuestionTemplate(id, name, family, answer_type, text, answer_fn, instances_fn, allow_none, rule)


TEMPLATES: tuple[QuestionTemplate, ...] = (
    _t(1, "touch_count", COUNTS, "integer",
       "How many distinct objects does the {a} touch between {t0} s and {t1} s? The ground and the walls count "
       "as objects.", _touch_count, _touch_count_instances,
       "bodies other than a that touch a in any frame of [t0, t1] (times rounded to the nearest frame); the ground and "
       "the walls count"),
    _t(2, "pattern_objects", IDENTIFICATION, "objects",
       "\"{pattern}\" happened with which object(s)? Name every object involved in any \"{pattern}\" event.",
       _pattern_objects, _pattern_objects_instances,
       "every body named in the params of any event of the pattern (library annotation of the whole rollout); "
       "asked only for patterns that fired and named a body"),
    _t(3, "closest_at_start", IDENTIFICATION, "object",
       "Which object is closest to the {a} at the start (distance between centres; the ground and the walls do "
       "not count)?", _closest, _closest_instances,
       "smallest centre-to-centre distance at frame 0 among non-border bodies; not asked when the runner-up is "
       "within tie_px"),
    _t(4, "blocking_object", IDENTIFICATION, "object",
       "Which object blocks the direct line between the {a} and the {b} at the start (if any)? Answer none if "
       "nothing does.", _blocking, _blocking_instances,
       "the one non-border body whose shape meets the segment between the two centres at frame 0, or none; "
       "not asked when two or more do", allow_none=True),
    _t(5, "greatest_distance", IDENTIFICATION, "object",
       "Which object travels the greatest total distance during the simulation?",
       _argmax_fn(lambda f: f.travel), _argmax_instances,
       "largest path length (sum of frame-to-frame centre displacements) among dynamic bodies; not asked when "
       "the runner-up is within tie_ratio"),
    _t(6, "highest_speed", IDENTIFICATION, "object",
       "Which object reaches the highest maximum speed during the simulation?",
       _argmax_fn(lambda f: f.max_speed), _argmax_instances,
       "largest peak speed among dynamic bodies; not asked when the runner-up is within tie_ratio"),
    _t(7, "first_collision", IDENTIFICATION, "object",
       "What is the first object that the {a} collides with? Contacts already present at the start do not count; "
       "answer none if it never collides.", _first_collision, _first_collision_instances,
       "partner of a's earliest contact start at frame >= 1 (contacts present at frame 0, and a touch resumed "
       "after a flicker, do not start anything); none if there is none; not asked when two bodies are hit in the same "
       "frame", allow_none=True),
    _t(8, "pct_any_collision", COUNTS, "percent",
       "What percentage of frames contain at least one collision involving the {a} (with any object or wall)?",
       _pct(lambda f, i: f.contact_with(i["a"], np.ones(f.N, bool))), _subject_instances(True),
       "frames where a touches any body"),
    _t(9, "pct_object_collision", COUNTS, "percent",
       "What percentage of frames contain a collision between the {a} and any other object (excluding walls and "
       "ground)?", _pct(lambda f, i: f.contact_with(i["a"], ~f.border)), _subject_instances(True),
       "frames where a touches a body that is not the ground or a wall (fixed obstacles count)"),
    _t(10, "pct_ground", COUNTS, "percent",
       "What percentage of frames contain a collision between the {a} and the ground?",
       _pct(lambda f, i: f.contact_with(i["a"], f.ground)), _subject_instances(True),
       "frames where a touches the ground"),
    _t(11, "pct_moving_pair_collision", COUNTS, "percent",
       "What percentage of frames contain at least one collision between any two moving objects (objects that "
       "can move; excluding walls, ground and fixed obstacles)?",
       _pct(lambda f, i: f.dynamic_pair_contact()), _no_slot_instances,
       "frames where two dynamic bodies touch"),
    _t(12, "pct_free_fall", COUNTS, "percent",
       "What percentage of frames does the {a} spend in free fall (not touching any object or wall)?",
       _pct(lambda f, i: f.free_fall[:, i["a"]]), _subject_instances(True),
       "frames inside a stretch of at least free_fall_min_seconds in which a touches nothing"),
    _t(13, "pct_any_moving", COUNTS, "percent",
       "What percentage of frames have at least one object moving in the scene?",
       _pct(lambda f, i: ~f.no_motion), _no_slot_instances,
       "frames outside every stretch of at least rest_min_seconds in which all dynamic bodies are at rest"),
    _t(14, "pct_none_moving", COUNTS, "percent",
       "What percentage of frames have no objects moving in the scene?",
       _pct(lambda f, i: f.no_motion), _no_slot_instances,
       "frames inside a stretch of at least rest_min_seconds in which all dynamic bodies are at rest"),
    _t(15, "pct_pair_touch", COUNTS, "percent",
       "What percentage of frames do the {a} and the {b} touch each other?",
       _pct(lambda f, i: f.touch[:, i["a"], i["b"]]), _pair_instances,
       "frames where a and b touch"),
    _t(16, "pct_wall", COUNTS, "percent",
       "What percentage of frames is the {a} in contact with any wall (left, right, or top boundary)?",
       _pct(lambda f, i: f.contact_with(i["a"], f.wall)), _subject_instances(True),
       "frames where a touches the left, right or top wall"),
    _t(17, "pct_static_obstacle", COUNTS, "percent",
       "What percentage of frames is the {a} in contact with any static obstacle (excluding ground and walls)?",
       _pct(lambda f, i: f.contact_with(i["a"], f.static_obstacle)), _subject_instances(True),
       "frames where a touches a body that cannot move and is not the ground or a wall"),
    _t(18, "will_pair_collide", PREDICTION, "yesno",
       _HEAD + "will any collision between the {a} and the {b} occur in the future? Answer yes/no.",
       _prediction_fn(PRED_PAIR), _prediction_instances(PRED_PAIR, _pair_fillings),
       "a and b touch in some frame after the cut; asked only at cuts where they do not touch"),
    _t(19, "will_touch_green", PREDICTION, "yesno",
       _HEAD + "will the {a} ever touch the {b} in the future? Answer yes/no.",
       _prediction_fn(PRED_PAIR), _prediction_instances(PRED_PAIR, _touch_role_fillings("green")),
       "a touches the green body after the cut; asked only at cuts where they do not touch"),
    _t(20, "will_touch_blue", PREDICTION, "yesno",
       _HEAD + "will the {a} ever touch the {b} in the future? Answer yes/no.",
       _prediction_fn(PRED_PAIR), _prediction_instances(PRED_PAIR, _touch_role_fillings("blue")),
       "a touches the blue (or purple) goal body after the cut; asked only at cuts where they do not touch"),
    _t(21, "will_moving_collide", PREDICTION, "yesno",
       _HEAD + "will there be any collision at all between moving objects (excluding walls and ground) in the "
       "future? Answer yes/no.",
       _prediction_fn(PRED_DYNAMIC), _prediction_instances(PRED_DYNAMIC, _no_fillings),
       "two dynamic bodies touch after the cut; asked only at cuts where no two dynamic bodies touch"),
    _t(22, "will_pattern", PREDICTION, "yesno",
       _HEAD + "will \"{pattern}\" happen in the second part? Answer yes/no.",
       _prediction_fn(PRED_PATTERN), _prediction_instances(PRED_PATTERN, _pattern_fillings),
       "the library emits an event of the pattern at a frame after the cut (whole-rollout annotation); asked "
       "only at cuts no activation of the pattern covers"),
    _t(23, "will_first_ground", PREDICTION, "yesno",
       _HEAD + "will the {a} touch the ground for the first time in the future? Answer yes/no.",
       _prediction_fn(PRED_GROUND), _prediction_instances(PRED_GROUND, _subject_fillings(True)),
       "a touches the ground after the cut; asked only at cuts before a ever touched the ground"),
    _t(24, "will_wall", PREDICTION, "yesno",
       _HEAD + "will the {a} collide with any wall in the future? Answer yes/no.",
       _prediction_fn(PRED_WALL), _prediction_instances(PRED_WALL, _subject_fillings(True)),
       "a touches the left, right or top wall after the cut; asked only at cuts where it touches none"),
    _t(25, "will_cross_green_vertical", PREDICTION, "yesno",
       _HEAD + "will the {a} cross the vertical line through the {b}'s initial position in the future? "
       "Answer yes/no.", CROSS_X.answer, CROSS_X.instances,
       "a's centre is on the other side of x = the green body's initial x in some frame after the cut than at "
       "the cut; asked only where a is more than cross_tolerance_px from the line at the cut"),
    _t(26, "will_cross_blue_horizontal", PREDICTION, "yesno",
       _HEAD + "will the {a} cross the horizontal line through the {b}'s initial position in the future? "
       "Answer yes/no.", CROSS_Y.answer, CROSS_Y.instances,
       "as 25 with y and the blue (or purple) goal body"),
    _t(27, "will_rest", PREDICTION, "yesno",
       _HEAD + "will there be any frame in the future in which no objects are moving in the scene? "
       "Answer yes/no.",
       _prediction_fn(PRED_REST), _prediction_instances(PRED_REST, _no_fillings),
       "a frame after the cut lies in a stretch of at least rest_min_seconds with every dynamic body at rest; "
       "asked only at cuts outside such a stretch"),
)

BY_ID = {t.id: t for t in TEMPLATES}
BY_NAME = {t.name: t for t in TEMPLATES}


def get_template(key: int | str) -> QuestionTemplate:
    """A template by id (1..27, or "A18") or name."""
    if isinstance(key, str):
        k = key.strip()
        if k in BY_NAME:
            return BY_NAME[k]
        k = k[1:] if k[:1] in ("A", "a") else k
        if not k.isdigit():
            raise KeyError(f"no question template {key!r}; ids are 1..27 (or A1..A27) or names like "
                           f"{TEMPLATES[0].name!r}")
        key = int(k)
    if key not in BY_ID:
        raise KeyError(f"no question template {key!r}; ids are 1..27")
    return BY_ID[key]


def parse_template_ids(spec: str) -> tuple[int, ...]:
    """'1-17,22' -> (1, ..., 17, 22); 'A3' and names allowed. Raises KeyError naming a bad part,
    ValueError when the spec names none."""
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        if dash and lo.strip().lstrip("Aa").isdigit():
            out += list(range(get_template(lo.strip()).id, get_template(hi.strip()).id + 1))
        else:
            out.append(get_template(part).id)
    if not out:
        raise ValueError(f"{spec!r} names no template")
    return tuple(dict.fromkeys(out))
