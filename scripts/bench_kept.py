"""Which evaluated policies are steady: every evaluation's mean policy of one run, played on
many fresh episodes.

    python scripts/bench_kept.py configs/halfcheetah_ars.toml --seeds 4 \
        --max-timesteps 5800000 --episodes 100 --set run.eval_every=3 --set run.eval_episodes=5

Trains ``mpiexec -n RANKS es-train CONFIG`` to the step budget with every evaluation
nominated and none confirmed while training (``run.best_share = 0``, a pool that holds them
all), takes the nominations the stop's confirmations start from (the final checkpoint's,
written before them, and the last evaluation's), and plays each policy ``--episodes`` times
on the same fresh reset seeds (none of them a training, evaluation or confirmation seed),
one process per rank. A *fall* is an episode below 0.8 x the policy's median return (below
the median by 0.2 x its size, where it is negative): for HalfCheetah, a flip onto its back.
The table shows which policies a kept-policy rule can choose from and how often each fails;
``returns.csv`` holds every episode. ``--judged N``
also plays each policy on the suite's N judging episodes (``es-bench suite`` scores a kept
policy on them: es-eval's seeds from 12345), so a policy's falls stand beside the figures
the suite would print for it. A run folder that reached the step budget is not trained again
(one trained with another config, budget or ``--set`` is refused).
"""

from __future__ import annotations

import argparse
import csv
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from report import BIN, check_config, emit, mpiexec, run_or_die, run_script, script_parser

from es.bench.suite import FINAL_SEED, read_progress
from es.cli.args import add_flag, add_out, add_ranks, positive_int
from es.config import from_dict, load_config, read_toml

#: The study's reset seeds: one shared list (every policy meets the same starts), far from
#: the seeds es-train derives for its episodes.
STUDY_SEED = 2_000_000_000
FALL = 0.2  # an episode more than this share of the median's size below the median


def run_sets(overrides: list[str], seed: int, max_timesteps: int) -> list[str]:
    """A run's ``--set``s: the user's, then the study's (every evaluation nominated)."""
    return [*overrides, f"run.seed={seed}", f"run.max_timesteps={max_timesteps}",
            "run.max_seconds=0", "run.best_share=0", "run.best_pool=1000000",
            "run.best_episodes=1"]


def other_run(run_dir: Path, config: str, sets: list[str]) -> bool:
    """Whether ``run_dir`` holds a run of another config, budget or ``--set``: studied, it
    would pass for this command's (a finished run folder is reused)."""
    if not (run_dir / "config.toml").is_file():
        return False
    recorded = from_dict(read_toml(run_dir / "config.toml")).to_dict()
    return recorded != load_config(config, sets).to_dict()


def train(config: str, run_dir: Path, ranks: int, seed: int, max_timesteps: int,
          sets: list[str]) -> None:
    """The run (a finished one is reused); exits in one line if es-train fails."""
    if trained(run_dir) >= max_timesteps:
        return
    command = mpiexec(ranks, str(BIN / "es-train"), config, "--run-dir", str(run_dir),
                      "--force", "--quiet", *[part for item in sets for part in ("--set", item)])
    run_or_die(__file__, f"es-train {config} (seed {seed})", command)


def trained(run_dir: Path) -> int:
    """The env steps a run folder's progress.csv reached (0: none)."""
    if not (run_dir / "progress.csv").is_file():
        return 0
    return max((int(row["timesteps"]) for row in read_progress(run_dir)), default=0)


def stop_pool(run_dir: Path) -> list:
    """The nominations the stop's confirmations start from: the final checkpoint's (written
    before them), and the last generation's, which its evaluation at the stop nominates."""
    from es.config import load_config
    from es.parallel.comm import LocalComm
    from es.rl.checkpoint import load_latest_checkpoint
    from es.rl.trainer import Trainer

    state = load_latest_checkpoint(run_dir / "checkpoints")[0]
    with Trainer(load_config(run_dir / "config.toml"), LocalComm(), None) as trainer:
        trainer.restore(state)
        trainer.evaluate_held()
        return trainer.nominations.waiting


def play_episodes(run_dir: str, policies: list, seeds: list[int]) -> list[list]:
    """Each policy's (parameters, normalisation) noise-free episodes on these reset seeds
    (one process: the environment made once)."""
    from es.config import load_config
    from es.rl.envs import env_from_config
    from es.rl.policy import make_policy
    from es.rl.rollout import run_episode

    config = load_config(Path(run_dir) / "config.toml")
    env = env_from_config(config)
    policy = make_policy(config, env)
    return [[run_episode(env, policy.bind(params, norm), seed) for seed in seeds]
            for params, norm in policies]


def play(run_dir: str, policies: list, seeds: list[int]) -> list[list[float]]:
    """Each policy's noise-free returns on these reset seeds (``play_episodes``)."""
    return [[episode.total_return for episode in episodes]
            for episodes in play_episodes(run_dir, policies, seeds)]


def play_study(run_dir: Path, policies: list, episodes: int, workers: int,
               first_seed: int = STUDY_SEED) -> tuple[list[int], list[np.ndarray]]:
    """Each policy's returns on the ``episodes`` reset seeds from ``first_seed`` (the
    study's), spread over ``workers`` processes; and those seeds, in the order of the
    returns."""
    chunks = [list(range(first_seed + w, first_seed + episodes, workers))
              for w in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        by_chunk = list(pool.map(play, [str(run_dir)] * workers, [policies] * workers, chunks))
    seeds = [seed for chunk in chunks for seed in chunk]
    return seeds, [np.array([r for chunk in by_chunk for r in chunk[i]])
                   for i in range(len(policies))]


def fall_summary(returns: np.ndarray) -> dict:
    """A policy's returns over the study: mean, median, worst, and its falls (episodes
    below the median by more than ``FALL`` x its size: 0.8 x the median where it is positive;
    where it is negative, as for Pendulum or an early Swimmer, 0.8 x counted every episode)."""
    median = float(np.median(returns))
    return {"mean": float(returns.mean()), "median": median, "worst": float(returns.min()),
            "falls": int((returns < median - FALL * abs(median)).sum())}


def study(run_dir: Path, episodes: int, workers: int, judged: int
          ) -> tuple[list[dict], list[dict]]:
    """One row per nominated policy (with its mean and worst of the suite's ``judged``
    episodes, when asked), and one per episode."""
    nominations = sorted(stop_pool(run_dir), key=lambda nomination: nomination.generation)
    policies = [(n.params, n.norm) for n in nominations]
    seeds, played = play_study(run_dir, policies, episodes, workers)
    # the suite's judging episodes: es-eval's reset seeds from FINAL_SEED
    suite = (play_study(run_dir, policies, judged, workers, FINAL_SEED)[1] if judged
             else [None] * len(policies))
    rows, episode_rows = [], []
    for nomination, returns, scored in zip(nominations, played, suite, strict=True):
        rows.append({"generation": nomination.generation, "eval_score": nomination.score,
                     **fall_summary(returns), "episodes": returns.size})
        if scored is not None:
            rows[-1] |= {"judged_mean": float(scored.mean()), "judged_worst": float(scored.min())}
        episode_rows += [{"generation": nomination.generation, "reset_seed": seed,
                          "return": r} for seed, r in zip(seeds, returns.tolist(), strict=True)]
    return rows, episode_rows


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_kept.py configs/halfcheetah_ars.toml --seeds 4 "
        "--max-timesteps 5800000 --episodes 100 --set run.eval_every=3"])
    parse.add_argument("config", help="es-train config file")
    add_flag(parse, "--seeds", "run.seed of the runs (default: 0)")
    parse.add_argument("--max-timesteps", type=positive_int, required=True, metavar="N",
                       help="env steps each run trains (run.max_timesteps)")
    add_flag(parse, "--episodes", "fresh ones per policy", default=100)
    add_flag(parse, "--judged", "each policy plays them too", default=0)
    add_ranks(parse, "2", several=False, detail="also the processes that play the episodes")
    add_flag(parse, "--set", "for every run")
    add_out(parse, "bench_kept")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    check_config(parse, args.config, args.overrides)
    ranks, rows = args.ranks[0], []
    out = Path(args.out)
    seeds = args.seeds or [0]
    for seed in seeds:
        if other_run(out / f"seed{seed}", args.config,
                     run_sets(args.overrides, seed, args.max_timesteps)):
            parse.error(f"{out / f'seed{seed}'} holds a run of another config, budget or "
                        "--set (its config.toml): give another --out, or remove the folder to "
                        "train it again")
    for seed in seeds:
        run_dir = out / f"seed{seed}"
        train(args.config, run_dir, ranks, seed, args.max_timesteps,
              run_sets(args.overrides, seed, args.max_timesteps))
        policies, episodes = study(run_dir, args.episodes, ranks, args.judged)
        rows += [{"seed": seed, **row} for row in policies]
        with (run_dir / "returns.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(episodes[0]))
            writer.writeheader()
            writer.writerows(episodes)
    emit(rows, out, f"Evaluated mean policies over {args.episodes} fresh episodes "
         f"({Path(args.config).name}, {args.max_timesteps:,} steps, mpiexec -n {ranks})")


if __name__ == "__main__":
    run_script(main)
