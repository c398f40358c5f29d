"""Which policy a kept-policy rule keeps, replayed exactly on finished runs.

    python scripts/kept_replay.py bench-results/bench_kept/seed0 bench-results/bench_kept/seed1 \
        --eval-every 10,20 --eval-episode-counts 5,2 --best-episode-counts 20,60

While confirmations wait for the stop (``run.best_share = 0``), training does not depend on
the kept-policy rule, so one run answers for every rule: a run trained by
``scripts/bench_kept.py`` holds every evaluated mean policy in its final checkpoint's pool.
For each rule the pool is rebuilt as that run would have held it: the evaluations the rule
makes (every ``--eval-every`` generations, a multiple of the run's ``run.eval_every``, and the
stop's), each scored (``run.best_by``) on the first ``--eval-episode-counts`` of its evaluation's
episodes, replayed on their own reset seeds; the best ``--pool`` of them race at the stop in
the trainer's own ``confirm_at_stop`` with ``run.best_episodes`` = each ``--best-episode-counts``;
``--best-from`` nominates only the evaluations from a later generation on (``run.best_from``).
A row per run and rule: the kept generation and its confirmed score, the race's episodes and
env steps, the evaluations' env steps, their share with the race's of all the run's steps,
and the kept policy's mean and worst over the suite's ``--judged`` episodes (es-eval's seeds
from 12345), the figures ``es-bench suite`` prints for it. ``scripts/kept_tradeoff.py`` gives
a race's odds over many orders of fresh episodes; this gives the one race each run plays.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
from pathlib import Path

import numpy as np
from bench_kept import play_episodes, play_study
from kept_tradeoff import number_list, whole_numbers
from report import emit, run_script, script_parser

from es.bench.suite import FINAL_SEED
from es.cli.args import add_flag, add_out, positive_int
from es.config import Config, ConfigError, load_config
from es.parallel.comm import LocalComm
from es.rl.checkpoint import CheckpointError, load_latest_checkpoint
from es.rl.kept import Nomination, policy_score
from es.rl.policies import ObsNorm
from es.rl.rollout import Episode
from es.rl.trainer import Trainer


class CountingTrainer(Trainer):
    """The trainer, counting the env steps of the noise-free episodes it plays (after a
    restore, only the stop's race plays any). A policy's confirmation seeds are the same
    under every rule, so each episode is played once per run (``raced``) and reused."""

    race_steps = 0
    raced: dict[tuple[bytes, int], Episode]

    def _noise_free_episode(self, params: np.ndarray, norm: ObsNorm, seed: int,
                            label: str) -> Episode:
        key = (params.tobytes(), seed)
        if key not in self.raced:
            self.raced[key] = super()._noise_free_episode(params, norm, seed, label)
        self.race_steps += self.raced[key].length
        return self.raced[key]


@dataclasses.dataclass
class Run:
    """A finished run with every evaluation nominated: its folder and config, every
    evaluation's nomination with its replayed episodes, its last generation and env steps."""

    folder: Path
    config: Config
    nominations: list[Nomination]
    episodes: dict[int, list[Episode]]
    last: int
    steps: int
    raced: dict[tuple[bytes, int], Episode] = dataclasses.field(default_factory=dict)


def load_run(folder: Path) -> Run:
    """The run in ``folder``. Raises ValueError naming what makes it unfit for a replay."""
    if not (folder / "config.toml").is_file():
        raise ValueError(f"{folder}: no config.toml; allowed: a run folder")
    config = load_config(folder / "config.toml")
    run_cfg = config.run
    if run_cfg.best_share:
        raise ValueError(f"{folder}: run.best_share = {run_cfg.best_share:g} confirmed "
                         "nominations while it trained; allowed: runs with run.best_share = 0")
    state = load_latest_checkpoint(folder / "checkpoints")[0]
    made = sum(1 for g in range(max(1, run_cfg.best_from), state.generation + 1)
               if evaluates(g, run_cfg.eval_every, state.generation))
    if run_cfg.best_pool < made:
        raise ValueError(f"{folder}: its pool (run.best_pool = {run_cfg.best_pool}) cannot hold "
                         f"its {made} evaluations; allowed: a run trained by "
                         "scripts/bench_kept.py, which holds them all")
    with Trainer(config, LocalComm(), None) as trainer:
        trainer.restore(state)
        trainer.evaluate_held()
        nominations = list(trainer.nominations.waiting)
        seeds = {n.generation: trainer.evaluation_seeds(n.generation) for n in nominations}
    episodes = {}
    for nomination in nominations:
        played = play_episodes(str(folder), [(nomination.params, nomination.norm)],
                               seeds[nomination.generation])[0]
        if policy_score(returns(played), run_cfg.best_by) != nomination.score:
            raise ValueError(f"{folder}: generation {nomination.generation}'s evaluation "
                             "replays to another score than the run recorded")
        episodes[nomination.generation] = played
    return Run(folder, config, nominations, episodes, state.generation, state.timesteps)


def evaluates(generation: int, every: int, last: int) -> bool:
    """Whether a run evaluated every ``every`` generations that stopped at ``last``
    evaluates ``generation`` (the stop evaluates its last generation too)."""
    return generation % every == 0 or generation == last


def returns(episodes: list[Episode]) -> np.ndarray:
    return np.array([episode.total_return for episode in episodes])


def replay(run: Run, every: int, eval_episodes: int, best_episodes: int, pool_size: int,
           best_from: int) -> tuple[float | None, int | None, int, int, int]:
    """The stop's race under one rule: the kept score and generation (None: none held), the
    race's episodes and env steps, and the rule's evaluations' env steps (a generation
    before ``best_from`` is evaluated, but not nominated)."""
    made = [n for n in run.nominations if evaluates(n.generation, every, run.last)]
    pool = sorted((dataclasses.replace(n, returns=[], score=policy_score(
        returns(run.episodes[n.generation][:eval_episodes]), run.config.run.best_by))
        for n in made if n.generation >= best_from), key=lambda n: (-n.score, -n.generation))
    rule = load_config(run.folder / "config.toml", [f"run.best_episodes={best_episodes}",
                                                    f"run.best_pool={pool_size}"])
    with CountingTrainer(rule, LocalComm(), None) as trainer:
        trainer.raced = run.raced
        trainer.restore(load_latest_checkpoint(run.folder / "checkpoints")[0])
        trainer.nominations.waiting = [n for n in pool if np.isfinite(n.score)][:pool_size]
        score, generation = trainer.confirm_at_stop()
    eval_steps = sum(e.length for n in made for e in run.episodes[n.generation][:eval_episodes])
    return score, generation, trainer.stop_confirm_episodes, trainer.race_steps, eval_steps


def replay_rows(run: Run, args: argparse.Namespace) -> list[dict]:
    """A row per rule of ``args`` for one run; each kept policy judged once."""
    judged: dict[int, np.ndarray] = {}
    rows = []
    for every, eval_episodes, best_episodes, best_from in itertools.product(
            args.eval_every, args.eval_episode_counts or [run.config.run.eval_episodes],
            args.best_episode_counts, args.best_from or [run.config.run.best_from]):
        score, generation, race_episodes, race_steps, eval_steps = replay(
            run, every, eval_episodes, best_episodes, args.pool, best_from)
        if args.judged and generation is not None and generation not in judged:
            kept = next(n for n in run.nominations if n.generation == generation)
            judged[generation] = play_study(run.folder, [(kept.params, kept.norm)],
                                            args.judged, args.workers, FINAL_SEED)[1][0]
        scored = judged.get(generation, np.array([np.nan]))
        spent = eval_steps + race_steps
        rows.append({
            "seed": run.config.run.seed, "every": every, "eval_episodes": eval_episodes,
            "best_episodes": best_episodes, "pool": args.pool, "best_from": best_from,
            "kept_generation": generation,
            "confirmed": score, "race_episodes": race_episodes, "race_steps": race_steps,
            "eval_steps": eval_steps, "train_steps": run.steps,
            "cost_share": spent / (run.steps + spent),
            "judged_mean": float(scored.mean()), "judged_worst": float(scored.min()),
        })
    return rows


def check_rules(run: Run, args: argparse.Namespace) -> None:
    """Raise ValueError for a rule the run cannot answer for."""
    run_cfg = run.config.run
    for every in args.eval_every:
        if every % run_cfg.eval_every:
            raise ValueError(f"--eval-every {every}: {run.folder} evaluated every "
                             f"{run_cfg.eval_every} generations; allowed: multiples of that")
    counts = args.eval_episode_counts
    if counts and max(counts) > run_cfg.eval_episodes:
        raise ValueError(f"--eval-episode-counts {max(counts)}: {run.folder} evaluated "
                         f"on {run_cfg.eval_episodes} episodes; allowed: at most that")
    if args.best_from and min(args.best_from) < run_cfg.best_from:
        raise ValueError(f"--best-from {min(args.best_from)}: {run.folder} nominated from "
                         f"generation {run_cfg.best_from}; allowed: that or later")


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/kept_replay.py bench-results/bench_kept/seed0 --eval-every 10,20 "
        "--best-episode-counts 20,60"])
    parse.add_argument("runs", nargs="+", metavar="RUN_DIR",
                       help="run folders trained by scripts/bench_kept.py (its --out/seedN)")
    parse.add_argument("--eval-every", type=number_list, required=True, metavar="LIST",
                       help="run.eval_every values (multiples of the runs')")
    parse.add_argument("--eval-episode-counts", type=number_list, default=None,
                       metavar="LIST", help="run.eval_episodes values (at most the runs'; "
                       "default: the runs')")
    parse.add_argument("--best-episode-counts", type=number_list, required=True,
                       metavar="LIST", help="run.best_episodes values")
    parse.add_argument("--best-from", type=whole_numbers(0), default=None, metavar="LIST",
                       help="run.best_from values (at least the runs'; default: the runs')")
    parse.add_argument("--pool", type=positive_int, default=16, metavar="N",
                       help="run.best_pool (default: 16)")
    add_flag(parse, "--judged", "the kept policy plays them", default=20)
    add_flag(parse, "--workers")
    add_out(parse, "kept_replay")
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    runs = []
    for folder in args.runs:  # every run checked before the first replay
        try:
            runs.append(load_run(Path(folder)))
            check_rules(runs[-1], args)
        except (ValueError, ConfigError, CheckpointError) as error:
            parse.error(str(error))
    emit([row for run in runs for row in replay_rows(run, args)], args.out,
         f"The stop's race replayed on {len(runs)} run(s)")


if __name__ == "__main__":
    run_script(main)
