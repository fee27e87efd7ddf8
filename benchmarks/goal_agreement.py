"""The ten Appendix G goal programs against a direct reading of the goals, on every shipped
variant: solution and near-miss rollouts of all 25 PHYRE templates, run to the horizon.

    python benchmarks/goal_agreement.py [--variants 100] [--workers 2] [--out runs/goal_agreement.json]

For each (rollout, goal) it compares the program's verdict (examples/goals/a*.rwd, evaluated by
`RewardProgram.evaluate`) with the reading of tests/dsl/goal_readings.py, which computes each
goal from the trace's raw arrays without the DSL; and, on the same rollouts stopped at success
(the simulator's default), whether the verdicts the program calls determined equal the full
runs'. Prints agreement per goal, every disagreement, how often a stopped rollout's verdict is
determined, and the time per evaluation beside the time per direct reading (same run).
tests/dsl/test_dsl_goal_agreement.py runs the same on 2 variants per template.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "dsl"))

from goal_readings import read_goals  # noqa: E402
from goal_rollouts import cases, rollout  # noqa: E402

from simpatterns.dsl import RewardProgram  # noqa: E402
from simpatterns.files import atomic_write_json  # noqa: E402
from simpatterns.cli_support import progress_map  # noqa: E402

GOALS = ROOT / "examples" / "goals"


def programs() -> dict[str, RewardProgram]:
    return {p.name[:3]: RewardProgram.coerce(p) for p in sorted(GOALS.glob("a[0-9][0-9]_*.rwd"))}


def run_case(case: tuple[str, int, str]) -> dict | None:
    full = rollout(*case)
    if full is None:
        return None
    stopped = rollout(*case, full=False)
    progs = programs()
    t0 = time.perf_counter()
    direct = read_goals(full)
    t_direct = time.perf_counter() - t0
    rows = []
    t_dsl = 0.0
    for goal, program in progs.items():
        t0 = time.perf_counter()
        mine = program.evaluate(None, full)
        t_dsl += time.perf_counter() - t0
        early = program.evaluate(None, stopped)
        rows.append({"goal": goal, "dsl": mine.success, "direct": direct[goal], "stopped": early.success,
                     "determined": early.determined, "stopped_early": stopped.num_frames < stopped.horizon})
    return {"case": list(case), "rows": rows, "t_dsl": t_dsl, "t_direct": t_direct, "frames": stopped.num_frames}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    todo = cases(args.variants)
    t0 = time.perf_counter()
    done = [r for _, r in progress_map(run_case, todo, workers=args.workers, progress="rollouts") if r]
    wall = time.perf_counter() - t0
    rows = [(d["case"], r) for d in done for r in d["rows"]]
    agree = sum(r["dsl"] == r["direct"] for _, r in rows)
    print(f"{len(done)} rollouts ({len(todo) - len(done)} near-misses not found), {len(rows)} verdicts; "
          f"wall {wall:.0f} s, load average {os.getloadavg()[0]:.1f}")
    print(f"agreement with the direct reading: {agree}/{len(rows)} = {agree / len(rows):.2%}")
    print("goal  agree  succeed(direct)  stopped early: determined, of which equal to the full run")
    for goal in sorted({r["goal"] for _, r in rows}):
        g = [r for _, r in rows if r["goal"] == goal]
        early = [r for r in g if r["stopped_early"]]
        det = [r for r in early if r["determined"]]
        print(f"{goal}  {sum(r['dsl'] == r['direct'] for r in g):4d}/{len(g)}  {sum(r['direct'] for r in g):4d}"
              f"   {len(det):4d}/{len(early)}  {sum(r['stopped'] == r['dsl'] for r in det):4d}/{len(det)}")
    bad = [(c, r) for c, r in rows if r["dsl"] != r["direct"]]
    for c, r in bad:
        print(f"  disagree: template {c[0]} variant {c[1]} {c[2]} goal {r['goal']}: program {r['dsl']}, "
              f"direct {r['direct']}")
    unsound = [(c, r) for c, r in rows if r["stopped_early"] and r["determined"] and r["stopped"] != r["dsl"]]
    print(f"determined verdicts of stopped rollouts that differ from the full run: {len(unsound)}")
    t_dsl = sum(d["t_dsl"] for d in done) / len(rows) * 1e3
    t_direct = sum(d["t_direct"] for d in done) / len(rows) * 1e3
    print(f"per goal and rollout: program {t_dsl:.2f} ms (annotating what it reads included), "
          f"direct reading {t_direct:.2f} ms; ratio {t_dsl / t_direct:.2f}")
    if args.out:
        atomic_write_json(args.out, {"rollouts": len(done), "verdicts": len(rows), "agree": agree,
                                     "disagreements": [{"case": c, **r} for c, r in bad],
                                     "unsound": len(unsound), "load": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
