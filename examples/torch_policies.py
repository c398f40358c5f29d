"""PyTorch policies for ``es-train``: each function is a factory, called with the
environment's observation and action spaces (and ``policy.kwargs``), returning a
``torch.nn.Module``. es maps its flat parameter vector onto the module, runs it on one
observation at a time, and turns the output into an action (argmax for discrete actions,
clipped to the bounds for continuous ones).

    es-train configs/cartpole.toml --set policy.kind=examples.torch_policies:mlp
    es-train configs/cartpole_masked_gru.toml       # policy.kind = "examples.torch_policies:gru"
"""

from __future__ import annotations

import math

import gymnasium as gym
import torch
from torch import nn


def outputs(action_space: gym.Space) -> int:
    """One output per discrete action (per choice of each part, for MultiDiscrete), or per
    dimension of a continuous action: what es turns into an action."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return int(action_space.nvec.sum())
    return math.prod(action_space.shape)


def small_output(layer: nn.Linear) -> nn.Linear:
    """Output weights scaled to 1% and a zero bias, as the built-in MLP starts: every action
    is still open to the first perturbations (PyTorch's default initialisation would make one
    action win from every state, and all members of a generation alike)."""
    with torch.no_grad():
        layer.weight.mul_(0.01)
        layer.bias.zero_()
    return layer


def mlp(observation_space: gym.Space, action_space: gym.Space, hidden: int = 64,
        layers: int = 2) -> nn.Module:
    """An MLP with tanh hidden layers (``hidden`` units each, ``layers`` of them)."""
    sizes = [math.prod(observation_space.shape), *[hidden] * layers]
    modules: list[nn.Module] = []
    for inputs, units in zip(sizes, sizes[1:], strict=False):
        modules += [nn.Linear(inputs, units), nn.Tanh()]
    modules.append(small_output(nn.Linear(sizes[-1], outputs(action_space))))
    return nn.Sequential(*modules)


class GRUPolicy(nn.Module):
    """A GRU cell over the observations, then a linear read-out: a policy with memory.
    ``forward(observation, state)`` returns ``(output, state)``, so es carries the state
    through the episode (None at its start)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space,
                 hidden: int = 8) -> None:
        super().__init__()
        self.cell = nn.GRUCell(math.prod(observation_space.shape), hidden)
        self.head = small_output(nn.Linear(hidden, outputs(action_space)))

    def forward(self, observation: torch.Tensor,
                state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        state = self.cell(observation.reshape(1, -1), state)
        return self.head(state)[0], state


def gru(observation_space: gym.Space, action_space: gym.Space, hidden: int = 8) -> nn.Module:
    return GRUPolicy(observation_space, action_space, hidden)
