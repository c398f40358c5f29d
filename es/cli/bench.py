"""``es-bench``: the measurements of ``es.bench`` from the command line.

    es-bench scaling --ranks 1,2 --mode weak                    # es.bench.scaling
    es-bench scaling --config configs/humanoid.toml --ranks 1,32,64,128
    es-bench scaling --synthetic-step-ms 2 --ranks 1,2,4,8,16,32,64
    es-bench comm --params 1e4,1e5,1e6 --populations 256,1024  # es.bench.comm
    es-bench bbob --dims 2,5,10 --methods auto,pycma --jobs 2   # es.bench.bbob
    es-bench highdim --dims 1000 --methods auto,pycma,pycma-diag
    es-bench suite configs/suites/mujoco.toml --seeds 0-4      # es.bench.suite
    es-bench reference --seeds 0-2    # DQN/PPO vs published results, es.bench.reference

A bad flag is one line on stderr and exit code 2, before anything is launched where it can be
checked first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from es.cli.args import (
    ArgumentParser,
    SpecError,
    add_flag,
    add_out,
    add_ranks,
    config_file,
    fail,
    int_list,
    name_list,
    nonnegative_int,
    nonnegative_ms,
    positive_int,
    pycma_seeds,
    survive_closed_stdout,
)

#: The most a ``comm`` count may be: 1e9 parameters are 4 GB in each of a rank's float32
#: all-reduce buffers.
MAX_COUNT = 10**9


def parse_counts(text: str) -> list[int]:
    """'1e4,1e5' -> [10000, 100000]: whole numbers from 1 to ``MAX_COUNT``."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:  # not a number
        values = []
    if not values or not all(value.is_integer() and 1 <= value <= MAX_COUNT
                             for value in values):
        raise SpecError(f"{text!r}: expected comma-separated whole counts from 1 to 1e9, "
                        "e.g. 1e4,1e5")
    return [int(value) for value in values]


def add_comm_sizes(parser: argparse.ArgumentParser) -> None:
    """What ``comm`` measures, passed on to ``comm-worker`` as it is."""
    parser.add_argument("--params", type=parse_counts, default="1e4,1e5,1e6", metavar="LIST",
                        help="parameter counts, comma-separated (default: %(default)s)")
    parser.add_argument("--populations", type=parse_counts, default="256,1024",
                        metavar="LIST", help="population sizes, even, comma-separated "
                        "(default: %(default)s)")
    add_flag(parser, "--repeats", "timed exchanges of each size", default=50)
    parser.add_argument("--late-ms", type=nonnegative_ms, default=0.0, metavar="MS",
                        help="the last rank arrives this much after the others at each timed "
                             "exchange, as at the end of a generation (default: %(default)s)")


def parser() -> ArgumentParser:
    # NumPy loads with these: only here, as late as the parser.
    from es.bench.bbob import HIGHDIM_FUNCTIONS, known_methods
    from es.bench.reference import CASES
    from es.bench.scaling import (
        BASE_CONFIG,
        STRONG_POPULATION,
        SYNTHETIC_DEFAULTS,
        WEAK_MEMBERS_PER_RANK,
    )

    parse = ArgumentParser(prog="es-bench",
                           description="Measured scaling, communication, learning suites and "
                           "black-box benchmarks.",
                           examples=["es-bench scaling --ranks 1,2,4 --mode weak",
                                     "es-bench suite configs/suites/mujoco.toml --seeds 0-4",
                                     "es-bench bbob --dims 2,5,10 --methods auto,pycma --jobs 2"])
    commands = parse.add_subparsers(dest="command", required=True)
    scale = commands.add_parser(
        "scaling", help="efficiency across rank counts",
        description="Measured scaling of es-train across rank counts: generations/s, env "
        "steps/s, parallel efficiency and rank 0's time breakdown. The config is trained as it "
        "is; --env, --policy-kind and --table-size replace its values.",
        examples=["es-bench scaling --ranks 1,2 --mode weak",
                  "es-bench scaling --config configs/humanoid.toml --ranks 1,32,64,128 "
                  "--launcher 'srun --mpi=pmi2'",
                  "es-bench scaling --synthetic-step-ms 2 --ranks 1,2,4,8,16,32,64"])
    add_flag(scale, "--config", "trained as it is, policy and noise table included",
             default=str(BASE_CONFIG))
    add_flag(scale, "--env", "instead of the config's env.id")
    scale.add_argument("--policy-kind", choices=("linear", "mlp", "cnn"),
                       help="policy.kind instead of the config's")
    add_flag(scale, "--table-size", "instead of the config's")
    scale.add_argument("--synthetic-step-ms", type=float, metavar="MS",
                       help="train on es/Sleep-v0, whose steps sleep MS milliseconds instead "
                            "of computing: coordination overhead alone, for more ranks than "
                            "cores")
    synthetic = SYNTHETIC_DEFAULTS
    scale.add_argument("--lengths", choices=("fixed", "pareto"),
                       help="with --synthetic-step-ms: episode lengths all --mean-length, or "
                            "heavy-tailed (Pareto) with that mean, capped at --max-length "
                            f"(default {synthetic['lengths']})")
    scale.add_argument("--mean-length", type=int, metavar="STEPS",
                       help=f"with --synthetic-step-ms (default {synthetic['mean_length']})")
    scale.add_argument("--max-length", type=int, metavar="STEPS",
                       help=f"with --synthetic-step-ms (default {synthetic['max_length']})")
    scale.add_argument("--min-sleep-ms", type=float, metavar="MS",
                       help="with --synthetic-step-ms: coalesce sleeps to at least this long "
                            f"(0: every step; default {synthetic['min_sleep_ms']})")
    add_ranks(scale, "1,2", several=True, detail="one measurement per count")
    scale.add_argument("--mode", choices=("weak", "strong"), default="weak",
                       help="weak: --members-per-rank fixed (ideal: the same time per "
                            "generation at every rank count); strong: --population fixed "
                            "(ideal: time falling as 1/ranks) (default: weak)")
    scale.add_argument("--members-per-rank", type=int,
                       help=f"--mode weak: members per rank (default {WEAK_MEMBERS_PER_RANK}; "
                            "an odd total is rounded up to pairs)")
    scale.add_argument("--population", type=int,
                       help=f"--mode strong: the population, even (default {STRONG_POPULATION})")
    add_flag(scale, "--generations", "at least 5 (warm-up and the final evaluation are not "
             "timed)", default=8)
    add_flag(scale, "--repeats", "runs of each rank count", default=3)
    scale.add_argument("--schedule", choices=("static", "dynamic"), default="dynamic",
                       help="run.schedule: members dealt out up front, or taken by ranks as "
                            "they finish (default: dynamic, es-train's own)")
    add_out(scale, "scaling", per="ENV-MODE")
    compare = commands.add_parser(
        "comm", help="ES scalars vs a gradient all-reduce",
        description="Bytes and time per update: what the ES ranks exchange against an "
        "all-reduce of a float32 gradient of the same parameter count.",
        examples=["es-bench comm --params 1e4,1e5,1e6 --populations 256,1024",
                  "es-bench comm --params 1e4 --populations 2,16 --late-ms 3 --ranks 3",
                  "es-bench comm --ranks 128 --launcher 'srun --mpi=pmi2'"])
    add_comm_sizes(compare)
    add_ranks(compare, "2", several=False)
    add_out(compare, "comm")
    for sub in (scale, compare):
        add_flag(sub, "--launcher")
    add_bbob_parsers(commands, HIGHDIM_FUNCTIONS, known_methods())  # bbob, highdim
    add_suite_parser(commands)
    add_reference_parser(commands, CASES)
    worker = commands.add_parser(
        "comm-worker", help="run by es-bench comm under mpiexec",
        examples=["mpiexec -n 2 es-bench comm-worker --params 1e4 --populations 256 "
                  "--out bench-results/comm"])
    add_comm_sizes(worker)
    add_out(worker, "comm", "comm.csv goes there")
    return parse


def add_bbob_parsers(commands: Any, highdim_functions: tuple[str, ...],
                     methods: list[str]) -> None:
    """The ``bbob`` and ``highdim`` sub-commands of ``es-bench``; ``methods``: what their
    ``--methods`` accept."""
    bench = commands.add_parser(
        "bbob", help="BBOB suite (ioh): strategies beside pycma",
        description="The 24 noiseless BBOB functions through ioh: es.minimize's methods "
        "beside pycma at equal budgets, as ECDFs of (problem, target) pairs reached.",
        examples=["es-bench bbob --dims 2,5,10,20 --instances 1-5 --methods auto,snes,pycma "
                  "--jobs 2",
                  "es-bench bbob --restarts 9 --bipop --budget-per-dim 10000 "
                  "--methods auto,pycma"])
    add_flag(bench, "--functions", "BBOB function ids such as 1-24 or 1,8", default="1-24",
             type=int_list(1, 24))
    bench.add_argument("--instances", type=int_list(1, 1000), default="1-5", metavar="LIST",
                       help="BBOB instances such as 1-5 (default: %(default)s)")
    add_flag(bench, "--dims", "2 to 100", default="2,5,10,20", type=int_list(2, 100))
    add_flag(bench, "--methods", "es.minimize methods and pycma, pycma-diag, pycma-paired",
             default="auto,pycma", type=name_list(methods))
    bench.add_argument("--budget-per-dim", type=positive_int, default=1000, metavar="N",
                       help="function evaluations per run: N x the dimension (default: 1000)")
    bench.add_argument("--restarts", type=nonnegative_int, default=0, metavar="N",
                       help="IPOP restarts (BIPOP with --bipop) after a local stop, every "
                            "method alike (default: 0)")
    bench.add_argument("--bipop", action="store_true", help="BIPOP restarts (with --restarts)")
    add_flag(bench, "--jobs", "the results do not depend on it, wall times do")
    bench.add_argument("--seed-offset", type=nonnegative_int, default=0, metavar="N",
                       help="shift every run's seed (another draw of the random numbers)")
    add_out(bench, "bbob")
    high = commands.add_parser(
        "highdim", help="d = 1000, 10000: time per generation, precision at equal evaluations",
        description="Sphere, ellipsoid and Rastrigin at d = 1000 and 10000: milliseconds per "
        "generation and the best f at equal evaluations, our methods beside pycma.",
        examples=["es-bench highdim --dims 1000,10000 --methods auto,sepcma,pycma,pycma-diag",
                  "es-bench highdim --dims 1000 --seeds 1-5 --budget-s 60"])
    add_flag(high, "--dims", "at least 2", default="1000,10000", type=int_list(2))
    add_flag(high, "--functions", f"among {', '.join(highdim_functions)}",
             default=",".join(highdim_functions), type=name_list(highdim_functions))
    add_flag(high, "--methods", "es.minimize methods and pycma, pycma-diag, pycma-paired",
             default="auto,pycma,pycma-diag", type=name_list(methods))
    add_flag(high, "--evals-per-dim", default=100)
    add_flag(high, "--max-evals", default=1_000_000)
    add_flag(high, "--budget-s", "of a pycma run (ours always finish their evaluations)",
             default=120.0)
    add_flag(high, "--seeds", "medians over them are reported; >= 1", default="1",
             type=pycma_seeds)
    add_flag(high, "--jobs", "skews the timings")
    add_out(high, "highdim")




def add_suite_parser(commands: Any) -> None:
    """The ``suite`` sub-command of ``es-bench``."""
    bench = commands.add_parser(
        "suite", help="tasks x strategies x seeds: success rates",
        description="Tasks x strategies x seeds, each run a real mpiexec es-train to its budget, "
        "its final policy scored on fresh episodes; an interrupted suite resumes.",
        examples=["es-bench suite configs/suites/mujoco.toml --tasks swimmer,halfcheetah "
                  "--seeds 0-4",
                  "es-bench suite configs/suites/mujoco.toml --strategies openai,ars --ranks 2"])
    bench.add_argument("suite", type=config_file,
                       help="suite file (TOML), e.g. configs/suites/mujoco.toml (from any "
                       "folder: a shipped suite's name, suites/mujoco)")
    bench.add_argument("--tasks", help="comma-separated task names (default: all)")
    bench.add_argument("--strategies", help="comma-separated strategies (default: all)")
    add_flag(bench, "--seeds", "every task and strategy runs each, and the tables cover these "
             "seeds' finished runs in --out", default="0-4")
    add_ranks(bench, "2", several=False)
    add_flag(bench, "--jobs", "each on --ranks ranks")
    add_flag(bench, "--launcher")
    add_out(bench, "suite", "finished runs in it are not redone", per="SUITE (the file's stem)")


def add_reference_parser(commands: Any, cases: dict[str, Any]) -> None:
    """The ``reference`` sub-command of ``es-bench``."""
    bench = commands.add_parser(
        "reference", help="our DQN/PPO beside published results",
        description="Train the shipped DQN and PPO configs for the env steps of published "
        "results (cleanrl, RL Baselines3 Zoo) on each seed and put ours beside theirs, in "
        f"their metric. Cases: {', '.join(cases)}.",
        examples=["es-bench reference --seeds 0-2",
                  "es-bench reference --cases ppo-halfcheetah-1m --seeds 0-2 --ranks 2 "
                  "--jobs 1"])
    bench.add_argument("--cases", help="comma-separated case names (default: all)")
    add_flag(bench, "--seeds", "every case runs each", default="0-2")
    add_ranks(bench, "2", several=False, detail="for ppo (dqn and one-environment cases run "
              "one process)")
    add_flag(bench, "--jobs", "each on --ranks ranks")
    add_out(bench, "reference", "finished runs in it are not redone")


def main(argv: list[str] | None = None) -> int:
    survive_closed_stdout()
    from es.bench.report import run_interruptible

    args = parser().parse_args(argv)
    said = args.command in ("suite", "reference")  # they say it themselves
    return run_interruptible(_run, args,  # Ctrl-C or SIGTERM: exit 130, workers ended
                             program=None if said else f"es-bench {args.command}")


def _run(args: argparse.Namespace) -> int:
    """The command, in an ``--out`` that holds no other command's results."""
    from es.bench.report import check_out, mark_out

    program = f"es-bench {args.command}"
    out = Path(args.out) if args.out is not None and args.command != "comm-worker" else None
    try:
        if out is not None:
            check_out(out, program)
    except ValueError as error:
        return fail(program, str(error))
    try:
        return _command(args)
    finally:
        if out is not None:
            mark_out(out, program)


def _command(args: argparse.Namespace) -> int:
    from es.bench import bbob, comm, reference, scaling, suite
    from es.bench.report import write_table

    try:
        if args.command in bbob.COMMANDS:
            return bbob.COMMANDS[args.command](args)
        if args.command == "suite":
            return suite.run_suite(args)
        if args.command == "reference":
            return reference.run_reference(args)
        if args.command == "comm-worker":
            comm.comm_worker(args.params, args.populations, args.repeats, args.late_ms,
                             args.out)
            return 0
        if args.command == "comm":
            comm.check_populations(args.populations)
            rows = comm.comm_compare(args)
            write_table(rows, args.out, "es-bench comm: bytes and time per update, ES scalars "
                        "vs float32 gradient all-reduce")
            comm.plot_comm(rows, args.out)
            return 0
        scaling.check_scaling(args)
        rows = scaling.scaling(args)
    except (ValueError, RuntimeError) as error:
        return fail(f"es-bench {args.command}", str(error))
    scaling.write_outputs(rows, scaling.scaling_out(args, rows[0]["env"]),
                          f"es-bench scaling: {rows[0]['env']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
