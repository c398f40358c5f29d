"""EvoTorch's side of ``scripts/bench_peers.py``: run by the Python of a venv that has
EvoTorch (``--evo-python``), so it imports nothing of es.

It trains HalfCheetah-v5 as EvoTorch's own examples build it, with the settings of es's
``configs/halfcheetah_pgpe.toml`` (which follows EvoTorch's PGPE): a linear policy with a bias
(``Linear(obs_length, act_length)``), observation normalisation, PGPE with ClipUp, population
64 sampled symmetrically, centered ranks, an initial stdev of 0.05 adapted per coordinate;
``num_actors`` Ray actors. It writes ``progress.csv`` (generation, env steps of the
population's episodes, seconds since this process started) until ``--max-timesteps``, then
plays the final center with EvoTorch's own ``to_policy`` (its observation normalisation, its
action clipping) on the given reset seeds and writes ``eval.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

STARTED = time.perf_counter()


def main() -> None:
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parse.add_argument("--seed", type=int, required=True)
    parse.add_argument("--actors", type=int, required=True)
    parse.add_argument("--max-timesteps", type=int, required=True)
    parse.add_argument("--out-dir", type=Path, required=True)
    parse.add_argument("--problem", choices=("vecgymne", "gymne"), required=True)
    parse.add_argument("--eval-episodes", type=int, required=True)
    parse.add_argument("--eval-seed", type=int, required=True)
    args = parse.parse_args()

    import evotorch
    import gymnasium as gym
    import numpy as np
    import ray
    import torch
    from evotorch.algorithms import PGPE
    from evotorch.neuroevolution import GymNE, VecGymNE

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    problem = {"gymne": GymNE, "vecgymne": VecGymNE}[args.problem](
        env="HalfCheetah-v5", network="Linear(obs_length, act_length)",
        observation_normalization=True, num_actors=args.actors)
    searcher = PGPE(problem, popsize=64, center_learning_rate=0.075, stdev_learning_rate=0.1,
                    stdev_init=0.05, optimizer="clipup", optimizer_config={"max_speed": 0.15},
                    ranking_method="centered", symmetric=True, stdev_max_change=0.2)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with (args.out_dir / "progress.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["generation", "timesteps", "time_s"])
        generation, steps = 0, 0
        while steps < args.max_timesteps:
            searcher.step()
            generation += 1
            steps = int(searcher.status["total_interaction_count"])
            writer.writerow([generation, steps, f"{time.perf_counter() - STARTED:.4f}"])
            handle.flush()
    # Its normalisation layer keeps float64 statistics: the policy runs in float64 throughout.
    policy = problem.to_policy(searcher.status["center"]).double()
    env = gym.make("HalfCheetah-v5")
    returns = []
    with torch.no_grad():
        for episode in range(args.eval_episodes):
            observation, _ = env.reset(seed=args.eval_seed + episode)
            total, done = 0.0, False
            while not done:
                action = policy(torch.as_tensor(observation, dtype=torch.float64)).numpy()
                observation, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
    (args.out_dir / "eval.json").write_text(json.dumps({
        "returns": returns, "generations": generation,
        "versions": {"evotorch": evotorch.__version__, "ray": ray.__version__,
                     "torch": torch.__version__}}))
    ray.shutdown()


if __name__ == "__main__":
    main()
