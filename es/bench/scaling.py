"""``es-bench scaling``: measured scaling of the trainer across rank counts.

    es-bench scaling --ranks 1,2 --mode weak
    es-bench scaling --config configs/humanoid.toml --ranks 1,32,64,128
    es-bench scaling --synthetic-step-ms 2 --ranks 1,2,4,8,16,32,64

For each rank count it launches ``mpiexec -n N es-train`` itself (several repetitions), reads
the run's ``progress.csv`` and reports generations/s, env steps/s, parallel efficiency against
the smallest rank count and rank 0's time breakdown per generation. Weak scaling keeps the
members per rank fixed (ideal: constant time per generation); strong scaling keeps the
population fixed (ideal: time per generation falls as 1/N). It writes a CSV, a Markdown table
and, when matplotlib is installed, a PNG into ``--out``.

The config (``--config``, by default ``es/bench/base.toml``: HalfCheetah, a linear policy, a
small noise table) is trained as it is, its policy and noise table included; ``--env``,
``--policy-kind`` and ``--table-size`` replace its values, and say so in one printed line.

With ``--synthetic-step-ms`` the environment is ``es/Sleep-v0``: steps sleep instead of
computing, so many ranks on few cores measure coordination overhead only. With a real
environment the figures are CPU-bound and meaningful only up to the number of cores.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import tempfile
from pathlib import Path
from typing import Any

from es.bench.launch import BIN, run_mpi, set_flags
from es.bench.report import markdown, out_folder, partial_rows_kept, pyplot, write_results

BASE_CONFIG = Path(__file__).parent / "base.toml"
BREAKDOWN = ("rollout_s", "wait_s", "update_s", "eval_s", "io_s")
WARMUP_GENERATIONS = 2  # start-up and the first noise-table touches are not steady state
# The last generation of a run always evaluates the mean policy: not steady state either.
#: Weak scaling's members per rank and strong scaling's population, where not given.
WEAK_MEMBERS_PER_RANK = 16
STRONG_POPULATION = 64
#: The synthetic environment's flags (``--synthetic-step-ms``), where not given.
SYNTHETIC_DEFAULTS = {"lengths": "fixed", "mean_length": 100, "max_length": 1000,
                      "min_sleep_ms": 10.0}

COLUMNS = ["ranks", "population", "seconds_per_generation", "steps_per_s", "efficiency",
           *BREAKDOWN]


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


def run_training(
    ranks: int, overrides: list[str], config: str, launcher: str | None = None
) -> list[dict[str, str]]:
    with tempfile.TemporaryDirectory(prefix=".es-bench-", dir=".") as tmp:  # seen by all nodes
        try:
            run_mpi(ranks, str(BIN / "es-train"), config, "--run-dir", f"{tmp}/run", "--quiet",
                    *set_flags(overrides), launcher=launcher)
        except RuntimeError as error:
            if "(exit 2): es-train: error:" not in str(error):
                raise
            raise RuntimeError(  # which of its keys a user can change here, and how
                f"{error}; es-bench scaling trains {config} as it is but for --env, "
                "--policy-kind and --table-size: change any other key in a copy of it given "
                "as --config") from None
        with open(f"{tmp}/run/progress.csv") as handle:
            return list(csv.DictReader(handle))


def replaced_values(args: argparse.Namespace) -> list[str]:
    """The config's values that flags replace (``--set`` overrides): its environment, policy
    kind (a CNN without observation normalisation, which it refuses) and noise table size,
    only where a flag asks for it."""
    replaced = []
    if args.synthetic_step_ms is not None:
        replaced += ["env.id=es/Sleep-v0", f"env.kwargs.step_ms={args.synthetic_step_ms}",
                     f"env.kwargs.lengths={args.lengths}",
                     f"env.kwargs.mean_length={args.mean_length}",
                     f"env.kwargs.max_length={args.max_length}",
                     f"env.kwargs.min_sleep_ms={args.min_sleep_ms}"]
    elif args.env is not None:
        replaced.append(f"env.id={args.env}")
    if args.policy_kind is not None:
        replaced.append(f"policy.kind={args.policy_kind}")
        if args.policy_kind == "cnn":  # refused beside a CNN, and no flag here could unset it
            replaced.append("policy.obs_norm=false")
    if args.table_size is not None:
        replaced.append(f"es.noise_table_size={args.table_size}")
    return replaced


def scaling(args: argparse.Namespace) -> list[dict[str, Any]]:
    from es.config import load_config
    from es.rl.envs import check_env_id

    replaced = replaced_values(args)
    base = [f"run.generations={args.generations}", "run.eval_every=1000000",
            "run.checkpoint_every=1000000", f"run.schedule={args.schedule}", *replaced]
    config = load_config(args.config, base)  # a bad config or flag fails before any launch
    check_env_id(config.env.id)  # --env CartPol-v1 too
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
    with partial_rows_kept(rows, len(args.ranks), "rank counts", scaling_out(args, env_id)):
        measure(args, config, base, kind, rows)
    return rows


def scaling_out(args: argparse.Namespace, env_id: str) -> Path:
    """``--out``, or ``bench-results/scaling/<env>-<mode>``."""
    return out_folder(args.out, "scaling", f"{env_id.replace('/', '_')}-{args.mode}")


def measure(args: argparse.Namespace, config: Any, base: list[str], kind: str,
            rows: list[dict[str, Any]]) -> None:
    """Each rank count's row, appended to ``rows`` as it is measured."""
    env_id = config.env.id
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


def write_outputs(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    table = (f"## {title}\n\n{rows[0]['kind']}, {rows[0]['mode']} scaling\n\n"
             f"{markdown(rows, COLUMNS)}")
    projection = project(rows)
    if projection:
        table += ("\nProjection (rank 0's episodes plus coordination fitted as w0 + c·N; "
                  f"not measured; paper: {PAPER}):\n\n"
                  + markdown(projection, list(projection[0])))
    write_results(rows, out, table)
    plt = pyplot()
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




def check_scaling(args: argparse.Namespace) -> None:
    """A one-line ValueError for flags that would otherwise fail only after the first
    launches, or with a message about something else."""
    for key, default in SYNTHETIC_DEFAULTS.items():
        given = getattr(args, key)
        if given is not None and args.synthetic_step_ms is None:
            raise ValueError(f"--{key.replace('_', '-')} {given}: only with --synthetic-step-ms "
                             "(it shapes the synthetic environment's episodes)")
        if given is None:
            setattr(args, key, default)
    other = {"weak": ("--population", args.population), "strong":
             ("--members-per-rank", args.members_per_rank)}[args.mode]
    if other[1] is not None:
        raise ValueError(f"{other[0]} {other[1]}: not with --mode {args.mode} (weak scaling "
                         "sets --members-per-rank, strong scaling --population)")
    if args.members_per_rank is None:
        args.members_per_rank = WEAK_MEMBERS_PER_RANK
    if args.population is None:
        args.population = STRONG_POPULATION
    if args.population % 2:
        raise ValueError(f"--population {args.population}: must be even (members are played "
                         "in mirrored pairs)")
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
    if args.synthetic_step_ms is not None and not 1 <= args.mean_length <= args.max_length:
        raise ValueError(f"--mean-length {args.mean_length}: must be in [1, --max-length "
                         f"{args.max_length}]")  # es-train's refusal, after a launch, said less
