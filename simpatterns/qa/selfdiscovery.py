"""Self-discovery with Q&A retention (paper §4.1, Algorithm 1's automatic round).

Each round:

1. split the rollouts (seeded, once for all rounds) into a discovery part and
   a held-out part;
2. ask the discovery questions in the annotation condition with the current
   library and keep the model's reasoning (wrong answers first);
3. run evolve's self-discovery (`evolve.discovery.DiscoveryJob` with no
   guided labels and ``self_discovery = k``): the LLM proposes new labels from
   the library and the reasoning, and a detector is evolved for each; those
   clearing the evolver's fitness threshold become candidates;
4. for each candidate, ask the held-out questions with the library plus the
   candidate and compare with the library alone: keep it only if accuracy
   rises by at least ``margin`` (absolute, 0.02 = 2 points);
5. the kept patterns join the library of the next round.

``decisions.json`` records, per candidate, both accuracies, the gain, the
margin and why it was kept or dropped; ``library/`` is the final library.
Every step is an ordinary run directory, so a killed loop resumes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from simpatterns.detectors.library import PatternLibrary
from simpatterns.files import atomic_write_json
from simpatterns.parallel import Backend
from simpatterns.qa.context import ContextBuilder
from simpatterns.qa.parse import answer_text
from simpatterns.qa.questions import Question
from simpatterns.qa.runner import EvalSettings, read_responses, run_eval, slug
from simpatterns.qa.scoring import grade_run

DECISIONS_FILE = "decisions.json"


@dataclass
class SelfDiscoveryConfig:
    k: int = 3  # labels the LLM may propose per round
    margin: float = 0.02  # held-out accuracy gain a candidate must reach to be kept
    heldout_fraction: float = 0.5
    rounds: int = 1
    seed: int = 0
    max_reasoning_texts: int = 12
    evolve: Any = None  # an evolve.config.EvolveConfig (samples per label, sandbox limits, ...); None: defaults
    settings: EvalSettings = field(default_factory=lambda: EvalSettings(conditions=["annotation"]))

    def to_json(self) -> dict[str, Any]:
        return {"k": self.k, "margin": self.margin, "heldout_fraction": self.heldout_fraction, "rounds": self.rounds,
                "seed": self.seed, "max_reasoning_texts": self.max_reasoning_texts,
                "settings": self.settings.to_json()}


def split_rollouts(questions: Sequence[Question], heldout_fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """(discovery rollout ids, held-out rollout ids), seeded; at least 3 rollouts for discovery."""
    ids = sorted({q.rollout_id for q in questions})
    if len(ids) < 4:
        raise ValueError(f"self-discovery needs at least 4 rollouts (3 to discover on, 1 held out), got {len(ids)}")
    perm = np.random.default_rng([seed, 7]).permutation(len(ids))
    n_held = min(len(ids) - 3, max(1, round(heldout_fraction * len(ids))))
    held = sorted(ids[i] for i in perm[:n_held])
    return sorted(set(ids) - set(held)), held


def reasoning_texts(questions: Sequence[Question], responses: Sequence[dict[str, Any]], limit: int) -> list[str]:
    """The model's reasoning per question (the reply without its answer line), wrong answers first."""
    by_id = {q.id: q for q in questions}
    graded = {(g.qid, g.condition): g for g in grade_run(questions, responses)}
    texts = []
    for r in responses:
        q, g = by_id.get(r["qid"]), graded.get((r["qid"], r["condition"]))
        if q is None or g is None:
            continue
        reply = r.get("response") or ""
        reasoning = "\n".join(ln for ln in reply.splitlines() if answer_text(ln) is None).strip()
        given = answer_text(reply)
        texts.append((g.correct, q.id, f"Question: {q.text}\nReasoning: {reasoning or '(none)'}\n"
                                       f"Answered: {given.strip() if given else '(no answer)'}; correct answer: "
                                       f"{q.answer} ({'right' if g.correct else 'wrong'})"))
    texts.sort(key=lambda t: (t[0], t[1]))
    return [t for _, _, t in texts[:limit]]


def _accuracy(questions: Sequence[Question], run_dir: Path, condition: str) -> tuple[float, int]:
    graded = [g for g in grade_run(questions, read_responses(run_dir)) if g.condition == condition]
    return (float(np.mean([g.correct for g in graded])) if graded else 0.0, len(graded))


def _ask(questions: Sequence[Question], builder: ContextBuilder, client: Any, run_dir: Path,
         settings: EvalSettings, run_info: dict[str, Any], log: Callable[[str], None] | None) -> None:
    out = run_eval(questions, builder, client, run_dir, settings, run_info=dict(run_info), log=log)
    if out.stopped or out.failed:
        raise RuntimeError(f"{run_dir}: {out.stopped or f'{out.failed} request(s) failed, e.g. {out.errors[0]}'}; "
                           "run self-discovery again to resume")


def self_discover(questions: Sequence[Question], root: str | os.PathLike, library: PatternLibrary, client: Any,
                  out_dir: str | os.PathLike, cfg: SelfDiscoveryConfig | None = None, *,
                  run_info: dict[str, Any] | None = None, sandbox_factory: Any = None,
                  log: Callable[[str], None] | None = None, backend: Backend | None = None) -> dict[str, Any]:
    """Run the loop (see the module docstring); returns the decisions record (also in decisions.json).
    ``backend``: where the discovery sandbox runs (None: this machine)."""
    from simpatterns.evolve.config import EvolveConfig
    from simpatterns.evolve.discovery import DiscoveryJob
    from simpatterns.evolve.proposers import LLMProposer
    from simpatterns.evolve.records import ProposedLabels

    cfg = cfg or SelfDiscoveryConfig()
    out = Path(out_dir)
    cond = cfg.settings.conditions[0]
    disc_ids, held_ids = split_rollouts(questions, cfg.heldout_fraction, cfg.seed)
    disc_q = [q for q in questions if q.rollout_id in disc_ids]
    held_q = [q for q in questions if q.rollout_id in held_ids]
    record: dict[str, Any] = {"config": cfg.to_json(), "discovery_rollouts": disc_ids, "heldout_rollouts": held_ids,
                              "heldout_questions": len(held_q), "rounds": []}
    current = library
    for rnd in range(cfg.rounds):
        rdir = out / f"round{rnd}"
        builder = ContextBuilder(Path(root), current)
        if log:
            log(f"round {rnd}: asking {len(disc_q)} discovery questions for reasoning")
        _ask(disc_q, builder, client, rdir / "reasoning", cfg.settings, run_info or {}, log)
        texts = reasoning_texts(disc_q, read_responses(rdir / "reasoning"), cfg.max_reasoning_texts)
        traces = [builder.trace(r) for r in sorted({q.rollout for q in disc_q})]
        ecfg = replace(cfg.evolve) if cfg.evolve is not None else EvolveConfig(seed=cfg.seed + rnd)
        ecfg.self_discovery = cfg.k
        run_dir = rdir / "discovery.run"
        kwargs = {"sandbox_factory": sandbox_factory} if sandbox_factory is not None else {}
        job = DiscoveryJob(traces, [], current, run_dir, rdir / "candidates",
                           LLMProposer(client, temperature=ecfg.llm_temperature, max_tokens=ecfg.llm_max_tokens), ecfg,
                           resume=(run_dir / "job.json").exists(), reasoning_texts=texts, backend=backend, **kwargs)
        if log:
            log(f"round {rnd}: self-discovery of up to {cfg.k} labels from {len(texts)} reasoning texts")
        candidates = job.run()
        base_labels = current.order()
        new = [x for x in candidates.order() if x not in base_labels]
        proposed = [s.label for s in job.state.labels]
        decisions: list[dict[str, Any]] = []
        for label in proposed:
            if label not in new:
                done = next((d for d in job.state.done if d.label == label), None)
                decisions.append({"label": label, "kept": False, "stage": "discovery",
                                  "why": f"no detector accepted by the evolver: {done.why if done else 'not evolved'}"})
        kept: list[str] = []
        if new:
            view = ContextBuilder(Path(root), candidates)
            view.prepare(held_q, cfg.settings.conditions)
            _ask(held_q, replace(view, visible=base_labels), client, rdir / "heldout_base", cfg.settings,
                 run_info or {}, log)
            base_acc, n = _accuracy(held_q, rdir / "heldout_base", cond)
            for label in new:
                visible = base_labels + [label]
                _ask(held_q, replace(view, visible=visible), client,
                     rdir / f"heldout_with_{slug(label)}", cfg.settings, run_info or {}, log)
                acc, _ = _accuracy(held_q, rdir / f"heldout_with_{slug(label)}", cond)
                gain = acc - base_acc
                keep = gain >= cfg.margin
                if keep:
                    kept.append(label)
                entry = candidates.entry(label)
                decisions.append({
                    "label": label, "description": entry.description, "fitness": entry.fitness, "stage": "q&a",
                    "heldout_questions": n, "accuracy_without": base_acc, "accuracy_with": acc, "gain": gain,
                    "margin": cfg.margin, "kept": keep,
                    "why": (f"held-out accuracy {100 * base_acc:.1f}% -> {100 * acc:.1f}% "
                            f"({100 * gain:+.1f} points) {'>=' if keep else '<'} margin {100 * cfg.margin:.1f}"),
                })
                if log:
                    log(f"  {label}: {decisions[-1]['why']}: {'kept' if keep else 'dropped'}")
        current = candidates.subset(base_labels + kept) if kept else current
        entry_ = {"round": rnd, "reasoning_texts": len(texts), "proposed": proposed, "decisions": decisions,
                  "library": current.order()}
        if not proposed:  # say why (the proposal record of the evolver's log), then stop
            rec = next((ProposedLabels.from_json(r) for _, r in job.log.records()
                        if r.get("type") == ProposedLabels.KIND), ProposedLabels())
            entry_["why_none"] = rec.why or (f"the LLM's answer named no new label: {rec.answer[:160]!r}"
                                             if rec.answer is not None else "the LLM was not asked")
            if log:
                log(f"round {rnd}: no labels proposed ({entry_['why_none']})")
        record["rounds"].append(entry_)
        atomic_write_json(out / DECISIONS_FILE, record)
        if not proposed:
            break
    current.save(out / "library")
    record["library"] = str(out / "library")
    atomic_write_json(out / DECISIONS_FILE, record)
    return record
