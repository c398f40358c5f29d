"""Measure the published PPO reference on this machine: run cleanrl's own
``ppo_continuous_action.py`` for several seeds and score each run in cleanrl's metric (the
mean of its last 100 training episodes), the figure es-bench reference compares ours with.

    python scripts/cleanrl_ppo_reference.py --script PATH/ppo_continuous_action.py \\
        --seeds 1-6 --jobs 2 --out bench-results/cleanrl-ppo

cleanrl's code is not part of this project: take ``cleanrl/ppo_continuous_action.py`` from
the vwxyzjn/cleanrl repository (measured: commit 016ca33, HalfCheetah-v4, 1M steps, its
defaults) and run this with an interpreter that has torch, tyro, tensorboard and
``gymnasium[mujoco]``. With gymnasium 1.4 its ``TransformObservation`` needs the observation
space as third argument (``env.observation_space``); nothing else needs changing. Each seed's
output goes to ``seed<S>.log`` in ``--out``, and a seed whose run finished
(``seed<S>.done``) is not rerun (``--score-only`` scores existing logs); ``results.csv`` gets a
row per seed, and mean ± std over seeds is printed. Runs use one thread each
(``OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from report import emit, run_script, script_parser

from es.cli.args import add_flag, add_out, parse_seeds

RETURN = re.compile(r"episodic_return=([-+\d.eE]+)")
LAST_EPISODES = 100


def training_return(log: Path) -> tuple[float, int]:
    """The mean of the last 100 episodic returns the run printed, and how many it printed."""
    returns = [float(value) for value in RETURN.findall(log.read_text())]
    if not returns:
        return float("nan"), 0
    return float(np.mean(returns[-LAST_EPISODES:])), len(returns)


def run_seed(script: Path, seed: int, log: Path, extra: list[str]) -> None:
    """One run of cleanrl's script; ``seed<S>.done`` marks it finished."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with log.open("w") as out:
        done = subprocess.run([sys.executable, str(script), "--seed", str(seed), *extra],
                              stdout=out, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode == 0:
        log.with_suffix(".done").touch()
    else:
        print(f"seed {seed}: exit code {done.returncode}, see {log}", file=sys.stderr)


def parser() -> argparse.ArgumentParser:
    parse = script_parser(__file__, __doc__, [
        "python scripts/cleanrl_ppo_reference.py --script ppo_continuous_action.py "
        "--seeds 1-6 --jobs 2",
        "python scripts/cleanrl_ppo_reference.py --score-only"])
    parse.add_argument("--script", type=Path, metavar="PATH",
                       help="cleanrl's ppo_continuous_action.py")
    parse.add_argument("--score-only", action="store_true", help="only score existing logs")
    parse.add_argument("extra", nargs="*", help="more arguments for cleanrl's script")
    add_flag(parse, "--seeds", "cleanrl's --seed of the runs", default=parse_seeds("1-6"))
    add_flag(parse, "--jobs")
    add_out(parse, "cleanrl-ppo")
    return parse


def main() -> int:
    parse = parser()
    args = parse.parse_args()
    logs = {seed: args.out / f"seed{seed}.log" for seed in args.seeds}
    if not args.score_only:
        if args.script is None or not args.script.is_file():
            parse.error(f"--script {args.script}: not a file; give cleanrl's "
                        "ppo_continuous_action.py")
        args.out.mkdir(parents=True, exist_ok=True)
        todo = [s for s, log in logs.items() if not log.with_suffix(".done").exists()]
        with ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda s: run_seed(args.script, s, logs[s], args.extra), todo))
    rows = []
    for seed, log in logs.items():
        if log.exists():
            mean, episodes = training_return(log)
            rows.append({"seed": seed, "episodes": episodes, "training return": mean,
                         "finished": log.with_suffix(".done").exists()})
    if not rows:
        parse.error(f"no seed<S>.log in {args.out}")
    emit(rows, args.out, "cleanrl ppo_continuous_action.py: the mean of each run's last "
         f"{LAST_EPISODES} training episodes")
    values = np.array([row["training return"] for row in rows])
    print(f"mean ± std over seeds {','.join(str(r['seed']) for r in rows)}: "
          f"{values.mean():,.2f} ± {values.std():,.2f}")
    return 0


if __name__ == "__main__":
    run_script(main)
