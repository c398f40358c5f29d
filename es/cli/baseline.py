"""``es-baseline {dqn,pg,ppo,gorila} CONFIG``: the baselines, with es-train's run folder, ``--set``,
``--run-dir`` and ``progress.csv``, so ``es-eval`` and ``es-plot`` work on their runs too."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from es.cli.args import (
    USAGE_ERROR,
    ArgumentParser,
    add_flag,
    config_file,
    survive_closed_stdout,
)
from es.cli.train import (
    LAUNCHED_AT,
    crash,
    fail_on_rank,
    flag_overrides,
    interrupted,
    prepare,
    world_comm,
)
from es.rl.runs import configure_logging, start_run_dir, undo_start_run_dir

if TYPE_CHECKING:
    from es.config import Config

ALGORITHMS = ("dqn", "pg", "ppo", "gorila")


#: What a baseline run that lost a peer can do next: it keeps no checkpoint.
NO_CHECKPOINT = "a baseline keeps no checkpoint: start the run again on the ranks that are left"


class RunFolderError(RuntimeError):
    """The run folder cannot be started (in use by another run, not writable)."""


def parser() -> argparse.ArgumentParser:
    parse = ArgumentParser(
        prog="es-baseline",
        description="Train a reinforcement-learning baseline on the same envs, configs and run "
        "folders as es-train: dqn (one process), pg (REINFORCE) and ppo (under mpiexec the "
        "ranks all-reduce gradients), gorila (under mpiexec -n N: N-1 actor ranks feed 1 "
        "learner).",
        examples=["es-baseline dqn configs/baselines/cartpole_dqn.toml",
                  "mpiexec -n 2 es-baseline pg configs/baselines/cartpole_pg.toml "
                  "--set pg.lr=1e-3",
                  "mpiexec -n 2 es-baseline ppo configs/baselines/pendulum_ppo.toml",
                  "mpiexec -n 3 es-baseline gorila configs/baselines/cartpole_dqn.toml"],
    )
    parse.add_argument("algorithm", choices=ALGORITHMS)
    parse.add_argument("config", type=config_file,
                       help="TOML config, e.g. configs/baselines/cartpole_dqn.toml (from any "
                       "folder: a shipped config's name, as es-train --list-configs prints them)")
    add_flag(parse, "--set", "e.g. --set dqn.lr=1e-3")
    add_flag(parse, "--run-dir", "default: runs/{env}__{name}__{seed}__{time}")
    add_flag(parse, "--force")
    add_flag(parse, "--quiet")
    add_flag(parse, "--tensorboard")
    return parse


#: The ``[run]`` settings of es-train's alone: a baseline keeps no confirmed policy, writes no
#: checkpoints and has no schedule (it read them, silently, as set).
ES_TRAIN_RUN_SETTINGS = ("best_episodes", "best_by", "best_pool", "best_share", "best_from",
                         "target_score", "schedule", "lockstep", "checkpoint_every",
                         "keep_checkpoints", "check_every", "max_failed_fraction")


def section_warnings(args: argparse.Namespace, config: Config) -> list[str]:
    """A config without the algorithm's section (es-train's config, say) trains the baseline
    on its defaults, and another baseline's settings (``--set pg.lr`` on a dqn run) tune
    nothing: legal, but a user who meant to tune it should hear of it."""
    import tomllib

    from es.config import (
        BASELINE_SECTIONS,
        STRATEGY_NAMES,
        STRATEGY_SECTIONS,
        changed_settings,
        unread_for_env_and_policy,
    )

    section = "dqn" if args.algorithm == "gorila" else args.algorithm
    said = [f"{', '.join(keys)}: [{other}] is es-baseline {other}'s; {args.algorithm} ignores "
            "it" for other in BASELINE_SECTIONS
            if other != section and (keys := changed_settings(config, other))]
    said += unread_for_env_and_policy(config)
    if args.algorithm == "ppo":
        if config.policy.obs_norm != config.ppo.normalize_obs:
            said.append(f"policy.obs_norm = {str(config.policy.obs_norm).lower()}: es-baseline "
                        "ppo normalises observations as ppo.normalize_obs = "
                        f"{str(config.ppo.normalize_obs).lower()} says; ignored")
    elif config.policy.obs_norm:  # the default: es-train's configs train PG without it, unsaid
        said.append(f"policy.obs_norm = true: es-baseline {args.algorithm} does not normalise "
                    "observations; ignored")
    train_only = [*changed_settings(config, "run", ES_TRAIN_RUN_SETTINGS),
                  *changed_settings(config, "policy", ("obs_clip", "action_noise", "clip_actions"))]
    with open(args.config, "rb") as handle:
        given = set(tomllib.load(handle))
    given |= {override.split(".", 1)[0] for override in args.overrides}
    if section in given:  # es-train's settings, as --set or in a config of both
        es_keys = [key for name in ("es", *STRATEGY_SECTIONS)
                   for key in changed_settings(config, name)] + train_only
        if es_keys:
            said.append(f"{', '.join(es_keys)}: es-train's; {args.algorithm} ignores them")
        return said
    if train_only:
        said.append(f"{', '.join(train_only)}: es-train's; {args.algorithm} ignores them")
    es_sections = sorted(given & ({"es"} | set(STRATEGY_NAMES)))
    whose = f" (its [{'], ['.join(es_sections)}] are es-train's)" if es_sections else ""
    return [f"{args.config} has no [{section}] section: {args.algorithm} trains with its "
            f"defaults{whose}; e.g. configs/baselines/cartpole_{section}.toml has one", *said]


def kept_at_interrupt(run_dir: Path) -> str:
    """What an interrupted baseline leaves (it has no checkpoint to resume): policy.npz is
    its last evaluation's, or there is none; the line said neither."""
    from es.rl.checkpoint import load_policy

    try:
        generation = load_policy(run_dir / "policy.npz").generation
    except (OSError, KeyError, ValueError):
        return f"no policy.npz in {run_dir}: the run ended before its first evaluation"
    return (f"{run_dir / 'policy.npz'} is round {generation}'s, the last evaluated "
            "(es-eval plays it; a baseline run cannot be resumed)")


def main(argv: list[str] | None = None) -> int:
    survive_closed_stdout()
    args = parser().parse_args(argv)
    args.overrides = flag_overrides(args)
    comm = world_comm("es-baseline")
    if comm is None:
        return USAGE_ERROR
    if args.algorithm == "dqn" and comm.size > 1:
        return fail_on_rank("es-baseline", f"dqn runs in one process, not {comm.size} ranks; "
                            "for distributed DQN use: mpiexec -n 3 es-baseline gorila CONFIG",
                            comm.rank)
    if args.algorithm == "gorila" and comm.size < 2:
        return fail_on_rank("es-baseline", "gorila needs at least 2 ranks (1 learner + "
                            "actors), e.g. mpiexec -n 3 es-baseline gorila CONFIG", comm.rank)
    configure_logging(comm.rank == 0 and not args.quiet, program="es-baseline")
    request = argparse.Namespace(resume=None, resume_or_start=None, config=args.config,
                                 overrides=args.overrides, run_dir=args.run_dir,
                                 force=args.force, sweep_parent=None)
    prepared = prepare(request) if comm.rank == 0 else None
    config, _, run_dir, warnings, error = comm.broadcast(prepared)
    if error:
        return fail_on_rank("es-baseline", error, comm.rank)

    from es.baselines import dqn, gorila, pg, ppo
    from es.config import ConfigError

    def begin() -> None:
        """The folder, once the baseline has checked its config and env (``Begin``): a
        refused config must not have cleared an earlier run out of it first. The warnings
        first, now that the run is sure to train: a refused one says only why."""
        if comm.rank == 0:
            for warning in [*warnings, *section_warnings(args, config)]:
                print(f"es-baseline: warning: {warning}", file=sys.stderr, flush=True)
        error = comm.broadcast(start_run_dir(run_dir, config, f"es-baseline {args.algorithm}")
                               if comm.rank == 0 else None)
        if error:
            raise RunFolderError(error)

    train = {"dqn": dqn.train, "pg": pg.train, "ppo": ppo.train,
             "gorila": gorila.train}[args.algorithm]
    # A rank that stops answering (stopped, hung, cut off) ends the job, as in es-train: the
    # others would wait for it in the next all-reduce, or the learner for its transitions.
    from es.parallel.heartbeat import peer_lost

    ranks = comm.allgather_objects(f"{os.getpid()}@{socket.gethostname()}")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill ends it as Ctrl-C
    try:
        with comm.heartbeat(ranks, config.run.peer_timeout_s,
                            lambda line: peer_lost(line, comm, lambda: NO_CHECKPOINT,
                                                   "es-baseline"), lambda: ""):
            result = train(config, comm, Path(run_dir) if comm.rank == 0 else None,
                           LAUNCHED_AT, begin)
    except RunFolderError as error:
        return fail_on_rank("es-baseline", str(error), comm.rank)
    except ConfigError as error:  # before training: the corrected command may use the folder
        if comm.rank == 0:
            undo_start_run_dir(run_dir)
        return fail_on_rank("es-baseline", str(error), comm.rank)
    except KeyboardInterrupt:
        return interrupted("es-baseline", comm, kept_at_interrupt(Path(run_dir))
                           if comm.rank == 0 else "")
    except Exception as error:  # one rank's failure must not leave the others waiting
        return crash("es-baseline", error, comm)
    if comm.rank == 0:
        final = "n/a" if result.eval_return is None else f"{result.eval_return:.2f}"
        rounds = f"{result.rounds} round{'s' if result.rounds != 1 else ''}"
        print(f"done: {args.algorithm}, {rounds}, {result.timesteps} steps, "
              f"eval return {final}; run folder {run_dir}", flush=True)
    return 0
