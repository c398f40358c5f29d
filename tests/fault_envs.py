"""Environments that misbehave on purpose, for the reliability tests.

Used as ``env.id = "fault_envs:Flaky-v0"`` with ``tests/`` on PYTHONPATH. Whether an episode
goes wrong is a pure function of its reset seed, so every rank count sees the same failures.
"""

import gymnasium as gym
import numpy as np

from es.rl.synthetic import SleepEnv


class FlakyEnv(gym.Env):
    """A 1-D point that should move right; some episodes raise, return NaN or NaN obs."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, fail_every: int = 4) -> None:
        self.fail_every = fail_every
        self.mode, self.x, self.t = "ok", 0.0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        pick = int(self.np_random.integers(0, 3 * self.fail_every))
        self.mode = {0: "raise", 1: "nan_reward", 2: "nan_obs"}.get(pick, "ok")
        self.x, self.t = float(self.np_random.normal()), 0
        return np.array([self.x, 1.0]), {}

    def step(self, action):
        self.t += 1
        if self.t == 5 and self.mode == "raise":
            raise RuntimeError("simulator exploded")
        self.x += float(np.asarray(action).ravel()[0])
        reward = self.x
        if self.t == 5 and self.mode == "nan_reward":
            reward = float("nan")
        obs = np.array([self.x, 1.0])
        if self.t == 5 and self.mode == "nan_obs":
            obs[0] = float("nan")
        return obs, reward, False, self.t >= 20, {}


gym.register("Flaky-v0", entry_point=FlakyEnv)



class LoudEnv(gym.Env):
    """A 1-D point that should move right, beside an observation held at ``scale``: sensor
    values in their own units (millimetres, counts), large but finite."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, scale: float = 1e6) -> None:
        self.scale, self.x, self.t = scale, 0.0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = float(self.np_random.normal()), 0
        return np.array([self.x, self.scale]), {}

    def step(self, action):
        self.t += 1
        self.x += float(np.asarray(action).ravel()[0])
        return np.array([self.x, self.scale]), self.x, False, self.t >= 50, {}


gym.register("Loud-v0", entry_point=LoudEnv)


class FlakyDiscreteEnv(FlakyEnv):
    """FlakyEnv with two actions (left, right), for DQN and Gorila."""

    action_space = gym.spaces.Discrete(2)

    def step(self, action):
        return super().step(2.0 * int(action) - 1.0)


def fails(seed: int, fail_every: int = 4) -> bool:
    """Whether the episode reset with ``seed`` goes wrong (at its 5th step): the same draw
    ``FlakyEnv.reset`` makes."""
    return int(np.random.default_rng(seed).integers(0, 3 * fail_every)) < 3


gym.register("FlakyDiscrete-v0", entry_point=FlakyDiscreteEnv)


class GlitchEnv(FlakyEnv):
    """FlakyEnv whose broken episodes (the same ``fails`` seeds) neither raise nor return a
    NaN reward: one observation at step 5 is NaN (or inf), and the episode carries on as if
    nothing happened. Only a look at every observation catches it, not at the last one."""

    def step(self, action):
        broken, self.mode = self.mode, "ok"
        obs, reward, terminated, truncated, info = super().step(action)
        self.mode = broken
        if self.t == 5 and broken != "ok":
            obs[0] = float("nan") if broken == "nan_obs" else float("inf")
        return obs, reward, terminated, truncated, info


gym.register("Glitch-v0", entry_point=GlitchEnv)


class LuckyEnv(gym.Env):
    """One step whose return is mostly luck: how close the action is to 0.5, plus a large
    draw from the reset seed. A short evaluation's mean says little about the policy, which
    is what the best-policy tests need: lucky evaluations that a longer one does not confirm."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, luck: float = 3.0) -> None:
        self.luck, self.draw = luck, 0.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.draw = float(self.np_random.normal())
        return np.ones(1), {}

    def step(self, action):
        reward = -(float(np.asarray(action).ravel()[0]) - 0.5) ** 2 + self.luck * self.draw
        return np.ones(1), reward, True, False, {}


gym.register("Lucky-v0", entry_point=LuckyEnv)


class DoomedSleepEnv(SleepEnv):
    """``es/Sleep-v0`` whose reset raises for the reset seeds listed in ``doomed``: a run
    whose every episode of one generation fails, the same way on every launch."""

    def __init__(self, doomed: list[int] = (), **kwargs) -> None:
        super().__init__(**kwargs)
        self.doomed = set(doomed)

    def reset(self, *, seed=None, options=None):
        if seed in self.doomed:
            raise RuntimeError(f"doomed reset seed {seed}")
        return super().reset(seed=seed, options=options)


gym.register("DoomedSleep-v0", entry_point=DoomedSleepEnv)
