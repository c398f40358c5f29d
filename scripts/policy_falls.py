"""How often a run's saved policies fall: each run folder's final (``policy.npz``) and kept
(``policy_best.npz``) policy played on many fresh starts.

    python scripts/policy_falls.py bench-results/suite/mujoco/runs/humanoid-ars-seed* \
        --episodes 100 --out docs/results/humanoid_falls

The suite judges a kept policy on 20 episodes; a policy that falls from 1-2% of its starts
passes that check four times in five, and a run's 50 confirmation episodes half the time.
This plays each policy on the same ``--episodes`` reset seeds (bench_kept.py's study seeds:
none of them a training, evaluation, confirmation or suite seed), spread over ``--workers``
processes; a *fall* is an episode below 0.8 x the policy's median return (as
bench_kept counts them: below the median by 0.2 x its size, where it is negative).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from bench_kept import STUDY_SEED, fall_summary, play_study
from report import emit, run_script, script_parser

from es.cli.args import add_flag, add_out

FILES = {"final": "policy.npz", "kept": "policy_best.npz"}


def falls(run_dir: Path, episodes: int, workers: int) -> list[dict]:
    """One row per saved policy of the run."""
    from es.config import load_config
    from es.rl.checkpoint import load_policy

    saved = {which: load_policy(run_dir / name) for which, name in FILES.items()
             if (run_dir / name).is_file()}
    # A run that kept its last policy saved it twice: its episodes are played once.
    distinct = {_identity(policy): policy for policy in saved.values()}
    _, played = play_study(run_dir, [(policy.params, policy.norm)
                                     for policy in distinct.values()], episodes, workers)
    by_identity = dict(zip(distinct, played, strict=True))
    seed = load_config(run_dir / "config.toml").run.seed
    rows = []
    for which, policy in saved.items():
        returns = by_identity[_identity(policy)]
        rows.append({"run": run_dir.name, "seed": seed, "policy": which,
                     "generation": policy.generation, "episodes": returns.size,
                     **fall_summary(returns)})
    return rows


def _identity(policy) -> bytes:
    """What makes two saved policies play alike: their parameters and normalisation."""
    norm = policy.norm
    return b"".join(part.tobytes() for part in (policy.params, norm.mean, norm.std,
                                               np.float64(norm.clip)))


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/policy_falls.py RUN_DIR [RUN_DIR ...] --episodes 100"])
    parse.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                       help="a run folder written by es-train or es-bench suite")
    add_flag(parse, "--episodes", "fresh ones per policy", default=100)
    add_flag(parse, "--workers")
    add_out(parse, "policy_falls")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    for run_dir in args.run_dirs:
        if not (run_dir / "policy.npz").is_file() or not (run_dir / "config.toml").is_file():
            parse.error(f"{str(run_dir)!r}: not a run folder (no policy.npz and config.toml)")
    rows = [row for run_dir in args.run_dirs for row in falls(run_dir, args.episodes,
                                                              args.workers)]
    emit(rows, args.out, f"Falls of saved policies over {args.episodes} fresh episodes "
         f"(reset seeds {STUDY_SEED}-{STUDY_SEED + args.episodes - 1})")


if __name__ == "__main__":
    run_script(main)
