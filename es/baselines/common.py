"""What the baselines share with ``es-train``: the run folder (``config.toml``,
``progress.csv`` with the same columns, ``policy.npz`` that ``es-eval`` plays), evaluation of
the greedy/mean policy on the same seeded episodes, budgets and the progress line."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import tomli_w

from es.config import BUILT_IN_POLICIES, Config, ConfigError
from es.core.pauses import PauseClock
from es.core.seeding import TAG_EVAL, episode_seeds
from es.parallel.comm import Comm
from es.parallel.exchange import spread
from es.rl.checkpoint import save_policy, write_atomically
from es.rl.cnn import ConvNetSpec
from es.rl.envs import env_from_config, policy_spec_for
from es.rl.metrics import ProgressLog, evaluation_columns, progress_line
from es.rl.policies import ObsNorm, PolicySpec, bind_policy
from es.rl.rollout import failures_told_once, safe_episode
from es.rl.runs import TRANSIENT, end_status_line

log = logging.getLogger("es")


#: Called by a baseline's ``train`` on every rank once it has checked its config and env,
#: before anything is written: es-baseline starts the run folder there (clearing an earlier
#: run's files), so that a refused config leaves the earlier run in it untouched.
Begin = Callable[[], None]


def check_box_observations(space: gym.Space) -> None:
    """The baselines' own networks take Box observations: another space is a ConfigError
    (exit 2) before anything is written, not an AttributeError from its missing bounds."""
    if not isinstance(space, gym.spaces.Box):
        raise ConfigError(f"observation space {space}: the baselines' networks take Box "
                          "observations (vectors, or stacked frames for policy.kind = 'cnn')")


def network_spec(config: Config, env: Any, program: str) -> PolicySpec | ConvNetSpec:
    """The network of ``policy.*`` for this env: an MLP (or linear), or for pixels the CNN
    torso without VBN (``es.baselines.nn`` has no backward pass through VBN). What the env
    refuses comes first: a CNN on a vector env was told to drop VBN, then refused anyway."""
    policy = config.policy
    if policy.kind not in BUILT_IN_POLICIES:
        raise ConfigError(f"policy.kind = {policy.kind!r}: {program} trains its own networks "
                          f"({', '.join(BUILT_IN_POLICIES)}), not a user's policy")
    check_box_observations(env.observation_space)
    try:
        spec = policy_spec_for(env, policy.kind, policy.hidden, policy.activation,
                               policy.torso, vbn=False)
    except ValueError as error:  # an env the networks cannot take: a config's error, exit 2
        raise ConfigError(str(error)) from None
    if policy.kind == "cnn" and policy.vbn:
        raise ConfigError(f"policy.vbn = true: {program} trains CNNs without virtual batch "
                          "norm; add --set policy.vbn=false")
    return spec


def input_scaling(space: gym.spaces.Box) -> ObsNorm:
    """A fixed input scaling from the observation space's bounds: a dimension with finite
    bounds maps onto [-1, 1] (Atari RAM bytes, angles), an unbounded one passes through. The
    baselines keep no running statistics (as cleanrl), yet bytes of 0..255 would saturate a
    tanh network. ``policy.npz`` stores it (no clipping), so es-eval scales alike."""
    low = np.asarray(space.low, dtype=np.float64).ravel()
    high = np.asarray(space.high, dtype=np.float64).ravel()
    bounded = np.isfinite(low) & np.isfinite(high) & (high > low)
    low, high = np.where(bounded, low, -1.0), np.where(bounded, high, 1.0)
    mean, std = (low + high) / 2, (high - low) / 2
    return ObsNorm(mean.astype(np.float32), std.astype(np.float32), float("inf"))


def scaled_env(config: Config) -> tuple[gym.Env, ObsNorm]:
    """The config's environment with ``input_scaling`` applied to its observations; pixels
    stay as they are (the CNN scales them by 1/255 itself)."""
    env = env_from_config(config)
    try:
        check_box_observations(env.observation_space)
    except ConfigError:
        env.close()
        raise
    norm = input_scaling(env.observation_space)
    if config.policy.kind == "cnn":
        return env, ObsNorm.identity(norm.mean.size, float("inf"))
    mean, std = norm.mean.astype(np.float64), norm.std.astype(np.float64)
    wrapped = gym.wrappers.TransformObservation(
        env, lambda obs: (np.ravel(obs) - mean) / std,
        gym.spaces.Box(-np.inf, np.inf, (mean.size,), np.float64))
    return wrapped, norm


@dataclass
class BaselineResult:
    rounds: int
    timesteps: int
    eval_return: float | None


class BaselineRun:
    """One baseline run's bookkeeping; every rank makes one, rank 0 writes the files."""

    def __init__(self, config: Config, comm: Comm, run_dir: Path | None, spec: PolicySpec,
                 norm: ObsNorm, started: float | None = None) -> None:
        self.config, self.comm, self.run_dir, self.spec = config, comm, run_dir, spec
        self.norm = norm
        self.started = time.time() if started is None else started
        self.pause_clock = PauseClock()  # es-train's rule: time stopped is not run time
        self.pause_clock.start()
        self.env = env_from_config(config)
        self.best_eval: float | None = None
        self.eval_return: float | None = None
        self.progress: ProgressLog | None = None
        if comm.rank == 0 and run_dir is not None:
            config_toml = tomli_w.dumps(config.to_dict())
            write_atomically(run_dir / "config.toml",
                             lambda handle: handle.write(config_toml.encode()))
            self.progress = ProgressLog(
                run_dir / "progress.csv",
                tensorboard_config=config_toml if config.run.tensorboard else None)

    @property
    def elapsed_s(self) -> float:
        return time.time() - self.started - self.pause_clock.paused_s

    def budget_spent(self, rounds: int, timesteps: int) -> bool:
        """``run.generations`` (rounds here) or ``run.max_timesteps`` reached: the same
        answer on every rank."""
        run = self.config.run
        return rounds >= run.generations or 0 < run.max_timesteps <= timesteps

    def out_of_time(self) -> bool:
        """``run.max_seconds`` spent by this process's clock: under MPI the ranks must agree
        on it before acting (clocks differ a little)."""
        return 0 < self.config.run.max_seconds <= self.elapsed_s

    def due_for_eval(self, rounds: int, last: bool) -> bool:
        return last or rounds % self.config.run.eval_every == 0

    def evaluate(self, params: np.ndarray, index: int) -> np.ndarray:
        """Returns of the greedy (discrete) or mean (continuous) policy on the same seeded
        evaluation episodes es-train uses (the unscaled env and ``policy.npz``'s scaling, as
        es-eval plays it); the episodes are spread over the ranks."""
        episodes = self.config.run.eval_episodes
        seeds = episode_seeds(self.config.run.seed, index, episodes, TAG_EVAL)
        act = bind_policy(self.spec, params.astype(np.float32), self.norm)
        with failures_told_once(f"rank {self.comm.rank}"):
            return spread(self.comm, episodes, lambda j: safe_episode(
                self.env, act, seeds[j], f"rank {self.comm.rank}: evaluation episode {j}"
            ).total_return)

    def record(self, row: dict[str, Any], params: np.ndarray,
               eval_returns: np.ndarray | None) -> None:
        """Fill the evaluation columns, print the progress line, append to progress.csv and
        save ``policy.npz`` after each evaluation (rank 0)."""
        row |= evaluation_columns(eval_returns)
        if row["eval_return"] is not None:
            self.eval_return = row["eval_return"]
            self.best_eval = max(self.eval_return, self.best_eval or -np.inf)
        row.setdefault("time_s", self.elapsed_s)
        row.setdefault("paused_s", self.pause_clock.paused_s)
        if self.comm.rank != 0:
            return
        printable = {**row}
        for key in ("return_mean", "return_max"):
            if printable.get(key) is None:
                printable[key] = float("nan")
        log.info(progress_line(printable, self.best_eval if eval_returns is not None else None),
                 extra=None if eval_returns is not None else TRANSIENT)
        if self.progress is not None:
            self.progress.write(row)
            if eval_returns is not None:
                save_policy(self.run_dir / "policy.npz", self.spec, params.astype(np.float32),
                            self.norm, self.config.env.id, int(row["generation"]))

    def close(self) -> None:
        self.pause_clock.stop()
        end_status_line()
        if self.progress is not None:
            self.progress.close()


def episode_stats(returns: list[float], failed: int = 0) -> dict[str, float | None]:
    """The ``return_*`` columns for the training episodes a round finished (none: empty),
    and how many more ended because the environment broke (``checked_step``)."""
    counts = {"episodes": len(returns) + failed, "failed_episodes": failed}
    if not returns:
        return {"return_mean": None, "return_min": None, "return_max": None, **counts}
    values = np.asarray(returns, dtype=np.float64)
    return {"return_mean": float(values.mean()), "return_min": float(values.min()),
            "return_max": float(values.max()), **counts}


def progress_row(generation: int, timesteps: int, returns: list[float], failed: int,
                 steps: int, elapsed: float, eval_started: float, **columns: Any
                 ) -> dict[str, Any]:
    """A baseline's ``progress.csv`` row for a round of ``steps`` env steps that took
    ``elapsed`` seconds before its evaluation (begun at ``eval_started``, a perf_counter
    time): the episode statistics, rates and timings; ``columns`` fill what the method
    measures (``bytes_sent``, ``rollout_s``, ``wait_s``, ``update_s``, ``grad_norm``),
    the rest are 0."""
    return {"generation": generation, "timesteps": timesteps,
            **episode_stats(returns, failed),
            "evals_per_s": (len(returns) + failed) / elapsed, "steps_per_s": steps / elapsed,
            "bytes_sent": 0, "rollout_s": 0.0, "wait_s": 0.0, "update_s": 0.0,
            "eval_s": time.perf_counter() - eval_started, "io_s": 0.0, "grad_norm": None,
            **columns}


def checked_step(env: gym.Env, action: Any, label: str
                 ) -> tuple[np.ndarray, float, bool, bool] | None:
    """``env.step``, or None when the environment broke: it raised, or gave a non-finite
    reward or observation. The transition is then unusable (it would poison the replay or
    the batch) and the episode is over, failed; the caller counts it (``failed_episodes``)."""
    try:
        obs, reward, terminated, truncated, _ = env.step(action)
    except Exception as error:  # a broken environment must not end the run
        log.warning("%s: env.step raised %s: %s", label, type(error).__name__, error)
        return None
    floating = np.issubdtype(np.asarray(obs).dtype, np.floating)
    if not np.isfinite(reward) or (floating and not np.all(np.isfinite(obs))):
        log.warning("%s: non-finite reward or observation", label)
        return None
    return obs, float(reward), bool(terminated), bool(truncated)


def clip_by_norm(grad: np.ndarray, max_norm: float) -> tuple[np.ndarray, float]:
    """``grad`` scaled down to ``max_norm`` if longer (0: unchanged), and its original norm."""
    norm = float(np.linalg.norm(grad))
    if max_norm > 0 and norm > max_norm:
        grad = grad * (max_norm / norm)
    return grad, norm
