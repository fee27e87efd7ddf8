"""One round of a label's evolution: prompts -> proposals -> evaluation -> sample records.

A round builds ``batch_size`` prompts from one database state (each on a
random island, with random earlier versions), gets the proposals concurrently
(LLM requests in flight, or offline mutations), pushes them through a bounded
queue to the evaluator threads (`CandidateEvaluator`: AST gate -> sandbox -> fitness),
and returns one `Sample` record per proposal in sample order, so concurrency
cannot reorder what the database sees. Every random draw comes from
`JobState.rng` keyed by (label, round, sample, stream).

A proposal is parsed once, by its proposer; the gate makes the `Candidate` from
that tree, and the candidate goes on to the sandbox and the fitness without being
parsed again. What its source declares rides along with the sample into the
programs database (in memory), for later prompts.
"""

from __future__ import annotations

import ast
import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from simpatterns.detectors.contract import count_lines
from simpatterns.evolve.config import EvolveConfig
from simpatterns.evolve.fitness import FitnessContext, FitnessParts
from simpatterns.evolve.prompt import LabelSpec, Prompt, Version, build_prompt
from simpatterns.evolve.proposers import ProposedModule
from simpatterns.evolve.records import Sample
from simpatterns.evolve.state import PROMPT_STREAM, PROPOSE_STREAM, JobState, LabelState
from simpatterns.sandbox import reasons as R
from simpatterns.sandbox.gate import check_candidate
from simpatterns.sandbox.distributed import ExecutorSandbox
from simpatterns.sandbox.pool import Sandbox, SandboxError
from simpatterns.sandbox.reasons import Reason, Rejected

# a proposal may be longer than the gate's default: the length penalty, not the gate, judges it
MAX_CANDIDATE_LINES = 2000


@dataclass
class Outcome:
    """What evaluating one program gave: the fitness parts, or the reason it was rejected."""

    parts: FitnessParts | None = None
    reason: Reason | None = None
    lines: int = 0
    cpu_s: float = 0.0  # measured by the sandbox, for reports (``timings.jsonl``); never scored
    constants: dict[str, Any] | None = None  # what the scored program declares, as written


class CandidateEvaluator:
    """Gate -> sandbox -> fitness for one program; safe to call from several threads.
    ``fitness_for(label)``: the fitness context candidates for ``label`` are scored in."""

    def __init__(self, sandbox: Sandbox | ExecutorSandbox, fitness_for: Callable[[str], FitnessContext], gate: bool = True):
        self.sandbox = sandbox
        self.fitness_for = fitness_for
        self.gate = gate

    def evaluate(self, source: str, spec: LabelSpec, tree: ast.Module | None = None) -> Outcome:
        """``tree``: ``source`` parsed already (by its proposer); None: the gate parses it."""
        ctx = self.fitness_for(spec.label)
        available = list(ctx.patterns)
        allowed = available if spec.depends is None else [d for d in spec.depends if d in available]
        try:
            cand = check_candidate(source, spec.label, allowed, max_lines=MAX_CANDIDATE_LINES, safety=self.gate,
                                   tree=tree)
        except Rejected as exc:
            return Outcome(reason=exc.reason, lines=count_lines(source))
        res = self.sandbox.evaluate(cand)
        if not res.ok:
            return Outcome(reason=res.reason, lines=cand.num_lines, cpu_s=res.cpu_s)
        assert res.events is not None
        scored = ctx.score(res.events, res.steps, cand.num_lines, res.events_hash)
        if isinstance(scored, Reason):
            return Outcome(reason=scored, lines=cand.num_lines, cpu_s=res.cpu_s)
        return Outcome(parts=scored, lines=cand.num_lines, cpu_s=res.cpu_s, constants=cand.constants)


@dataclass
class RoundItem:
    k: int
    sample: int
    island: int
    epoch: int
    versions: list[Version]
    prompt: Prompt
    seed: int
    proposal: ProposedModule | None = None
    outcome: Outcome | None = None


def plan_round(state: JobState, cur: LabelState, batch: int, library_info: dict[str, dict[str, Any]],
               api_text: str, compact: bool = False) -> list[RoundItem]:
    """The round's prompts, all from the database as it is now (``compact``: for small models)."""
    items: list[RoundItem] = []
    for k in range(batch):
        rng = state.rng(cur.index, cur.round, k, PROMPT_STREAM)
        island = cur.db.choose_island(rng)
        progs = cur.db.sample_programs(island, rng)
        versions = [Version(p.source, p.fitness if p.parts.get("rejected") is None else None, p.id, p.declared())
                    for p in progs]
        prompt = build_prompt(cur.spec, versions, island, cur.db.epoch(island), library_info,
                              cur.db.feedback(island), api_text, compact=compact)
        seed = int(state.rng(cur.index, cur.round, k, PROPOSE_STREAM).integers(2**31 - 1))
        items.append(RoundItem(k, cur.samples + k, island, cur.db.epoch(island), versions, prompt, seed))
    return items


async def run_round(items: list[RoundItem], spec: LabelSpec, proposer: Any, evaluator: CandidateEvaluator,
                    executor: ThreadPoolExecutor, config: EvolveConfig) -> None:
    """Propose (concurrently) and evaluate (``config.workers`` evaluator threads, behind a
    bounded queue) every item, filling in its proposal and outcome."""
    queue: asyncio.Queue[RoundItem | None] = asyncio.Queue(maxsize=max(1, config.queue_size))
    loop = asyncio.get_running_loop()

    async def produce(item: RoundItem) -> None:
        try:
            item.proposal = await proposer.propose(item.prompt, spec, item.versions, item.seed)
        except Exception as exc:  # noqa: BLE001 - a proposer bug costs one sample, not the job
            item.proposal = ProposedModule(None, Reason(R.LLM_ERROR, f"proposer failed: {type(exc).__name__}: {exc}"))
        await queue.put(item)

    async def consume() -> None:
        while True:
            item = await queue.get()
            if item is None:
                return
            prop = item.proposal
            assert prop is not None
            if prop.source is None:
                item.outcome = Outcome(reason=prop.reason)
                continue
            try:
                item.outcome = await loop.run_in_executor(executor, evaluator.evaluate, prop.source, spec, prop.tree)
            except SandboxError:
                raise  # the sandbox itself is broken (a server that cannot restart): stop the job
            except Exception as exc:  # noqa: BLE001 - a scoring bug costs one sample, not the job
                item.outcome = Outcome(reason=Reason(R.SANDBOX_ERROR, f"evaluation failed: {type(exc).__name__}: "
                                                                      f"{exc}"))

    consumers = [asyncio.create_task(consume()) for _ in range(max(1, config.workers))]
    try:
        await asyncio.gather(*(produce(it) for it in items))
    finally:
        for _ in consumers:
            await queue.put(None)
        await asyncio.gather(*consumers)


def safe_sample_record(cur: LabelState, it: RoundItem, quarantine: Callable[[dict[str, Any]], None]) -> Sample:
    """`sample_record`, or, when the record cannot be built or written as JSON, a rejected
    sample with reason ``quarantined``: the item goes to ``quarantine`` with why, and the job
    (and every ``--resume``) goes on past it."""
    try:
        rec = sample_record(cur, it)
        json.dumps(rec.to_json(), allow_nan=False).encode("utf-8")
        return rec
    except Exception as exc:  # noqa: BLE001 - one unprocessable answer costs one sample
        why = f"{type(exc).__name__}: {exc}"
        code = it.proposal.source if it.proposal is not None else None
        quarantine({"label": cur.spec.label, "sample": it.sample, "reason": why,
                    "code": None if code is None else code[:100_000]})
        rec = Sample(label=cur.spec.label, round=cur.round, k=it.k, sample=it.sample, island=it.island,
                     epoch=it.epoch, parents=it.prompt.parents, version=it.prompt.version,
                     prompt_hash=it.prompt.prompt_hash, seed=it.seed, model="", code=None, prompt_tokens=0,
                     completion_tokens=0, finish_reason="", wall_s=None, outcome="rejected")
        rec.reason = Reason(R.QUARANTINED, why)
        return rec


def sample_record(cur: LabelState, it: RoundItem) -> Sample:
    prop, out = it.proposal, it.outcome
    assert prop is not None and out is not None
    rec = Sample(label=cur.spec.label, round=cur.round, k=it.k, sample=it.sample, island=it.island, epoch=it.epoch,
                 parents=it.prompt.parents, version=it.prompt.version, prompt_hash=it.prompt.prompt_hash,
                 seed=it.seed, model=prop.model, code=prop.source, prompt_tokens=prop.prompt_tokens,
                 completion_tokens=prop.completion_tokens, finish_reason=prop.finish_reason,
                 wall_s=None, outcome="scored" if out.parts is not None else "rejected")
    if out.parts is not None:
        rec.fitness = out.parts.to_json()
        rec.signature = list(out.parts.signature)
        rec.constants = out.constants
    else:
        rec.reason = out.reason or Reason(R.SANDBOX_ERROR, "no outcome")
    return rec
