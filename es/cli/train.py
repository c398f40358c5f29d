"""``es-train``: one run or a sweep, under ``mpiexec``/``srun`` or in one process.

Its preparation (config, resume, run folder; rank 0 decides for all) and its failure handling
are ``es-baseline``'s too.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import re
import shlex
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import es.cli.threads  # noqa: F401  (one BLAS thread per process, before NumPy loads)
from es.cli.args import (
    USAGE_ERROR,
    ArgumentParser,
    add_flag,
    config_file,
    fail,
    folder_path,
    nonnegative_int,
    positive_int,
    say_line,
    survive_closed_stdout,
)
from es.core.exit_codes import CHECKPOINTED
from es.launch.elastic import tool_failure
from es.rl.runs import (
    check_run_dir,
    configure_logging,
    default_run_dir,
    first_few,
    run_folders_in,
    start_run_dir,
)

if TYPE_CHECKING:
    from es.config import Config, ESConfig
    from es.parallel.comm import MPIComm

LAUNCHED_AT = time.time()
#: ``--elastic``'s defaults: launch on any one node, relaunch at most this often.
MIN_NODES, MAX_RESTARTS = 1, 10


def fail_on_rank(program: str, message: str, rank: int = 0) -> int:
    """``fail`` printed by rank 0 alone: every rank of the job exits with code 2."""
    return fail(program, message) if rank == 0 else USAGE_ERROR


def world_comm(program: str):
    """The job's communicator, or None after a one-line error when a launcher started
    separate copies (printed once, by the launcher's process 0)."""
    from es.parallel.comm import LaunchError, make_comm, stop_signals_end_mpi_init
    from es.parallel.launcher import launcher_rank

    try:
        with stop_signals_end_mpi_init() as starting_mpi:
            if starting_mpi and EARLY_SIGNALS:  # held before MPI_Init: nothing ran yet
                raise KeyboardInterrupt  # rather than wait there for ranks it ended
            return make_comm()
    except LaunchError as error:
        if launcher_rank() == 0:
            fail(program, str(error))
        return None


def crash(program: str, error: Exception, comm, then: str = "") -> int:
    """An unexpected failure on one rank: name the rank (and ``then``, what the user can do
    next), and abort the job so that the other ranks do not wait for it forever. Exit
    code 1."""
    say_line(f"{program}: error on rank {comm.rank}: {type(error).__name__}: {error}"
             + (f"; {then}" if then else ""))
    if comm.size > 1:
        comm.abort(1)
    return 1


def memory_hint(error: Exception, config: Config) -> str:
    """What a run sizes by its config, after a MemoryError (NumPy's words name an array's
    bytes, not the setting: es.population = 10**12 read as 3.64 TiB of int64)."""
    if not isinstance(error, MemoryError):
        return ""
    es = config.es
    size = es.noise_table_size * 4
    size_text = f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.0f} MiB"
    table = (f" and es.noise_table_size = {es.noise_table_size} ({size_text} a node)"
             if es.uses_noise_table else "")
    return (f"the config sizes es.population = {es.population} (arrays of a generation's "
            f"members){table}: lower what is too large for this machine")


def interrupted(program: str, comm, then: str = "") -> int:
    """A second signal on one rank (stop at once, not at the generation's end): say so (and
    ``then``), and abort the job, since ranks the signal missed would wait for this one
    until their heartbeat's deadline (exit 76, blaming it). Exit code 130."""
    say_line(f"{program}: interrupted on rank {comm.rank}" + (f"; {then}" if then else ""))
    if comm.size > 1:
        comm.abort(130)
    return 130


def train_parser() -> argparse.ArgumentParser:
    from es.rl.resume import RESUME_OVERRIDES

    parser = ArgumentParser(
        prog="es-train",
        description="Train a policy with evolution strategies (es.strategy: OpenAI-ES, "
        "SNES, ARS, PGPE, sep-CMA-ES, CMA-ES). Run plainly for one process, or under "
        "mpiexec/srun for many ranks: the result is bit-identical either way.",
        examples=["es-train configs/cartpole.toml --set es.sigma=0.05",
                  "mpiexec -n 4 es-train configs/halfcheetah.toml --seeds 0-3 --run-dir runs/hc",
                  "es-train --resume runs/CartPole-v1__cartpole__0__20250101-120000"],
    )
    parser.add_argument("configs", nargs="*", metavar="config", type=config_file,
                        help="TOML config file, e.g. configs/cartpole.toml (from any folder: "
                        "a shipped config's name, as --list-configs prints them); several make "
                        "a sweep")
    parser.add_argument("--list-configs", action="store_true",
                        help="print the configs that come with es, and where they are, and exit")
    add_flag(parser, "--seeds", "a sweep over run.seed: one run folder per (config, seed); "
             "under mpiexec the ranks split into groups that train the runs side by side")
    add_flag(parser, "--set", "e.g. --set es.sigma=0.05")
    add_flag(parser, "--run-dir", "default: runs/{env}__{name}__{seed}__{time}; with --seeds "
             "or several configs, the folder that holds the runs")
    add_flag(parser, "--force")
    parser.add_argument(
        "--resume", type=folder_path, metavar="RUN_DIR",
        help="continue a run from its newest intact checkpoint (any rank count), or start it "
        "over from its config.toml if it was stopped before its first checkpoint; only "
        f"{', '.join(RESUME_OVERRIDES)} may be changed with --set",
    )
    parser.add_argument(
        "--resume-or-start", type=folder_path, metavar="RUN_DIR",
        help="with a config file: start the run in RUN_DIR when it holds none, resume it "
        "exactly when it holds one of the same config (refused if the config differs); the "
        "same command line on every start of a batch job. With --seeds or several config "
        "files, RUN_DIR holds the sweep's run folders, each started or resumed so")
    parser.add_argument(
        "--requeue-on-signal", action="store_true",
        help="under Slurm: after a SIGTERM, SIGUSR1 or SIGUSR2 has stopped the run and its "
        "checkpoint is written, requeue the job (scontrol requeue $SLURM_JOB_ID)")
    add_flag(parser, "--quiet")
    add_flag(parser, "--tensorboard")
    elastic = parser.add_argument_group(
        "elastic runs", "a run that survives a lost or hung node: es-train launches the ranks "
        "itself (do not start it under mpiexec or srun) and, when a node is lost, launches them "
        "again on the nodes still usable, from the newest checkpoint (docs/cluster.md)")
    elastic.add_argument(
        "--elastic", action="store_true",
        help="supervise the run: with --hostfile, Hydra's mpiexec over its hosts; inside a "
        "Slurm allocation (sbatch --no-kill), srun on the job's nodes. Needs --resume-or-start")
    elastic.add_argument("--hostfile", metavar="FILE",
                         help="hosts to launch on (host:slots lines, as mpiexec -f reads)")
    elastic.add_argument("--min-nodes", type=positive_int, metavar="N",
                         help="stop, checkpoint intact (exit code 75), when fewer nodes are "
                         f"usable (default {MIN_NODES})")
    elastic.add_argument("--max-restarts", type=nonnegative_int, metavar="N",
                         help=f"relaunches at most (default {MAX_RESTARTS})")
    return parser


def shipped_configs_table() -> str:
    """One line per shipped config: its name (what es-train and the other programs take from
    any folder), and the opening sentence of its leading comment; then where they are, for a
    copy to edit."""
    from es.config import SHIPPED_CONFIGS, shipped_configs

    lines = []
    names = shipped_configs()
    width = max(map(len, names))
    for name in names:
        comment = []
        for line in (SHIPPED_CONFIGS / f"{name}.toml").read_text().splitlines():
            if not line.startswith("#"):
                break
            comment.append(line.lstrip("# ").strip())
        # The first sentence ("et al. 2017" is not an end), or two where it is a bare name.
        sentences = re.split(r"\.\s+(?=[A-Z])", " ".join(comment))
        sentence = ". ".join(sentences[:2 if len(sentences[0]) < 20 else 1]).rstrip(".:")
        lines.append(f"{name:<{width}}  {sentence[:100] + ('...' if len(sentence) > 100 else '')}")
    lines.append(f"in {SHIPPED_CONFIGS.resolve()}: copy one to change it, or --set a key")
    return "\n".join(lines)


def flag_overrides(args: argparse.Namespace) -> list[str]:
    """``--set`` overrides with the ones that flags stand for appended."""
    return [*args.overrides, *(["run.tensorboard=true"] if args.tensorboard else [])]


def _load_resume(run_dir: str, overrides: list[str], flag: str = "--resume"):
    """``load_resume`` with the command line's ``--set`` texts, each named as given when it
    would change more than a budget; its errors name ``flag``, as the user typed it. Rank 0
    only; raises ConfigError."""
    from es.config import ConfigError, parse_override
    from es.rl.resume import RESUME_OVERRIDES, load_resume

    budgets = {}
    for text in overrides:
        keys, value = parse_override(text)
        if ".".join(keys) not in RESUME_OVERRIDES:
            raise ConfigError(
                f"--set {text!r}: a resumed run keeps its config; only "
                f"{', '.join(RESUME_OVERRIDES)} may change"
            )
        budgets[".".join(keys)] = value
    return load_resume(run_dir, budgets, flag)


def sweep_folder(parent: str, config: Config) -> Path:
    """A sweep's run folder: ``{parent}/{env}__{name}__{seed}``, as ``prepare`` makes it (a
    stamp, to the second, would not part the runs)."""
    return Path(parent) / default_run_dir("", config.env.id, config.run.name, config.run.seed,
                                          stamped=False)


def refuse_other_config(run_dir: str, held: Config, wanted: Config) -> None:
    """ConfigError when the folder's run (``held``) differs from ``wanted`` in more than
    what a resume may change: ``--resume-or-start`` would otherwise train another config on."""
    from es.config import ConfigError, from_dict
    from es.rl.resume import RESUME_OVERRIDES, flat

    there = flat(from_dict(held.to_dict()).to_dict())
    for key, value in flat(wanted.to_dict()).items():
        if key not in RESUME_OVERRIDES and there.get(key) != value:
            raise ConfigError(
                f"--resume-or-start {run_dir!r}: the folder holds a run of another config: "
                f"{key} is {there.get(key)!r} there and {value!r} here; use another folder, or "
                "the config and --set that started it")


RESUME_OR_START_ALONE = (
    "--resume-or-start RUN_DIR takes a config file and names the folder itself: e.g. "
    "es-train configs/hopper_ars.toml --resume-or-start runs/hopper (no --run-dir, --force or "
    "--resume)")


def _resume_or_start(run_dir: str, wanted: Config):
    """(config, state, warnings, run folder to resume or None to start) for
    ``--resume-or-start`` of the ``wanted`` config; rank 0 only. Raises ConfigError when the
    folder holds another config's run."""
    from es.config import from_dict
    from es.rl.checkpoint import has_checkpoint
    from es.rl.resume import claim

    folder = Path(run_dir)
    claim(run_dir)
    if not (folder / "config.toml").is_file() and not has_checkpoint(folder):
        return wanted, None, [], None
    config, state, warnings = _load_resume(run_dir, [], "--resume-or-start")
    refuse_other_config(run_dir, config, wanted)
    # What a resume may change, the command line changes (e.g. more generations).
    config = from_dict({**config.to_dict(), "run": wanted.to_dict()["run"]})
    return config, state, warnings, run_dir if state is not None else None


def prepare(args: argparse.Namespace):
    """Rank 0 reads the config (and checkpoint), checks it and makes the run folder; every
    rank gets the outcome, so all ranks exit alike on a user error."""
    from es.config import ConfigError, load_config
    from es.rl.envs import check_env_id
    from es.rl.tensorboard_log import require_tensorboard

    try:
        if args.resume_or_start:
            if not args.config or args.run_dir or args.force or args.resume:
                raise ConfigError(RESUME_OR_START_ALONE)
            wanted = load_config(args.config, args.overrides)
            folder = (args.resume_or_start if args.sweep_parent is None
                      else str(sweep_folder(args.sweep_parent, wanted)))
            config, state, warnings, run_dir = _resume_or_start(folder, wanted)
        elif args.resume:
            if args.config or args.run_dir or args.force:
                raise ConfigError("--resume takes the config and folder from the run: drop "
                                  "the config file, --run-dir and --force")
            from es.rl.resume import claim

            claim(args.resume)
            config, state, warnings = _load_resume(args.resume, args.overrides)
            # No checkpoint yet: a fresh start in the same folder (the killed session's
            # progress rows and policy go).
            run_dir = args.resume if state is not None else None
        else:
            if not args.config:
                raise ConfigError("a config file is needed, e.g. es-train configs/cartpole.toml")
            config, state, warnings = load_config(args.config, args.overrides), None, []
            run_dir = None
        check_env_id(config.env.id)
        if config.run.tensorboard:
            require_tensorboard()
    except (ConfigError, ValueError) as error:
        return None, None, None, [], str(error)
    if run_dir is None:
        requested = args.resume or args.resume_or_start or args.run_dir
        if args.sweep_parent is not None:  # a sweep: the runs' parent folder
            requested = str(sweep_folder(args.sweep_parent, config))
        # Resumed or started: the folder holds nothing of another run (checked above).
        run_dir, error = check_run_dir(requested, config, bool(
            args.force or args.resume or args.resume_or_start))
        if error:
            return None, None, None, [], error
    return config, state, run_dir, warnings, None


def planned_runs(args: argparse.Namespace) -> list[argparse.Namespace]:
    """One namespace per run: a config file and, with --seeds, a run.seed override."""
    if args.resume and (args.configs or args.seeds):
        raise ValueError("--resume continues one run: drop the config files and --seeds")
    if args.requeue_on_signal and "SLURM_JOB_ID" not in os.environ:
        raise ValueError("--requeue-on-signal requeues a Slurm job, and this is not one "
                         "(no SLURM_JOB_ID): run it in an sbatch script")
    if args.requeue_on_signal and not args.resume_or_start:
        raise ValueError("--requeue-on-signal needs --resume-or-start RUN_DIR: the requeued "
                         "job runs the same command again, which must resume the run")
    sweep = len(args.configs) > 1 or bool(args.seeds)
    if args.resume_or_start and not args.resume:
        _check_folder_kind(Path(args.resume_or_start), sweep)
    if args.resume or not sweep:
        return [argparse.Namespace(**vars(args), config=(args.configs or [None])[0],
                                   sweep_parent=None, label="", watched_by_sweep=False,
                                   started_at=LAUNCHED_AT)]
    if not args.configs:
        raise ValueError("a config file is needed, e.g. es-train configs/cartpole.toml")
    if args.seeds and any(text.replace(" ", "").startswith("run.seed=")
                          for text in args.overrides):
        raise ValueError("--seeds sets run.seed for each run: drop --set run.seed")
    if args.resume_or_start and args.run_dir:
        raise ValueError(RESUME_OR_START_ALONE)
    if args.run_dir and (Path(args.run_dir) / "config.toml").is_file():
        raise ValueError(f"--run-dir {args.run_dir!r} holds one run, not a sweep's: the "
                         "sweep's runs would go in beside its files, where es-plot and "
                         "--resume-or-start refuse the mix; give the sweep another folder")
    seeds = args.seeds or [None]
    runs = []
    for config in args.configs:
        for seed in seeds:
            overrides = [*args.overrides, *([f"run.seed={seed}"] if seed is not None else [])]
            label = Path(config).stem + ("" if seed is None else f" seed {seed}")
            runs.append(argparse.Namespace(**{**vars(args), "overrides": overrides},
                                           config=config,
                                           sweep_parent=args.resume_or_start or args.run_dir,
                                           label=f"[{label}] ", watched_by_sweep=False,
                                           started_at=LAUNCHED_AT))
    return runs


def _check_folder_kind(folder: Path, sweep: bool) -> None:
    """``--resume-or-start``: a sweep's folder holds its runs' folders, a run's folder its
    files. Given the other kind, a run started beside a sweep's runs (and es-plot refused the
    folder), or a sweep's runs went inside a run's folder."""
    if not folder.is_dir():
        return
    if sweep and (folder / "config.toml").is_file():
        raise ValueError(f"--resume-or-start {str(folder)!r} holds one run, not a sweep's: "
                         "resume it without --seeds (and with its one config file), or give "
                         "the sweep another folder")
    if not sweep and (runs := run_folders_in(folder)) \
            and not (folder / "config.toml").is_file():
        raise ValueError(f"--resume-or-start {str(folder)!r} holds a sweep's runs "
                         f"({first_few(runs)}), not a run: give the sweep's --seeds (and config "
                         "files) as it was started, or another folder")


def start_commands(runs: list[argparse.Namespace]) -> list[str]:
    """The es-train lines that start ``runs`` of a sweep (its config files and seeds, its
    other --set's and parent folder): one per config file."""
    commands = []
    for config in dict.fromkeys(run.config for run in runs):
        mine = [run for run in runs if run.config == config]
        seeds = [text.split("=", 1)[1] for run in mine for text in run.overrides
                 if text.startswith("run.seed=")]
        line = ["es-train", config, *(["--seeds", ",".join(seeds)] if seeds else []),
                *(part for text in mine[0].overrides if not text.startswith("run.seed=")
                  for part in ("--set", text))]
        if mine[0].sweep_parent:
            line += ["--run-dir", mine[0].sweep_parent]
        commands.append(shlex.join(line))
    return commands


def _check_sweep(runs: list[argparse.Namespace]) -> float:
    """Every config and override of a sweep is checked before its first run starts: a typo
    must not wait for the runs before it to train, nor be reported once per seed. Returns the
    runs' longest ``run.peer_timeout_s``, the sweep's deadline for a silent rank."""
    from es.config import ConfigError, load_config
    from es.rl.envs import check_env_id

    folders: dict[Path, str] = {}
    timeout_s = 0.0
    for run in runs:
        config = load_config(run.config, run.overrides)
        timeout_s = max(timeout_s, config.run.peer_timeout_s)
        check_env_id(config.env.id)
        folder = sweep_folder(run.sweep_parent or config.run.runs_dir, config)
        named = f"{run.label.strip()[1:-1]} ({run.config})"  # "cp seed 0 (a/cp.toml)"
        if folder in folders:
            raise ValueError(f"{folders[folder]} and {named} would train in the same folder, "
                             f"{folder} (the same env.id, run.name and run.seed): give one of "
                             "the files another run.name")
        folders[folder] = named
        if run.resume_or_start and (folder / "config.toml").is_file():
            try:  # the run's own start reads its checkpoint, which decides
                held = load_config(folder / "config.toml")
            except ConfigError:
                continue
            refuse_other_config(str(folder), held, config)
    return timeout_s


#: Stop signals that came before the run's own handler: a Ctrl-C during start-up raised
#: KeyboardInterrupt on one rank inside an exchange and left the others waiting for ever.
EARLY_SIGNALS: list[int] = []


def hold_early_signals() -> None:
    """Until the trainer's ``StopFlag`` takes over, a stop signal is noted, not raised: the
    run then stops at its first generation's end, checkpointed, on every rank alike. One
    that es-train was started ignoring stays ignored (``StopFlag.install``)."""
    # es.rl.trainer.STOP_SIGNALS, written out: importing the trainer here would come before
    # the hold, and widen the window it closes.
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, lambda received, frame: EARLY_SIGNALS.append(received))


def main(argv: list[str] | None = None) -> int:
    """One run, or a sweep: the world's ranks split into groups, each training its runs."""
    survive_closed_stdout()
    args = train_parser().parse_args(argv)
    if args.list_configs:
        print(shipped_configs_table())
        return 0
    args.overrides = flag_overrides(args)
    if args.elastic or args.hostfile:
        return supervise_elastic(args)
    hold_early_signals()
    world = world_comm("es-train")
    hold_early_signals()  # again: MPI_Init (mpi4py's import) put MPICH's SIGUSR1 handler in
    if world is None:
        return USAGE_ERROR
    for flag, value in (("--min-nodes", args.min_nodes), ("--max-restarts", args.max_restarts)):
        if value is not None:  # without --elastic nothing relaunches: it would do nothing
            return fail_on_rank("es-train", f"{flag} {value}: only with --elastic",
                                world.rank)
    from es.parallel.comm import MPIComm

    if isinstance(world, MPIComm):
        remove_dead_shared_memory(world)
    try:
        runs = planned_runs(args)
        timeout_s = _check_sweep(runs) if len(runs) > 1 else 0.0
    except ValueError as error:
        return fail_on_rank("es-train", str(error), world.rank)
    if len(runs) == 1:  # a sweep of one seed too: its lines labelled, its own heartbeats
        configure_logging(world.rank == 0 and not args.quiet, runs[0].label, "es-train")
        return _train_one(runs[0], world)
    configure_logging(world.rank == 0 and not args.quiet, program="es-train")
    groups = min(world.size, len(runs))
    color = world.rank * groups // world.size  # contiguous blocks of ranks, node-friendly
    comm = world.split(color)
    codes = []
    mine = runs[color::groups]
    with _sweep_heartbeat(world, args, timeout_s) as doing:
        for index, run in enumerate(mine):
            doing[0] = run.label.strip()
            # Each group's leader prints its own run's progress, labelled. A run after the
            # first counts its time from its own start, not the process's.
            configure_logging(comm.rank == 0 and not args.quiet, run.label, "es-train")
            run.started_at = LAUNCHED_AT if index == 0 else time.time()
            run.watched_by_sweep = True  # by the sweep's heartbeats, not the run's own
            codes.append(_train_one(run, comm))
            if codes[-1] in (130, CHECKPOINTED) and index + 1 < len(mine):
                # A signal stopped this run at its checkpoint: it was for the sweep.
                if comm.rank == 0:
                    later = mine[index + 1:]
                    then = ("the same command resumes it and starts them"
                            if args.resume_or_start
                            else f"they start with: {' ; '.join(start_commands(later))}")
                    print(f"es-train: {run.label}stopped; not started: "
                          f"{', '.join(run.label.strip() for run in later)}; {then}",
                          file=sys.stderr, flush=True)
                break
        doing[0] = "the sweep's end"
        world.barrier()
    # Once for the whole job, by one rank, after every group has checkpointed.
    if args.requeue_on_signal and any(world.allgather_objects(CHECKPOINTED in codes)) \
            and world.rank == 0:
        requeue_slurm_job()
    return max(codes)


def _listed_ranks(comm, label: str = "") -> list[str]:
    """Each rank's "pid@host", and rank 0's line of them: MPI launchers report a dead process
    by pid and host, and this line maps them to ranks."""
    names = comm.allgather_objects(f"{os.getpid()}@{socket.gethostname()}")
    if comm.size > 1 and comm.rank == 0:
        listed = ", ".join(f"rank {rank} = pid {where}" for rank, where in enumerate(names))
        print(f"es-train: {label}{comm.size} ranks: {listed}", file=sys.stderr, flush=True)
    return names


@contextlib.contextmanager
def _sweep_heartbeat(world, args: argparse.Namespace, timeout_s: float) -> Iterator[list[str]]:
    """A sweep's heartbeats, between every rank of the job for all of it (the runs' own are
    left out): a group's heartbeats did not see another group's silent rank, so with groups
    of one rank the others trained on and then waited for it at the sweep's end for good.
    Yields the run this rank trains (its item 0), named in a report."""
    from es.parallel.heartbeat import peer_lost

    names = _listed_ranks(world)
    then = ("each run's newest checkpoint is intact: on the ranks that are left, "
            + ("the same command resumes the sweep" if args.resume_or_start else
               "resume the runs stopped with es-train --resume RUN_DIR and start the others"))
    doing = ["the sweep's start"]
    with world.heartbeat(names, timeout_s, lambda line: peer_lost(line, world, lambda: then,
                                                                  "es-train"),
                         lambda: f"run {doing[0]}"):
        yield doing


def supervise_elastic(args: argparse.Namespace) -> int:
    """``--elastic``: this process launches the ranks and relaunches them after a lost node
    (``es.launch.elastic``); it never joins the MPI job itself."""
    from es.parallel.comm import LaunchError, under_mpi_launcher
    from es.parallel.launcher import launcher_rank
    from es.rl.runs import (
        LOCK_HELD_BY_SUPERVISOR,
        SUPERVISOR_LOCK_LINE,
        claim_run_dir,
        lock_line,
        undo_start_run_dir,
    )

    rank = launcher_rank()  # started under a launcher by mistake: its process 0 alone says so
    if not args.elastic:
        return fail_on_rank("es-train", "--hostfile is for --elastic runs (under plain mpiexec, "
                            "give mpiexec -f FILE instead)", rank)
    try:
        launched = under_mpi_launcher()
    except LaunchError as error:
        return fail_on_rank("es-train", str(error), rank)
    if launched:
        return fail_on_rank("es-train", "--elastic launches the ranks itself: start it without "
                            "mpiexec or srun, e.g. es-train CONFIG --resume-or-start RUN "
                            "--elastic --hostfile hosts", rank)
    if not args.resume_or_start or len(args.configs) != 1 or args.seeds:
        return fail("es-train", "--elastic relaunches one run from its checkpoint: give one "
                    "config file and --resume-or-start RUN_DIR (no --seeds), e.g. es-train "
                    "configs/humanoid_ars.toml --resume-or-start runs/humanoid --elastic")
    if args.requeue_on_signal:
        return fail("es-train", "--requeue-on-signal and --elastic: the batch script "
                    "requeues on exit code 75 (scripts/slurm_train.sbatch)")
    # The supervisor holds the folder for the ranks it launches: a relaunch after a hung node
    # must not wait for the lock of a rank 0 that hangs there.
    existed = Path(args.resume_or_start).exists()
    error = claim_run_dir(args.resume_or_start, "es-train --elastic")
    if error:
        return fail("es-train", error)
    os.environ[LOCK_HELD_BY_SUPERVISOR] = str(Path(args.resume_or_start).resolve())
    os.environ[SUPERVISOR_LOCK_LINE] = lock_line("es-train --elastic")
    code = USAGE_ERROR
    try:
        code = _supervise_elastic(args)
        return code
    finally:
        if code == USAGE_ERROR and not existed:  # refused before any run: no folder left
            undo_start_run_dir(args.resume_or_start)


def _supervise_elastic(args: argparse.Namespace) -> int:
    """The nodes, and the supervision of the run on them."""
    from es.launch.elastic import (
        ElasticError,
        HostfileNodes,
        SlurmNodes,
        elastic_folder,
        supervise,
    )

    try:
        with elastic_folder() as folder:
            if args.hostfile:
                nodes = HostfileNodes(Path(args.hostfile), Path(folder))
            elif "SLURM_JOB_ID" in os.environ:
                nodes = SlurmNodes()
            else:
                raise ElasticError("--elastic needs --hostfile FILE, or to run inside a Slurm "
                                   "allocation (sbatch --no-kill or salloc --no-kill)")
            program = [_this_program(), args.configs[0], "--resume-or-start",
                       args.resume_or_start, *(f"--set={item}" for item in args.overrides),
                       *(["--quiet"] if args.quiet else [])]
            return supervise(nodes, program, Path(args.resume_or_start),
                             args.min_nodes or MIN_NODES,
                             MAX_RESTARTS if args.max_restarts is None else args.max_restarts)
    except ElasticError as error:
        return fail("es-train", str(error))


def _this_program() -> str:
    beside = Path(sys.executable).parent / "es-train"
    return str(beside) if beside.exists() else sys.argv[0]


def remove_dead_shared_memory(comm: MPIComm) -> None:
    """On each node's first rank: remove the MPICH segments that killed jobs left in
    ``/dev/shm`` (``es.parallel.shm``: they hold RAM until removed), and say so in one
    line."""
    from es.parallel.shm import SHM_FOLDER, remove_dead_segments

    if comm.rank not in [members[0] for members in comm.node_ranks()]:
        return
    removed, freed = remove_dead_segments()
    if removed:
        print(f"es-train: removed {removed} MPICH shared-memory segment{'s' * (removed != 1)} "
              f"({freed / 1e6:.1f} MB) that killed MPI jobs had left in {SHM_FOLDER} on "
              f"{socket.gethostname()}", file=sys.stderr, flush=True)


def node_summary(nodes: list[list[int]], ranks: list[str], es: ESConfig) -> str:
    """'2 nodes (node0: ranks 0-1, node1: ranks 2-3), 2 noise tables (one per node)'."""
    def span(members: list[int]) -> str:
        return f"rank {members[0]}" if len(members) == 1 else (
            f"ranks {members[0]}-{members[-1]}"
            if members == list(range(members[0], members[-1] + 1))
            else "ranks " + ",".join(map(str, members)))

    hosts = ", ".join(f"{ranks[members[0]].partition('@')[2]}: {span(members)}"
                      for members in nodes)
    count = len(nodes)
    tables = (f"{count} noise table{'s' * (count != 1)} (one per node)" if es.uses_noise_table
              else "no noise table (es.noise = 'seed')" if es.noise == "seed"
              else f"no noise table (es.strategy = {es.strategy!r} draws its own samples)")
    return f"{count} node{'s' * (count != 1)} ({hosts}), {tables}"


def _train_one(args: argparse.Namespace, comm) -> int:
    """One run; the run folder is let go when it ends, however it ends."""
    from es.rl.runs import release_run_dir

    try:
        return _train(args, comm)
    finally:
        release_run_dir()
        # The trainer's objects hold one another: collected now, not at interpreter exit,
        # where ALE's bindings (nanobind) printed "leaked" lines for each rank's game.
        gc.collect()


def _train(args: argparse.Namespace, comm) -> int:
    prepared = prepare(args) if comm.rank == 0 else None
    config, state, run_dir, warnings, error = comm.broadcast(prepared)
    if error:
        return fail_on_rank("es-train", error, comm.rank)
    for warning in warnings if comm.rank == 0 else ():
        print(f"es-train: {args.label}warning: {warning}", file=sys.stderr, flush=True)
    ranks = _listed_ranks(comm, args.label)

    from gymnasium.error import DependencyNotInstalled

    from es.parallel.heartbeat import peer_lost
    from es.rl.resume import after_lost
    from es.rl.trainer import STOP_SIGNALS, StopFlag, Stopped, Trainer, TrainingError

    label = args.label.replace("{", "{{").replace("}", "}}")  # a sweep's run, as its lines
    stop_flag = StopFlag(announce=f"es-train: {label}{{signal}}: stopping after the generation "
                         "in progress, with its checkpoint (a second signal 2 s later stops at "
                         "once, that generation lost, the newest checkpoint kept)"
                         if comm.rank == 0 else None)
    stop_flag.install()
    if EARLY_SIGNALS:
        stop_flag.received_before(EARLY_SIGNALS[0])
    try:
        trainer = Trainer(config, comm, Path(run_dir), args.started_at, stop_flag)
        if state is not None:
            trainer.restore(state)
    except (ValueError, DependencyNotInstalled) as error:  # a config the environment or the
        return fail_on_rank("es-train", str(error), comm.rank)  # policy cannot take, a missing
        # extra (gymnasium[box2d])
    except TrainingError as error:  # every rank sees it alike, e.g. a VBN batch mismatch
        if comm.rank == 0:
            print(f"es-train: error: {error}", file=sys.stderr, flush=True)
        return 1
    except Exception as error:  # e.g. out of memory on one rank
        return crash("es-train", error, comm, memory_hint(error, config))
    if state is None:  # a start: the folder is written now that the run can be built
        error = comm.broadcast(start_run_dir(run_dir, config) if comm.rank == 0 else None)
        if error:
            trainer.close()
            return fail_on_rank("es-train", error, comm.rank)
        # Once the run is sure to train: a config refused for another reason says only that.
        from es.config import ignored_settings

        for warning in ignored_settings(config) if comm.rank == 0 else ():
            print(f"es-train: {args.label}warning: {warning}", file=sys.stderr, flush=True)
    nodes = comm.node_ranks()  # the noise tables are built: say where they are
    if comm.rank == 0:
        print(f"es-train: {args.label}{node_summary(nodes, ranks, config.es)}",
              file=sys.stderr, flush=True)
    try:
        then = functools.partial(after_lost, run_dir, resume_command(args, run_dir))
        watched = contextlib.nullcontext() if args.watched_by_sweep else comm.heartbeat(
            ranks, config.run.peer_timeout_s, lambda line: peer_lost(line, comm, then, "es-train"),
            lambda: f"generation {trainer.strategy.generation + 1}")
        with watched, trainer:
            result = trainer.run()
    except Stopped as stop:
        # The checkpoint is written: a late copy of the signal (the launcher's forwarded
        # one, a requeue's SIGTERM) must not turn the exit code into a kill's.
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        code = 128 + stop.signum if stop.signum == signal.SIGINT else CHECKPOINTED
        if comm.rank == 0:
            print(f"es-train: {args.label}{stop}; checkpoint saved (exit code {code}). Resume "
                  f"with: {resume_command(args, run_dir)}", file=sys.stderr, flush=True)
            if args.requeue_on_signal and code == CHECKPOINTED and args.sweep_parent is None:
                requeue_slurm_job()  # a sweep's after all its groups have stopped
        return code
    except TrainingError as error:
        return _fail_run(str(error), run_dir, comm.rank)
    except OSError as error:  # a full disk or quota, a folder gone: rank 0's writes
        from es.rl.checkpoint import has_checkpoint

        then = (f"the newest checkpoint is intact: once {run_dir} can be written again, "
                f"resume with: {resume_command(args, run_dir)}" if has_checkpoint(run_dir)
                else f"no checkpoint was written yet: once {run_dir} can be written again, "
                f"{resume_command(args, run_dir)} starts it over")
        return crash("es-train", error, comm, then)
    except KeyboardInterrupt:  # a second signal: at once, not at the generation's end
        from es.rl.checkpoint import has_checkpoint

        then = (f"the newest checkpoint is intact: resume with: "
                f"{resume_command(args, run_dir)}" if has_checkpoint(run_dir) else "")
        return interrupted("es-train", comm, then)
    except Exception as error:  # an internal failure on one rank
        return crash("es-train", error, comm, memory_hint(error, config))
    if comm.rank == 0:
        final = "n/a" if result.eval_return is None else f"{result.eval_return:.2f}"
        kept = "" if result.best_return is None else (
            f", kept policy_best.npz {result.best_return:.2f} "
            f"(generation {result.best_generation})")
        if result.best_return is None and config.run.best_episodes \
                and result.generations < config.run.best_from:
            # halfcheetah_ars.toml under a small budget ended with no kept policy, unsaid.
            kept = (f", no policy_best.npz: it is nominated from generation "
                    f"{config.run.best_from} on (run.best_from)")
        if result.stop_confirm_episodes:
            kept += (f", {result.stop_confirm_episodes} episodes in "
                     f"{result.stop_confirm_s:.1f} s confirming at the stop")
        print(
            f"{args.label}done: {result.generations} generation{'s' * (result.generations != 1)}"
            f", {result.timesteps} steps "
            f"(ended by {result.ended_by}), eval return {final}{kept}; run folder {run_dir}",
            flush=True,
        )
    return 0


def resume_command(args: argparse.Namespace, run_dir: str) -> str:
    """What continues a stopped run: the same command where it starts or resumes itself."""
    return ("the same command" if args.resume_or_start
            else f"es-train --resume {shlex.quote(str(run_dir))}")


def requeue_slurm_job() -> None:
    """``scontrol requeue`` this batch job (an array job's own task), after the checkpoint
    is written: Slurm then stops the job's processes and starts the same script again."""
    import subprocess

    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    job = f"{array_job}_{task}" if array_job and task else os.environ["SLURM_JOB_ID"]
    # The requeue ends this job's steps with SIGTERM, maybe before scontrol returns: the
    # caller ignores it from the stop on, so it cannot cut the report short.
    try:
        done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"es-train: could not requeue job {job}: {error}", file=sys.stderr, flush=True)
        return
    if done.returncode != 0:
        print(f"es-train: could not requeue job {job}: {tool_failure(done)}",
              file=sys.stderr, flush=True)
        return
    print(f"es-train: requeued Slurm job {job}", file=sys.stderr, flush=True)


def _fail_run(message: str, run_dir: str, rank: int) -> int:
    """A run that failed while training: where its last checkpoint is, or that it has none
    (it failed in its first generation: nothing to resume, start it again once fixed)."""
    from es.rl.checkpoint import has_checkpoint

    if rank == 0:
        where = (f"The last generation is checkpointed in {run_dir}" if has_checkpoint(run_dir)
                 else f"No generation finished, so {run_dir} holds no checkpoint: start the run "
                 "again (--force) once the cause is fixed")
        print(f"es-train: error: {message}. {where}", file=sys.stderr, flush=True)
    return 1
