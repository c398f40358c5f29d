"""``es-bench reference``: our DQN and PPO beside published results, at their env steps.

    es-bench reference --seeds 0-2
    es-bench reference --cases ppo-halfcheetah-1m --seeds 0-2 --ranks 2

A baseline is only worth comparing against if it performs as the field's reference
implementations do. Each case trains one shipped baseline config (``configs/baselines/``) for
exactly the env steps of a published result (``run.max_timesteps``; no wall-clock limit, so
the figures do not depend on this machine's speed), as a real ``es-baseline`` process per
seed, and scores the run the two ways the references report theirs:

- **training return**: the mean of the run's last 100 training episodes (exploring policy:
  epsilon-greedy or sampled actions, raw rewards), what cleanrl reports (openrlbenchmark
  averages each seed's last 100 ``episodic_return`` values, then gives mean ± std over
  seeds). ``progress.csv`` holds a mean per round; the oldest round needed counts in
  proportion to the episodes it contributes.
- **final evaluation**: the final policy (greedy / mean action) on 20 fresh seeded episodes,
  what RL Baselines3 Zoo's benchmark reports (a deterministic evaluation of one trained
  agent).

Each case names its reference's source, metric, seeds and steps, and ``results.md`` puts ours
in that metric (mean ± std over our seeds) beside it, with the ratio. A run whose
``final.json`` exists is done and not redone; ``--jobs`` runs several side by side. Outputs in
``--out`` (default ``bench-results/reference``), covering every finished run there (earlier
calls' cases too): ``runs.csv`` (a row per run, with the ranks it ran on, also in its
``command.json``), ``results.md``.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from es.bench.report import out_folder, run_interruptible
from es.bench.suite import (
    BIN,
    NO_GENERATION_LIMIT,
    finished_seeds,
    last_line,
    read_progress,
    run_all,
    score_final,
    supervised,
    write_csv,
)
from es.config import shipped_config

FINAL_EPISODES = 20
TRAINING_EPISODES = 100  # cleanrl / openrlbenchmark: the last 100 training episodes
TRAINING, EVALUATION = "training return", "final evaluation"


@dataclass(frozen=True)
class Reference:
    """A published result, as its source reports it."""

    source: str
    mean: float
    std: float
    metric: str  # TRAINING or EVALUATION
    runs: str  # how many seeds / runs the figure is over
    note: str = ""


@dataclass(frozen=True)
class Case:
    name: str
    method: str  # es-baseline's algorithm
    config: str
    steps: int
    references: tuple[Reference, ...]
    overrides: tuple[str, ...] = ()
    max_ranks: int = 0  # more ranks than the config can use get this many (0: any number)


CLEANRL_PPO = ("cleanrl ppo_continuous_action.py, docs/benchmark/ppo_continuous_action.md "
               "(HalfCheetah-v4)")
# cleanrl's script itself, run on this project's machine (scripts/cleanrl_ppo_reference.py).
CLEANRL_PPO_HERE = Reference("cleanrl ppo_continuous_action.py run here: torch 2.13 CPU, "
                             "gymnasium 1.4, mujoco 4.0, HalfCheetah-v4", 1471.44, 24.28,
                             TRAINING, "6 seeds, 1-6", "its own code and settings")
CLEANRL_ROLLOUT = ("ppo.anneal_lr=true", "ppo.num_envs=1", "ppo.steps_per_env=2048")


def cleanrl_ppo(note: str) -> tuple[Reference, Reference]:
    """cleanrl's published HalfCheetah PPO figure (``note``: how the case relates to it) and
    its script as run here."""
    return (Reference(CLEANRL_PPO, 1442.64, 46.03, TRAINING, "3 seeds", note),
            CLEANRL_PPO_HERE)


CASES: dict[str, Case] = {case.name: case for case in (
    Case("dqn-cartpole-50k", "dqn", "configs/baselines/cartpole_dqn.toml", 50_000, (
        Reference("RL Baselines3 Zoo benchmark.md, dqn CartPole-v1", 500.0, 0.0, EVALUATION,
                  "1 run", "its own tuned settings: 256-256 net, lr 2.3e-3, epsilon to 0.04 "
                  "over 8k steps"),), max_ranks=1),  # DQN is one process by design
    Case("dqn-cartpole-500k", "dqn", "configs/baselines/cartpole_dqn.toml", 500_000, (
        Reference("cleanrl dqn.py, docs/rl-algorithms/dqn.md", 488.69, 16.11, TRAINING,
                  "3 seeds", "the same settings as ours, constant lr as there"),),
         ("dqn.lr_decay_steps=0",), max_ranks=1),
    Case("ppo-cartpole-100k", "ppo", "configs/baselines/cartpole_ppo.toml", 100_000, (
        Reference("RL Baselines3 Zoo benchmark.md, ppo CartPole-v1", 500.0, 0.0, EVALUATION,
                  "1 run", "the same tuned settings as ours"),)),
    Case("ppo-pendulum-100k", "ppo", "configs/baselines/pendulum_ppo.toml", 100_000, (
        Reference("RL Baselines3 Zoo benchmark.md, ppo Pendulum-v1", -172.225, 104.159,
                  EVALUATION, "1 run", "with gSDE exploration (ours: plain Gaussian)"),)),
    Case("ppo-halfcheetah-1m", "ppo", "configs/baselines/halfcheetah_ppo.toml", 1_000_000, (
        *cleanrl_ppo("the same settings as ours; v4 (ours v5)"),
        Reference("RL Baselines3 Zoo benchmark.md, ppo HalfCheetah-v3", 5819.099, 663.530,
                  EVALUATION, "1 run", "tuned otherwise: lr 2e-5, clip 0.1, 256-256 ReLU, "
                  "gamma 0.98, 512-step rollouts"),
    ), ("ppo.anneal_lr=true",)),
    # cleanrl's rollout exactly: one environment for 2,048 steps (one rank only).
    Case("ppo-halfcheetah-1m-1env", "ppo", "configs/baselines/halfcheetah_ppo.toml", 1_000_000,
         cleanrl_ppo("the same settings and rollout as ours here; v4 (ours v5)"),
         CLEANRL_ROLLOUT, max_ranks=1),
    # ... and on the reference's own HalfCheetah-v4, so no version differs.
    Case("ppo-halfcheetah-v4-1m-1env", "ppo", "configs/baselines/halfcheetah_ppo.toml",
         1_000_000, cleanrl_ppo("the same settings, rollout and env version as ours here"),
         (*CLEANRL_ROLLOUT, "env.id=HalfCheetah-v4"), max_ranks=1),
    # ... and ending an episode at the time limit as cleanrl does: no bootstrap from its value,
    # on v5 (the env) and on cleanrl's v4.
    Case("ppo-halfcheetah-1m-1env-noboot", "ppo", "configs/baselines/halfcheetah_ppo.toml",
         1_000_000, cleanrl_ppo("the same settings, rollout and time-limit handling as ours "
                                "here; v4 (ours v5)"),
         (*CLEANRL_ROLLOUT, "ppo.bootstrap_truncated=false"), max_ranks=1),
    Case("ppo-halfcheetah-v4-1m-1env-noboot", "ppo", "configs/baselines/halfcheetah_ppo.toml",
         1_000_000, cleanrl_ppo("the same settings, rollout, env version and time-limit "
                                "handling as ours here"),
         (*CLEANRL_ROLLOUT, "env.id=HalfCheetah-v4", "ppo.bootstrap_truncated=false"),
         max_ranks=1),
)}


def training_return(rows: list[dict[str, str]], episodes: int = TRAINING_EPISODES) -> float:
    """The mean return of the last ``episodes`` training episodes from ``progress.csv``'s
    per-round means; the oldest round needed counts in proportion (NaN: none finished)."""
    total, counted = 0.0, 0.0
    for row in reversed(rows):
        if not row.get("return_mean"):
            continue
        finished = int(row["episodes"]) - int(row.get("failed_episodes") or 0)
        take = min(finished, episodes - counted)
        total += take * float(row["return_mean"])
        counted += take
        if counted >= episodes:
            break
    return total / counted if counted else math.nan


def ranks_of(case: Case, ranks: int) -> int:
    """The ranks a case's runs use when ``--ranks`` asks for ``ranks``."""
    return min(ranks, case.max_ranks or ranks)


def runs_on_ranks(ranks: list[int]) -> str:
    """'each on 2 ranks', or where some cases run in one process (DQN, one-env PPO) however
    many ranks were asked for: '3 on 2 ranks, 6 on 1'."""
    counts = collections.Counter(ranks)
    if len(counts) == 1:
        return f"each on {ranks[0]} rank{'s' if ranks[0] > 1 else ''}"
    return ", ".join(f"{n} on {r}" + (" ranks" if i == 0 else "")
                     for i, (r, n) in enumerate(sorted(counts.items(), reverse=True)))


def train_command(case: Case, seed: int, run_dir: Path, ranks: int) -> list[str]:
    overrides = [*case.overrides, f"run.seed={seed}", f"run.max_timesteps={case.steps}",
                 "run.max_seconds=0", f"run.generations={NO_GENERATION_LIMIT}"]
    line = [str(BIN / "es-baseline"), case.method, str(shipped_config(case.config)), "--run-dir",
            str(run_dir),
            "--force", "--quiet"]
    for value in overrides:
        line += ["--set", value]
    ranks = ranks_of(case, ranks)
    if ranks > 1:
        line = [str(BIN / "mpiexec"), "-n", str(ranks), *line]
    return line


def run_folder(out: Path, case: Case, seed: int) -> Path:
    return out / "runs" / f"{case.name}-seed{seed}"


def execute(case: Case, seed: int, out: Path, ranks: int) -> None:
    """Train and score one run, unless it is done (its ``final.json`` exists)."""
    run_dir = run_folder(out, case, seed)
    final = run_dir / "final.json"
    if not final.is_file():
        if run_dir.exists():
            shutil.rmtree(run_dir)  # interrupted: baselines do not resume, start again
        run_dir.mkdir(parents=True)
        command = train_command(case, seed, run_dir, ranks)
        (run_dir / "command.json").write_text(json.dumps(
            {"ranks": ranks_of(case, ranks), "command": command}, indent=1) + "\n")
        returncode, stderr = supervised(command)
        if returncode != 0:
            raise RuntimeError(f"{case.name} seed {seed}: es-baseline exited with {returncode}: "
                               f"{last_line(stderr)}")
        score_final(run_dir, FINAL_EPISODES, f"{case.name} seed {seed}")


def finished_runs(out: Path) -> list[tuple[Case, int]]:
    """Every case and seed with its final score in ``out``, in ``CASES``' order."""
    runs = []
    for case in CASES.values():
        runs += [(case, seed) for seed in finished_seeds(out, case.name)]
    return runs


def run_row(case: Case, seed: int, out: Path) -> dict[str, Any]:
    """A finished run's row of ``runs.csv``."""
    run_dir = run_folder(out, case, seed)
    rows = read_progress(run_dir)
    returns = np.array(json.loads((run_dir / "final.json").read_text())["returns"],
                       dtype=np.float64)
    launched = run_dir / "command.json"
    ranks = json.loads(launched.read_text())["ranks"] if launched.is_file() else ""
    return {"case": case.name, "method": case.method, "seed": seed, "ranks": ranks,
            "config": " ".join([case.config, *case.overrides]), "steps": int(rows[-1]["timesteps"]),
            "train_s": float(rows[-1]["time_s"]), TRAINING: training_return(rows),
            EVALUATION: float(returns.mean()), "final_std": float(returns.std()),
            "final_min": float(returns.min())}


def comparison(case: Case, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per reference: ours in its metric (mean ± std over seeds) beside it."""
    lines = []
    for reference in case.references:
        ours = np.array([r[reference.metric] for r in rows], dtype=np.float64)
        ratio = ours.mean() / reference.mean if reference.mean else math.nan
        lines.append({
            "case": case.name, "steps": f"{case.steps:,}", "metric": reference.metric,
            # One seed has no spread over seeds: a "± 0.0" would read as a measured one.
            "ours": (f"{ours.mean():,.1f} ± {ours.std():,.1f} (seeds "
                     f"{','.join(str(r['seed']) for r in rows)})" if len(rows) > 1 else
                     f"{ours[0]:,.1f} (seed {rows[0]['seed']} alone)"),
            "reference": f"{reference.mean:,.1f} ± {reference.std:,.1f} ({reference.runs})",
            # Returns can be negative (Pendulum): "ours / reference" reads the wrong way there.
            "ours / reference": f"{ratio:.2f}" if reference.mean > 0 else "—",
            "source": reference.source + (f"; {reference.note}" if reference.note else ""),
        })
    return lines


def markdown(lines: list[dict[str, Any]], title: str) -> str:
    columns = list(lines[0])
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    table += ["| " + " | ".join(str(line[c]) for c in columns) + " |" for line in lines]
    return f"## {title}\n\n" + "\n".join(table) + "\n"


def reference(args: argparse.Namespace) -> int:
    names = list(CASES) if args.cases is None else [n.strip() for n in args.cases.split(",")]
    unknown = [n for n in names if n not in CASES]
    if unknown or not names:
        raise ValueError(f"--cases {args.cases!r}: allowed are {', '.join(CASES)}")
    out = out_folder(args.out, "reference")
    out.mkdir(parents=True, exist_ok=True)
    work = [(CASES[name], seed) for name in names for seed in args.seeds]
    ranks = args.ranks[0]
    print(f"es-bench reference: {len(work)} runs, {args.jobs} at a time, "
          f"{runs_on_ranks([ranks_of(case, ranks) for case, _ in work])}", flush=True)

    def one(item: tuple[Case, int]) -> None:
        execute(*item, out, ranks)
        row = run_row(*item, out)
        print(f"  {row['case']} seed {row['seed']}: training {row[TRAINING]:.1f}, final "
              f"{row[EVALUATION]:.1f} ± {row['final_std']:.1f}, {row['train_s']:.0f} s",
              flush=True)

    run_all(one, work, args.jobs, "es-bench reference", out)
    # The tables cover every finished run in the folder, this call's and earlier ones'.
    finished = finished_runs(out)
    rows = [run_row(case, seed, out) for case, seed in finished]
    write_csv(out / "runs.csv", rows)
    lines = [line for case in dict.fromkeys(case for case, _ in finished)
             for line in comparison(case, [r for r in rows if r["case"] == case.name])]
    text = markdown(lines, f"es-bench reference: every finished run in {out}; training return "
                    f"= the last {TRAINING_EPISODES} training episodes, final evaluation = "
                    f"the final policy on {FINAL_EPISODES} fresh episodes")
    (out / "results.md").write_text(text)
    print("\n" + text)
    return 0


def run_reference(args: argparse.Namespace) -> int:
    return run_interruptible(reference, args)
