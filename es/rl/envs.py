"""Gymnasium environments: id checks, construction, and the policy shape they imply."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import re
import sys
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.error import DependencyNotInstalled

from es.config import AtariConfig, Config, ConfigError
from es.rl.cnn import TORSOS, ConvNetSpec
from es.rl.policies import PolicySpec


def _register_on_demand(env_id: str) -> None:
    """Make ``ALE/...`` (ale-py) and ``es/...`` (our synthetic) ids known to Gymnasium."""
    if is_atari(env_id):
        from es.rl.atari import register_ale  # loads ale_py only when needed

        register_ale()
    elif env_id.startswith("es/"):
        from es.rl.synthetic import register

        register()


def import_user_module(name: str) -> Any:
    """Import a user's module (an env's ``module:EnvId``, a policy factory's module) from the
    path or from the current folder, as ``python -m`` would: console scripts do not put the
    folder they run in on ``sys.path``."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())
    return importlib.import_module(name)


class EnvIdError(ValueError):
    """An ``env.id`` that cannot be made: the one-line message says why."""


def check_env_id(env_id: str) -> None:
    """Raise ``EnvIdError`` with a one-line message if Gymnasium does not know ``env_id``.

    ``module:EnvId`` (Gymnasium's syntax for user environments) imports ``module`` first,
    which registers its environments.
    """
    _register_on_demand(env_id)
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            import_user_module(module)
        except Exception as error:  # the user's module may fail in any way while it loads
            raise EnvIdError(f"env.id {env_id!r}: cannot import module {module!r} "
                             f"({type(error).__name__}: {error})") from None
        name = class_env_id(module, name) or name
    try:
        spec = gym.spec(name)
    except gym.error.Error as error:
        # An id the user's module registered is only found through it (es-eval, --resume).
        close = [f"{module}:{found}" if module and _registered_by(found, module) else found
                 for found in similar_env_ids(name)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        if module and name.isidentifier() and not hasattr(sys.modules[module], name):
            makers = [found for found in dir(sys.modules[module]) if _is_env_maker(
                getattr(sys.modules[module], found))]
            if close := difflib.get_close_matches(name, makers, n=3):
                hint = f" (did you mean {', '.join(f'{module}:{found}' for found in close)}?)"
            raise EnvIdError(f"env.id {env_id!r}: module {module!r} has no {name!r} (an "
                             "environment class or function) and registers no such "
                             f"Gymnasium id{hint}") from error
        if not module and (game := ale_game_of(name)):
            raise EnvIdError(old_atari_id(env_id, game)) from None
        raise EnvIdError(f"env.id {env_id!r}: not a registered Gymnasium id{hint}") from error
    # ale-py registers gym's old ids too, once loaded (by an ALE/ id earlier in the process)
    # (es.rl.atari.ALE_ENTRY_POINT, written out: importing that module loads ale_py)
    if not name.startswith("ALE/") and spec.entry_point == "ale_py.env:AtariEnv":
        raise EnvIdError(old_atari_id(env_id, ale_game_of(name) or "<Game>"))


def ale_game_of(name: str) -> str | None:
    """The ALE game an old-style Atari id names (``PongNoFrameskip-v4``, ``Breakout-ram-v0``:
    gym's ids before ale-py's ``ALE/`` namespace), where ale-py has it."""
    found = re.fullmatch(r"([A-Z][A-Za-z]*?)(?:NoFrameskip|Deterministic)?(?:-ram)?-v\d+", name)
    if found is None:
        return None
    from es.rl.atari import register_ale  # loads ale_py only when needed

    register_ale()
    return found.group(1) if f"ALE/{found.group(1)}-v5" in gym.registry else None


def old_atari_id(env_id: str, game: str) -> str:
    """Why gym's old Atari ids are refused: made as they are, they would skip the Atari
    preprocessing (frames of 210 x 160 RGB reached the policy), and what to write instead."""
    return (f"env.id {env_id!r}: gym's old Atari id; here an ALE game is ALE/{game}-v5, with "
            "its frame skip, frame stack and RAM observations in atari.frame_skip, "
            "atari.frame_stack and atari.obs (the v4 ids' no sticky actions: "
            "atari.sticky_actions = 0)")


def class_env_id(module: str, name: str) -> str | None:
    """For ``module:MyEnv``, a class (or a function) of the user's module rather than an id it
    registers: the id it is registered under here (``module/MyEnv``, namespaced apart from
    the module's own ids, such as ``MyEnv-v0``), so that it needs no ``gymnasium.register`` of
    its own (no time limit then: ``env.max_episode_steps`` sets one). None for an id."""
    made = getattr(sys.modules[module], name, None)
    if not _is_env_maker(made):
        return None
    env_id = f"{module}/{name}"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=made)
    return env_id


def _is_env_maker(made: object) -> bool:
    """An environment class, or a function (that makes one)."""
    return (inspect.isclass(made) and issubclass(made, gym.Env)) or inspect.isfunction(made)


def _registered_by(env_id: str, module: str) -> bool:
    """Whether ``env_id``'s entry point lives in ``module``."""
    entry = gym.spec(env_id).entry_point
    where = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    return where == module


def similar_env_ids(env_id: str, count: int = 3) -> list[str]:
    """The registered ids closest to a mistyped one, each at its newest version: a wrong
    version or case (``halfcheetah-v9``) points at ``HalfCheetah-v5``, not at the ``v2``
    that needs the long-gone mujoco-py."""
    newest: dict[str, gym.envs.registration.EnvSpec] = {}
    for spec in gym.registry.values():
        base = spec.id if spec.version is None else spec.id.rsplit("-v", 1)[0]
        if base not in newest or (spec.version or 0) > (newest[base].version or 0):
            newest[base] = spec
    wanted = re.sub(r"-v\d+$", "", env_id).lower()
    by_lower = {base.lower(): base for base in newest}
    close = difflib.get_close_matches(wanted, list(by_lower), n=count, cutoff=0.75)
    return [newest[by_lower[match]].id for match in close]


def is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/")


def make_env(
    env_id: str,
    max_episode_steps: int | None,
    kwargs: dict[str, Any],
    atari: AtariConfig | None = None,
    render_mode: str | None = None,
) -> gym.Env:
    """The environment of a config; ALE games get the standard preprocessing (``es.rl.atari``),
    with ``max_episode_steps`` counted in agent steps.

    With ``kwargs`` (``env.kwargs``), a failure to construct is a ``ConfigError`` naming them:
    a misspelt keyword or a value of the wrong type surfaces there, as whatever exception the
    environment's constructor happens to raise."""
    if not kwargs and render_mode is None:
        try:
            return _make(env_id, max_episode_steps, kwargs, atari, render_mode)
        except TypeError as error:  # a constructor with arguments of its own, none given
            message = creator_words(error)
            if not re.search(r"missing \d+ required (positional|keyword-only) argument",
                             message):
                raise constructor_failed(env_id, error) from None
            raise ConfigError(f"{env_id} cannot be made without arguments ({message}): give "
                              "them in env.kwargs (--set env.kwargs.NAME=VALUE)") from None
        except (ConfigError, DependencyNotInstalled):
            raise
        except Exception as error:  # the user's constructor: "error on rank 0: OSError: ..."
            raise constructor_failed(env_id, error) from None  # named no env, exit code 1
    try:
        return _make(env_id, max_episode_steps, kwargs, atari, render_mode)
    except (ConfigError, DependencyNotInstalled):  # ours, naming the keyword; an extra's
        raise
    except Exception as error:  # the constructor is any user's code: keep its type and words
        message = creator_words(error)
        if render_mode is not None:  # the same env was made without it to be trained
            raise ConfigError(f"{env_id} cannot render frames (render_mode={render_mode!r}: "
                              f"{type(error).__name__}: {message})") from None
        unknown = re.search(r"unexpected keyword argument '([^']*)'", message)
        if unknown and unknown[1] in kwargs:
            raise ConfigError(f"env.kwargs.{unknown[1]}: {env_id} takes no such keyword "
                              f"({message})") from None
        if not isinstance(error, (TypeError, ValueError)):  # not the keywords' doing
            raise constructor_failed(env_id, error) from None
        raise ConfigError(f"env.kwargs = {kwargs!r}: {env_id} cannot be made with them "
                          f"({type(error).__name__}: {message})") from None


def constructor_failed(env_id: str, error: Exception) -> ConfigError:
    """The one-line error of an env whose constructor raised: its id, and its words."""
    return ConfigError(f"env.id = {env_id!r}: the env's constructor raised "
                       f"{type(error).__name__}: {creator_words(error)}")


def creator_words(error: Exception) -> str:
    """What an env's constructor said, without the note gymnasium.make adds to it."""
    return str(error).split(" was raised from the environment creator")[0]


def _make(
    env_id: str,
    max_episode_steps: int | None,
    kwargs: dict[str, Any],
    atari: AtariConfig | None,
    render_mode: str | None,
) -> gym.Env:
    _register_on_demand(env_id)
    module, _, name = env_id.rpartition(":")
    made = env_id  # what Gymnasium makes; messages name the id the user gave
    if module:  # Gymnasium imports it too, but not from the current folder
        import_user_module(module)
        made = class_env_id(module, name) or env_id
    if is_atari(env_id):
        from es.rl.atari import make_atari_env  # loads ale_py only when needed

        atari = atari or AtariConfig()
        return make_atari_env(env_id, atari.obs, atari.frame_skip, atari.frame_stack,
                              atari.noop_max, atari.sticky_actions, max_episode_steps,
                              render_mode, **kwargs)
    spec = gym.registry.get(made.rpartition(":")[2])
    _check_kwarg_types(env_id, spec, kwargs)
    options: dict[str, Any] = dict(kwargs)
    if max_episode_steps is not None:
        options["max_episode_steps"] = max_episode_steps
    if render_mode is not None:
        options["render_mode"] = render_mode
    if spec is not None and "mujoco" in str(spec.entry_point):
        _quiet_model_deprecations()
    return adapted_actions(gym.make(made, disable_env_checker=True, **options))


class _ShiftedActions(gym.ActionWrapper):
    """Actions counted from 0 for a Discrete or MultiDiscrete space that starts elsewhere
    (``Discrete(3, start=-1)``), and flat for a Box of several dimensions: the space every
    policy acts in (the built-ins' argmax and flat outputs, a torch module's, the baselines'),
    mapped back to the env's own. Both had failed every episode on the env's assertion."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.action_space
        self.to_env: Any
        if isinstance(space, gym.spaces.Box):
            self.action_space = gym.spaces.Box(space.low.ravel(), space.high.ravel(),
                                               dtype=space.dtype)
            self.to_env = lambda action: np.reshape(action, space.shape)
        elif isinstance(space, gym.spaces.Discrete):
            self.action_space = gym.spaces.Discrete(int(space.n))
            self.to_env = lambda action: int(space.start) + int(action)
        else:  # MultiDiscrete
            self.action_space = gym.spaces.MultiDiscrete(space.nvec, dtype=space.dtype)
            self.to_env = lambda action: space.start + np.asarray(action, space.dtype)

    def action(self, action: Any) -> Any:
        return self.to_env(action)


def check_env_api(env: gym.Env, env_id: str) -> None:
    """One reset and one step of a random action (seeded), checked against Gymnasium's API:
    a custom env written for the old Gym API, or returning a reward of shape (1,), failed
    every episode at generation 1 with NumPy's words ("not enough values to unpack", "only
    0-dimensional arrays can be converted"). A ValueError naming what was wrong instead. An
    env that raises here is left to its episodes, which count it as they count every
    failure (some envs raise from some starts)."""
    head = f"env.id = {env_id!r}"
    try:
        returned = env.reset(seed=0)
    except Exception:  # the env's own failure: its episodes report it
        return
    if not (isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[1], dict)):
        raise ValueError(f"{head}: reset returned {_short(returned)}; a Gymnasium env's reset "
                         "returns (observation, info), info a dict (the old Gym API returned "
                         "the observation alone)")
    _check_observation(returned[0], env.observation_space, head, "reset")
    api = ("a Gymnasium env's step returns (observation, reward, terminated, truncated, "
           "info) (the old Gym API returned 4 values, with one done)")
    try:
        env.action_space.seed(0)
        stepped = env.step(env.action_space.sample())
    except ValueError as error:  # a wrapper's unpacking (TimeLimit's) of the env's step
        if unpacked := re.search(r"values to unpack \(expected 5, got (\d+)\)", str(error)):
            raise ValueError(f"{head}: step returned a tuple of {unpacked[1]}; {api}") from None
        return
    except Exception:
        return
    if not (isinstance(stepped, tuple) and len(stepped) == 5):
        raise ValueError(f"{head}: step returned {_short(stepped)}; {api}")
    _check_observation(stepped[0], env.observation_space, head, "step")
    if np.ndim(stepped[1]) != 0 or np.asarray(stepped[1]).dtype.kind not in "biuf":
        raise ValueError(f"{head}: step's reward is {_short(stepped[1])}; it must be one "
                         "number (e.g. float(reward))")


def _check_observation(observation: Any, space: gym.Space, head: str, where: str) -> None:
    """A Box observation of the space's size (what the policies' sizes come from)."""
    if isinstance(space, gym.spaces.Box) and np.size(observation) != np.prod(space.shape):
        raise ValueError(f"{head}: {where} gave an observation of shape "
                         f"{np.shape(observation)}, but its observation_space is {space}")


def _short(value: Any) -> str:
    """A returned value, as a message shows it: its type and (for arrays) shape."""
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:40] + '...'}"


def adapted_actions(env: gym.Env) -> gym.Env:
    """``env``, or ``_ShiftedActions`` of it where its action space needs that."""
    space = env.action_space
    if (isinstance(space, gym.spaces.Box) and len(space.shape) > 1) or (
            isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete)
            and np.any(space.start != 0)):
        return _ShiftedActions(env)
    return env


def _check_kwarg_types(env_id: str, spec: Any, kwargs: dict[str, Any]) -> None:
    """A keyword whose default in the env's constructor (``spec``'s entry point) is a number
    (or True/False, or a tuple of numbers such as a range) given something else: a
    constructor that stores it unchecked (MuJoCo's ``ctrl_cost_weight = 'abc'``) fails in
    every episode instead, and the run with them."""
    if spec is None or not kwargs:
        return
    try:
        maker = spec.entry_point if callable(spec.entry_point) else \
            gym.envs.registration.load_env_creator(spec.entry_point)
        parameters = inspect.signature(maker).parameters
    except (ValueError, TypeError, ImportError, AttributeError):  # nothing to read it from
        return
    def is_number(item: Any) -> bool:
        return isinstance(item, int | float) and not isinstance(item, bool)

    for key, value in kwargs.items():
        default = parameters[key].default if key in parameters else None
        number = is_number(value)
        if isinstance(default, bool):
            wanted, fits = "true or false", isinstance(value, bool)
        elif isinstance(default, int) and "float" not in str(parameters[key].annotation):
            # MuJoCo's frame_skip = 2.5 reached mj_step and failed every episode; an int
            # default annotated float (Reacher-v5's reward_dist_weight = 1) takes any number.
            wanted, fits = "a whole number", number and isinstance(value, int)
        elif isinstance(default, int | float):
            wanted, fits = "a number", number
        elif isinstance(default, tuple | list) and default and all(map(is_number, default)):
            # Hopper's healthy_z_range = 5 failed every episode ("cannot unpack non-iterable").
            wanted = f"a list of {len(default)} numbers"
            fits = (isinstance(value, list | tuple) and len(value) == len(default)
                    and all(map(is_number, value)))
        else:
            continue
        if fits and key == "frame_skip" and value < 1:
            # MuJoCo's frame_skip = -4 stepped the simulation zero times (dt negative): the
            # body never moved and the run trained on nothing.
            wanted, fits = "a whole number >= 1", False
        if fits and key.endswith("_range") and isinstance(default, tuple | list) \
                and len(default) == 2 \
                and default[0] <= default[1] and value[0] > value[1]:
            # Hopper's healthy_z_range = [2.0, 0.7] ended every episode at its first step.
            wanted, fits = "a range [low, high], low <= high", False
        if not fits:
            raise ConfigError(f"env.kwargs.{key} = {value!r}: {env_id} takes {wanted} "
                              f"(its default: {default!r})")


#: MuJoCo warnings about Gymnasium's own model files, which a user cannot act on: HalfCheetah's
#: XML sets the deprecated ``settotalmass`` (MuJoCo 3.3+), printed at every env a rank builds.
GYMNASIUM_MODEL_NOTES = ("compiler attribute 'settotalmass' is deprecated",)


def _quiet_model_deprecations() -> None:
    """Route MuJoCo's warnings through a handler that drops ``GYMNASIUM_MODEL_NOTES`` and
    prints the rest as MuJoCo does; a handler the user installed stays."""
    import mujoco

    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_mujoco_warning)


def _mujoco_warning(message: str) -> None:
    if not message.startswith(GYMNASIUM_MODEL_NOTES):
        print(f"WARNING: {message}", file=sys.stderr, flush=True)


def without_time_limit(config: Config, env: gym.Env) -> bool:
    """Whether nothing ends the env's episodes but the env itself (no TimeLimit, no
    ``env.max_episode_steps``): an episode that never ends holds up its generation, and with
    it ``run.max_seconds`` and a stop signal, which are heeded between generations. ALE games
    end themselves after 108,000 frames (their v5 default), es/Sleep-v0 at its max_length."""
    return not (config.env.max_episode_steps or is_atari(config.env.id)
                or config.env.id.startswith("es/")
                or (env.spec is not None and env.spec.max_episode_steps is not None))


def env_from_config(config: Config, render_mode: str | None = None) -> gym.Env:
    env = config.env
    return make_env(env.id, env.max_episode_steps or None, env.kwargs, config.atari, render_mode)


def policy_spec_for(
    env: gym.Env,
    kind: str,
    hidden: tuple[int, ...],
    activation: str,
    torso: str = "nature",
    vbn: bool = True,
    clip_actions: bool = True,
) -> PolicySpec | ConvNetSpec:
    """The built-in policy ``kind`` for ``env``'s spaces; ``clip_actions`` False leaves a Box
    action's bounds infinite, so nothing clips it (``policy.clip_actions``)."""
    obs_space, act_space = env.observation_space, env.action_space
    if kind == "cnn":
        return _cnn_spec(obs_space, act_space, torso, vbn)
    if not isinstance(obs_space, gym.spaces.Box):
        raise ValueError(f"observation space {obs_space}: policy.kind = {kind!r} takes Box "
                         "observations; for others give your own policy (policy.kind = "
                         "'module:factory', policy.obs_norm = false: docs/python-api.md)")
    obs_dim = int(np.prod(obs_space.shape))
    if isinstance(act_space, gym.spaces.Discrete):
        return PolicySpec(kind, obs_dim, int(act_space.n), True, hidden, activation)
    if isinstance(act_space, gym.spaces.Box):
        if not np.issubdtype(act_space.dtype, np.floating):
            raise ValueError(f"action space {act_space}: policy.kind = {kind!r} gives real "
                             "numbers, not the env's integers; give your own policy "
                             "(policy.kind = 'module:factory': docs/python-api.md)")
        spec = PolicySpec(
            kind,
            obs_dim,
            int(np.prod(act_space.shape)),
            False,
            hidden,
            activation,
            tuple(float(v) for v in act_space.low.ravel()),
            tuple(float(v) for v in act_space.high.ravel()),
        )
        return spec if clip_actions else spec.unclipped()
    raise ValueError(f"action space {act_space}: policy.kind = {kind!r} takes Discrete and Box "
                     "actions; for others give your own policy (policy.kind = "
                     "'module:factory': docs/python-api.md)")


def _cnn_spec(obs_space: gym.Space, act_space: gym.Space, torso: str, vbn: bool) -> ConvNetSpec:
    """Stacked frames ``(C, H, W)`` in, one logit per discrete action out."""
    if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 3):
        raise ValueError(f"policy.kind = 'cnn' needs stacked image observations (C, H, W), got "
                         f"{obs_space}; for ALE games set atari.obs = 'pixels'")
    if not isinstance(act_space, gym.spaces.Discrete):
        raise ValueError(f"policy.kind = 'cnn' needs discrete actions, got {act_space}")
    convs, dense = TORSOS[torso]
    return ConvNetSpec(int(act_space.n), tuple(int(n) for n in obs_space.shape), convs, dense,
                       vbn)
