"""``es-bench``: measured scaling of the trainer across rank counts.

    es-bench scaling --ranks 1,2 --mode weak
    es-bench scaling --config configs/humanoid.toml --ranks 1,32,64,128
    es-bench scaling --synthetic-step-ms 2 --ranks 1,2,4,8,16,32,64
    es-bench comm --params 1e4,1e5,1e6 --populations 256,1024
    es-bench bbob --dims 2,5,10 --methods auto,pycma --jobs 2   # see es.bench_bbob
    es-bench highdim --dims 1000 --methods auto,pycma,pycma-diag
    es-bench suite configs/suites/mujoco.toml --seeds 0-4      # see es.bench_suite
    es-bench reference --seeds 0-2    # DQN/PPO vs published results, see es.bench_reference

For each rank count it launches ``mpiexec -n N es-train`` itself (several repetitions), reads
the run's ``progress.csv`` and reports generations/s, env steps/s, parallel efficiency against
the smallest rank count and rank 0's time breakdown per generation. Weak scaling keeps the
members per rank fixed (ideal: constant time per generation); strong scaling keeps the
population fixed (ideal: time per generation falls as 1/N). It writes a CSV, a Markdown table
and, when matplotlib is installed, a PNG into ``--out``.

The config (``--config``, by default ``es/bench_base.toml``: HalfCheetah, a linear policy, a
small noise table) is trained as it is, its policy and noise table included; ``--env``,
``--policy`` and ``--table-size`` replace its values, and say so in one printed line.

With ``--synthetic-step-ms`` the environment is ``es/Sleep-v0``: steps sleep instead of
computing, so many ranks on few cores measure coordination overhead only. With a real
environment the figures are CPU-bound and meaningful only up to the number of cores.
"""

from __future__ import annotations

import argparse
import csv
import math
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from es import cliargs
from es.cliargs import ArgumentParser, add_flag, fail

BIN = Path(sys.executable).parent
BREAKDOWN = ("rollout_s", "wait_s", "update_s", "eval_s", "io_s")
WARMUP_GENERATIONS = 2  # start-up and the first noise-table touches are not steady state
# The last generation of a run always evaluates the mean policy: not steady state either.


def steady_state(rows: list[dict[str, str]]) -> dict[str, float]:
    """Generations/s, steps/s and mean breakdown between the warm-up and the final row."""
    if len(rows) < WARMUP_GENERATIONS + 3:
        raise ValueError(f"need at least {WARMUP_GENERATIONS + 3} generations, got {len(rows)}")
    first, last = rows[WARMUP_GENERATIONS], rows[-2]
    seconds = float(last["time_s"]) - float(first["time_s"])
    generations = int(last["generation"]) - int(first["generation"])
    steady = rows[WARMUP_GENERATIONS + 1 : -1]
    out = {
        "seconds_per_generation": seconds / generations,
        "generations_per_s": generations / seconds,
        "steps_per_s": (int(last["timesteps"]) - int(first["timesteps"])) / seconds,
        "bytes_per_generation": statistics.mean(int(r["bytes_sent"]) for r in steady),
    }
    for column in BREAKDOWN:
        out[column] = statistics.mean(float(r[column]) for r in steady)
    return out


def step_efficiency(base_ranks: int, base_steps_per_s: float, ranks: int,
                    steps_per_s: float) -> float:
    """Env steps/s per rank against the base: work-normalised efficiency. With early
    termination a population's work varies from run to run and between rank counts; counting
    steps instead of generations separates idle ranks from a population that happened to
    live longer."""
    return (steps_per_s / ranks) / (base_steps_per_s / base_ranks)


def efficiency(mode: str, base_ranks: int, base_spg: float, ranks: int, spg: float) -> float:
    """Parallel efficiency from seconds per generation (spg) against the base rank count.

    Weak scaling: work grows with the ranks, so ideal spg is constant: base_spg / spg.
    Strong scaling: fixed work, ideal spg shrinks as 1/N: base_spg * base_ranks / (spg * N).
    """
    if mode == "weak":
        return base_spg / spg
    return base_spg * base_ranks / (spg * ranks)


PROJECTED_RANKS = (80, 720, 1440)
PAPER = "Salimans et al. 2017, Humanoid: 657 min on 18 cores -> 10 min on 1,440 (about 82%)"


def project(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A two-term model of weak scaling fitted to the measurements, then extrapolated.

    Rank 0's generation is its own episodes (constant under weak scaling: their measured
    median) plus coordination: waiting in collectives for stragglers and transfers, the
    update and file writes. Coordination is fitted by least squares as w0 + c * N (gathering
    a row from every rank grows with N); projected efficiency is t(N0) / t(N). A projection,
    not a measurement: it knows nothing of network topology or of a cluster's noise.
    """
    if len(rows) < 2 or rows[0]["mode"] != "weak":
        return []
    ranks = [float(r["ranks"]) for r in rows]
    coordination = [r["wait_s"] + r["update_s"] + r["io_s"] for r in rows]
    rollout = statistics.median(r["rollout_s"] for r in rows)
    mean_n, mean_c = statistics.mean(ranks), statistics.mean(coordination)
    spread = sum((n - mean_n) ** 2 for n in ranks)
    slope = max(sum((n - mean_n) * (c - mean_c) for n, c in zip(ranks, coordination,
                                                                   strict=True)) / spread, 0.0)
    intercept = max(mean_c - slope * mean_n, 0.0)

    def seconds(n: float) -> float:
        return rollout + intercept + slope * n

    return [{"ranks": n, "projected_seconds_per_generation": seconds(n),
             "projected_efficiency": seconds(ranks[0]) / seconds(n),
             "per_rank_cost_us": 1e6 * slope} for n in PROJECTED_RANKS]


def mpiexec(ranks: int, *command: str, launcher: str | None = None) -> list[str]:
    """``LAUNCHER -n RANKS COMMAND``. The default launcher is the mpiexec installed beside
    this Python (the mpich wheel's), else the one on PATH; a cluster passes its own, e.g.
    ``"srun --mpi=pmix"`` or ``"mpiexec -f hosts.txt"``."""
    if launcher:
        base = shlex.split(launcher)
    else:
        beside = BIN / "mpiexec"
        base = [str(beside) if beside.exists() else shutil.which("mpiexec") or "mpiexec"]
    return [*base, "-n", str(ranks), *command]


def _run_mpi(ranks: int, *command: str, launcher: str | None = None) -> None:
    """Run ``command`` on ``ranks`` ranks; a failure is a RuntimeError ending in the last line
    of its stderr (where our programs put their one-line error)."""
    try:
        done = subprocess.run(mpiexec(ranks, *command, launcher=launcher), capture_output=True,
                              text=True)
    except OSError as error:  # a --launcher that does not exist or cannot run
        raise RuntimeError(f"launcher {error.filename!r}: {error.strerror}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"mpiexec -n {ranks} failed (exit {done.returncode}): {last[-300:]}")


def set_flags(overrides: list[str]) -> list[str]:
    """``["a.b=1", ...]`` -> ``["--set", "a.b=1", ...]`` for es-train."""
    return [part for override in overrides for part in ("--set", override)]


def run_training(
    ranks: int, overrides: list[str], config: str, launcher: str | None = None
) -> list[dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix=".es-bench-", dir=".") as tmp:  # seen by all nodes
        _run_mpi(ranks, str(BIN / "es-train"), config, "--run-dir", f"{tmp}/run", "--quiet",
                 *set_flags(overrides), launcher=launcher)
        with open(f"{tmp}/run/progress.csv") as handle:
            return list(csv.DictReader(handle))


def replaced_values(args: argparse.Namespace) -> list[str]:
    """The config's values that flags replace (``--set`` overrides): its environment, policy
    kind and noise table size, only where a flag asks for it."""
    replaced = []
    if args.synthetic_step_ms is not None:
        replaced += ["env.id=es/Sleep-v0", f"env.kwargs.step_ms={args.synthetic_step_ms}",
                     f"env.kwargs.lengths={args.lengths}",
                     f"env.kwargs.mean_length={args.mean_length}",
                     f"env.kwargs.max_length={args.max_length}",
                     f"env.kwargs.min_sleep_ms={args.min_sleep_ms}"]
    elif args.env is not None:
        replaced.append(f"env.id={args.env}")
    if args.policy is not None:
        replaced.append(f"policy.kind={args.policy}")
    if args.table_size is not None:
        replaced.append(f"es.noise_table_size={args.table_size}")
    return replaced


def scaling(args: argparse.Namespace) -> list[dict[str, Any]]:
    from es.config import load_config

    replaced = replaced_values(args)
    base = [f"run.generations={args.generations}", "run.eval_every=1000000",
            "run.checkpoint_every=1000000", f"run.schedule={args.schedule}", *replaced]
    config = load_config(args.config, base)  # a bad config or flag fails before any launch
    if replaced:
        print(f"es-bench scaling: flags replace values of {args.config}: "
              f"{', '.join(replaced)}", flush=True)
    env_id = config.env.id
    if args.synthetic_step_ms is not None:
        kind = (f"coordination-only (synthetic, {args.synthetic_step_ms} ms sleeping steps, "
                f"sleeps coalesced to >= {args.min_sleep_ms} ms)")
    else:
        kind = "CPU-bound (real environment)"
    rows: list[dict[str, Any]] = []
    baseline = None
    for ranks in args.ranks:
        population = args.members_per_rank * ranks if args.mode == "weak" else args.population
        population += population % 2
        measured = [steady_state(run_training(ranks, [*base, f"es.population={population}"],
                                              args.config, args.launcher))
                    for _ in range(args.repeats)]
        spg = statistics.median(m["seconds_per_generation"] for m in measured)
        steps_per_s = statistics.median(m["steps_per_s"] for m in measured)
        baseline = baseline or (ranks, spg, steps_per_s)
        row = {"env": env_id, "policy": config.policy.kind,
               "noise_table_size": config.es.noise_table_size, "kind": kind, "mode": args.mode,
               "schedule": args.schedule, "ranks": ranks, "population": population,
               "repeats": args.repeats,
               "seconds_per_generation": spg,
               "spg_min": min(m["seconds_per_generation"] for m in measured),
               "spg_max": max(m["seconds_per_generation"] for m in measured),
               "generations_per_s": 1.0 / spg,
               "steps_per_s": steps_per_s,
               "efficiency": efficiency(args.mode, baseline[0], baseline[1], ranks, spg),
               "step_efficiency": step_efficiency(baseline[0], baseline[2], ranks, steps_per_s),
               "bytes_per_generation": statistics.median(m["bytes_per_generation"]
                                                         for m in measured)}
        for column in BREAKDOWN:
            row[column] = statistics.median(m[column] for m in measured)
        rows.append(row)
        print(f"ranks {ranks:>3}: {spg:.3f} s/generation, efficiency {row['efficiency']:.3f}",
              flush=True)
    return rows


def markdown(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    columns = columns or ["ranks", "population", "seconds_per_generation", "steps_per_s",
                          "efficiency", *BREAKDOWN]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _write_results(rows: list[dict[str, Any]], out: Path, table: str) -> None:
    """``results.csv`` (every column) and ``results.md`` in ``out``; the table is printed."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "results.md").write_text(table)
    print("\n" + table)


def _pyplot() -> Any:
    """matplotlib.pyplot (headless), or None without the optional [plot] extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install -e '.[plot]'): no plot written")
        return None
    return plt


def write_table(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    _write_results(rows, out, f"## {title}\n\n{markdown(rows, list(rows[0]))}")


def plot_comm(rows: list[dict[str, Any]], out: Path) -> None:
    """Bytes per update against the parameter count, log-log, one line per population."""
    plt = _pyplot()
    if plt is None:
        return
    figure, axes = plt.subplots(figsize=(6, 4))
    by_params = sorted({r["params"]: r["allreduce_bytes"] for r in rows}.items())
    axes.plot(*zip(*by_params, strict=True), "s-", label="gradient all-reduce (float32)")
    for population in sorted({r["population"] for r in rows}):
        mine = [(r["params"], r["es_bytes"]) for r in rows if r["population"] == population]
        axes.plot(*zip(*mine, strict=True), "o-", label=f"ES, population {population}")
    axes.set(xscale="log", yscale="log", xlabel="parameters", ylabel="bytes per update")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out / "comm.png", dpi=100)
    print(f"wrote {out / 'comm.png'}")


def write_outputs(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    table = f"## {title}\n\n{rows[0]['kind']}, {rows[0]['mode']} scaling\n\n{markdown(rows)}"
    projection = project(rows)
    if projection:
        table += ("\nProjection (rank 0's episodes plus coordination fitted as w0 + c·N; "
                  f"not measured; paper: {PAPER}):\n\n"
                  + markdown(projection, list(projection[0])))
    _write_results(rows, out, table)
    plt = _pyplot()
    if plt is None:
        return
    ranks = [r["ranks"] for r in rows]
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4))
    left.plot(ranks, [r["efficiency"] for r in rows], "o-", label="measured")
    left.axhline(1.0, color="grey", linestyle="--", label="ideal")
    left.set_xscale("log", base=2)
    left.set_xticks(ranks, labels=[str(n) for n in ranks])
    left.set(xlabel="ranks", ylabel="parallel efficiency", ylim=(0, 1.1))
    left.legend()
    base_rate = rows[0]["steps_per_s"] / ranks[0]
    middle.plot(ranks, [r["steps_per_s"] for r in rows], "o-", label="measured")
    if rows[0]["mode"] == "weak":
        middle.plot(ranks, [base_rate * n for n in ranks], "--", color="grey", label="linear")
    middle.set_xscale("log", base=2)
    middle.set_yscale("log")
    middle.set_xticks(ranks, labels=[str(n) for n in ranks])
    middle.set(xlabel="ranks", ylabel="env steps/s")
    middle.legend()
    bottom = [0.0] * len(rows)
    for column in BREAKDOWN:
        values = [r[column] for r in rows]
        right.bar([str(n) for n in ranks], values, bottom=bottom, label=column)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    right.set(xlabel="ranks", ylabel="rank 0 seconds per generation")
    right.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(out / "scaling.png", dpi=100)
    print(f"wrote {out / 'scaling.png'}")


def check_args(args: argparse.Namespace) -> None:
    """A one-line ValueError for flags that would otherwise fail only after the first
    launches, or with a message about something else."""
    if args.command == "comm":
        if any(population % 2 for population in args.populations):
            raise ValueError(f"--populations {','.join(map(str, args.populations))}: counts "
                             "must be even (mirrored pairs)")
        return
    at_least = (("--members-per-rank", args.members_per_rank, 1),
                ("--population", args.population, 2),
                ("--generations", args.generations, WARMUP_GENERATIONS + 3))
    for name, value, low in at_least:
        if value < low:
            raise ValueError(f"{name} {value}: must be >= {low}")
    for name, value in (("--synthetic-step-ms", args.synthetic_step_ms),
                        ("--min-sleep-ms", args.min_sleep_ms)):
        if value is not None and not 0 <= value < math.inf:
            raise ValueError(f"{name} {value}: must be a finite number >= 0")


def parse_counts(text: str) -> list[int]:
    """'1e4,1e5' -> [10000, 100000]."""
    try:
        counts = [int(float(part)) for part in text.split(",")]
    except (ValueError, OverflowError):  # not a number; inf
        counts = []
    if not counts or min(counts) < 1:
        raise cliargs.SpecError(f"{text!r}: expected comma-separated counts, e.g. 1e4,1e5")
    return counts


def comm_worker(params: list[int], populations: list[int], repeats: int, out: Path) -> None:
    """Under mpiexec: time what the trainer exchanges per update (``es.exchange``, static
    schedule, no observation statistics) against an all-reduce of a float32 gradient of the
    parameter count (what data-parallel policy gradient sends). Rank 0 writes
    ``out/comm.csv``."""
    import time

    import numpy as np

    from es.comm import MPIComm
    from es.exchange import share_results, static_share

    comm = MPIComm()
    no_obs_stats = np.zeros(0, dtype=np.int64)
    rows = []
    for population in populations:
        members = static_share(comm.rank, comm.size, population, mirrored=True)
        returns = np.zeros(len(members))

        def es_update(members=members, returns=returns, population=population) -> None:
            share_results(comm, population, True, members, returns, 0, no_obs_stats,
                          dynamic=False)

        for dim in params:
            gradient = np.zeros(dim, dtype=np.float32)
            timings = {}
            exchanges = (("es", es_update),
                         ("allreduce", lambda grad=gradient: comm.allreduce_sum(grad)))
            for name, exchange in exchanges:
                exchange()  # warm-up
                comm.barrier()
                before, times = comm.world_bytes_sent, []
                for _ in range(repeats):
                    started = time.perf_counter()
                    exchange()
                    times.append(time.perf_counter() - started)
                timings[name] = (statistics.median(times), (comm.world_bytes_sent - before)
                                 // repeats)
            rows.append({
                "ranks": comm.size, "params": dim, "population": population,
                "es_bytes": timings["es"][1], "allreduce_bytes": timings["allreduce"][1],
                "bytes_ratio": timings["es"][1] / timings["allreduce"][1],
                "es_us": 1e6 * timings["es"][0], "allreduce_us": 1e6 * timings["allreduce"][0],
            })
    if comm.rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        with (out / "comm.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def comm_compare(args: argparse.Namespace) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix=".es-bench-", dir=".") as tmp:
        _run_mpi(args.ranks[0], sys.executable, "-m", "es.bench", "comm-worker", "--params",
                 ",".join(map(str, args.params)), "--populations",
                 ",".join(map(str, args.populations)), "--repeats", str(args.repeats), "--out",
                 tmp, launcher=args.launcher)
        with open(f"{tmp}/comm.csv") as handle:
            return [{k: float(v) if "." in v else int(v) for k, v in row.items()}
                    for row in csv.DictReader(handle)]


def add_comm_sizes(parser: argparse.ArgumentParser) -> None:
    """What ``comm`` measures, passed on to ``comm-worker`` as it is."""
    parser.add_argument("--params", type=parse_counts, default="1e4,1e5,1e6", metavar="LIST",
                        help="parameter counts, comma-separated (default: %(default)s)")
    parser.add_argument("--populations", type=parse_counts, default="256,1024",
                        metavar="LIST", help="population sizes, even, comma-separated "
                        "(default: %(default)s)")
    add_flag(parser, "--repeats", "timed exchanges of each size", default=50)


def parser() -> ArgumentParser:
    from es import (  # numpy: imported only here, as late as the parser
        bench_bbob,
        bench_reference,
        bench_suite,
    )

    parse = ArgumentParser(prog="es-bench", description=__doc__.splitlines()[0],
                           examples=["es-bench scaling --ranks 1,2,4 --mode weak",
                                     "es-bench suite configs/suites/mujoco.toml --seeds 0-4",
                                     "es-bench bbob --dims 2,5,10 --methods auto,pycma --jobs 2"])
    commands = parse.add_subparsers(dest="command", required=True)
    scale = commands.add_parser(
        "scaling", help="efficiency across rank counts",
        description="Measured scaling of es-train across rank counts: generations/s, env "
        "steps/s, parallel efficiency and rank 0's time breakdown. The config is trained as it "
        "is; --env, --policy and --table-size replace its values.",
        examples=["es-bench scaling --ranks 1,2 --mode weak",
                  "es-bench scaling --config configs/humanoid.toml --ranks 1,32,64,128 "
                  "--launcher 'srun --mpi=pmix'",
                  "es-bench scaling --synthetic-step-ms 2 --ranks 1,2,4,8,16,32,64"])
    add_flag(scale, "--config", "trained as it is, policy and noise table included",
             default=str(Path(__file__).parent / "bench_base.toml"))
    add_flag(scale, "--env", "instead of the config's env.id")
    scale.add_argument("--policy", choices=("linear", "mlp", "cnn"),
                       help="policy.kind instead of the config's")
    add_flag(scale, "--table-size", "instead of the config's")
    scale.add_argument("--synthetic-step-ms", type=float, help="use es/Sleep-v0 with this step")
    scale.add_argument("--lengths", choices=("fixed", "pareto"), default="fixed")
    scale.add_argument("--mean-length", type=int, default=100)
    scale.add_argument("--max-length", type=int, default=1000)
    scale.add_argument("--min-sleep-ms", type=float, default=10.0,
                       help="coalesce synthetic sleeps to at least this long (0: every step)")
    cliargs.add_ranks(scale, "1,2", several=True, detail="one measurement per count")
    scale.add_argument("--mode", choices=("weak", "strong"), default="weak")
    scale.add_argument("--members-per-rank", type=int, default=16)
    scale.add_argument("--population", type=int, default=64, help="strong scaling population")
    add_flag(scale, "--generations", "at least 5 (warm-up and the final evaluation are not "
             "timed)", default=8)
    add_flag(scale, "--repeats", "runs of each rank count", default=3)
    scale.add_argument("--schedule", choices=("static", "dynamic"), default="static")
    cliargs.add_out(scale, "scaling", per="ENV-MODE")
    compare = commands.add_parser(
        "comm", help="ES scalars vs a gradient all-reduce",
        description="Bytes and time per update: what the ES ranks exchange against an "
        "all-reduce of a float32 gradient of the same parameter count.",
        examples=["es-bench comm --params 1e4,1e5,1e6 --populations 256,1024",
                  "es-bench comm --ranks 128 --launcher 'srun --mpi=pmix'"])
    add_comm_sizes(compare)
    cliargs.add_ranks(compare, "2", several=False)
    cliargs.add_out(compare, "comm")
    for sub in (scale, compare):
        add_flag(sub, "--launcher")
    bench_bbob.add_parsers(commands)  # bbob, highdim
    bench_suite.add_parser(commands)
    bench_reference.add_parser(commands)
    worker = commands.add_parser(
        "comm-worker", help="run by es-bench comm under mpiexec",
        examples=["mpiexec -n 2 python -m es.bench comm-worker --params 1e4 --populations 256 "
                  "--out bench-results/comm"])
    add_comm_sizes(worker)
    cliargs.add_out(worker, "comm", "comm.csv goes there")
    return parse


def main(argv: list[str] | None = None) -> int:
    from es import bench_bbob, bench_reference, bench_suite

    args = parser().parse_args(argv)
    try:
        if args.command in bench_bbob.COMMANDS:
            return bench_bbob.COMMANDS[args.command](args)
        if args.command == "suite":
            return bench_suite.run_suite(args)
        if args.command == "reference":
            return bench_reference.run_reference(args)
        if args.command == "comm-worker":
            comm_worker(args.params, args.populations, args.repeats, args.out)
            return 0
        check_args(args)
        if args.command == "comm":
            rows = comm_compare(args)
            write_table(rows, args.out, "es-bench comm: bytes and time per update, ES scalars "
                        "vs float32 gradient all-reduce")
            plot_comm(rows, args.out)
            return 0
        rows = scaling(args)
    except (ValueError, RuntimeError) as error:
        return fail("es-bench", str(error))
    env_name = rows[0]["env"].replace("/", "_")
    out = cliargs.out_folder(args.out, "scaling", f"{env_name}-{args.mode}")
    write_outputs(rows, out, f"es-bench scaling: {rows[0]['env']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
