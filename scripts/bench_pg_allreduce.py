"""Policy gradient with MPI gradient all-reduce: wall time of 1 rank against N ranks.

    python scripts/bench_pg_allreduce.py --ranks 1,2 --seeds 0-2 --updates 40

Every rank count plays the same episodes (their seeds do not depend on the rank) and takes the
same updates, so the learning curve is the same and only the wall time differs. Reported per
(ranks, seed): seconds for the fixed number of updates, env steps/s, wall seconds to the first
evaluation at or above --threshold, and bytes all-reduced per update.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import tomllib
from pathlib import Path

from report import CONFIGS, check_config, emit, run_or_die, run_script, script_parser

from es.cli.args import add_flag, add_out, add_ranks, positive_int

BIN = Path(sys.executable).parent


def run(ranks: int, seed: int, args: argparse.Namespace, folder: Path) -> dict:
    run_dir = folder / f"n{ranks}-seed{seed}"
    line = [str(BIN / "es-baseline"), "pg", args.config, "--run-dir", str(run_dir), "--quiet",
            "--set", f"run.seed={seed}", "--set", f"run.generations={args.updates}",
            "--set", "run.max_seconds=0", "--set", "run.eval_every=1"]
    if ranks > 1:
        line = [str(BIN / "mpiexec"), "-n", str(ranks), *line]
    run_or_die(__file__, f"es-baseline pg {args.config}"
               + (f" on {ranks} ranks" if ranks > 1 else ""), line)
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


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_pg_allreduce.py --ranks 1,2 --seeds 0-2 --updates 40",
        "python scripts/bench_pg_allreduce.py --ranks 1,4 --seeds 0 --threshold 195"])
    add_flag(parse, "--config", "an es-baseline pg config",
             default=str(CONFIGS / "baselines" / "cartpole_pg.toml"))
    add_ranks(parse, "1,2", several=True, detail="each seed runs on each count")
    add_flag(parse, "--seeds", "run.seed of the runs", default="0-2")
    parse.add_argument("--updates", type=positive_int, default=40,
                       help="run.generations of a run (default: %(default)s)")
    add_flag(parse, "--threshold", "the wall time to its first evaluation is reported",
             default=475.0)
    add_out(parse, "bench_pg_allreduce")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    check_config(parse, args.config)
    with open(args.config, "rb") as handle:
        if "pg" not in tomllib.load(handle):  # es-train's config: pg on defaults, unasked
            parse.error(f"--config {args.config}: no [pg] section; this benchmark runs "
                        "es-baseline pg, e.g. --config configs/baselines/cartpole_pg.toml")
    with tempfile.TemporaryDirectory() as folder:
        rows = [run(ranks, seed, args, Path(folder)) for seed in args.seeds for ranks in args.ranks]
    emit(rows, args.out, f"REINFORCE, {args.config}, {args.updates} updates; wall_s includes "
         "start-up and evaluation (spread over the ranks)")


if __name__ == "__main__":
    run_script(main)
