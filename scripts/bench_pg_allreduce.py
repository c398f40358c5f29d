"""Policy gradient with MPI gradient all-reduce: wall time of 1 rank against N ranks.

    python scripts/bench_pg_allreduce.py --ranks 1,2 --seeds 0,1,2 --updates 40

Every rank count plays the same episodes (their seeds do not depend on the rank) and takes the
same updates, so the learning curve is the same and only the wall time differs. Reported per
(ranks, seed): seconds for the fixed number of updates, env steps/s, wall seconds to the first
evaluation at or above --threshold, and bytes all-reduced per update.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

from report import emit

BIN = Path(sys.executable).parent


def run(ranks: int, seed: int, args: argparse.Namespace, folder: Path) -> dict:
    run_dir = folder / f"n{ranks}-seed{seed}"
    line = [str(BIN / "es-baseline"), "pg", args.config, "--run-dir", str(run_dir), "--quiet",
            "--set", f"run.seed={seed}", "--set", f"run.generations={args.updates}",
            "--set", "run.max_seconds=0", "--set", "run.eval_every=1"]
    if ranks > 1:
        line = [str(BIN / "mpiexec"), "-n", str(ranks), *line]
    subprocess.run(line, check=True, capture_output=True)
    with (run_dir / "progress.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    solved = [r for r in rows if r["eval_return"] and float(r["eval_return"]) >= args.threshold]
    train_s = sum(float(r["rollout_s"]) + float(r["update_s"]) + float(r["wait_s"])
                  for r in rows)
    steps = int(rows[-1]["timesteps"])
    return {
        "ranks": ranks, "seed": seed, "updates": len(rows), "env_steps": steps,
        "wall_s": float(rows[-1]["time_s"]),
        "train_steps_per_s": steps / train_s,
        "s_to_threshold": float(solved[0]["time_s"]) if solved else float("nan"),
        "bytes_per_update": int(rows[-1]["bytes_sent"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/baselines/cartpole_pg.toml")
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--threshold", type=float, default=475.0)
    parser.add_argument("--csv", default="bench/pg_allreduce.csv")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = [run(int(r), int(s), args, Path(folder))
                for s in args.seeds.split(",") for r in args.ranks.split(",")]
    emit(rows, args.csv, f"REINFORCE, {args.config}, {args.updates} updates; wall_s includes "
         "start-up and evaluation (spread over the ranks)")


if __name__ == "__main__":
    main()
