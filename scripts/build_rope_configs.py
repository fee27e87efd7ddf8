"""Generate the shipped rope configurations (simpatterns/simulators/mujoco/data/rope_{train,eval}.npz).

Random-force episodes from a slightly jittered circle, filtered by crossing
count (0..6), unambiguous crossings and a proof that the loop is unknotted;
see `simpatterns.simulators.mujoco.tasks.generate_configurations`. The seed
and every setting are recorded in each file's ``meta``:

    python scripts/build_rope_configs.py                    # seed 17, 40 per crossing count
    python scripts/build_rope_configs.py --check            # regenerate and compare labels with the shipped files

Results can differ in the last bits across machines (MuJoCo's floating point),
so --check compares counts and labels, not positions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from simpatterns.simulators.mujoco.tasks import SPLITS, generate_configurations, read_configurations

SEED = 17
OUT = Path(__file__).resolve().parent.parent / "simpatterns" / "simulators" / "mujoco" / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--per-level", type=int, default=40, help="configurations per crossing count (both splits)")
    parser.add_argument("--max-crossings", type=int, default=6)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()

    def progress(e: int, counts: dict) -> None:
        if e % 20 == 0:
            print(f"episode {e}: " + "; ".join(f"{s} {counts[s]}" for s in SPLITS), file=sys.stderr, flush=True)

    sets = generate_configurations(args.seed, args.per_level, range(args.max_crossings + 1), progress=progress)
    status = 0
    for split, configs in sets.items():
        path = args.out / f"rope_{split}.npz"
        configs.meta["script"] = "scripts/build_rope_configs.py"
        if args.check:
            shipped = read_configurations(path)
            same = shipped.crossings.tolist() == configs.crossings.tolist() and list(shipped.gauss) == list(configs.gauss)
            print(f"{path}: {'matches' if same else 'DIFFERS from'} a regeneration with seed {args.seed}")
            status |= 0 if same else 1
        else:
            configs.save(path)
            print(f"wrote {path}: {len(configs)} configurations, counts {configs.meta['counts']}, "
                  f"episodes {configs.meta['episodes']}, dropped {configs.meta['dropped']}")
    print(f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
