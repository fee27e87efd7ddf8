"""Reward synthesis with a real small model on the CPU: unconstrained vs generic vs specialised grammar.

For the ten Appendix G goals (scene 00000:0) and the three bucket goals
(the three-bucket scene), with SmolLM2-135M in-process (``--llm
local:smollm2-135m``, compact prompts), each goal is compiled three ways:

- ``none``: no grammar, parse and repair only (what a hosted API gets);
- ``generic``: the DSL's decoding grammar (syntax only);
- ``specialised``: the grammar over the prompt's patterns and the scene's bodies.

Reported per mode: the parse rate and check rate of first answers, the
share of goals solved within ``--attempts`` (1 + repairs) and the repair
attempts used, seconds per goal and generated tokens per second. The
unconstrained run is the baseline the others are compared with. The
machine is shared, so the load average is printed with the figures.

    python benchmarks/local_llm.py [--attempts 3] [--max-tokens 200] [--threads 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from simpatterns.detectors.library import PatternLibrary
from simpatterns.dsl.synthesize import (
    SynthesisConfig, SynthesisFailed, _split_example, load_goal_examples, phyre_scene_bodies, synthesize_reward,
    with_agent_ball,
)
from simpatterns.envs.scenes import three_buckets
from simpatterns.files import atomic_write_json
from simpatterns.llm import make_client

GOALS = Path(__file__).resolve().parents[1] / "examples" / "goals"
MODES = ("none", "generic", "specialised")


def goals() -> list[tuple[str, str, str]]:
    """(name, goal text, scene) for the ten Appendix G goals and the three bucket goals."""
    out = []
    for path in sorted(GOALS.glob("a*.rwd")) + sorted(GOALS.glob("bucket_*.rwd")):
        goal, _ = _split_example(path.read_text())
        out.append((path.stem, goal, "buckets" if path.stem.startswith("bucket") else "00000:0"))
    return out


def raw_speed(client, library, bodies) -> dict[str, float]:
    """Prompt reading and generation speed, measured apart (a 1-token answer times the prompt)."""
    from simpatterns.dsl.constrained import specialised_grammar
    from simpatterns.llm import ChatRequest

    text = "Describe a ball rolling down a ramp. " * 40  # about 400 tokens
    out = {}

    def timed(**kw) -> tuple[float, int, int]:
        t0 = time.perf_counter()
        c = client.complete_one(ChatRequest([{"role": "user", "content": kw.pop("prompt")}], temperature=0.7,
                                            seed=kw.pop("seed"), **kw))
        return time.perf_counter() - t0, c.usage.prompt_tokens, c.usage.completion_tokens

    dt, p, _ = timed(prompt=text, seed=1, max_tokens=1)  # a fresh prompt: read in full
    out["prompt reading"] = p / dt
    grammar = specialised_grammar(library, bodies)
    for name, g in (("generation", None), ("generation with the specialised grammar", grammar)):
        short, _, _ = timed(prompt="Write a reward program.", seed=2, max_tokens=1, grammar=g)
        dt, _, n = timed(prompt="Write a reward program.", seed=2, max_tokens=128, grammar=g)
        out[name] = (n - 1) / max(1e-9, dt - short)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm", default="local:smollm2-135m")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--attempts", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    library = PatternLibrary.builtin()
    examples = load_goal_examples(library=library)
    scenes = {"00000:0": phyre_scene_bodies("00000:0"), "buckets": with_agent_ball(three_buckets().trace_bodies())}
    spec = args.llm + (f"?threads={args.threads}" if args.llm.startswith("local") and "?" not in args.llm else "")
    load0 = os.getloadavg()
    rows: dict[str, list[dict]] = {}
    with make_client(spec) as client:
        print(f"model {client.model} ({client.server_kind}), {args.threads} thread(s), "
              f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, load average {load0[0]:.2f}")
        speed = raw_speed(client, library, scenes["00000:0"])
        print("raw speed: " + ", ".join(f"{k} {v:.1f} tokens/s" for k, v in speed.items()), flush=True)
        for mode in [m for m in args.modes.split(",") if m]:
            rows[mode] = []
            for name, goal, scene in goals():
                cfg = SynthesisConfig(n=1, max_attempts=args.attempts, max_tokens=args.max_tokens, seed=0,
                                      grammar=mode, prompt="compact")
                t0 = time.perf_counter()
                try:
                    result = synthesize_reward(goal, client, library=library, bodies=scenes[scene],
                                               examples=examples, config=cfg)
                except SynthesisFailed as exc:
                    result = exc.result
                dt = time.perf_counter() - t0
                first = result.attempts[0].candidates[0] if result.attempts and result.attempts[0].candidates else None
                row = {"goal": name, "ok": result.ok, "attempts": len(result.attempts),
                       "first_parses": first is not None and first.stage in ("check", "ok"),
                       "first_checks": first is not None and first.stage == "ok",
                       "constrained": result.stats()["constrained"], "seconds": dt,
                       "prompt_tokens": result.usage.prompt_tokens,
                       "completion_tokens": result.usage.completion_tokens, "program": result.text}
                rows[mode].append(row)
                print(f"  {mode:<11} {name:<34} ok={row['ok']!s:<5} attempts={row['attempts']} "
                      f"{dt:6.1f} s  {row['completion_tokens']:4d} tokens", flush=True)
    load1 = os.getloadavg()

    print(f"\nload average {load0[0]:.2f} at the start, {load1[0]:.2f} at the end (2 shared cores)")
    header = ("grammar", "parse (1st)", "check (1st)", f"solved in {args.attempts}", "repairs/goal",
              "s/goal", "answer tokens/s of wall time", "check vs none")
    print(" | ".join(header))
    summary = {}
    base = None
    for mode, rs in rows.items():
        n = len(rs)
        gen_s = sum(r["seconds"] for r in rs)
        s = {"parse_rate": sum(r["first_parses"] for r in rs) / n, "check_rate": sum(r["first_checks"] for r in rs) / n,
             "solved": sum(r["ok"] for r in rs) / n, "repairs": statistics.mean(r["attempts"] - 1 for r in rs),
             "seconds_per_goal": gen_s / n,
             "tokens_per_s": sum(r["completion_tokens"] for r in rs) / gen_s if gen_s else 0.0,
             "constrained": all(r["constrained"] for r in rs)}
        summary[mode] = s
        if mode == "none":
            base = s["check_rate"]
        ratio = "-" if not base else f"{s['check_rate'] / base:.1f}x"
        print(f"{mode} | {s['parse_rate']:.0%} | {s['check_rate']:.0%} | {s['solved']:.0%} | {s['repairs']:.2f} | "
              f"{s['seconds_per_goal']:.1f} | {s['tokens_per_s']:.1f} | {ratio}")
    if args.json:
        atomic_write_json(args.json, {"summary": summary, "speed": speed, "rows": rows, "load": [load0, load1]})


if __name__ == "__main__":
    main()
