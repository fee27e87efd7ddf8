"""PHYRE's evaluation setups and folds, on our tasks.

Two setups, named as PHYRE names them, each with 10 folds (seeds 0-9):

- ``ball_within_template``: inside every template, 80% of its tasks train
  and 20% test (a template with too few tasks is left out);
- ``ball_cross_template``: 80% of the templates (20 of 25) train, the tasks
  of the other 5 test.

A fold is ``(train, dev, test)``: ``test`` comes from the seed's split;
``train`` and ``dev`` split the seed's *training* part again 80/20 (within:
over its tasks; cross: over its templates), so model selection never sees
the test tasks. For a final number, train on ``train + dev``.

The splits are made exactly as PHYRE 0.2.2 makes them: items are ordered by
the MD5 of ``item + salt`` (a shuffle that depends on the seed and on the
ids only) and cut at ``round(0.8 n)`` (``int(0.8 n)`` for the dev cut).
`tests/agents/test_folds_metrics.py` checks all 20 folds both ways against
PHYRE's own code: on PHYRE's task list ours equal ``phyre.get_fold``; on our
task list they equal what PHYRE's fold code makes of it. The ids differ from
PHYRE's (our variants are numbered 000-099; PHYRE numbers a template's tasks
by their place in its parameter grid), so the folds hold other tasks, and
only cross-template folds share PHYRE's templates.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from simpatterns.agents.tasks import TIER, all_task_ids, template_of

EVAL_SETUPS = ("ball_cross_template", "ball_within_template")
NUM_FOLDS = 10  # PHYRE's seeds 0..9
TRAIN_SHARE = 0.8


@dataclass(frozen=True)
class Fold:
    """One fold: sorted task ids of each split."""

    setup: str
    seed: int
    train: tuple[str, ...]
    dev: tuple[str, ...]
    test: tuple[str, ...]

    def __iter__(self):  # unpacks like phyre.get_fold: train, dev, test = fold
        return iter((self.train, self.dev, self.test))

    @property
    def train_all(self) -> tuple[str, ...]:
        """``train + dev``: what an agent trains on before its final test."""
        return tuple(sorted(self.train + self.dev))


def stable_shuffle(items: Iterable[str], salt: str = "") -> list[str]:
    """Items ordered by the MD5 hex digest of ``str(item) + salt`` (PHYRE's shuffle)."""
    return sorted(items, key=lambda s: hashlib.md5((str(s) + salt).encode("utf8")).hexdigest())


def _by_template(task_ids: Iterable[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for t in sorted(task_ids):
        groups[template_of(t)].append(t)
    return dict(groups)


def _within(task_ids: Sequence[str], seed: int, dev_seed: int | None) -> tuple[list[str], list[str]]:
    train: list[str] = []
    test: list[str] = []
    for _, group in sorted(_by_template(task_ids).items()):
        order = stable_shuffle(group, f"ball_online_ind_tasks{seed}")
        cut = int(round(len(order) * TRAIN_SHARE))
        if cut == 0:
            continue
        train += order[:cut]
        test += order[cut:]
    if dev_seed is None:
        return train, test
    order = stable_shuffle(train, f"make_dev{dev_seed}")
    cut = int(len(order) * TRAIN_SHARE)
    return order[:cut], order[cut:]


def _cross(task_ids: Sequence[str], seed: int, dev_seed: int | None) -> tuple[list[str], list[str]]:
    groups = _by_template(task_ids)
    templates = stable_shuffle(list(groups), f"ball_cross_template_half_{seed}")
    cut = int(round(len(templates) * TRAIN_SHARE))
    if dev_seed is not None:
        templates = stable_shuffle(templates[:cut], f"dev_ball_cross_template_half_{dev_seed}")
        cut = int(len(templates) * TRAIN_SHARE)
    train = [t for k in templates[:cut] for t in groups[k]]
    test = [t for k in templates[cut:] for t in groups[k]]
    return train, test


_SPLITTERS = {"ball_within_template": _within, "ball_cross_template": _cross}


def check_setup(eval_setup: str) -> str:
    if eval_setup not in _SPLITTERS:
        raise ValueError(f"unknown eval setup {eval_setup!r}; use one of {', '.join(EVAL_SETUPS)}")
    return eval_setup


def get_fold(eval_setup: str, seed: int, task_ids: Sequence[str] | None = None) -> Fold:
    """The ``seed``-th fold of ``eval_setup`` over ``task_ids`` (default: every shipped task)."""
    split = _SPLITTERS[check_setup(eval_setup)]
    ids = list(all_task_ids(TIER) if task_ids is None else task_ids)
    _, test = split(ids, seed, None)
    train, dev = split(ids, seed, seed)
    return Fold(eval_setup, int(seed), tuple(sorted(train)), tuple(sorted(dev)), tuple(sorted(test)))


def parse_fold(spec: str) -> tuple[str, list[int]]:
    """``"ball_within_template:0-2,5"`` -> ``("ball_within_template", [0, 1, 2, 5])``;
    without seeds, seed 0."""
    setup, _, seeds = spec.partition(":")
    check_setup(setup.strip())
    return setup.strip(), parse_seeds(seeds) if seeds.strip() else [0]


def parse_seeds(text: str) -> list[int]:
    """``"0-2,5"`` -> ``[0, 1, 2, 5]``."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"seeds {text!r}: {part!r} is not a number or a range like 0-9") from None
        if b < a:
            raise ValueError(f"seeds {text!r}: range {part!r} runs backwards")
        out += [k for k in range(a, b + 1) if k not in out]
    if not out:
        raise ValueError(f"seeds {text!r}: no seed given")
    return out
