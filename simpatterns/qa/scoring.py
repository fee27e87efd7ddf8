"""Scores: accuracy per template, family and condition, baselines and bootstrap intervals.

`grade_run` grades every stored response (`parse.grade`); `summarise` groups
them. For each group: n, accuracy with a 95 % bootstrap interval (questions
resampled, seeded), the share of unparsable answers, the mean absolute error
of percentage answers, the mean Jaccard similarity of object-set answers,
and two baselines computed on the same questions:

- random: the expected accuracy of a uniform guess over each question's
  answer space (yes/no: 1/2; an object: 1/choices; a set: 1/(2^choices - 1);
  a count of 0..max: 1/(max + 1); a percentage: the share of [0, 100]
  within the tolerance of the gold answer);
- majority: per template, always giving the answer that is right most often
  over the whole data set (for percentages the constant with the most gold
  answers within tolerance). Score a subset against its full questions file
  (`report.score_run` does), or a template asked once or twice scores itself.

Groups are computed over all questions and over the stable ones only
(answers that survive a 1 px nudge of the action).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from simpatterns.qa.parse import grade
from simpatterns.qa.questions import FAMILIES, PERCENT_TOLERANCE, Question

BOOTSTRAP = 2000


def random_chance(q: Question) -> float:
    """Probability that a uniform guess over the answer space is right."""
    if q.answer_type == "yesno":
        return 0.5
    if q.answer_type == "object":
        return 1.0 / max(1, len(q.choices or []))
    if q.answer_type == "objects":
        return 1.0 / max(1, 2 ** len(q.choices or []) - 1)
    if q.answer_type == "integer":
        return 1.0 / (max(0, q.max_count or 0) + 1)
    if q.answer_type == "percent":
        g = float(q.answer)
        return (min(100.0, g + PERCENT_TOLERANCE) - max(0.0, g - PERCENT_TOLERANCE)) / 100.0
    raise ValueError(f"unknown answer type {q.answer_type!r}")


def _majority_hits(qs: Sequence[Question]) -> dict[str, float]:
    """Per question id: whether its template's majority answer is right (majority over ``qs``, the
    whole data set; ties go to the first answer by its text)."""
    out: dict[str, float] = {}
    by_t: dict[int, list[Question]] = defaultdict(list)
    for q in qs:
        by_t[q.template].append(q)
    grid = np.arange(0.0, 100.01, 0.5)
    for group in by_t.values():
        if group[0].answer_type == "percent":
            golds = np.array([float(q.answer) for q in group])
            best = grid[int(np.argmax((np.abs(golds[None, :] - grid[:, None]) <= PERCENT_TOLERANCE).sum(axis=1)))]
            out.update({q.id: float(abs(float(q.answer) - best) <= PERCENT_TOLERANCE) for q in group})
        else:
            counts = Counter(str(_key(q.answer)) for q in group)
            top = max(counts.values())
            best = min(k for k, c in counts.items() if c == top)
            out.update({q.id: float(str(_key(q.answer)) == best) for q in group})
    return out


def _key(answer: Any) -> Any:
    return tuple(answer) if isinstance(answer, list) else answer


@dataclass
class Graded:
    """One graded response."""

    qid: str
    condition: str
    template: int
    family: str
    correct: bool
    unparsable: bool
    parsed: Any
    error: str
    abs_error: float | None
    jaccard: float | None
    stable: bool | None
    chance: float
    majority: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def grade_run(questions: Sequence[Question], responses: Iterable[dict[str, Any]]) -> list[Graded]:
    """Grade stored responses; responses to questions not in ``questions`` are ignored. The majority
    baseline is taken over all of ``questions``."""
    by_id = {q.id: q for q in questions}
    majority = _majority_hits(questions)
    out = []
    for r in responses:
        q = by_id.get(r["qid"])
        if q is None:
            continue
        g = grade(q, r.get("response") or "")
        out.append(Graded(q.id, r["condition"], q.template, q.family, g.correct, not g.parsed.ok, g.parsed.value,
                          g.parsed.error, g.abs_error, g.jaccard, q.stable, random_chance(q), majority[q.id]))
    order = {q.id: i for i, q in enumerate(questions)}
    out.sort(key=lambda g: (g.condition, order[g.qid]))
    return out


def bootstrap_ci(values: np.ndarray, seed: int = 0, n: int = BOOTSTRAP, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean of ``values`` (resampled with replacement)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(n, v.size))].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


@dataclass
class GroupScore:
    condition: str
    group: str  # "all", "family:<f>" or "template:<id>"
    subset: str  # "all" or "stable"
    n: int
    accuracy: float
    ci: tuple[float, float]
    unparsable: float
    random: float
    majority: float
    mae: float | None
    jaccard: float | None

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["ci"] = list(self.ci)
        return d


def _score(graded: list[Graded], condition: str, group: str, subset: str, seed: int) -> GroupScore:
    acc = np.array([g.correct for g in graded], dtype=float)
    errs = [g.abs_error for g in graded if g.abs_error is not None]
    jac = [g.jaccard for g in graded if g.jaccard is not None]
    return GroupScore(
        condition, group, subset, len(graded), float(acc.mean()) if acc.size else float("nan"),
        bootstrap_ci(acc, seed), float(np.mean([g.unparsable for g in graded])) if graded else float("nan"),
        float(np.mean([g.chance for g in graded])) if graded else float("nan"),
        float(np.mean([g.majority for g in graded])) if graded else float("nan"),
        float(np.mean(errs)) if errs else None, float(np.mean(jac)) if jac else None,
    )


def summarise(graded: Sequence[Graded], seed: int = 0) -> list[GroupScore]:
    """Scores per condition x (all, each family, each template) x (all questions, stable ones)."""
    out: list[GroupScore] = []
    conditions = list(dict.fromkeys(g.condition for g in graded))
    for cond in conditions:
        rows = [g for g in graded if g.condition == cond]
        for subset in ("all", "stable"):
            sub = rows if subset == "all" else [g for g in rows if g.stable]
            if not sub:
                continue
            out.append(_score(sub, cond, "all", subset, seed))
            for fam in FAMILIES:
                part = [g for g in sub if g.family == fam]
                if part:
                    out.append(_score(part, cond, f"family:{fam}", subset, seed))
            for t in sorted({g.template for g in sub}):
                out.append(_score([g for g in sub if g.template == t], cond, f"template:{t}", subset, seed))
    return out


def find(scores: Sequence[GroupScore], condition: str, group: str = "all", subset: str = "all") -> GroupScore | None:
    for s in scores:
        if s.condition == condition and s.group == group and s.subset == subset:
            return s
    return None


def accuracy(questions: Sequence[Question], responses: Iterable[dict[str, Any]], condition: str) -> tuple[float, int]:
    """Mean accuracy of one condition and how many responses it counts."""
    graded = [g for g in grade_run(questions, responses) if g.condition == condition]
    return (float(np.mean([g.correct for g in graded])) if graded else float("nan"), len(graded))
