"""NumPy policies over one flat float32 parameter vector: linear, MLP, and (``es.rl.cnn``) a CNN.

A ``PolicySpec`` fixes the architecture and action space; ``act_fn`` binds a parameter vector
and observation statistics into a fast ``obs -> action`` function (weights unpacked once per
episode, not per step). Observations are normalised as in Salimans et al. 2017:
``clip((obs - mean) / std, -clip, clip)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from es.rl.cnn import ConvNetSpec

ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "tanh": lambda x: np.tanh(x, out=x),
    "relu": lambda x: np.maximum(x, 0, out=x),
}


@dataclass(frozen=True)
class PolicySpec:
    kind: str  # "linear" | "mlp"
    obs_dim: int
    act_dim: int  # number of discrete actions, or the size of a continuous action
    discrete: bool
    hidden: tuple[int, ...] = ()
    activation: str = "tanh"
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("linear", "mlp"):
            raise ValueError(f"policy kind {self.kind!r}: allowed are 'linear', 'mlp'")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r}: allowed are {sorted(ACTIVATIONS)}")

    def unclipped(self) -> PolicySpec:
        """This policy with infinite action bounds: continuous actions go to the env as
        computed (``policy.clip_actions = false``, ``es-eval --unclipped``)."""
        return dataclasses.replace(self, action_low=(-np.inf,) * len(self.action_low),
                                   action_high=(np.inf,) * len(self.action_high))

    @property
    def layer_sizes(self) -> list[int]:
        hidden = list(self.hidden) if self.kind == "mlp" else []
        return [self.obs_dim, *hidden, self.act_dim]

    @property
    def layer_shapes(self) -> list[tuple[int, int]]:
        """(out, in) of each weight matrix; each is followed by a bias of size out."""
        sizes = self.layer_sizes
        return [(sizes[i + 1], sizes[i]) for i in range(len(sizes) - 1)]

    @property
    def num_params(self) -> int:
        return sum(o * i + o for o, i in self.layer_shapes)

    def initial_params(self, rng: np.random.Generator) -> np.ndarray:
        """Linear: zeros (as in ARS). MLP: column-normalised Gaussian rows, small output layer."""
        if self.kind == "linear":
            return np.zeros(self.num_params, dtype=np.float32)
        chunks = []
        shapes = self.layer_shapes
        for index, (out, inp) in enumerate(shapes):
            scale = 0.01 if index == len(shapes) - 1 else 1.0
            weights = rng.standard_normal((out, inp))
            weights *= scale / np.sqrt(np.square(weights).sum(axis=1, keepdims=True))
            chunks += [weights.ravel(), np.zeros(out)]
        return np.concatenate(chunks).astype(np.float32)

    def bind(self, params: np.ndarray, norm: ObsNorm) -> Callable[[np.ndarray], np.ndarray | int]:
        """The episode's ``observation -> action`` (the policy protocol's fast path,
        ``es.rl.policy``): weights unpacked once, ``norm`` folded in."""
        return act_fn(self, params, norm)

    def act(self, params: np.ndarray, observation: np.ndarray, state: None = None
            ) -> tuple[np.ndarray | int, None]:
        """The policy protocol's ``act``: one action (no state); the inputs are clipped to
        the default ``obs_clip`` as es's normalisation would."""
        return self.bind(params, ObsNorm.identity(self.obs_dim))(observation), None

    def unpack(self, params: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Views (no copies) of each layer's weights and bias."""
        if params.size != self.num_params:
            raise ValueError(f"{params.size} parameters given, the policy has {self.num_params}")
        layers, start = [], 0
        for out, inp in self.layer_shapes:
            weights = params[start : start + out * inp].reshape(out, inp)
            start += out * inp
            layers.append((weights, params[start : start + out]))
            start += out
        return layers


class PolicyError(ValueError):
    """A user's policy that cannot be used (``es.rl.policy``): a one-line message naming its
    factory and what was expected."""


@dataclass(frozen=True)
class ObsNorm:
    mean: np.ndarray
    std: np.ndarray
    clip: float = 5.0

    @classmethod
    def identity(cls, dim: int, clip: float = 5.0) -> ObsNorm:
        return cls(np.zeros(dim, np.float32), np.ones(dim, np.float32), clip)


def act_fn(
    spec: PolicySpec, params: np.ndarray, norm: ObsNorm
) -> Callable[[np.ndarray], np.ndarray | int]:
    """The policy as a function of one observation.

    Runs once per environment step, so it is written for few NumPy calls: the weights are
    unpacked (as float64, the dtype of most observations, so nothing is converted per step)
    once per episode, and clipping uses in-place ``minimum``/``maximum``.
    """
    layers = [(w.astype(np.float64), b.astype(np.float64)) for w, b in spec.unpack(params)]
    mean = np.asarray(norm.mean, dtype=np.float64)
    inv_std = 1.0 / np.asarray(norm.std, dtype=np.float64)
    clip = float(norm.clip)
    hidden_layers, (out_w, out_b) = layers[:-1], layers[-1]
    activation = ACTIVATIONS[spec.activation]

    def features(obs: np.ndarray) -> np.ndarray:
        x = np.subtract(np.ravel(obs), mean)
        x *= inv_std
        np.minimum(x, clip, out=x)
        np.maximum(x, -clip, out=x)
        for weights, bias in hidden_layers:
            x = np.dot(weights, x)
            x += bias
            x = activation(x)
        y = np.dot(out_w, x)
        y += out_b
        return y

    if spec.discrete:
        return lambda obs: int(np.argmax(features(obs)))
    low = np.asarray(spec.action_low, dtype=np.float64)
    high = np.asarray(spec.action_high, dtype=np.float64)

    def act(obs: np.ndarray) -> np.ndarray:
        y = features(obs)
        np.minimum(y, high, out=y)
        np.maximum(y, low, out=y)
        return y

    return act


def bind_policy(
    spec: PolicySpec | ConvNetSpec,
    params: np.ndarray,
    norm: ObsNorm,
    reference: np.ndarray | None = None,
) -> Callable[[np.ndarray], np.ndarray | int]:
    """``obs -> action`` for a built-in policy. A CNN with virtual batch norm takes its layer
    statistics from ``reference`` (the VBN reference batch) pushed through ``params``: once
    per parameter vector, so once per episode."""
    if isinstance(spec, ConvNetSpec) and reference is not None:
        spec = dataclasses.replace(spec, reference=reference)
    return spec.bind(params, norm)


def with_action_noise(
    act: Callable[[np.ndarray], np.ndarray], low: np.ndarray, high: np.ndarray, std: float,
    rng: np.random.Generator,
) -> Callable[[np.ndarray], np.ndarray]:
    """``act`` plus Gaussian noise of ``std`` (then clipped to the bounds ``low``..``high``):
    the paper's action noise, which smooths a training episode's return as a function of the
    parameters. The action keeps its shape (the built-ins' are flat)."""
    low = np.asarray(low, dtype=np.float64).ravel()
    high = np.asarray(high, dtype=np.float64).ravel()

    def noisy(obs: np.ndarray) -> np.ndarray:
        action = act(obs)
        shape = np.shape(action)
        action = action + std * rng.standard_normal(low.size).reshape(shape)
        np.minimum(action, high.reshape(shape), out=action)
        np.maximum(action, low.reshape(shape), out=action)
        return action

    return noisy
