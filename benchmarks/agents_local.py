#!/usr/bin/env python
"""The language-model agent with the local small model: conditions, library curve, leave-one-out.

A few tasks of the ``ball_within_template`` fold (the first test task of the
first ``--tasks`` templates), a small menu (``--bins``³ grid) and a few attempts
per task; the language-model agent asked by the local llama.cpp model (issue
11's ``local`` backend, ``--model smollm2-135m``; text feedback only: the
model reads no images; each answer constrained to a ``CHOICE: <id>`` line of
the menu by a grammar, ``--choice-grammar``) under the feedback conditions ``outcome``,
``annotation`` and ``state``, next to the random and oracle agents on the same
menus; then the library-size curve (0 patterns and all) and leave-one-out
importance of a few patterns, scored by AUCCESS. Prints the AUCCESS table, the
studies, the time per model request against the same conditions through the
scripted server (the pipeline without inference: simulation, annotation,
prompts; the baseline measured in this run), and the load average.

    python benchmarks/agents_local.py [--tasks 3] [--budget 3] [--out /tmp/agents_local]
    python benchmarks/agents_local.py --llm openai --base-url http://127.0.0.1:8080/v1   # a llama.cpp server
    python benchmarks/agents_local.py --scripted     # dry run: a scripted model answers

A 135M-parameter model is for checking that everything runs, not a result:
its choices are close to random (see the random rows), whatever it is shown.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from simpatterns.agents.folds import get_fold  # noqa: E402
from simpatterns.agents.report import markdown_table, write_report, write_study_report  # noqa: E402
from simpatterns.agents.runner import EvalConfig, evaluate, make_conditions  # noqa: E402
from simpatterns.agents.studies import importance, library_curve  # noqa: E402
from simpatterns.agents.tasks import template_of  # noqa: E402
from simpatterns.detectors.library import PatternLibrary  # noqa: E402
from simpatterns.llm import LLMError, make_client  # noqa: E402
from simpatterns.llm.testing import Reply, Rule, ScriptedLLMServer  # noqa: E402

FEEDBACK = ["outcome", "annotation", "state"]
HOLD_OUT = ["collision start", "airborne"]


def fold_tasks(n_templates: int) -> tuple[str, ...]:
    test = get_fold("ball_within_template", 0).test
    firsts: dict[str, str] = {}
    for t in sorted(test):
        firsts.setdefault(template_of(t), t)
    return tuple(list(firsts.values())[:n_templates])


def random_choices(menus: dict) -> ScriptedLLMServer:
    """The baseline 'model': a seeded random menu choice per request (no inference)."""
    rng = np.random.default_rng(0)
    rules = []
    for tid, menu in menus.items():
        template, variant = tid.split(":")
        head = f"Task (template {template}, variant {int(variant)})"
        ids = [c.id for c in menu.choices]

        def is_task(body, head=head) -> bool:
            first = body["messages"][1]["content"]
            return head in (first if isinstance(first, str) else first[0]["text"])

        rules.append(Rule(match=is_task, replies=[Reply(f"CHOICE: {c}") for c in rng.permutation(ids)]))
    return ScriptedLLMServer(rules=rules, default=Reply("CHOICE: A1"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=3, help="templates (one test task each)")
    ap.add_argument("--budget", type=int, default=3)
    ap.add_argument("--bins", type=int, default=3)
    ap.add_argument("--llm", default="local")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--base-url", default=None, help="with --llm openai: a llama.cpp (or other) server")
    ap.add_argument("--budget-chars", type=int, default=1000, help="a small model's context is short")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--out", type=Path, default=Path("/tmp/agents_local"))
    ap.add_argument("--cache", default=None, help="menu cache (default ~/.cache/simpatterns/menus)")
    ap.add_argument("--free-answer", action="store_true", help="no choice grammar: the model writes freely (the "
                    "135M model then rarely writes a CHOICE line, so almost every attempt is wasted)")
    ap.add_argument("--scripted", action="store_true", help="dry run with the scripted server instead of a model")
    ap.add_argument("--fresh", action="store_true", help="delete OUT first (otherwise runs resume)")
    args = ap.parse_args()
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    lib = PatternLibrary.builtin()
    tasks = fold_tasks(args.tasks)
    config = EvalConfig(setup=None, tasks=tasks, budget=args.budget, bins=args.bins)
    llm_opts = {"budget_chars": args.budget_chars, "max_tokens": args.max_tokens, "history": "full",
                **({} if args.free_answer else {"choice_grammar": True})}
    conditions = make_conditions(["llm"], FEEDBACK, llm_opts)
    print(f"tasks {', '.join(tasks)}; budget {args.budget}; {args.bins}^3 menus; feedback {', '.join(FEEDBACK)}")

    t0 = time.perf_counter()
    base = evaluate(args.out / "conditions", config, make_conditions(["random", "oracle"]), cache_dir=args.cache,
                    log=print)
    print(f"random and oracle: {base.done} episodes ({time.perf_counter() - t0:.1f} s, menus included)")
    from simpatterns.agents.menu import MenuStore

    menus = MenuStore(args.cache, args.bins).get_many(list(tasks))

    # baseline: the same conditions through the scripted server (the pipeline without inference)
    with random_choices(menus) as server:
        shutil.rmtree(args.out / "scripted_baseline", ignore_errors=True)
        bclient = make_client("openai", base_url=server.base_url, concurrency=1)
        t0 = time.perf_counter()
        evaluate(args.out / "scripted_baseline", config, conditions, cache_dir=args.cache,
                 client_factory=lambda _: bclient)
        base_s = (time.perf_counter() - t0) / max(1, len(server.requests))
        bclient.close()

        if args.scripted:
            client = make_client("openai", base_url=server.base_url, concurrency=1,
                                 transcript=args.out / "transcript.jsonl")
            spec, model = "scripted", "random choice"
        else:
            try:
                client = make_client(args.llm, model=args.model, base_url=args.base_url, concurrency=1,
                                     transcript=args.out / "transcript.jsonl")
            except (LLMError, ImportError) as exc:
                sys.exit(f"local model backend not available ({args.llm}, {args.model}): {exc}\n"
                         "install the local extra (issue 11), or run with --scripted for a dry run")
            spec, model = args.llm, args.model
        try:
            t0 = time.perf_counter()
            out = evaluate(args.out / "conditions", config, conditions, cache_dir=args.cache,
                           client_factory=lambda _: client, progress=True)
            cond_s = time.perf_counter() - t0
            sent = client.attempts_sent  # requests this run sent (a resumed run sends fewer)
            per_request = cond_s / max(1, sent)
            [study_cond] = [c for c in conditions if c.name == "llm/annotation"]
            curve = library_curve(config, study_cond, client, args.out / "library_curve", [0, len(lib)], trials=1,
                                  library=lib, cache_dir=args.cache, log=print)
            imp = importance(config, study_cond, client, args.out / "importance", HOLD_OUT, library=lib,
                             cache_dir=args.cache, log=print)
        finally:
            client.close()

    r = write_report(args.out / "conditions")
    curve_md = write_study_report(args.out / "library_curve")
    imp_md = write_study_report(args.out / "importance")
    print(f"\nmodel {model} ({spec}); {len(tasks)} tasks x {args.budget} attempts; {out.done} episodes this run")
    print(markdown_table(r["head"], r["rows"]))
    print(f"time per model request {per_request:.2f} s ({sent} requests, {cond_s:.0f} s) vs {base_s:.3f} s "
          f"per request through the scripted server (x{per_request / max(base_s, 1e-9):.0f})")
    print("library curve (AUCCESS): " + ", ".join(f"{p['size']} patterns {100 * p['mean']:.1f}%"
                                                  for p in curve["summary"]))
    print(f"leave-one-out (full library {100 * imp['baseline']:.1f}%): "
          + ", ".join(f"{x['label']} {x['importance']:+.1f}%" for x in imp["patterns"]))
    print(f"load average {os.getloadavg()[0]:.2f} (machine shared; timings indicative)")
    print(f"reports: {r['dir'] / 'report.md'}, {curve_md}, {imp_md}")
    for png in sorted(list(args.out.glob("*/*.png"))):
        print(f"  {png}")


if __name__ == "__main__":
    main()
