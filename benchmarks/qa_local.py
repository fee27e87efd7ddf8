"""The Q&A benchmark end to end with the local small model: conditions, library curve, leave-one-out.

Generates a small data set, asks it with the local llama.cpp model (issue 11's
``local`` backend, ``--model smollm2-135m``; text conditions only: the model
reads no images), runs the library-size curve and the leave-one-out study, and
writes the report with its plots. It prints accuracy per condition, the time
per answer against the same run through the scripted server (the pipeline
without inference: the baseline measured in this run), and the load average.

    python benchmarks/qa_local.py [--scenes 4] [--questions 24] [--out /tmp/qa_local]
    python benchmarks/qa_local.py --llm openai --base-url http://127.0.0.1:8080/v1   # a llama.cpp server
    python benchmarks/qa_local.py --scripted     # dry run: a scripted model answers

``--scripted`` replaces the model by the scripted server (right from the
annotation, random otherwise) to check the pipeline where no local backend is
installed; its accuracies describe that script, not a model.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from simpatterns.detectors.library import PatternLibrary
from simpatterns.llm import LLMError, make_client
from simpatterns.llm.testing import Reply, ScriptedLLMServer
from simpatterns.qa.context import ContextBuilder, ContextOptions
from simpatterns.qa.generate import GenerateConfig, generate_dataset
from simpatterns.qa.report import score_run, write_report
from simpatterns.qa.runner import EvalSettings, run_eval
from simpatterns.qa.scoring import find
from simpatterns.qa.scripted import oracle_rules, random_rules
from simpatterns.qa.studies import importance, library_curve

CONDITIONS = ["annotation", "state", "objects"]
HOLD_OUT = ["collision start", "support relationship", "airborne", "grid cell transition", "bounce"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenes", type=int, default=10)
    ap.add_argument("--questions", type=int, default=24)
    ap.add_argument("--llm", default="local")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--base-url", default=None, help="with --llm openai: a llama.cpp (or other) server")
    ap.add_argument("--budget-chars", type=int, default=1500, help="a small model's context is short")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/qa_local"))
    ap.add_argument("--scripted", action="store_true", help="dry run with the scripted server instead of a model")
    ap.add_argument("--fresh", action="store_true", help="delete OUT first (otherwise runs resume)")
    args = ap.parse_args()
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    lib = PatternLibrary.builtin()
    t0 = time.perf_counter()
    everything = generate_dataset(args.out / "data", GenerateConfig(scenes=args.scenes, seed=0), lib)
    pick = np.random.default_rng(0).choice(len(everything), min(args.questions, len(everything)), replace=False)
    qs = [everything[i] for i in sorted(pick.tolist())]  # a seeded sample over rollouts and templates
    print(f"data set: {len(qs)} questions on {len({q.rollout_id for q in qs})} rollouts "
          f"({time.perf_counter() - t0:.1f} s)")
    options = ContextOptions(budget_chars=args.budget_chars)
    builder = ContextBuilder(args.out / "data", lib, options=options)
    builder.prepare(qs, ["annotation"])
    settings = EvalSettings(conditions=CONDITIONS, temperature=0.0, max_tokens=args.max_tokens, seed=0, options=options)
    info = {"questions_path": str((args.out / "data" / "questions.jsonl").resolve())}

    # baseline: the same questions through the scripted server (the pipeline without inference)
    with ScriptedLLMServer(rules=oracle_rules(qs, builder) + random_rules(qs, builder),
                           default=Reply("ANSWER: none")) as server:
        base_client = make_client("openai", base_url=server.base_url, concurrency=1)
        shutil.rmtree(args.out / "scripted_baseline", ignore_errors=True)
        t0 = time.perf_counter()
        run_eval(qs, builder, base_client, args.out / "scripted_baseline", settings,
                 run_info={**info, "llm": {"spec": "scripted", "model": "oracle+random"}})
        base_s = (time.perf_counter() - t0) / (len(qs) * len(CONDITIONS))
        base_client.close()

        if args.scripted:
            client = make_client("openai", base_url=server.base_url, concurrency=4,
                                 transcript=args.out / "transcript.jsonl")
            spec, model = "scripted", "oracle+random"
        else:
            try:
                client = make_client(args.llm, model=args.model, base_url=args.base_url, concurrency=1,
                                     transcript=args.out / "transcript.jsonl")
            except (LLMError, ImportError) as exc:
                sys.exit(f"local model backend not available ({args.llm}, {args.model}): {exc}\n"
                         "install the local extra (issue 11), or run with --scripted for a dry run")
            spec, model = args.llm, args.model
        info["llm"] = {"spec": spec, "model": model}
        try:
            t0 = time.perf_counter()
            out = run_eval(qs, builder, client, args.out / "conditions", settings, run_info=info, progress=True)
            per_answer = (time.perf_counter() - t0) / max(1, out.answered)
            curve = library_curve(qs, builder, client, args.out / "library_curve", [0, 4, len(lib)], args.trials,
                                  seed=0, settings=EvalSettings(["annotation"], 0.0, args.max_tokens, 0, options),
                                  run_info=info, log=print)
            imp = importance(qs, builder, client, args.out / "importance", HOLD_OUT,
                             settings=EvalSettings(["annotation"], 0.0, args.max_tokens, 0, options),
                             run_info=info, log=print)
        finally:
            client.close()

    rs = score_run(args.out / "conditions")
    md = write_report([args.out / "conditions", args.out / "library_curve", args.out / "importance"],
                      args.out / "report", title=f"Q&A with {model}")
    print(f"\nmodel {model} ({spec}); {len(qs)} questions; load average {os.getloadavg()[0]:.2f} (machine shared)")
    for c in CONDITIONS:
        s = find(rs.scores, c)
        print(f"  {c:<12} accuracy {100 * s.accuracy:5.1f}% (95% {100 * s.ci[0]:.0f}-{100 * s.ci[1]:.0f}), "
              f"unparsable {100 * s.unparsable:.0f}%, random baseline {100 * s.random:.1f}%, "
              f"majority {100 * s.majority:.1f}%")
    print(f"  time per answer {per_answer:.3f} s vs {base_s:.4f} s through the scripted server "
          f"(x{per_answer / max(base_s, 1e-9):.0f})")
    print("  library curve: " + ", ".join(f"{p['size']} patterns {100 * p['mean']:.1f}%" for p in curve["summary"]))
    print("  importance: " + ", ".join(f"{r['label']} {r['importance']:+.1f}%" for r in imp["patterns"]))
    print(f"report: {md}")
    for png in sorted(md.parent.glob("*.png")):
        print(f"  {png}")


if __name__ == "__main__":
    main()
