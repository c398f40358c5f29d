"""What a kept-policy rule costs and buys, replayed on a ``scripts/bench_kept.py`` study.

    python scripts/kept_tradeoff.py bench-results/bench_kept --steps 5800000 \
        --best-episodes 100,50,30,20 --every 1,2,3

For each seed of the study (its ``results.csv`` and ``seed*/returns.csv``: every evaluated
mean policy of a run on the same fresh episodes), the stop's race of the trainer's own rule
(``es.rl.kept.NominationPool``) is replayed ``--trials`` times with the study's episodes in
place of confirmation episodes, each policy's in a new random order per trial. The pool holds
the ``--pool`` best evaluations among every ``--every``-th one (2: evaluations half as
often). A row per seed and setting: the race's episodes (mean and 90th percentile) and their
share of the run's env steps (``--steps``, ``--episode-steps`` each), and what the kept
policy is worth over the study's episodes: its mean, its falls (episodes below 0.8 x its
median, as bench_kept counts them) and the chance that 20 fresh episodes show none, which is
what the suite's steadiness check sees.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable
from pathlib import Path

import numpy as np
from report import emit, run_script, script_parser

from es.cli.args import add_flag, add_out, positive_int
from es.config import read_toml
from es.rl.kept import Nomination, NominationPool, policy_score
from es.rl.policies import ObsNorm

#: How many fresh episodes the suite's steadiness check plays.
CHECKED_EPISODES = 20


def load_study(folder: Path) -> dict[int, list[dict]]:
    """Per seed, its evaluated policies: generation, evaluation score, the study's returns
    and falls. A folder that is not a bench_kept study (another script's results.csv, a
    seed's returns missing) is a ValueError naming what is missing."""
    with (folder / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    missing = {"seed", "generation", "eval_score", "falls"} - set(rows[0] if rows else ())
    if missing:
        raise ValueError(f"its results.csv lacks the columns {', '.join(sorted(missing))} "
                         "(not a scripts/bench_kept.py --out folder)")
    study: dict[int, list[dict]] = {}
    for seed in sorted({int(row["seed"]) for row in rows}):
        returns: dict[int, list[float]] = {}
        if not (folder / f"seed{seed}" / "returns.csv").is_file():
            raise ValueError(f"no seed{seed}/returns.csv (a scripts/bench_kept.py --out "
                             "folder has one per seed)")
        with (folder / f"seed{seed}" / "returns.csv").open() as handle:
            for episode in csv.DictReader(handle):
                returns.setdefault(int(episode["generation"]), []).append(
                    float(episode["return"]))
        study[seed] = [{"generation": int(row["generation"]), "score": float(row["eval_score"]),
                        "falls": int(row["falls"]),
                        "returns": np.array(returns[int(row["generation"])])}
                       for row in rows if int(row["seed"]) == seed]
    return study


def race(policies: list[dict], every: int, episodes: int, pool_size: int, by: str,
         rng: np.random.Generator) -> tuple[dict | None, int]:
    """One stop race: the kept policy (None: none held) and the episodes it took."""
    evaluations = sorted(policy["generation"] for policy in policies)
    cadence = evaluations[0] if evaluations else 1  # the study's evaluation interval
    by_generation = {policy["generation"]: policy for policy in policies}
    pool = NominationPool(pool_size, episodes, by, seed=0)
    for policy in policies:
        if policy["generation"] % (cadence * every) == 0:
            pool.nominate(Nomination(policy["generation"], policy["score"], np.zeros(1),
                                     ObsNorm.identity(1)), None)
    shuffled = {g: rng.permutation(p["returns"]) for g, p in by_generation.items()}
    kept, kept_policy, played = None, None, 0
    while (planned := pool.next_round()) is not None:
        nomination, seeds = planned
        start = len(nomination.returns)
        returns = shuffled[nomination.generation][start:start + len(seeds)]
        played += len(returns)
        verdict = pool.record(nomination, returns, kept)
        if verdict.confirmed is not None:
            kept, kept_policy = verdict.confirmed, by_generation[nomination.generation]
            if by == "mean":
                break
    return kept_policy, played


def tradeoff_rows(study: dict[int, list[dict]], args: argparse.Namespace) -> list[dict]:
    rows = []
    for seed, policies in study.items():
        for every in args.every:
            for episodes in args.best_episodes:
                rng = np.random.default_rng(args.seed)
                trials = [race(policies, every, episodes, args.pool, args.by, rng)
                          for _ in range(args.trials)]
                kept = [policy for policy, _ in trials if policy is not None]
                costs = np.array([played for _, played in trials], dtype=float)
                clean = [(1 - p["falls"] / p["returns"].size) ** CHECKED_EPISODES for p in kept]
                rows.append({
                    "seed": seed, "every": every, "best_episodes": episodes, "pool": args.pool,
                    "race_episodes": costs.mean(), "race_episodes_p90": np.percentile(costs, 90),
                    "race_share": costs.mean() * args.episode_steps / args.steps,
                    "kept_share": len(kept) / len(trials),
                    "kept_mean": float(np.mean([p["returns"].mean() for p in kept])) if kept
                    else float("nan"),
                    "kept_score": float(np.mean([policy_score(p["returns"], args.by)
                                                 for p in kept])) if kept else float("nan"),
                    "no_fall_in_20": float(np.mean(clean)) if kept else float("nan"),
                })
    return rows


def whole_numbers(low: int) -> Callable[[str], list[int]]:
    """The type of a flag of comma-separated whole numbers, each at least ``low``."""
    def parse(text: str) -> list[int]:
        try:
            values = [int(part) for part in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: give comma-separated whole numbers") from None
        if not values or min(values) < low:
            raise argparse.ArgumentTypeError(f"{text!r}: every number must be at least {low}")
        return values
    return parse


number_list = whole_numbers(1)


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/kept_tradeoff.py bench-results/bench_kept --steps 5800000"])
    parse.add_argument("study", help="a scripts/bench_kept.py --out folder")
    parse.add_argument("--steps", type=positive_int, required=True, metavar="N",
                       help="env steps of each study run (its --max-timesteps)")
    parse.add_argument("--episode-steps", type=positive_int, default=1000, metavar="N",
                       help="env steps of a confirmation episode (default: 1000)")
    parse.add_argument("--best-episodes", type=number_list, default=[100, 50, 30, 20],
                       metavar="LIST", help="run.best_episodes values (at most the study's "
                       "episodes per policy; default: 100,50,30,20)")
    parse.add_argument("--every", type=number_list, default=[1, 2], metavar="LIST",
                       help="keep every k-th evaluation (default: 1,2)")
    parse.add_argument("--pool", type=positive_int, default=16, metavar="N",
                       help="run.best_pool (default: 16)")
    parse.add_argument("--by", choices=("worst", "mean"), default="worst",
                       help="run.best_by (default: worst)")
    parse.add_argument("--trials", type=positive_int, default=300, metavar="N",
                       help="races per seed and setting (default: 300)")
    add_flag(parse, "--seed", "of the episode orders", default=0)
    add_out(parse, "kept_tradeoff")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    folder = Path(args.study)
    if not (folder / "results.csv").is_file():
        parse.error(f"{args.study!r}: no results.csv (give a scripts/bench_kept.py --out folder)")
    try:
        study = load_study(folder)
    except ValueError as error:
        parse.error(f"{args.study!r}: {error}")
    for seed in study:  # the share of the run's steps is the point: of the steps it trained
        config = folder / f"seed{seed}" / "config.toml"
        budget = read_toml(config)["run"]["max_timesteps"] if config.is_file() else None
        if budget is not None and budget != args.steps:
            parse.error(f"--steps {args.steps}: the study's seed {seed} trained "
                        f"run.max_timesteps = {budget}; give that")
    fewest = min(p["returns"].size for policies in study.values() for p in policies)
    if max(args.best_episodes) > fewest:
        parse.error(f"--best-episodes {max(args.best_episodes)}: the study played {fewest} "
                    "episodes per policy; allowed: at most that")
    emit(tradeoff_rows(study, args), args.out,
         f"The stop's race replayed on {folder} ({args.trials} trials per row)")


if __name__ == "__main__":
    run_script(main)
