"""The SPMD generation loop: every rank runs it, evaluates its share, applies the same update.

Per generation the ranks exchange (member id, return, length) rows and one int64 block of
observation statistics; nothing else. Each rank rebuilds every perturbation from the shared
noise (table slice or seed) and steps the identical ``OpenES`` state, so the parameters are
bit-identical on every rank and for every rank count. Only rank 0 writes files.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tomli_w

from es.checkpoint import save_policy, write_atomically
from es.comm import Comm
from es.config import Config
from es.envs import make_env, policy_spec_for
from es.metrics import ProgressLog, progress_line
from es.noise import NoiseSource, NoiseTable, SeedNoise, fill_table
from es.optim import make_optimizer
from es.policies import ObsNorm, act_fn
from es.rollout import ObsStats, run_episode
from es.seeding import TAG_ENV, TAG_EVAL, TAG_INIT, episode_seeds, generator
from es.strategy import FITNESS_SHAPINGS, Generation, OpenES

log = logging.getLogger("es")


@dataclass
class TrainResult:
    params: np.ndarray
    generations: int
    timesteps: int
    eval_return: float | None


def make_noise(config: Config, comm: Comm) -> NoiseSource:
    """The shared table lives once per node (an MPI shared window under MPI)."""
    if config.es.noise == "seed":
        return SeedNoise()
    table = comm.node_shared_array(
        config.es.noise_table_size, np.float32, lambda out: fill_table(out, config.run.seed)
    )
    return NoiseTable(table)


class Trainer:
    def __init__(
        self, config: Config, comm: Comm, run_dir: Path | None, start_time: float | None = None
    ) -> None:
        self.config, self.comm, self.run_dir = config, comm, run_dir
        self.start_time = time.time() if start_time is None else start_time
        env_cfg, policy_cfg, es_cfg = config.env, config.policy, config.es
        self.env = make_env(env_cfg.id, env_cfg.max_episode_steps or None, env_cfg.kwargs)
        self.spec = policy_spec_for(
            self.env, policy_cfg.kind, tuple(policy_cfg.hidden), policy_cfg.activation
        )
        seed = config.run.seed
        if es_cfg.noise == "table" and self.spec.num_params > es_cfg.noise_table_size:
            raise ValueError(
                f"es.noise_table_size = {es_cfg.noise_table_size}: must be >= the policy's "
                f"{self.spec.num_params} parameters"
            )
        self.strategy = OpenES(
            self.spec.initial_params(generator(seed, TAG_INIT)),
            population=es_cfg.population,
            sigma=es_cfg.sigma,
            noise=make_noise(config, comm),
            optimizer=make_optimizer(
                es_cfg.optimizer, self.spec.num_params, es_cfg.lr, es_cfg.momentum
            ),
            l2=es_cfg.l2,
            mirrored=es_cfg.mirrored,
            seed=seed,
            sigma_decay=es_cfg.sigma_decay,
            sigma_min=es_cfg.sigma_min,
            lr_decay=es_cfg.lr_decay,
            lr_min=es_cfg.lr_min,
            fitness_shaping=FITNESS_SHAPINGS[es_cfg.fitness_shaping],
        )
        self.obs_stats = ObsStats(self.spec.obs_dim)
        self.timesteps = 0

    @property
    def norm(self) -> ObsNorm:
        if not self.config.policy.obs_norm:
            return ObsNorm.identity(self.spec.obs_dim, self.config.policy.obs_clip)
        return self.obs_stats.norm(self.config.policy.obs_clip)

    def my_directions(self, count: int) -> range:
        """Static round-robin share of this rank (a mirrored pair stays on one rank)."""
        return range(self.comm.rank, count, self.comm.size)

    def evaluate_population(self, generation: Generation) -> tuple[np.ndarray, np.ndarray]:
        """Returns and lengths of all members (member order) and the merged obs-stat block."""
        count = len(generation.directions)
        seeds = episode_seeds(self.config.run.seed, generation.index, count, TAG_ENV)
        per_direction = 2 if generation.mirrored else 1
        norm, record = self.norm, self.config.policy.obs_norm
        increment = self.obs_stats.empty_increment()
        rows = []
        for direction in self.my_directions(count):
            for member in range(direction * per_direction, (direction + 1) * per_direction):
                act = act_fn(self.spec, generation.params(member), norm)
                episode = run_episode(self.env, act, seeds[direction], record_obs=record)
                if record:
                    self.obs_stats.add_episode(increment, episode)
                rows.append((member, episode.total_return, episode.length))
        gathered = self.comm.allgather_rows(np.array(rows, dtype=np.float64).reshape(-1, 3))
        gathered = gathered[np.argsort(gathered[:, 0], kind="stable")]
        if not np.array_equal(gathered[:, 0], np.arange(generation.population)):
            raise RuntimeError(f"generation {generation.index}: members missing after gather")
        merged = self.comm.allreduce_sum(increment) if record else increment
        return gathered[:, 1:], merged

    def evaluate_mean(self, index: int) -> np.ndarray:
        """Noise-free returns of the current mean policy; episodes spread over the ranks."""
        episodes = self.config.run.eval_episodes
        seeds = episode_seeds(self.config.run.seed, index, episodes, TAG_EVAL)
        act = act_fn(self.spec, self.strategy.theta, self.norm)
        rows = [
            (j, run_episode(self.env, act, seeds[j]).total_return, 0.0)
            for j in range(self.comm.rank, episodes, self.comm.size)
        ]
        gathered = self.comm.allgather_rows(np.array(rows, dtype=np.float64).reshape(-1, 3))
        return gathered[np.argsort(gathered[:, 0], kind="stable"), 1]

    def run(self) -> TrainResult:
        writer = self.comm.rank == 0 and self.run_dir is not None
        progress = ProgressLog(self.run_dir / "progress.csv") if writer else None
        if writer:
            payload = tomli_w.dumps(self.config.to_dict()).encode()
            write_atomically(self.run_dir / "config.toml", lambda handle: handle.write(payload))
        eval_return = None
        try:
            while True:
                row = self._generation()
                eval_return = row["eval_return"] if row["eval_return"] is not None else eval_return
                if self.comm.rank == 0:
                    log.info(progress_line(row))
                    if progress:
                        progress.write(row)
                if writer and row["eval_return"] is not None:
                    self._save_policy()
                if self._done():
                    break
        finally:
            if progress:
                progress.close()
        return TrainResult(
            self.strategy.theta.copy(), self.strategy.generation, self.timesteps, eval_return
        )

    def _done(self) -> bool:
        run_cfg = self.config.run
        budget = run_cfg.max_timesteps
        return self.strategy.generation >= run_cfg.generations or (
            budget > 0 and self.timesteps >= budget
        )

    def _generation(self) -> dict:
        started = time.perf_counter()
        bytes_before = self.comm.world_bytes_sent
        generation = self.strategy.ask()
        results, increment = self.evaluate_population(generation)
        returns, lengths = results[:, 0], results[:, 1]
        update_started = time.perf_counter()
        stats = self.strategy.tell(returns)
        if self.config.policy.obs_norm:
            self.obs_stats.apply(increment)
        update_s = time.perf_counter() - update_started
        steps = int(lengths.sum())
        self.timesteps += steps
        index = self.strategy.generation
        evaluated = index % self.config.run.eval_every == 0 or self._done()
        eval_returns = self.evaluate_mean(index) if evaluated else None
        elapsed = time.perf_counter() - started
        return {
            "generation": index,
            "timesteps": self.timesteps,
            "time_s": time.time() - self.start_time,
            "return_mean": float(returns.mean()),
            "return_min": float(returns.min()),
            "return_max": float(returns.max()),
            "eval_return": None if eval_returns is None else float(eval_returns.mean()),
            "eval_std": None if eval_returns is None else float(eval_returns.std()),
            "episodes": len(returns),
            "evals_per_s": len(returns) / elapsed,
            "steps_per_s": steps / elapsed,
            "bytes_sent": self.comm.world_bytes_sent - bytes_before,
            "update_s": update_s,
            "grad_norm": stats["grad_norm"],
        }

    def _save_policy(self) -> None:
        save_policy(
            self.run_dir / "policy.npz",
            self.spec,
            self.strategy.theta,
            self.norm,
            self.config.env.id,
            self.strategy.generation,
        )
