"""A synthetic Gymnasium environment whose steps take wall time but no CPU.

``es/Sleep-v0`` paces its steps ``step_ms`` apart by sleeping, so dozens of ranks on two cores
measure the framework's own coordination overhead, not the machine's arithmetic. Pacing is by
deadline, as a simulator with a fixed step cost would behave: a step returns ``step_ms`` after
the previous step's deadline, so the policy's few microseconds between steps and an
oversubscribed scheduler's late wake-ups are absorbed instead of piling up. A caller that
arrives after the deadline gets no sleep, and the deadlines restart from then: a stall in the
framework is never hidden by later, shorter steps.

A wake-up itself costs the sleeper 20-50 µs of CPU (measured on the 2-core box), which at 64
ranks and 2 ms steps would saturate two cores with the emulator's own load. ``min_sleep_ms``
coalesces sleeps: a step whose deadline is less than that far ahead returns at once and a later
step sleeps for both, the episode's last step always sleeping up to its deadline. An episode
still takes ``length * step_ms``; only the spacing of its steps inside changes. Episode lengths are
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
        min_sleep_ms: float = 0.0,
    ) -> None:
        if step_ms < 0:
            raise ValueError(f"step_ms {step_ms}: must be >= 0")
        if lengths not in LENGTH_DISTRIBUTIONS:
            raise ValueError(f"lengths {lengths!r}: allowed are {', '.join(LENGTH_DISTRIBUTIONS)}")
        if not 1 <= mean_length <= max_length:
            raise ValueError(f"mean_length {mean_length}: must be in [1, max_length]")
        if min_sleep_ms < 0:
            raise ValueError(f"min_sleep_ms {min_sleep_ms}: must be >= 0")
        self.step_s, self.min_sleep_s = step_ms / 1000.0, min_sleep_ms / 1000.0
        self.lengths, self.mean_length, self.max_length = lengths, mean_length, max_length
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
        self._mix = np.linspace(-1.0, 1.0, obs_dim * act_dim).reshape(obs_dim, act_dim)
        self._target = np.linspace(0.5, -0.5, obs_dim)
        self.state = np.zeros(obs_dim)
        self.length = self.t = 0
        self.clock, self.sleep = time.perf_counter, time.sleep  # replaceable in tests
        self._deadline = 0.0

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
        self._deadline = self.clock()
        self.state = self.np_random.normal(size=self.state.size)
        return self.state.copy(), {}

    def step(self, action):
        self.t += 1
        if self.step_s:
            target, now = self._deadline + self.step_s, self.clock()
            if now >= target:
                self._deadline = now
            else:
                if target - now >= self.min_sleep_s or self.t >= self.length:
                    self.sleep(target - now)
                self._deadline = target
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        self.state = 0.9 * self.state + 0.1 * (self._mix @ action)
        reward = -float(np.sum(np.square(self.state - self._target)))
        return self.state.copy(), reward, False, self.t >= self.length, {}


def register() -> None:
    if "es/Sleep-v0" not in gym.registry:
        gym.register("es/Sleep-v0", entry_point=SleepEnv)
