"""A user's ``torch.nn.Module`` as a policy of the protocol (``es.rl.policy``).

The flat float32 vector maps onto ``module.parameters()`` in their order
(``torch.nn.utils.vector_to_parameters``); the module runs on the CPU with one thread under
``torch.inference_mode()``, on one observation at a time (no batch dimension is added). Its
output becomes the action: argmax for Discrete actions (one output per action), one argmax
per part for MultiDiscrete, and for Box actions the output reshaped to the action's shape and
clipped to its bounds.

A module whose ``forward`` takes two arguments is recurrent: ``forward(observation, state)``
returns ``(output, state)``, with ``state`` None at the start of every episode.

Initial parameters are the module's own, as its constructor made them (es seeds torch from
the run's seed before calling the factory, so every rank builds the same module); a module
that defines ``initial_params(rng)`` chooses its own instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.utils.parametrize

from es.rl.policies import PolicyError


def takes_state(module: torch.nn.Module) -> bool:
    """Whether ``forward`` takes (observation, state): a recurrent module."""
    parameters = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(parameters) >= 2


def describe(value: Any) -> str:
    """A module's return in a few words: a tensor's shape, else its type."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shapes and values, a NaN equal to a NaN in the same place."""
    if a.shape != b.shape:
        return False
    if a.is_floating_point():
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0),
                                                                 b.nan_to_num(0.0))
    return torch.equal(a, b)


def as_tensor(observation: Any) -> Any:
    """An observation of any space as tensors: float32 for real values, int64 for integers,
    dicts and tuples kept as dicts and tuples (Dict and Tuple spaces)."""
    if isinstance(observation, dict):
        return {key: as_tensor(value) for key, value in observation.items()}
    if isinstance(observation, tuple):
        return tuple(as_tensor(value) for value in observation)
    values = np.asarray(observation)
    if values.dtype.kind in "iub":
        return torch.from_numpy(values.astype(np.int64))
    return torch.from_numpy(values.astype(np.float32))


def finite(outputs: np.ndarray, name: str) -> np.ndarray:
    """``outputs``, or a ``PolicyError`` if any is NaN or infinite: the argmax of a NaN is
    the first NaN's index, a constant action that trained quietly."""
    if not np.isfinite(outputs).all():
        raise PolicyError(f"policy.kind = {name!r}: the module returned {outputs.ravel()!r}; "
                          "its outputs must be finite numbers to choose an action")
    return outputs


def outputs_to_actions(space: gym.Space, name: str) -> Callable[[np.ndarray], list[Any]] | None:
    """Rows of outputs -> actions, all rows at once, element by element as
    ``output_to_action`` converts one row (the same bits); None where only row by row."""
    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        return lambda rows: (start + np.argmax(finite(rows, name), axis=1)).tolist()
    if isinstance(space, gym.spaces.Box):
        low = np.asarray(space.low, dtype=np.float64).ravel()
        high = np.asarray(space.high, dtype=np.float64).ravel()
        shape = space.shape
        return lambda rows: [row.reshape(shape) for row in np.clip(rows.astype(np.float64),
                                                                    low, high)]
    return None


def output_to_action(space: gym.Space, name: str) -> tuple[int, Callable[[np.ndarray], Any]]:
    """(outputs the module must give, output -> action) for ``space``."""
    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        return int(space.n), lambda out: start + int(np.argmax(finite(out, name)))
    if isinstance(space, gym.spaces.Box):
        low = np.asarray(space.low, dtype=np.float64)
        high = np.asarray(space.high, dtype=np.float64)
        return low.size, lambda out: np.clip(out.astype(np.float64).reshape(low.shape), low,
                                             high)
    if isinstance(space, gym.spaces.MultiDiscrete):
        sizes = [int(n) for n in space.nvec.ravel()]
        edges = np.cumsum(sizes)[:-1]
        shape = space.nvec.shape
        return sum(sizes), lambda out: np.array(
            [int(np.argmax(part)) for part in np.split(finite(out, name), edges)]
        ).reshape(shape)
    raise PolicyError(f"policy.kind = {name!r}: a torch module acts in Discrete, MultiDiscrete "
                      f"or Box action spaces, not {space}; return actions yourself with an "
                      "object of the policy protocol (docs/python-api.md)")


class TorchPolicy:
    """``module`` as a policy for ``observation_space`` -> ``action_space``."""

    def __init__(self, module: torch.nn.Module, observation_space: gym.Space,
                 action_space: gym.Space, name: str) -> None:
        torch.set_num_threads(1)  # the parallelism is the ranks'
        self.module, self.name = module.eval(), name
        self.parameters = list(module.parameters())
        if any(isinstance(p, torch.nn.parameter.UninitializedParameter)
               for p in self.parameters):  # else torch's own words, naming no factory
            raise PolicyError(f"policy.kind = {name!r}: the module has lazy parameters "
                              "(LazyLinear, LazyConv2d, ...), whose sizes come at its first "
                              "call; give their input sizes (Linear, Conv2d)")
        self.num_params = sum(p.numel() for p in self.parameters)
        if self.num_params == 0:
            raise PolicyError(f"policy.kind = {name!r}: the module has no parameters")
        if any(p.dtype != torch.float32 or p.device.type != "cpu" for p in self.parameters):
            raise PolicyError(f"policy.kind = {name!r}: every parameter must be float32 on "
                              "the CPU")
        self.recurrent = takes_state(module)
        self.outputs, self.to_action = output_to_action(action_space, name)
        self.to_actions = outputs_to_actions(action_space, name)
        self.loaded: object = None  # which bound episode's parameters the module holds
        #: The one-slot lockstep form (None: not an MLP): single episodes run it, so that they
        #: give the bits of a member run among others.
        self.single = self.batched(1) if isinstance(observation_space, gym.spaces.Box) else None
        if self.single is not None and self.single.linear[-1].out_features != self.outputs:
            raise self.wrong_outputs(f"{self.single.linear[-1].out_features} outputs")

    def buffers(self) -> dict[str, torch.Tensor]:
        """Copies of the module's buffers: a forward that changes them (a running mean of its
        inputs) makes a member's actions depend on the episodes its rank played before."""
        return {name: buffer.detach().clone() for name, buffer in self.module.named_buffers()}

    def changed_buffers(self, before: dict[str, torch.Tensor]) -> list[str]:
        """The names of the buffers that differ from ``before`` (``buffers()``'s copies)."""
        now = dict(self.module.named_buffers())
        return [name for name, old in before.items()
                if name not in now or not same_values(old, now[name])]

    def initial_params(self, rng: np.random.Generator) -> np.ndarray:
        own = getattr(self.module, "initial_params", None)
        if own is not None:
            return np.asarray(own(rng), dtype=np.float32)
        vector = torch.nn.utils.parameters_to_vector(self.parameters)
        return vector.detach().numpy().astype(np.float32)

    def _load(self, params: np.ndarray, owner: object) -> None:
        vector = torch.tensor(np.asarray(params, dtype=np.float32))
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(vector, self.parameters)
        self.loaded = owner

    def _output(self, out: Any) -> np.ndarray:
        values = out.detach().numpy().ravel() if isinstance(out, torch.Tensor) else None
        if values is None or values.size != self.outputs:
            raise self.wrong_outputs(f"{values.size} outputs" if values is not None
                                     else type(out).__name__)
        return values

    def wrong_outputs(self, got: str) -> PolicyError:
        return PolicyError(f"policy.kind = {self.name!r}: the module returned {got}; expected "
                           f"a tensor of {self.outputs} outputs for the action space")

    def act(self, params: np.ndarray, observation: Any, state: Any) -> tuple[Any, Any]:
        if self.single is not None:  # an MLP: no state, the lockstep's computation
            return self.bind(params)(observation), None
        return _Episode(self, np.array(params, dtype=np.float32)).step(observation, state)

    def batched(self, slots: int) -> Lockstep | None:
        """``slots`` members' episodes at once, one forward for all per step (see
        ``Lockstep``), for a plain ``Sequential`` of plain ``Linear`` layers and elementwise
        activations; None for any other module (its members run one by one)."""
        if self.recurrent or not plain_mlp(self.module, self.parameters):
            return None
        lockstep = Lockstep(self, list(self.module), slots)
        return lockstep if lockstep.independent_of_companions() else None

    def bind(self, params: np.ndarray) -> Callable[[Any], Any]:
        """The episode's ``observation -> action``, its recurrent state starting fresh; for a
        module that runs in lockstep, through the one-slot form of the same computation."""
        params = np.array(params, dtype=np.float32)
        if self.single is None:
            return _Episode(self, params)
        single, token = self.single, object()

        def act(observation: Any) -> Any:
            if single.owners[0] is not token:  # another episode's parameters are loaded
                single.load(0, params, token)
            return self.to_action(single.outputs(np.ravel(observation)[np.newaxis])[0])

        return act


#: Activations applied element by element: a slot's values never meet another slot's.
ELEMENTWISE = (torch.nn.Tanh, torch.nn.ReLU, torch.nn.Sigmoid, torch.nn.ELU,
               torch.nn.LeakyReLU, torch.nn.GELU, torch.nn.SiLU, torch.nn.Softsign,
               torch.nn.Identity)


def plain_mlp(module: torch.nn.Module, parameters: list[torch.nn.Parameter]) -> bool:
    """Whether ``Lockstep`` computes what ``module`` computes: a ``Sequential`` starting with
    a ``Linear``, of ``Linear`` layers and ``ELEMENTWISE`` activations, none of them a
    subclass, hooked or parametrized (weight_norm), and ``parameters`` exactly each Linear's
    weight and bias in order (a Linear used twice, tied weights, lists its parameters once).
    Anything else ran the lockstep's plain layers quietly, or failed in torch's words."""
    layers = list(module) if type(module) is torch.nn.Sequential else []
    if (not layers or type(layers[0]) is not torch.nn.Linear
            or not all(type(layer) is torch.nn.Linear or type(layer) in ELEMENTWISE
                       for layer in layers)):
        return False
    if any(layer._forward_hooks or layer._forward_pre_hooks
           or torch.nn.utils.parametrize.is_parametrized(layer)
           for layer in (module, *layers)):
        return False
    expected = [tensor for layer in layers if type(layer) is torch.nn.Linear
                for tensor in (layer.weight, layer.bias) if tensor is not None]
    return (len(expected) == len(parameters)
            and all(a is b for a, b in zip(expected, parameters, strict=True)))


class Lockstep:
    """``slots`` members of a ``TorchPolicy`` whose MLP runs as one batched computation per
    layer: each slot holds one member's parameters (``load``) and observation, ``outputs``
    gives every slot's module output. A ``Linear`` is computed as the elementwise product of
    each slot's weights with its input, summed over the input: a reduction of one row at a
    time, whose bits depend on that row alone, whatever the batch's size and the other slots
    hold (checked at start-up; a matrix product's kernels do not promise that). The
    one-slot form runs single episodes (evaluation, es-eval), so every path gives the same
    actions. They equal ``module(x)`` up to float32 rounding (another summation order)."""

    def __init__(self, policy: TorchPolicy, layers: list[torch.nn.Module], slots: int) -> None:
        self.policy, self.layers, self.slots = policy, layers, slots
        self.linear = [layer for layer in layers if isinstance(layer, torch.nn.Linear)]
        self.weights = [torch.zeros(slots, layer.out_features, layer.in_features)
                        for layer in self.linear]
        self.biases = [torch.zeros(slots, layer.out_features) if layer.bias is not None
                       else None for layer in self.linear]
        self.inputs = torch.zeros(slots, self.linear[0].in_features)
        self.owners: list[object] = [None] * slots  # who loaded each slot

    def load(self, slot: int, params: np.ndarray, owner: object = None) -> None:
        """A member's flat vector into ``slot``, laid out as ``module.parameters()``."""
        # A copy: a strategy's candidates may be read-only (CMA-ES's), which torch warns of.
        vector, start = torch.from_numpy(np.array(params, np.float32)), 0
        for index, layer in enumerate(self.linear):
            size = layer.weight.numel()
            self.weights[index][slot] = vector[start:start + size].view(layer.weight.shape)
            start += size
            if layer.bias is not None:
                self.biases[index][slot] = vector[start:start + layer.out_features]
                start += layer.out_features
        self.owners[slot] = owner

    def outputs(self, observations: np.ndarray) -> np.ndarray:
        """The module's output for every slot, ``observations`` one row per slot."""
        with torch.inference_mode():
            x = self.inputs
            x.copy_(torch.from_numpy(np.asarray(observations, np.float32)).view_as(x))
            index = 0
            for layer in self.layers:
                if isinstance(layer, torch.nn.Linear):
                    x = (self.weights[index] * x.unsqueeze(1)).sum(-1)
                    if self.biases[index] is not None:
                        x = x + self.biases[index]
                    index += 1
                else:
                    x = layer(x)
            return x.reshape(self.slots, -1).numpy().copy()

    def independent_of_companions(self) -> bool:
        """Each slot's output, computed among random companions, against the same member
        alone in a one-slot batch: equal bits, or batching is not used."""
        rng = np.random.default_rng(0)
        params = rng.standard_normal((self.slots, self.policy.num_params)).astype(np.float32)
        inputs = rng.standard_normal((self.slots, self.linear[0].in_features))
        alone = Lockstep(self.policy, self.layers, 1)
        for order in (np.arange(self.slots), rng.permutation(self.slots)):
            for slot, member in enumerate(order):
                self.load(slot, params[member])
            together = self.outputs(inputs[order])
            for slot, member in enumerate(order):
                alone.load(0, params[member])
                if not np.array_equal(alone.outputs(inputs[member:member + 1]),
                                      together[slot:slot + 1]):
                    return False
        self.owners = [None] * self.slots
        return True


class _Episode:
    """One episode of a ``TorchPolicy`` at one parameter vector."""

    def __init__(self, policy: TorchPolicy, params: np.ndarray) -> None:
        self.policy, self.params, self.state = policy, params, None

    def step(self, observation: Any, state: Any) -> tuple[Any, Any]:
        policy = self.policy
        if policy.loaded is not self:  # another episode's parameters are in the module
            policy._load(self.params, self)
        with torch.inference_mode():
            if policy.recurrent:
                returned = policy.module(as_tensor(observation), state)
                if not (isinstance(returned, tuple | list) and len(returned) == 2):
                    raise PolicyError(
                        f"policy.kind = {policy.name!r}: forward takes a second argument, so "
                        "the module is read as recurrent, forward(observation, state) -> "
                        f"(output, state), but it returned {describe(returned)}; return the "
                        "pair, or take the observation alone")
                out, state = returned
            else:
                out = policy.module(as_tensor(observation))
        return policy.to_action(policy._output(out)), state

    def __call__(self, observation: Any) -> Any:
        action, self.state = self.step(observation, self.state)
        return action
