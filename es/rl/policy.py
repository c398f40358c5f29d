"""The policy protocol: what ``es`` trains, built in or the user's own.

A policy is any object with

- ``num_params``: the length of its one flat float32 parameter vector;
- ``initial_params(rng)``: the starting vector, drawn from a ``np.random.Generator`` (every
  rank passes the same one, so every rank starts alike);
- ``act(params, observation, state)``: ``(action, state)``. ``state`` is None at the start of
  every episode; a recurrent policy returns its next state, any other returns None.

The built-in linear, MLP (``PolicySpec``) and CNN (``ConvNetSpec``) policies are such objects;
so is a user's ``torch.nn.Module`` once ``es.rl.torch_policy`` wraps it. The trainer reaches
every policy through ``episode_actor`` (one path): a policy that can prepare its parameters
once per episode (unpacking weights, loading a module) offers ``bind(params, norm)``, the
episode's ``observation -> action`` with observation normalisation folded in; for any other,
``episode_actor`` carries the state and normalises Box observations itself.

``policy.kind = "package.module:factory"`` names a user policy in a config: the factory is
called as ``factory(observation_space, action_space, **policy.kwargs)``.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import math
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from es.config import CNN_OBS_NORM, Config, ConfigError
from es.core.install import install_hint
from es.rl.cnn import ConvNetSpec
from es.rl.envs import import_user_module, policy_spec_for
from es.rl.policies import ObsNorm, PolicyError, PolicySpec


@runtime_checkable
class Policy(Protocol):
    """A policy over one flat float32 parameter vector (see the module's docstring)."""

    num_params: int

    def initial_params(self, rng: np.random.Generator) -> np.ndarray: ...

    def act(self, params: np.ndarray, observation: Any, state: Any) -> tuple[Any, Any]: ...


def is_factory(kind: str) -> bool:
    """``"package.module:factory"`` rather than a built-in kind."""
    module, _, name = kind.partition(":")
    return bool(module and name)


def import_object(path: str, what: str) -> Any:
    """``"package.module:qualified.name"`` -> the object, importing the module from the
    current folder too (where ``es-train`` runs, as ``python -m`` would). A one-line
    ``PolicyError`` says what is missing."""
    module_name, _, qualname = path.partition(":")
    try:
        target: Any = import_user_module(module_name)
    except Exception as error:  # the user's module may fail in any way while it loads
        hint = (f" ({install_hint('torch')})" if isinstance(error, ImportError)
                and getattr(error, "name", "") == "torch" else "")
        raise PolicyError(f"{what} = {path!r}: cannot import module {module_name!r} "
                          f"({type(error).__name__}: {error}){hint}") from None
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            # es.train(policy=...) from a notebook or script records its __main__.
            hint = (": it was defined in the notebook or script that trained the run; give "
                    "it from Python again (es.resume(RUN_DIR, policy=...)), or move it into a "
                    "module that es-train and es-eval can import" if module_name == "__main__"
                    else "")
            raise PolicyError(f"{what} = {path!r}: module {module_name!r} has no "
                              f"{qualname!r}{hint}") from None
    return target


def object_path(target: Any) -> str:
    """``"module:qualname"`` of a class or function (of an instance: of its class)."""
    kind = target if isinstance(target, type) or callable(target) and hasattr(
        target, "__qualname__") else type(target)
    return f"{kind.__module__}:{kind.__qualname__}"


def is_torch_module(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def make_policy(config: Config, env: gym.Env, source: Any = None,
                seed: int = 0) -> PolicySpec | ConvNetSpec | UserPolicy:
    """The policy ``policy.*`` describes for ``env``: a built-in one, or the user's
    (``policy.kind = "module:factory"``, or ``source``, a factory, class or instance given
    from Python, whose path the config then names). ``seed`` seeds torch while a factory
    builds a module, so that every rank builds the same one."""
    policy = config.policy
    if policy.action_noise > 0 and not isinstance(env.action_space, gym.spaces.Box):
        raise PolicyError(f"policy.action_noise = {policy.action_noise}: noise is added to "
                          f"continuous (Box) actions, {env.spec.id if env.spec else 'the env'} "
                          f"has {env.action_space}; set policy.action_noise = 0")
    if source is None and not is_factory(policy.kind):
        spec = policy_spec_for(env, policy.kind, tuple(policy.hidden), policy.activation,
                               policy.torso, policy.vbn, policy.clip_actions)
        if policy.kind == "cnn" and policy.obs_norm:  # after the env's pixels were checked
            raise ConfigError(CNN_OBS_NORM)
        return spec
    if source is None:
        source = import_object(policy.kind, "policy.kind")
    return build_user_policy(source, env, dict(policy.kwargs), policy.obs_norm, policy.kind,
                             seed)


def is_instance(source: Any) -> bool:
    """A policy object (of the protocol, or a torch module) rather than a factory or class
    that makes one."""
    return not isinstance(source, type) and (isinstance(source, Policy)
                                             or is_torch_module(source) or not callable(source))


def build_user_policy(source: Any, env: gym.Env, kwargs: dict[str, Any], normalise: bool,
                      name: str, seed: int = 0) -> UserPolicy:
    """The user's policy for ``env``: ``source`` is a factory or class (called with the
    spaces and ``kwargs``), or an instance (a protocol object or a torch module) used as it
    is. ``name`` (its ``module:factory``) heads every error."""
    spaces = (env.observation_space, env.action_space)
    if normalise and not isinstance(env.observation_space, gym.spaces.Box):
        raise PolicyError(f"policy.obs_norm = true: observation normalisation needs Box "
                          f"observations, {env.spec.id if env.spec else 'the env'} has "
                          f"{env.observation_space}; set policy.obs_norm = false")
    made = source
    if not is_instance(source):
        try:
            with seeded_torch(seed):
                made = source(*spaces, **kwargs)
        except Exception as error:  # the user's code: keep its words, on one line
            # A run es.train was given an instance of, say, torch.nn.Sequential names its
            # class, which es-eval and --resume call with the spaces as any factory.
            hint = ("; a run trained from an instance names its class, called with the "
                    "spaces here: give es.train a factory (a function of the two spaces) to "
                    "evaluate or resume its runs" if isinstance(source, type)
                    and isinstance(error, TypeError) else "")
            raise PolicyError(f"policy.kind = {name!r}: the factory raised "
                              f"{type(error).__name__}: {error}{hint}") from None
    elif kwargs:
        raise PolicyError(f"policy.kwargs = {kwargs!r}: the policy is an instance, not a "
                          "factory to call with them")
    if is_torch_module(made):
        from es.rl.torch_policy import TorchPolicy

        made = TorchPolicy(made, *spaces, name)
    elif not isinstance(made, Policy):
        protocol = ("a torch.nn.Module or an object with num_params, initial_params(rng) and "
                    "act(params, observation, state)")
        if made is source:  # not callable, so taken as it is: no factory to blame
            raise PolicyError(f"policy.kind = {name!r} is {source!r:.60}, not a policy "
                              f"(type {type(source).__name__}); name {protocol}, or a "
                              "factory (a function or class of the observation and action "
                              "spaces) that returns one")
        raise PolicyError(f"policy.kind = {name!r}: the factory returned "
                          f"{type(made).__name__}; expected {protocol}")
    return UserPolicy(made, env.observation_space, env.action_space, normalise, name, kwargs)


@contextlib.contextmanager
def seeded_torch(seed: int) -> Iterator[None]:
    """Torch's global generator seeded for the block and restored after (when the user's
    code has loaded torch; otherwise nothing to seed)."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


#: Steps of the probe episode that every user policy plays twice before training.
PROBE_STEPS = 8


class UserPolicy:
    """A user's policy object made safe for the trainer: its parameters and actions are
    checked (a wrong one is a one-line ``PolicyError`` naming the factory), and Box
    observations are normalised before it sees them when ``policy.obs_norm`` is on."""

    def __init__(self, policy: Any, observation_space: gym.Space, action_space: gym.Space,
                 normalise: bool, name: str, kwargs: dict[str, Any] | None = None) -> None:
        self.policy, self.name, self.normalise = policy, name, normalise
        self.kwargs = dict(kwargs or {})  # the factory's, recorded in policy.npz
        self.observation_space, self.action_space = observation_space, action_space
        try:
            self.num_params = int(policy.num_params)
        except (TypeError, ValueError):
            raise PolicyError(f"policy.kind = {name!r}: num_params = {policy.num_params!r}; "
                              "expected a whole number") from None
        if self.num_params < 1:
            raise PolicyError(f"policy.kind = {name!r}: num_params = {self.num_params}; "
                              "expected at least 1")
        self.obs_dim = (int(np.prod(observation_space.shape))
                        if isinstance(observation_space, gym.spaces.Box) else 0)
        self.check_action = action_check(action_space, name)
        self.probed: list[tuple[Any, Any]] = []  # the probe episode's (observation, action)

    def initial_params(self, rng: np.random.Generator) -> np.ndarray:
        try:
            params = np.asarray(self.policy.initial_params(rng))
        except Exception as error:
            raise PolicyError(f"policy.kind = {self.name!r}: initial_params raised "
                              f"{type(error).__name__}: {error}") from None
        if params.shape != (self.num_params,):
            raise PolicyError(f"policy.kind = {self.name!r}: initial_params returned shape "
                              f"{params.shape}; expected ({self.num_params},) finite numbers")
        if not np.all(np.isfinite(params)):
            raise PolicyError(f"policy.kind = {self.name!r}: initial_params returned "
                              f"{int(np.sum(~np.isfinite(params)))} non-finite values (NaN or "
                              f"infinite) of {self.num_params}; expected finite numbers")
        return params.astype(np.float32)

    def act(self, params: np.ndarray, observation: Any, state: Any) -> tuple[Any, Any]:
        action, state = self.policy.act(params, observation, state)
        return self.check_action(action), state

    def lockstep(self, slots: int) -> Any:
        """The wrapped policy's batched form for ``slots`` members (a torch MLP's
        ``Lockstep``), or None: it plays one member at a time."""
        batched = getattr(self.policy, "batched", None)
        if batched is None or not isinstance(self.observation_space, gym.spaces.Box):
            return None
        return batched(slots)

    def model_inputs(self, norm: ObsNorm) -> Callable[[np.ndarray], np.ndarray]:
        """Rows of flat Box observations -> the policy's inputs (a lockstep's): normalised
        element by element as ``bind`` normalises one observation, when ``policy.obs_norm``
        is on (so the same bits)."""
        if not self.normalise:
            return lambda rows: rows
        return normaliser(norm)

    def lockstep_actions(self, outputs: np.ndarray) -> list[Any]:
        """A lockstep's outputs, one row per slot, as actions: all rows at once where the
        policy converts them itself (a torch module: within the space by construction), else
        row by row, checked."""
        convert = getattr(self.policy, "to_actions", None)
        if convert is not None:
            return convert(outputs)
        return [self.check_action(self.policy.to_action(row)) for row in outputs]

    def probe(self, env: gym.Env, params: np.ndarray) -> None:
        """Play the first ``PROBE_STEPS`` steps of an episode, then act again on the same
        observations with the same parameters: a policy that fails, gives the wrong output or
        action, or acts at random (``torch.randn`` in ``forward``), is a
        ``PolicyError`` before training starts. A random policy would break what es promises:
        the same bits for any rank count, after a resume, and in es-eval."""
        seen = self.probed = []
        buffers = getattr(self.policy, "buffers", None)  # a torch module's
        before = buffers() if buffers is not None else None
        try:
            act = self.bind(params, ObsNorm.identity(self.obs_dim))
            observation, _ = env.reset(seed=0)
            for step in range(PROBE_STEPS):
                action = act(observation)
                seen.append((copy.deepcopy(observation), action))
                try:
                    observation, _, terminated, truncated, _ = env.step(action)
                except Exception as error:  # the env's code (or keywords), on the action
                    env_id = env.spec.id if env.spec is not None else "the env"
                    raise PolicyError(
                        f"policy.kind = {self.name!r} on {env_id}: the env's step raised "
                        f"{type(error).__name__}: {error} on the policy's action {action!r} "
                        f"(step {step} of a probe episode): the action, or the env's code or "
                        "its env.kwargs") from None
                if terminated or truncated:
                    break
            again = self.bind(params, ObsNorm.identity(self.obs_dim))
            replayed = [again(observation) for observation, _ in seen]
        except PolicyError:
            raise
        except Exception as error:  # the user's code: keep its words, on one line
            # torch's C++ errors go on with a stack of frames: not the user's to read
            said = " ".join(re.split(r"\s+Exception raised from ", str(error))[0].split())
            hint = ("; integer observations (pixels, RAM, Discrete) reach a torch module as "
                    "int64 tensors, as nn.Embedding takes them: cast them in forward, e.g. "
                    "x.float()" if re.search(r"\bLong\b|long int", said) else "")
            raise PolicyError(f"policy.kind = {self.name!r}: acting on a first observation "
                              f"raised {type(error).__name__}: {said}{hint}") from None
        for step, ((_, first), second) in enumerate(zip(seen, replayed, strict=True)):
            values = np.asarray(first)
            if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
                raise PolicyError(  # it was called random: NaN equals no NaN
                    f"policy.kind = {self.name!r}: acted {first!r} on an observation of the "
                    f"env's (step {step} of a probe episode): an action must be finite "
                    "numbers")
            if not np.array_equal(values, np.asarray(second)):
                raise PolicyError(
                    f"policy.kind = {self.name!r}: the same parameters acted {first!r} and "
                    f"{second!r} on the same observation (step {step} of a probe episode): "
                    "the policy must be deterministic (no random draws in forward or act)")
        changed = self.policy.changed_buffers(before) if before is not None else []
        if changed:
            raise PolicyError(
                f"policy.kind = {self.name!r}: forward changed the module's buffer "
                f"{changed[0]!r} while acting: a member's actions would depend on the episodes "
                "its rank played before it, and the result on the rank count; keep no running "
                "statistics in the module (policy.obs_norm normalises the observations)")

    def probe_digest(self) -> str:
        """A digest of the probe episode's actions (as printed: rounding in the last bits
        does not count), which a checkpoint keeps: a resume whose probe acts otherwise runs
        other policy code (an edited module file, a notebook's class defined again under its
        name) or another env than the run's start did."""
        return hashlib.sha256(repr([action for _, action in self.probed]).encode()).hexdigest()

    def rebuilt_apart(self, instance: Any, env: gym.Env, params: np.ndarray,
                      seed: int = 0) -> str | None:
        """Why the class of ``instance`` (the policy given, already probed), called with the
        two spaces as es-eval and ``--resume`` call what ``config.toml`` names, is another
        policy: it fails, has another parameter count, or acts otherwise on the probe
        episode's observations with the same parameters (a class whose constructor takes
        other arguments, left at their defaults). None when it acts alike."""
        try:
            with seeded_torch(seed):
                made = type(instance)(self.observation_space, self.action_space)
            rebuilt = build_user_policy(made, env, {}, self.normalise, self.name)
        except PolicyError as error:
            return f"fails: {error}"
        except Exception as error:  # the user's code: keep its words, on one line
            return f"raises {type(error).__name__}: {error}"
        if rebuilt.num_params != self.num_params:
            return (f"builds {rebuilt.num_params} parameters, not the instance's "
                    f"{self.num_params}")
        try:
            again = rebuilt.bind(params, ObsNorm.identity(self.obs_dim))
            replayed = [again(observation) for observation, _ in self.probed]
        except Exception as error:  # the user's code: keep its words, on one line
            return f"raises {type(error).__name__}: {error} when it acts"
        for step, ((_, first), second) in enumerate(zip(self.probed, replayed, strict=True)):
            if not np.array_equal(np.asarray(first), np.asarray(second)):
                return (f"acts {second!r} where the instance acted {first!r} with the same "
                        f"parameters (step {step} of a probe episode)")
        return None

    def bind(self, params: np.ndarray, norm: ObsNorm) -> Callable[[Any], Any]:
        """The episode's ``observation -> action``: the wrapped policy's own ``bind`` if it
        has one (a torch module is loaded once per episode), else ``act`` with the state
        carried here; Box observations normalised first when ``policy.obs_norm`` is on."""
        normalised = normaliser(norm) if self.normalise else None
        inner = getattr(self.policy, "bind", None)
        if inner is not None:
            step = inner(params)

            def bound(observation: Any) -> Any:
                if normalised is not None:
                    observation = normalised(observation)
                return self.check_action(step(observation))

            return bound
        state: Any = None

        def stepped(observation: Any) -> Any:
            nonlocal state
            if normalised is not None:
                observation = normalised(observation)
            action, state = self.policy.act(params, observation, state)
            return self.check_action(action)

        return stepped


def normaliser(norm: ObsNorm) -> Callable[[np.ndarray], np.ndarray]:
    """``clip((obs - mean) / std, -clip, clip)`` in the observation's own shape."""
    mean = np.asarray(norm.mean, dtype=np.float64)
    inv_std = 1.0 / np.asarray(norm.std, dtype=np.float64)
    clip = float(norm.clip)

    def normalise(observation: np.ndarray) -> np.ndarray:
        """One observation, or rows of flat observations (element by element alike)."""
        shape = np.shape(observation)
        x = np.subtract(observation if len(shape) == 2 and shape[1] == mean.size
                        else np.ravel(observation), mean)
        x *= inv_std
        np.clip(x, -clip, clip, out=x)
        return x.reshape(shape)

    return normalise


def action_check(space: gym.Space, name: str) -> Callable[[Any], Any]:
    """A check of one action against ``space``, cheap enough for every step: the action, or
    a ``PolicyError`` saying what was expected. Box actions may be any float dtype (MuJoCo
    takes float64); Discrete ones any integer type."""

    def refuse(action: Any, expected: str) -> PolicyError:
        text = np.array2string(np.asarray(action), threshold=8) if np.ndim(action) else (
            repr(action))
        return PolicyError(f"policy.kind = {name!r}: action {text} is outside the action "
                           f"space {space}; expected {expected}")

    if isinstance(space, gym.spaces.Discrete):
        low, high = int(space.start), int(space.start + space.n)

        def discrete(action: Any) -> Any:
            # A NaN failed in int() with "cannot convert float NaN to integer", unnamed.
            if not (np.ndim(action) == 0 and math.isfinite(value := float(action))
                    and value == int(value) and low <= int(value) < high):
                raise refuse(action, f"an integer in [{low}, {high})")
            return int(action)

        return discrete
    if isinstance(space, gym.spaces.Box):
        low, high, shape = space.low, space.high, space.shape

        def box(action: Any) -> Any:
            # NaN passes (a NaN observation makes one): the episode then fails as a broken
            # environment's would, counted, not ending the run.
            values = np.asarray(action, dtype=np.float64)
            if values.shape != shape or np.any(values < low) or np.any(values > high):
                raise refuse(action, f"shape {shape} within the bounds")
            return values

        return box
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = space.nvec

        def multi(action: Any) -> Any:
            values = np.asarray(action)
            if (values.shape != nvec.shape or values.dtype.kind not in "iu"
                    or np.any(values < 0) or np.any(values >= nvec)):
                raise refuse(action, f"integers of shape {nvec.shape} below {nvec.tolist()}")
            return values

        return multi

    def any_space(action: Any) -> Any:
        if not space.contains(action):
            raise refuse(action, "a member of the space")
        return action

    return any_space
