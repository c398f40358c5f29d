"""Wall-clock time to reach return thresholds, as a user runs training.

    python scripts/bench_solve.py                      # both targets below, 2 ranks
    python scripts/bench_solve.py --only halfcheetah --budget-s 600
    python scripts/bench_solve.py configs/halfcheetah_ars.toml --seeds 0-4 \
        --thresholds 3000 --budget-s 300               # any config, several seeds

Runs ``mpiexec -n RANKS es-train CONFIG`` for at most a wall-clock budget, or until the
evaluation reached the highest threshold (then interrupts it with SIGINT), and reads
progress.csv: the wall time (since launch, start-up included) and env steps at which the
noise-free evaluation of the mean policy first reached each threshold.
"""

from __future__ import annotations

import argparse
import csv
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import (
    BIN,
    CONFIGS,
    check_config,
    died,
    emit,
    mpiexec,
    run_script,
    script_parser,
)

from es.cli.args import SpecError, add_flag, add_out, add_ranks, finite_float

TARGETS = {
    "cartpole": (str(CONFIGS / "cartpole.toml"), 20.0, (475.0,)),
    "halfcheetah": (str(CONFIGS / "halfcheetah.toml"), 600.0, (3000.0, 5000.0, 6000.0)),
}


def reached(run_dir: Path, threshold: float) -> bool:
    path = run_dir / "progress.csv"
    if not path.exists():
        return False
    with path.open() as handle:
        return any(r["eval_return"] and float(r["eval_return"]) >= threshold
                   for r in csv.DictReader(handle) if None not in r.values())


def stop(process: subprocess.Popen) -> None:
    """SIGINT, as es-train stops on with its checkpoint; SIGKILL if that takes over 15 s."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def run_for(config: str, ranks: int, seconds: float, run_dir: Path, overrides: list[str],
            stop_at: float = float("inf")):
    command = mpiexec(ranks, str(BIN / "es-train"), config, "--run-dir", str(run_dir), "--quiet")
    for override in overrides:
        command += ["--set", override]
    started = time.time()
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(command, stderr=errors, stdout=subprocess.DEVNULL)
        try:
            while process.poll() is None and time.time() - started < seconds:
                if reached(run_dir, stop_at):
                    break
                time.sleep(0.5)
        finally:  # at the budget, and when the script itself is interrupted (its temporary
            interrupted = process.poll() is None  # run folder goes: nothing may train on)
            if interrupted:
                stop(process)
        wall = time.time() - started
        started_training = (run_dir / "progress.csv").exists()
        # Stopped by us, es-train exits 130 (SIGINT) after writing its checkpoint; stopped while
        # Python still starts (a loaded machine), before es-train's handler, it dies of the
        # signal: the budget is what ended it, whatever the exit code says.
        if process.returncode not in ((0, 130) if interrupted else (0,)) and (
                started_training or not interrupted):
            errors.seek(0)
            died(__file__, f"es-train {config}", process.returncode, errors.read())
        if not started_training:
            sys.exit(f"{Path(__file__).name}: es-train {config}: the budget of {seconds:g} s "
                     "ended it before its first generation; give a longer --budget-s")
    with (run_dir / "progress.csv").open() as handle:
        return list(csv.DictReader(handle)), wall


def parse_thresholds(text: str) -> tuple[float, ...]:
    """'3000,5000' -> (3000.0, 5000.0)."""
    try:
        return tuple(finite_float(part) for part in text.split(","))
    except SpecError:
        raise SpecError(f"{text!r}: expected finite eval returns, comma-separated") from None


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_solve.py --only halfcheetah --budget-s 600",
        "python scripts/bench_solve.py configs/halfcheetah_ars.toml --seeds 0-4 "
        "--thresholds 3000 --budget-s 300"])
    parse.add_argument("configs", nargs="*", metavar="config",
                       help="config files instead of the built-in targets (need --thresholds)")
    parse.add_argument("--only", choices=sorted(TARGETS), action="append",
                       help="one of the built-in targets (repeatable; default: all)")
    parse.add_argument("--thresholds", type=parse_thresholds, metavar="LIST",
                       help="eval returns to reach, comma-separated (needed for config files; "
                       "default for the built-in targets: the target's own)")
    add_flag(parse, "--seeds", "run.seed of the runs (default: each config's)")
    add_ranks(parse, "2", several=False)
    add_flag(parse, "--budget-s", "default: 600 for config files, the target's own for the "
             "built-in targets")
    add_flag(parse, "--set", "for every run")
    add_out(parse, "bench_solve")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    if args.configs:
        if args.only:
            parse.error("--only picks built-in targets: give config files or --only, not both")
        if not args.thresholds:
            parse.error("config files need --thresholds")
        jobs = [(path, path, args.budget_s or 600.0, args.thresholds) for path in args.configs]
    else:
        jobs = [(name, *TARGETS[name][:1], args.budget_s or TARGETS[name][1],
                 args.thresholds or TARGETS[name][2]) for name in args.only or sorted(TARGETS)]
    for _, config, _, _ in jobs:
        check_config(parse, config, args.overrides)
    seeds = args.seeds or [None]
    ranks = args.ranks[0]
    rows = []
    for name, config, budget, thresholds in jobs:
        for seed in seeds:
            overrides = [*args.overrides, *([f"run.seed={seed}"] if seed is not None else [])]
            with tempfile.TemporaryDirectory() as tmp:
                progress, wall = run_for(config, ranks, budget, Path(tmp) / "run",
                                         overrides, stop_at=max(thresholds))
            evals = [(float(r["time_s"]), int(r["timesteps"]), float(r["eval_return"]))
                     for r in progress if r["eval_return"]]
            reached = []
            for threshold in thresholds:
                hit = next(((t, s) for t, s, e in evals if e >= threshold), None)
                rows.append({  # a threshold not reached: empty cells, no number
                    "config": name, "seed": "" if seed is None else seed, "ranks": ranks,
                    "budget_s": budget, "threshold": threshold,
                    "reached_at_s": hit[0] if hit else "",
                    "reached_at_steps": hit[1] if hit else "",
                    "best_eval": max(e for _, _, e in evals), "last_eval": evals[-1][2],
                    "steps": int(progress[-1]["timesteps"]), "wall_s": round(wall, 1),
                })
                reached.append(f"{threshold:g} at {hit[0]:.1f} s ({hit[1]:,} steps)" if hit
                               else f"{threshold:g} not reached")
            print(f"{name}{'' if seed is None else f' seed {seed}'}: {', '.join(reached)}; "
                  f"best evaluation {rows[-1]['best_eval']:.1f}, {rows[-1]['steps']:,} steps, "
                  f"{rows[-1]['wall_s']} s", flush=True)
    emit(rows, args.out, f"Time to reach eval return thresholds, mpiexec -n {ranks}")


if __name__ == "__main__":
    run_script(main)
