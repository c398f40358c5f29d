"""A synthetic Gymnasium environment whose steps take wall time but no CPU.

``es/Sleep-v0`` sleeps ``step_ms`` per step, so dozens of ranks on two cores measure the
framework's own coordination overhead, not the machine's arithmetic. Episode lengths are
drawn from the reset seed (fixed, or heavy-tailed like early terminations in Hopper), so they
are the same for every rank count. The task itself is simple and learnable: drive a linear
system's state to a target; the return is higher the closer it gets.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

LENGTH_DISTRIBUTIONS = ("fixed", "pareto")


class SleepEnv(gym.Env):
    metadata: dict = {"render_modes": []}

    def __init__(
        self,
        step_ms: float = 2.0,
        obs_dim: int = 8,
        act_dim: int = 2,
        lengths: str = "fixed",
        mean_length: int = 100,
        max_length: int = 1000,
    ) -> None:
        if step_ms < 0:
            raise ValueError(f"step_ms {step_ms}: must be >= 0")
        if lengths not in LENGTH_DISTRIBUTIONS:
            raise ValueError(f"lengths {lengths!r}: allowed are {', '.join(LENGTH_DISTRIBUTIONS)}")
        if not 1 <= mean_length <= max_length:
            raise ValueError(f"mean_length {mean_length}: must be in [1, max_length]")
        self.step_s = step_ms / 1000.0
        self.lengths, self.mean_length, self.max_length = lengths, mean_length, max_length
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
        self._mix = np.linspace(-1.0, 1.0, obs_dim * act_dim).reshape(obs_dim, act_dim)
        self._target = np.linspace(0.5, -0.5, obs_dim)
        self.state = np.zeros(obs_dim)
        self.length = self.t = 0

    def draw_length(self) -> int:
        """Fixed, or Pareto with shape 1.5 (mean ``mean_length``), capped at ``max_length``."""
        if self.lengths == "fixed":
            return self.mean_length
        shape = 1.5
        scale = self.mean_length * (shape - 1) / shape
        draw = scale * (1.0 + self.np_random.pareto(shape))
        return int(min(max(round(draw), 1), self.max_length))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.length, self.t = self.draw_length(), 0
        self.state = self.np_random.normal(size=self.state.size)
        return self.state.copy(), {}

    def step(self, action):
        if self.step_s:
            time.sleep(self.step_s)
        self.t += 1
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        self.state = 0.9 * self.state + 0.1 * (self._mix @ action)
        reward = -float(np.sum(np.square(self.state - self._target)))
        return self.state.copy(), reward, False, self.t >= self.length, {}


def register() -> None:
    if "es/Sleep-v0" not in gym.registry:
        gym.register("es/Sleep-v0", entry_point=SleepEnv)
