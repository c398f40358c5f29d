"""Run one episode; observation statistics that merge exactly across any number of ranks.

Observation statistics are (sum, sumsq, count) as in Salimans et al. 2017. Floating-point
sums depend on the order of addition, so a 2-rank run would normalise observations slightly
differently from a 3-rank run. Each episode's sums are therefore rounded to fixed point
(multiples of 2**-8) and added as int64: integer addition is exact in any order, so the
merged statistics, and hence the parameters, are bit-identical at any rank count.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from es.rl.policies import ObsNorm, PolicyError

log = logging.getLogger("es")

#: The warnings of a failed episode; each takes the episode's label first.
RAISED = "%s: episode raised %s: %s"
NON_FINITE = "%s: failed: a non-finite reward or observation (NaN or inf)"

FIXED_POINT_SCALE = 2.0**8
#: What a generation's episodes may add up to, unscaled: scaled, 2**62, within an int64. Each
#: of a generation's P episodes may so add up to 2**54 / P (2**48 = 2.8e14 for P = 64); one
#: beyond is left out of the statistics. The rounding (4e-3 on a whole episode's sum) is far
#: below the std floor of 0.1.
FIXED_POINT_TOTAL = 2.0**54


@dataclass
class Episode:
    total_return: float
    length: int
    obs_sum: np.ndarray | None = None
    obs_sumsq: np.ndarray | None = None


def run_episode(
    env: gym.Env,
    act: Callable[[np.ndarray], np.ndarray | int],
    seed: int,
    record_obs: bool = False,
    max_steps: int | None = None,
) -> Episode:
    """One episode from ``env.reset(seed=seed)`` until termination, truncation or
    ``max_steps`` steps."""
    obs, _ = env.reset(seed=seed)
    total, length = 0.0, 0
    seen = Observations(record_obs)
    while True:
        seen.add(obs)
        obs, reward, terminated, truncated, _ = env.step(act(obs))
        total += float(reward)
        length += 1
        if terminated or truncated or length == max_steps:
            return seen.episode(total, length, obs)


class Observations:
    """What an episode keeps of the observations it acted on, in the memory of one
    observation whatever its length (a list of them grew without bound in an env with no
    time limit). With ``record``, their sum and sum of squares, added in order as the sums
    over the stacked observations were (the same bits); without, a running sum of the
    real-valued ones all the same, which a NaN or inf among them keeps non-finite: a broken
    simulator fails the episode wherever it broke, where only its last observation was
    looked at (an evaluation, a confirmation, es-eval)."""

    def __init__(self, record: bool) -> None:
        self.record = record
        self.sum: np.ndarray | None = None
        self.sumsq: np.ndarray | None = None
        self.finite = True  # of the observations not summed (a Dict's, a Tuple's parts)
        self.size: int | None = None  # the episode's first array observation's

    def add(self, observation: Any) -> None:
        if self.record:
            # A copy, as np.array makes it: some envs reuse their observation's buffer.
            values = np.array(observation, dtype=np.float64).ravel()
            self._same_size(values.size, observation)
            if self.sum is None:
                self.sum, self.sumsq = values, values * values
            else:
                self.sum += values
                self.sumsq += values * values
        elif isinstance(observation, np.ndarray):
            self._same_size(observation.size, observation)
            if observation.dtype.kind != "f":  # integers and bytes (pixels) cannot be NaN
                return
            if self.sum is None:
                self.sum = observation.astype(np.float64).ravel()
            else:
                self.sum += observation.ravel()
        elif self.finite:
            self.finite = all_finite(observation)

    def _same_size(self, size: int, observation: Any) -> None:
        """The episode's observations keep its first one's size: the policy's inputs had
        broadcast a smaller one without a word."""
        if self.size is None:
            self.size = size
        elif size != self.size:
            raise ValueError(f"observation of shape {np.shape(observation)}: the env gave "
                             f"{self.size} numbers at the episode's start, {size} now")

    def episode(self, total: float, length: int, last_observation: Any) -> Episode:
        """The ended episode: its return NaN if any observation was NaN or inf, the last one
        (after the final step) included; with ``record``, the sums of those acted on."""
        finite = (self.finite and (self.sum is None or bool(np.all(np.isfinite(self.sum))))
                  and all_finite(last_observation))
        total = total if finite else float("nan")
        return Episode(total, length, self.sum, self.sumsq) if self.record else Episode(
            total, length)


def all_finite(observation: Any) -> bool:
    return all(np.all(np.isfinite(part)) for part in numeric_parts(observation))


def checked(episode: Episode, label: str) -> Episode:
    """A non-finite return becomes NaN, with a warning naming ``label``: a NaN or inf reward
    or observation (``Observations.episode``), which "non-finite return" left unsaid."""
    if not np.isfinite(episode.total_return):
        log.warning(NON_FINITE, label)
        episode.total_return = float("nan")
    return episode


def numeric_parts(observation: Any) -> list[np.ndarray]:
    """The arrays of an observation of any space (a Dict's or Tuple's parts; text and other
    non-numeric parts left out)."""
    if isinstance(observation, dict):
        return [part for value in observation.values() for part in numeric_parts(value)]
    if isinstance(observation, tuple):
        return [part for value in observation for part in numeric_parts(value)]
    values = np.asarray(observation)
    return [values] if values.dtype.kind in "iufb" else []


def safe_episode(env: gym.Env, act: Callable[[np.ndarray], np.ndarray | int], seed: int,
                 label: str, record_obs: bool = False, max_steps: int | None = None) -> Episode:
    """``run_episode``, but a broken environment (it raises, or gives a non-finite reward or
    observation) does not end the run: the episode is failed, with return NaN and a warning
    naming ``label``. Callers count the NaNs; nobody may drop them silently."""
    try:
        episode = run_episode(env, act, seed, record_obs=record_obs, max_steps=max_steps)
    except PolicyError:  # the user's policy, not the environment: that ends the run
        raise
    except Exception as error:  # a broken environment must not end the run
        log.warning(RAISED, label, type(error).__name__, error)
        return Episode(float("nan"), 0)
    return checked(episode, label)


class _FailuresAlike(logging.Filter):
    """Passes the first warning of each distinct episode failure and counts the others."""

    def __init__(self) -> None:
        super().__init__()
        self.repeats: dict[tuple[str, tuple[str, ...]], int] = {}
        self.lock = threading.Lock()  # the logger is the process's: any thread may log

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg not in (RAISED, NON_FINITE) or not isinstance(record.args, tuple):
            return True
        key = (record.msg, tuple(str(arg) for arg in record.args[1:]))
        with self.lock:
            if key in self.repeats:
                self.repeats[key] += 1
                return False
            self.repeats[key] = 0
        return True


@contextmanager
def failures_told_once(where: str) -> Iterator[None]:
    """Within the block, an episode failure that repeats one already told (the same error,
    the same words) is counted, not printed, and each count is told once at the end as
    ``where: N more episodes alike: ...``: a broken environment fails every member alike,
    and a generation of 64 printed 64 identical lines."""
    repeats = _FailuresAlike()
    log.addFilter(repeats)
    try:
        yield
    finally:
        log.removeFilter(repeats)
        for (message, rest), count in repeats.repeats.items():
            if count:
                more = f"{count} more episode{'s' * (count > 1)} alike"
                log.warning(message, f"{where}: {more}" if where else more, *rest)


def random_policy(env: gym.Env, seed: int) -> Callable[[np.ndarray], np.ndarray | int]:
    """Uniform random actions from the env's action space, seeded: the baseline to beat."""
    env.action_space.seed(seed)
    return lambda obs: env.action_space.sample()


class LockstepEpisode:
    """One member's episode stepped from outside, beside others (the trainer's lockstep):
    what ``safe_episode(run_episode(...))`` does, one ``step(action)`` at a time, with the
    same result: the return, length and recorded observation sums; NaN with a warning naming
    ``label`` for an environment that raises or returns a non-finite value."""

    def __init__(self, member: int, env: gym.Env, seed: int, label: str, record: bool,
                 max_steps: int | None, noise: Callable[[Any], Any] | None) -> None:
        self.member, self.env, self.label, self.record = member, env, label, record
        self.max_steps, self.noise = max_steps, noise
        self.total, self.length = 0.0, 0
        self.seen = Observations(record)
        self.failed: Episode | None = None  # set when the reset itself failed
        self.result: Episode | None = None  # set when the episode is over
        try:
            self.observation, _ = env.reset(seed=seed)
        except Exception as error:  # a broken environment must not end the run
            log.warning(RAISED, label, type(error).__name__, error)
            self.failed = Episode(float("nan"), 0)

    def step(self, action: Any) -> bool:
        """Play ``action`` (the policy's, before action noise); True once the episode is
        over, its ``result`` set."""
        try:
            self.seen.add(self.observation)
        except ValueError as error:  # the env changed its observation's size: failed
            log.warning(RAISED, self.label, type(error).__name__, error)
            self.result = Episode(float("nan"), 0)
            return True
        if self.noise is not None:
            action = self.noise(action)
        try:
            self.observation, reward, terminated, truncated, _ = self.env.step(action)
        except Exception as error:  # a broken environment must not end the run
            log.warning(RAISED, self.label, type(error).__name__, error)
            self.result = Episode(float("nan"), 0)
            return True
        self.total += float(reward)
        self.length += 1
        if not (terminated or truncated or self.length == self.max_steps):
            return False
        self.result = checked(self.seen.episode(self.total, self.length, self.observation),
                              self.label)
        return True


def random_observations(env: gym.Env, count: int, rng: np.random.Generator,
                        keep: float = 0.1) -> np.ndarray:
    """``count`` observations of a uniformly random policy, each step's kept with probability
    ``keep`` so they spread over many episode phases, not one stretch. A pure function of the
    generator (reset seeds and actions come from it) for a deterministic environment."""
    kept: list[np.ndarray] = []
    act = random_policy(env, int(rng.integers(2**31)))
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    while len(kept) < count:
        if rng.random() < keep:
            kept.append(np.array(obs))
        obs, _, terminated, truncated, _ = env.step(act(obs))
        if terminated or truncated:
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
    return np.stack(kept)


class ObsStats:
    """Running (sum, sumsq, count) of observations; increments are exact int64 blocks, so
    their sum is the same in any order, on any number of ranks. ``episodes``: how many a
    generation adds, which sets how large each may be (``limit``)."""

    def __init__(self, dim: int, episodes: int) -> None:
        self.dim = dim
        self.limit = FIXED_POINT_TOTAL / max(episodes, 1)
        self.sum = np.zeros(dim, dtype=np.float64)
        self.sumsq = np.zeros(dim, dtype=np.float64)
        self.count = 0

    def empty_increment(self) -> np.ndarray:
        """Layout: [sum (dim) | sumsq (dim) | count], fixed point except the count."""
        return np.zeros(2 * self.dim + 1, dtype=np.int64)

    def add_episode(self, increment: np.ndarray, episode: Episode) -> bool:
        """Add an episode's sums to ``increment``; False (and nothing added) for a failed
        episode, or one whose sums are not finite or beyond ``limit``."""
        if episode.obs_sum is None or episode.obs_sumsq is None:
            return False
        sums = np.concatenate((episode.obs_sum, episode.obs_sumsq))
        if not np.all(np.isfinite(sums)) or np.abs(sums).max() > self.limit:
            return False
        increment[:-1] += np.rint(sums * FIXED_POINT_SCALE).astype(np.int64)
        increment[-1] += episode.length
        return True

    def apply(self, increment: np.ndarray) -> None:
        """Fold a merged increment in (the same on every rank, so the same result)."""
        fixed = increment[:-1].astype(np.float64) / FIXED_POINT_SCALE
        self.sum += fixed[: self.dim]
        self.sumsq += fixed[self.dim :]
        self.count += int(increment[-1])

    def norm(self, clip: float, min_variance: float = 1e-2) -> ObsNorm:
        if self.count == 0:
            return ObsNorm.identity(self.dim, clip)
        mean = self.sum / self.count
        std = np.sqrt(np.maximum(self.sumsq / self.count - np.square(mean), min_variance))
        return ObsNorm(mean.astype(np.float32), std.astype(np.float32), clip)
