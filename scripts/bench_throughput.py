"""Training env-steps/s against bare environment stepping with the same policy.

    python scripts/bench_throughput.py --config configs/halfcheetah.toml --ranks 2
    python scripts/bench_throughput.py --config configs/pong.toml --bare-policy random \
        --generations 6 --budget-s 30
    python scripts/bench_throughput.py --suite configs/suites/mujoco.toml --max-train-s 1800
    python scripts/bench_throughput.py --suite configs/suites/mujoco.toml --interleave \
        --max-train-s 120
    python scripts/bench_throughput.py --config configs/hopper_ars.toml --schedules static,dynamic

With ``--suite``, every config of the suite (or of ``--tasks``/``--strategies``) trains as
the suite runs it (its evaluations and confirmations on), for the task's wall budget capped
at ``--max-train-s``, then replays bare the episodes it played (the generations after five of
its checkpoints, spread over its steps: the same members, reset seeds, action noise and step
caps, with nothing else; ``--budget-s`` split between them) and the generation after its
last checkpoint (its final policy's members): one row per config with the training rate over
the whole run (the confirmations at its stop included), the two bare rates and their ratios,
and where rank 0's wall time went: its own members' episodes (``rollout_s``), waiting in the
exchanges (``wait_s``), updates (``update_s``) and file writes (``io_s``); the rest is
per-generation overhead (asking for members, rebuilding them, the checks); and what evaluations and
confirmations of the kept policy (the stop's included) cost the machine: the ranks' mean
seconds in them (``eval_ranks_s``, ``confirm_ranks_s``), since one rank may play most of
them while the others play more members. With
``--interleave`` each config instead trains generation by generation in the same processes
as its reference, every generation followed by a bare replay of the episodes each rank has
just played: training and reference alternate every few seconds, so the machine's drift
(identical 10-s bare runs differ by up to 19% on the development VM) cannot pass for the
trainer's cost; the row has the ratio, its quartiles over generations, the shares of
training time the ranks spent in evaluation and confirmation episodes (their mean; not the
stop's) and rank 0 spent waiting in the exchanges, and ``ratio_synced``: the ratio against
replays that wait for their slowest rank every generation, as training must (a generation
of one episode per rank waits for the slower episode, whatever the trainer does).

Both are measured in one script run, with the same number of processes and the same
policies (MuJoCo steps faster or slower depending on what the policy does, so a fair bare
run must use the trained policy). First ``mpiexec -n RANKS es-train CONFIG`` runs for
``--generations``; its steps/s over the second half of the run is read from progress.csv
(evaluation, observation statistics, updates and communication included). Then every rank
replays the generation after the run's last checkpoint, round and round: its final
policy's members as the strategy samples them (its own step size, as CMA-ES and PGPE adapt
it), with the action noise, reset seeds and step cap that training gives them, and nothing
else: no training, no communication. With ``--bare-policy random``
the bare run takes uniformly random actions instead (the Atari yardstick: how close training
comes to the preprocessed environment's own rate). With ``--schedules`` each repeat trains
once per schedule, back to back (the parameters, and so the steps and the final policy, are
the same under any schedule), against one bare run: the way to compare them on a machine
whose speed drifts.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from report import (  # noqa: E402
    BIN,
    CONFIGS,
    check_config,
    emit,
    mpiexec,
    python_on_ranks,
    run_or_die,
    run_script,
    script_parser,
)

from es.bench.launch import set_flags  # noqa: E402
from es.bench.suite import column_sum  # noqa: E402
from es.cli.args import add_flag, add_out, add_ranks, parse_seconds  # noqa: E402

#: The schedule column of a row trained with the config's own ``run.schedule``.
AS_CONFIGURED = "as configured"
#: With --suite: how many of a run's policies, spread over its steps, bare stepping plays.
PLAYED_POLICIES = 5
#: ``run.keep_checkpoints`` of a suite run: every one stays, for ``played_checkpoints``.
NO_CHECKPOINT_LIMIT = 1_000_000
#: A suite config chosen by --tasks/--strategies: (suite, its file, task, strategy, entry).
Chosen = tuple[Any, Path, Any, str, Any]


def bare_worker(run_dir: str, seconds: float, random_actions: bool,
                checkpoint: str | None) -> None:
    """Under mpiexec: replay the generation after ``checkpoint`` (``replayed_plays``), this
    rank's members round and round, or step episodes of random actions; no recording,
    serving or exchange; rank 0 prints."""
    from es.config import load_config
    from es.parallel.comm import MPIComm
    from es.rl.checkpoint import read_checkpoint
    from es.rl.envs import env_from_config
    from es.rl.rollout import random_policy, run_episode
    from es.rl.trainer import Trainer

    comm = MPIComm()
    config = load_config(f"{run_dir}/config.toml")
    steps, episode = 0, 0
    if checkpoint:
        with Trainer(config, comm, None) as trainer:
            plays, cap = replayed_plays(trainer, read_checkpoint(Path(checkpoint))[0])
            mine, norm = plays[comm.rank::comm.size], trainer.norm
            comm.barrier()
            started = time.perf_counter()
            while mine and time.perf_counter() - started < seconds:
                params, seed = mine[episode % len(mine)]
                steps += replayed_steps(trainer, params, norm, seed, cap)
                episode += 1
            rate = steps / (time.perf_counter() - started)
    else:
        env = env_from_config(config)
        comm.barrier()
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            steps += run_episode(env, random_policy(env, episode), seed=episode).length
            episode += 1
        rate = steps / (time.perf_counter() - started)
    rates = comm.allgather_rows(np.array([[rate, steps, 0.0]]))
    if comm.rank == 0:
        print(f"BARE {rates[:, 0].sum():.1f} {int(rates[:, 1].sum())}", flush=True)


def interleaved_worker(config_path: str, overrides: list[str], seconds: float) -> None:
    """Under mpiexec: train generation by generation (``Trainer._generation``: members,
    evaluations and confirmations beside them, exchanges, update) and after each, every rank
    replays bare the member episodes it has just played; until ``seconds`` of training or
    the config's step or generation budget. The two alternate every few seconds, so the
    machine's drift (10-s bare runs back to back differ by up to 19% on the development VM)
    falls on both alike. ``run.max_seconds`` is switched off: the trainer's clock runs on
    through the replays, and a spent time budget evaluates every generation (es-train's
    stop), which made Swimmer's 60-s configs look half as fast. Not timed: the stop's
    confirmations, checkpoints and progress rows (es-train's; under 0.1% of a run). Rank 0
    prints one line per generation: its training steps and seconds, the replay's steps/s
    summed over the ranks, rank 0's seconds in evaluation and confirmation episodes and
    waiting in the exchanges, and the slowest rank's replay seconds."""
    from threadpoolctl import threadpool_limits

    from es.config import load_config
    from es.parallel.comm import MPIComm
    from es.rl.trainer import Trainer

    comm = MPIComm()
    config = load_config(config_path, [*overrides, "run.max_seconds=0"])
    played: list[tuple[np.ndarray, int, Any, int | None]] = []
    with threadpool_limits(limits=1), Trainer(config, comm, None) as trainer:
        original = trainer._one_episode

        def recorded(generation: Any, member: int, seeds: Any, norm: Any, record: bool,
                     cap: int | None) -> Any:
            played.append((generation.params(member), int(seeds[generation.key_of(member)]),
                           norm, cap))
            return original(generation, member, seeds, norm, record, cap)

        trainer._one_episode = recorded
        trained_s, done = 0.0, False
        while not done:
            played.clear()
            steps_before = trainer.timesteps
            comm.barrier()
            started = time.perf_counter()
            row = trainer._generation()
            train_s = time.perf_counter() - started
            trained_steps = trainer.timesteps - steps_before
            replayed_at = time.perf_counter()
            steps = sum(replayed_steps(trainer, params, norm, seed, cap)
                        for params, seed, norm, cap in played)
            mine = np.array([[steps, time.perf_counter() - replayed_at]])
            ranks = comm.allgather_rows(mine, counts=[1] * comm.size)
            trained_s += train_s
            done = bool(comm.broadcast(
                trained_s >= seconds or trainer._spent_budget() is not None
                if comm.rank == 0 else None))
            if ranks[:, 0].sum() != trained_steps:
                raise RuntimeError(f"the replay stepped {int(ranks[:, 0].sum())} times, "
                                   f"training {trained_steps}: not the same episodes")
            if comm.rank == 0:
                bare = sum(steps / seconds for steps, seconds in ranks if seconds > 0)
                print(f"GENERATION {trained_steps} {train_s:.6f} {bare:.1f} "
                      f"{trainer.side_ranks_s[0]:.6f} {trainer.side_ranks_s[1]:.6f} "
                      f"{row['wait_s']:.6f} "
                      f"{ranks[:, 1].max():.6f}", flush=True)


def replayed_steps(trainer: Any, params: np.ndarray, norm: Any, seed: int,
                   cap: int | None) -> int:
    """One member's episode played bare as training played it (``Trainer.member_act``: its
    policy and action noise; the same reset seed and step cap): its length."""
    from es.rl.rollout import run_episode

    return run_episode(trainer.env, trainer.member_act(params, norm, seed), seed,
                       max_steps=cap).length


def replayed_plays(trainer: Any, state: Any) -> tuple[list[tuple[np.ndarray, int]], int | None]:
    """The episodes of the generation after checkpoint ``state`` exactly as the run played
    them: each member's parameters and reset seed, in member order, and the step cap (the
    strategy's own sampling: CMA-ES's and PGPE's adapted step sizes, which a sigma from the
    config would miss). With ``trainer.member_act`` and the restored normalisation, each
    replays its member's episode step for step."""
    from es.core.seeding import TAG_ENV, episode_seeds

    trainer.restore(state)
    generation = trainer.strategy.ask()
    seeds = episode_seeds(trainer.config.run.seed, generation.index, generation.keys, TAG_ENV)
    plays = [(generation.params(member), int(seeds[generation.key_of(member)]))
             for member in range(generation.population)]
    return plays, trainer.episode_cap()


def training_rate(config: str, ranks: int, generations: int, run_dir: str,
                  overrides: list[str]) -> tuple[float, int, float]:
    """Training steps/s over the run's second half, its steps, and the share of that time
    rank 0 spent waiting in the exchanges."""
    command = mpiexec(ranks, str(BIN / "es-train"), config, "--run-dir", run_dir, "--quiet",
                      *set_flags([f"run.generations={generations}", *overrides]))
    run_or_die(__file__, f"es-train {' '.join([config, *overrides])}", command)
    with open(f"{run_dir}/progress.csv") as handle:
        rows = list(csv.DictReader(handle))
    first, last = rows[len(rows) // 2], rows[-1]
    steps = int(last["timesteps"]) - int(first["timesteps"])
    wall = float(last["time_s"]) - float(first["time_s"])
    return steps / wall, steps, column_sum(rows[len(rows) // 2 + 1:], "wait_s") / wall


def bare_rate(run_dir: str, ranks: int, budget_s: float, policy: str,
              checkpoint: Path | None = None) -> tuple[float, int]:
    """Every rank replaying the generation after ``checkpoint`` (by default the run's last:
    its final policy's members as the strategy samples them, with the action noise and step
    cap training gave them), or stepping random actions."""
    if policy == "trained" and checkpoint is None:
        checkpoint = played_checkpoints(Path(run_dir), 1, last=True)[0]
    chosen = ["--bare-checkpoint", str(checkpoint)] if policy == "trained" else []
    stdout = run_or_die(__file__, "the bare stepping run", python_on_ranks(
        ranks, __file__, "--bare-worker", run_dir, "--budget-s", str(budget_s),
        "--bare-policy", policy, *chosen))
    line = next(line for line in stdout.splitlines() if line.startswith("BARE"))
    return float(line.split()[1]), int(line.split()[2])


def played_checkpoints(run_dir: Path, count: int, last: bool = False) -> list[Path]:
    """The checkpoints nearest the middles of ``count`` equal step segments of the run: the
    generations it played, early ones included (with repeats where it wrote fewer); with
    ``last``, the newest."""
    found = [(json.loads(meta.read_text())["timesteps"], meta)
             for meta in sorted((run_dir / "checkpoints").glob("ckpt-*.json"))]
    total = max(steps for steps, _ in found)
    if last:
        return [max(found, key=lambda item: item[0])[1]]
    return [min(found, key=lambda item: abs(item[0] - (k + 0.5) / count * total))[1]
            for k in range(count)]


def played_bare_rate(run_dir: Path, ranks: int, budget_s: float) -> float:
    """Bare steps/s of the episodes a run played: the generation after each of
    ``PLAYED_POLICIES`` checkpoints is replayed for an equal share of ``budget_s`` and stands
    for an equal share of the run's steps, so the run's bare time is the sum of its segments'
    steps over their rates (the harmonic mean of the rates). MuJoCo's step cost depends on
    the gait: a run's final policy may step a third faster than its early ones."""
    rates = [bare_rate(str(run_dir), ranks, budget_s / PLAYED_POLICIES, "trained", checkpoint)[0]
             for checkpoint in played_checkpoints(run_dir, PLAYED_POLICIES)]
    return len(rates) / sum(1 / rate for rate in rates)


def chosen_configs(args: argparse.Namespace) -> list[Chosen]:
    """Every suite config that ``--tasks`` and ``--strategies`` choose, checked as es-bench
    suite checks them (a ``ValueError`` naming the bad value)."""
    from es.bench.suite import load_suite, select

    suite_file = Path(args.suite)
    suite = load_suite(suite_file)
    return [(suite, suite_file, task, strategy, entry)
            for task in select(suite, args.tasks, args.strategies)
            for strategy, entry in task.configs.items()]


def print_row(row: dict) -> None:
    print("  ".join(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}"
                    for key, value in row.items()), flush=True)


def suite_rows(chosen: list[Chosen], args: argparse.Namespace,
               ranks: int) -> list[dict]:
    """One row per suite config: trained as ``es-bench suite`` trains it, for its task's
    budget (at most ``--max-train-s``), then stepped bare: a replay of the generations it
    played (``played_bare_rate``) and its final policy."""
    from es.bench.suite import (
        Run,
        cost_columns,
        read_progress,
        stops_confirm_s,
        train_command,
    )

    rows = []
    for suite, suite_file, task, strategy, entry in chosen:
        budget_s = min(task.budget_s or math.inf, args.max_train_s)
        run = Run(dataclasses.replace(task, budget_s=budget_s), strategy, args.seed)
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp) / "run"
            command = [*train_command(run, suite, suite_file, run_dir, ranks,
                                      mpiexec(ranks)[:-2]),
                       "--set", f"run.keep_checkpoints={NO_CHECKPOINT_LIMIT}"]
            run_or_die(__file__, f"{run.name}: es-train", command)
            progress = read_progress(run_dir)
            stop_s = stops_confirm_s(run_dir)
            wall = float(progress[-1]["time_s"]) + stop_s
            costs = cost_columns(progress, stop_s)
            steps = int(progress[-1]["timesteps"])
            final_bare, bare_steps = bare_rate(str(run_dir), ranks, args.budget_s,
                                               args.bare_policy)
            played_bare = played_bare_rate(run_dir, ranks, args.budget_s)
        rows.append({
            "task": task.name, "config": entry.config.rsplit("/", 1)[-1],
            "seed": args.seed, "ranks": ranks, "train_s": round(wall, 1),
            "train_steps": steps, "train_steps_per_s": steps / wall,
            "bare_steps_per_s": played_bare, "ratio": steps / wall / played_bare,
            "bare_final_steps_per_s": final_bare, "bare_final_steps": bare_steps,
            "ratio_final": steps / wall / final_bare,
            "rollout_share": column_sum(progress, "rollout_s") / wall,
            **costs,
            "update_share": column_sum(progress, "update_s") / wall,
            "io_share": column_sum(progress, "io_s") / wall,
        })
        print_row(rows[-1])
    return rows


def interleaved_rows(chosen: list[Chosen], args: argparse.Namespace,
                     ranks: int) -> list[dict]:
    """One row per suite config: ``interleaved_worker`` for its task's budget (at most
    ``--max-train-s``) of training, with the suite's overrides (seed, evaluation episodes)."""
    from es.bench.suite import run_config

    rows = []
    for suite, suite_file, task, strategy, entry in chosen:
        config, overrides = run_config(suite, suite_file, entry, args.seed)
        seconds = min(task.budget_s or math.inf, args.max_train_s)
        stdout = run_or_die(__file__, f"{task.name}-{strategy}: interleaved", python_on_ranks(
            ranks, __file__, "--interleaved-worker", str(config),
            "--budget-s", str(seconds), *set_flags(overrides)))
        generations = [tuple(map(float, line.split()[1:])) for line in stdout.splitlines()
                       if line.startswith("GENERATION ")]
        steps = sum(g[0] for g in generations)
        train_s = sum(g[1] for g in generations)
        bare_s = sum(g[0] / g[2] for g in generations)
        ratios = np.array([g[0] / g[2] / g[1] for g in generations])
        rows.append({
            "task": task.name, "config": entry.config.rsplit("/", 1)[-1],
            "seed": args.seed, "ranks": ranks, "generations": len(generations),
            "train_s": round(train_s, 1), "train_steps": int(steps),
            "train_steps_per_s": steps / train_s, "bare_steps_per_s": steps / bare_s,
            "ratio": bare_s / train_s,
            "ratio_q1": float(np.quantile(ratios, 0.25)),
            "ratio_median": float(np.median(ratios)),
            "ratio_q3": float(np.quantile(ratios, 0.75)),
            "eval_share": sum(g[3] for g in generations) / train_s,
            "confirm_share": sum(g[4] for g in generations) / train_s,
            "wait_share": sum(g[5] for g in generations) / train_s,
            "ratio_synced": sum(g[6] for g in generations) / train_s,
        })
        print_row(rows[-1])
    return rows


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/bench_throughput.py --config configs/halfcheetah.toml --ranks 2",
        "python scripts/bench_throughput.py --config configs/pong.toml --bare-policy random "
        "--generations 6 --budget-s 30"])
    add_flag(parse, "--config", "the training run's",
             default=str(CONFIGS / "halfcheetah.toml"))
    add_ranks(parse, "2", several=False, detail="for training and bare stepping alike")
    add_flag(parse, "--generations", "of the training run", default=80)
    add_flag(parse, "--budget-s", "of the bare stepping run", default=20.0)
    add_flag(parse, "--repeats", "training then bare stepping, each time", default=3)
    parse.add_argument("--bare-policy", choices=("trained", "random"), default="trained",
                       help="what bare stepping plays: the members of the generation after "
                       "the run's last checkpoint, or random actions (for pixels, where the "
                       "policy's forward pass would dominate; default: trained)")
    add_flag(parse, "--set", "for the training run")
    parse.add_argument("--schedules", metavar="LIST", help="comma-separated run.schedule "
                       "values (static, dynamic) to train with back to back in each repeat "
                       "(default: the config's own)")
    parse.add_argument("--suite", metavar="FILE", help="every config of this suite file "
                       "(e.g. configs/suites/mujoco.toml), as the suite runs it; --config, "
                       "--generations, --repeats and --set are then not used")
    # As es-bench suite defines them.
    parse.add_argument("--tasks", help="comma-separated task names (default: all)")
    parse.add_argument("--strategies", help="comma-separated strategies (default: all)")
    parse.add_argument("--max-train-s", type=parse_seconds, default=1800.0, metavar="S",
                       help="with --suite: the most wall seconds a config trains, else its "
                       "task's budget (default: 1800)")
    add_flag(parse, "--seed", "with --suite: run.seed", default=0)
    parse.add_argument("--interleave", action="store_true",
                       help="with --suite: alternate each training generation with a bare "
                       "replay of its episodes in the same processes (drift-free ratio; of "
                       "the shares, only evaluation, confirmation (not the stop's) and "
                       "waiting are measured)")
    add_out(parse, "bench_throughput")
    parse.add_argument("--bare-worker", metavar="RUN_DIR", help=argparse.SUPPRESS)
    parse.add_argument("--bare-checkpoint", metavar="FILE", help=argparse.SUPPRESS)
    parse.add_argument("--interleaved-worker", metavar="CONFIG", help=argparse.SUPPRESS)
    return parse


def main() -> None:
    parse = parser()
    args = parse.parse_args()
    ranks = args.ranks[0]
    if args.bare_worker:
        bare_worker(args.bare_worker, args.budget_s, args.bare_policy == "random",
                    args.bare_checkpoint)
        return
    if args.interleaved_worker:
        interleaved_worker(args.interleaved_worker, args.overrides, args.budget_s)
        return
    if not args.suite:
        given = [flag for flag, value, default in (
            ("--interleave", args.interleave, False), ("--tasks", args.tasks, None),
            ("--strategies", args.strategies, None), ("--max-train-s", args.max_train_s, 1800.0),
            ("--seed", args.seed, 0)) if value != default]
        if given:
            parse.error(f"{', '.join(given)}: with --suite FILE only (without it, --config "
                        "trains for --generations)")
        if args.generations < 3:
            parse.error(f"--generations {args.generations}: at least 3 (the rate is taken "
                        "over the run's second half, from its middle row to its last)")
    if args.suite:
        try:
            chosen = chosen_configs(args)
        except ValueError as error:  # es.config.ConfigError included
            parse.error(str(error))
        rows = (interleaved_rows(chosen, args, ranks) if args.interleave
                else suite_rows(chosen, args, ranks))
        emit(rows, args.out, f"Training throughput of {args.suite} (seed {args.seed}, at most "
             f"{args.max_train_s:g} s each) vs a bare replay of the episodes it played, same "
             f"ranks{', generation by generation' if args.interleave else ''}")
        return
    check_config(parse, args.config, args.overrides)
    schedules = args.schedules.split(",") if args.schedules is not None else [None]
    if args.schedules is not None and (len(set(schedules)) < len(schedules)
                                       or not set(schedules) <= {"static", "dynamic"}):
        parse.error(f"--schedules {args.schedules!r}: allowed: static, dynamic, each at most "
                    "once, comma-separated")
    rows = []
    for repeat in range(1, args.repeats + 1):
        with tempfile.TemporaryDirectory() as tmp:
            trained = {}
            for index, schedule in enumerate(schedules):
                chosen = [f"run.schedule={schedule}"] if schedule else []
                trained[schedule or AS_CONFIGURED] = training_rate(
                    args.config, ranks, args.generations, f"{tmp}/{index}",
                    [*args.overrides, *chosen])
            bare, bare_steps = bare_rate(f"{tmp}/0", ranks, args.budget_s, args.bare_policy)
        for schedule, (train_rate, train_steps, wait_share) in trained.items():
            rows.append({"config": " ".join([args.config, *args.overrides]), "ranks": ranks,
                         "schedule": schedule, "repeat": repeat,
                         "bare_policy": args.bare_policy,
                         "bare_steps_per_s": bare, "bare_steps": bare_steps,
                         "train_steps_per_s": train_rate, "train_steps": train_steps,
                         "ratio": train_rate / bare, "wait_share": wait_share})
    emit(rows, args.out, "Training throughput vs bare environment stepping, same policy and ranks")
    for schedule in dict.fromkeys(row["schedule"] for row in rows):
        ratios = [r["ratio"] for r in rows if r["schedule"] == schedule]
        print(f"{schedule}: median ratio {np.median(ratios):.3f} over {len(ratios)} repeats")


if __name__ == "__main__":
    run_script(main)
