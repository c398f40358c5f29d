"""Training env-steps/s against bare environment stepping with the same policy.

    python scripts/bench_throughput.py --config configs/halfcheetah.toml --ranks 2

Both are measured in one script run, with the same number of processes: first every rank
steps the environment with the config's policy and nothing else (no training, no
communication), then ``mpiexec -n RANKS es-train CONFIG`` runs for ``--generations`` and its
steps/s is read from progress.csv (evaluation, updates and communication included).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from report import BIN, emit, mpiexec  # noqa: E402


def bare_worker(config_path: str, seconds: float) -> None:
    """Under mpiexec: step episodes with a perturbed initial policy; rank 0 prints steps/s."""
    from es.comm import MPIComm
    from es.config import load_config
    from es.envs import make_env, policy_spec_for
    from es.policies import ObsNorm, act_fn
    from es.rollout import run_episode

    comm = MPIComm()
    config = load_config(config_path)
    env = make_env(config.env.id, config.env.max_episode_steps or None, config.env.kwargs)
    spec = policy_spec_for(env, config.policy.kind, config.policy.hidden, config.policy.activation)
    rng = np.random.default_rng(comm.rank)
    params = spec.initial_params(rng) + config.es.sigma * rng.standard_normal(
        spec.num_params).astype(np.float32)
    norm = ObsNorm.identity(spec.obs_dim, config.policy.obs_clip)
    comm.barrier()
    steps, started, episode = 0, time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        steps += run_episode(env, act_fn(spec, params, norm), seed=episode).length
        episode += 1
    rate = steps / (time.perf_counter() - started)
    rates = comm.allgather_rows(np.array([[rate, steps, 0.0]]))
    if comm.rank == 0:
        print(f"BARE {rates[:, 0].sum():.1f} {int(rates[:, 1].sum())}", flush=True)


def training_rate(config: str, ranks: int, generations: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        command = mpiexec(ranks, str(BIN / "es-train"), config, "--run-dir", f"{tmp}/run",
                          "--quiet", "--set", f"run.generations={generations}")
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
        with open(f"{tmp}/run/progress.csv") as handle:
            rows = list(csv.DictReader(handle))
    first, last = rows[0], rows[-1]
    steps = int(last["timesteps"]) - int(first["timesteps"])
    return steps / (float(last["time_s"]) - float(first["time_s"])), steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/halfcheetah.toml")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--generations", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=20.0, help="bare stepping duration")
    parser.add_argument("--csv", default="bench/throughput.csv")
    parser.add_argument("--bare-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_worker:
        bare_worker(args.config, args.seconds)
        return
    bare = subprocess.run(
        mpiexec(args.ranks, sys.executable, __file__, "--bare-worker", "--config", args.config,
                "--seconds", str(args.seconds)),
        check=True, capture_output=True, text=True,
    )
    bare_line = next(line for line in bare.stdout.splitlines() if line.startswith("BARE"))
    bare_rate, bare_steps = float(bare_line.split()[1]), int(bare_line.split()[2])
    train_rate, train_steps = training_rate(args.config, args.ranks, args.generations)
    emit([{"config": args.config, "ranks": args.ranks, "bare_steps_per_s": bare_rate,
           "bare_steps": bare_steps, "train_steps_per_s": train_rate, "train_steps": train_steps,
           "ratio": train_rate / bare_rate}],
         args.csv, "Training throughput vs bare environment stepping, same policy and ranks")


if __name__ == "__main__":
    main()
