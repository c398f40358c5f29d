"""Users' policies and environments for the tests, importable as ``user_policies:...`` with
``tests/`` on PYTHONPATH: NumPy objects of the policy protocol, torch modules, broken
factories of every kind, and environments with Dict observations and MultiDiscrete actions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn


class LinearNumpy:
    """A linear policy of the protocol in plain NumPy, for any Box or Dict observation (the
    Dict's parts concatenated) and Discrete, Box or MultiDiscrete actions."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 scale: float = 0.0) -> None:
        self.inputs = int(gym.spaces.flatdim(observation_space))
        self.action_space = action_space
        if isinstance(action_space, gym.spaces.Discrete):
            self.outputs = int(action_space.n)
        elif isinstance(action_space, gym.spaces.MultiDiscrete):
            self.outputs = int(action_space.nvec.sum())
        else:
            self.outputs = int(np.prod(action_space.shape))
        self.num_params = self.inputs * self.outputs + self.outputs
        self.scale = scale

    def initial_params(self, rng: np.random.Generator) -> np.ndarray:
        return (self.scale * rng.standard_normal(self.num_params)).astype(np.float32)

    def act(self, params, observation, state):
        if isinstance(observation, dict):
            x = np.concatenate([np.ravel(observation[key]) for key in sorted(observation)])
        elif isinstance(observation, tuple):
            x = np.concatenate([np.ravel(part) for part in observation])
        else:
            x = np.ravel(observation)
        weights = params[: self.inputs * self.outputs].reshape(self.outputs, self.inputs)
        out = weights @ x + params[self.inputs * self.outputs:]
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            return int(np.argmax(out)), None
        if isinstance(space, gym.spaces.MultiDiscrete):
            parts = np.split(out, np.cumsum(space.nvec)[:-1])
            return np.array([int(np.argmax(part)) for part in parts]), None
        return np.clip(out, space.low, space.high), None


class StepCounter(LinearNumpy):
    """A recurrent NumPy policy whose state counts the steps of the episode; it records the
    state it was given at every episode's first step (None when es starts each fresh)."""

    first_states: list = []

    def act(self, params, observation, state):
        if state is None or state == 0:
            StepCounter.first_states.append(state)
        action, _ = super().act(params, observation, None)
        return action, (state or 0) + 1


class Memory(nn.Module):
    """A recurrent torch module: ``forward(observation, state)``."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        self.cell = nn.GRUCell(int(np.prod(observation_space.shape)), 4)
        self.head = nn.Linear(4, int(action_space.n))

    def forward(self, observation, state):
        state = self.cell(observation.reshape(1, -1), state)
        return self.head(state)[0], state


class DictModule(nn.Module):
    """A torch module that reads a Dict observation (a dict of tensors)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        size = sum(int(np.prod(space.shape)) for space in observation_space.values())
        self.head = nn.Linear(size, int(np.prod(action_space.shape)))

    def forward(self, observation):
        return self.head(torch.cat([observation[key].ravel() for key in sorted(observation)]))


class Gained(LinearNumpy):
    """Acts on ``gain`` times the observation: an instance trained with another gain than the
    default is another policy than its class rebuilds, with as many parameters."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 gain: float = 1.0) -> None:
        super().__init__(observation_space, action_space, scale=0.1)
        self.gain = gain

    def act(self, params, observation, state):
        return super().act(params, self.gain * np.asarray(observation), state)


class SizedMlp(nn.Module):
    """A torch module whose size is a constructor argument: an instance trained with another
    than the default cannot be rebuilt from its class alone."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 hidden: int = 8) -> None:
        super().__init__()
        self.net = torch_mlp(observation_space, action_space, hidden)

    def forward(self, observation):
        return self.net(observation)


def torch_mlp(observation_space, action_space, hidden: int = 8) -> nn.Module:
    return nn.Sequential(nn.Linear(int(np.prod(observation_space.shape)), hidden), nn.Tanh(),
                         nn.Linear(hidden, int(action_space.n)))


# ---- broken factories: each must end in a one-line error naming it ------------------------

def raises(observation_space, action_space):
    raise RuntimeError("no GPU here")


def wrong_kind(observation_space, action_space):
    return "a string"


def lazy(observation_space, action_space):
    return nn.Sequential(nn.LazyLinear(int(action_space.n)))


class Uncast(nn.Module):
    """A Linear layer on FrozenLake's Discrete observation: an int64 tensor, not cast."""

    def __init__(self, observation_space, action_space) -> None:
        super().__init__()
        self.linear = nn.Linear(1, int(action_space.n))

    def forward(self, observation):
        return self.linear(observation.reshape(1))


def uncast(observation_space, action_space):
    return Uncast(observation_space, action_space)


def wrong_outputs(observation_space, action_space):
    return nn.Linear(int(np.prod(observation_space.shape)), 7)


def wrong_outputs_mlp(observation_space, action_space):
    """An MLP, which runs batched, with one output where CartPole's two actions need two."""
    return nn.Sequential(nn.Linear(int(np.prod(observation_space.shape)), 8), nn.Tanh(),
                         nn.Linear(8, 1))


class Noisy(nn.Module):
    """Random in its forward: the same parameters act differently on the same observation."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        self.head = nn.Linear(int(np.prod(observation_space.shape)), int(action_space.n))

    def forward(self, observation):
        return self.head(observation) + 10 * torch.randn(self.head.out_features)


class RunningMean(nn.Module):
    """Keeps a running mean of its inputs in a buffer, changed by every forward: its actions
    depend on the episodes played before, so on how members are shared out among ranks."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        size = int(np.prod(observation_space.shape))
        self.head = nn.Linear(size, int(action_space.n))
        self.register_buffer("mean", torch.zeros(size))

    def forward(self, observation):
        self.mean.mul_(0.99).add_(0.01 * observation)
        return self.head(observation - self.mean)


def nan_outputs(observation_space, action_space):
    """Outputs NaN for every observation: argmax picked action 0 for ever, quietly."""
    head = nn.Linear(int(np.prod(observation_space.shape)), int(action_space.n))
    return nn.Sequential(head, nn.Tanh(), nn.Linear(int(action_space.n), int(action_space.n)),
                         nn.Threshold(10.0, float("nan")))


class HalfRecurrent(nn.Module):
    """forward takes a state (so es reads it as recurrent) but returns the output alone."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        self.head = nn.Linear(int(np.prod(observation_space.shape)), int(action_space.n))

    def forward(self, observation, state=None):
        return self.head(observation)


class NanStart(LinearNumpy):
    def initial_params(self, rng):
        params = np.zeros(self.num_params, dtype=np.float32)
        params[:3] = np.nan
        return params


def nan_start(observation_space, action_space):
    return NanStart(observation_space, action_space)


class NaNActions(LinearNumpy):
    """NaN for every action: a Discrete one as a float, a Box one as an array."""

    def act(self, params, observation, state):
        if isinstance(self.action_space, gym.spaces.Discrete):
            return float("nan"), None
        return np.full(self.action_space.shape, np.nan, dtype=np.float32), None


def nan_actions(observation_space, action_space):
    return NaNActions(observation_space, action_space)


class OutsideTheSpace(LinearNumpy):
    def act(self, params, observation, state):
        return 5, None  # CartPole has actions 0 and 1


def outside(observation_space, action_space):
    return OutsideTheSpace(observation_space, action_space)


class LaterOutside(LinearNumpy):
    """Valid actions for its first 50 steps (the start-up check passes), then 5."""

    steps = 0

    def act(self, params, observation, state):
        LaterOutside.steps += 1
        return (5 if LaterOutside.steps > 50 else 0), None


# ---- environments with other spaces -------------------------------------------------------

class GoalReach(gym.Env):
    """Move a point towards a goal in the plane: a Dict observation (``position``,
    ``goal``) as goal-conditioned robotics tasks have, Box actions; reward: minus the
    distance."""

    observation_space = gym.spaces.Dict({
        "goal": gym.spaces.Box(-1.0, 1.0, (2,), np.float64),
        "position": gym.spaces.Box(-2.0, 2.0, (2,), np.float64)})
    action_space = gym.spaces.Box(-0.1, 0.1, (2,), np.float64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.goal = self.np_random.uniform(-1.0, 1.0, 2)
        self.position = np.zeros(2)
        return self._observation(), {}

    def _observation(self):
        return {"goal": self.goal.copy(), "position": self.position.copy()}

    def step(self, action):
        self.position = np.clip(self.position + action, -2.0, 2.0)
        distance = float(np.linalg.norm(self.goal - self.position))
        return self._observation(), -distance, distance < 0.05, False, {}


class TupleReach(GoalReach):
    """GoalReach with a Tuple observation: (goal, position)."""

    observation_space = gym.spaces.Tuple((GoalReach.observation_space["goal"],
                                          GoalReach.observation_space["position"]))

    def _observation(self):
        return (self.goal.copy(), self.position.copy())


class TupleModule(nn.Module):
    """A torch module that reads a Tuple observation (a tuple of tensors)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        self.head = nn.Linear(4, 2)

    def forward(self, observation):
        goal, position = observation
        return self.head(torch.cat([goal, position]))


class PickTwo(gym.Env):
    """MultiDiscrete actions: choose two digits; reward 1 for each equal to the observed
    targets."""

    observation_space = gym.spaces.Box(0.0, 2.0, (2,), np.float64)
    action_space = gym.spaces.MultiDiscrete([3, 3])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.target = self.np_random.integers(0, 3, 2)
        return self.target.astype(np.float64), {}

    def step(self, action):
        reward = float(np.sum(np.asarray(action) == self.target))
        self.target = self.np_random.integers(0, 3, 2)
        return self.target.astype(np.float64), reward, False, False, {}


class PickTwoOfTwo(PickTwo):
    """PickTwo whose step refuses the digit 0 that its action space allows (an env's own
    assertion): the probe names the env's step and the action, not the policy's acting."""

    def step(self, action):
        assert np.all(np.asarray(action) > 0), f"no such move: {action}"
        return super().step(action)


for name, entry in (("GoalReach-v0", GoalReach), ("TupleReach-v0", TupleReach),
                    ("PickTwo-v0", PickTwo), ("PickTwoOfTwo-v0", PickTwoOfTwo)):
    if name not in gym.registry:
        gym.register(name, entry_point=entry, max_episode_steps=30)
