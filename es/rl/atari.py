"""Atari environments with the standard preprocessing, for any ALE game id.

Pixels follow Machado et al. (2018) as Gymnasium implements it: the emulator steps one frame at a
time, ``AtariPreprocessing`` repeats each action ``frame_skip`` frames, max-pools the last two
(sprites flicker between frames), converts to 84x84 grayscale and starts each episode with 1 to
``noop_max`` no-op frames; ``FrameStackObservation`` then stacks the last ``frame_stack`` frames,
so a policy sees motion. Observations are uint8 of shape ``(frame_stack, 84, 84)``.

RAM observations are the console's 128 bytes (uint8, shape ``(128,)``). Max-pooling is
meaningless for RAM, so the ALE repeats each action itself (``frameskip=frame_skip``);
``RamNoopReset`` adds the same no-op start as the pixel chain.

Both modes keep v5's sticky actions (``repeat_action_probability``) and its 108,000-frame cap,
and are reproducible: ``reset(seed=s)`` reseeds the ALE (sticky actions) and
``env.unwrapped.np_random`` (the number of no-ops). ``max_episode_steps`` counts agent steps of
``frame_skip`` frames each, not emulator frames.
"""

from __future__ import annotations

from typing import Any

import ale_py
import gymnasium as gym
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit

OBS_MODES = ("pixels", "ram")
SCREEN_SIZE = 84
CONSOLE_HZ = 60  # frames a second of the Atari 2600 (NTSC), which the ALE emulates
ALE_ENTRY_POINT = "ale_py.env:AtariEnv"

# gym.make keywords that make_atari_env sets itself, and the argument to use instead.
RESERVED_KWARGS = {
    "frameskip": "frame_skip",
    "repeat_action_probability": "sticky_actions",
    "obs_type": "obs",
}


class RamNoopReset(gym.Wrapper):
    """Start each episode with 1 to ``noop_max`` no-op emulator frames (RAM observations).

    Gymnasium 1.x has no stand-alone no-op reset: it lives inside ``AtariPreprocessing``, which
    needs screen observations. The no-ops here are single frames, drawn from the seeded
    ``env.unwrapped.np_random``, exactly as in that wrapper, so ``noop_max`` means the same
    in both observation modes even though the ALE itself skips frames here.
    """

    def __init__(self, env: gym.Env, noop_max: int) -> None:
        super().__init__(env)
        self.noop_max = noop_max

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if self.noop_max == 0:
            return obs, info
        ale = self.env.unwrapped.ale
        for _ in range(int(self.env.unwrapped.np_random.integers(1, self.noop_max + 1))):
            ale.act(ale_py.Action.NOOP)
            if ale.game_over():
                ale.reset_game()
        info = info | {
            "lives": ale.lives(),
            "episode_frame_number": ale.getEpisodeFrameNumber(),
            "frame_number": ale.getFrameNumber(),
        }
        return ale.getRAM(), info


def register_ale() -> None:
    """The ALE's games known to Gymnasium, and its banner ("A.L.E: Arcade Learning
    Environment ... [Powered by Stella]", on stderr from every rank and every es-eval) off;
    its warnings and errors stay."""
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
    gym.register_envs(ale_py)


def check_atari_id(env_id: str) -> None:
    """Raise a one-line ``ValueError`` unless ``env_id`` is a registered ALE game."""
    register_ale()
    try:
        entry_point = gym.spec(env_id).entry_point
    except gym.error.Error:
        entry_point = None
    if entry_point != ALE_ENTRY_POINT:
        raise ValueError(f"env id {env_id!r}: not an ALE game (e.g. 'ALE/Pong-v5')")


def check_atari_args(
    obs: str,
    frame_skip: int,
    frame_stack: int,
    noop_max: int,
    sticky_actions: float,
    max_episode_steps: int | None,
    kwargs: dict[str, Any],
) -> None:
    """Raise a one-line ``ValueError`` naming the first bad argument and what is allowed."""
    if obs not in OBS_MODES:
        raise ValueError(f"obs {obs!r}: allowed are {', '.join(map(repr, OBS_MODES))}")
    if frame_skip < 1:
        raise ValueError(f"frame_skip {frame_skip}: must be >= 1")
    if frame_stack < 1:
        raise ValueError(f"frame_stack {frame_stack}: must be >= 1")
    if noop_max < 0:
        raise ValueError(f"noop_max {noop_max}: must be >= 0")
    if not 0.0 <= sticky_actions <= 1.0:
        raise ValueError(f"sticky_actions {sticky_actions}: must be in [0, 1]")
    if max_episode_steps is not None and max_episode_steps < 1:
        raise ValueError(f"max_episode_steps {max_episode_steps}: must be >= 1 or None")
    reserved = sorted(kwargs.keys() & RESERVED_KWARGS.keys())
    if reserved:
        key = reserved[0]
        raise ValueError(f"keyword {key!r}: set by make_atari_env, use {RESERVED_KWARGS[key]}")


def make_atari_env(
    env_id: str,
    obs: str = "pixels",
    frame_skip: int = 4,
    frame_stack: int = 4,
    noop_max: int = 30,
    sticky_actions: float = 0.25,
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
    **kwargs: Any,
) -> gym.Env:
    """Make ``env_id`` with the preprocessing of ``obs`` mode; ``kwargs`` go to ``gym.make``.

    ``frame_stack`` applies to pixels only. ``kwargs`` may override ``full_action_space``
    (default False: the game's minimal action set) or ``max_num_frames_per_episode``.
    """
    check_atari_args(obs, frame_skip, frame_stack, noop_max, sticky_actions,
                     max_episode_steps, kwargs)
    check_atari_id(env_id)
    options: dict[str, Any] = {"full_action_space": False, **kwargs}
    options |= {"repeat_action_probability": sticky_actions, "render_mode": render_mode}
    if obs == "pixels":
        env = gym.make(env_id, frameskip=1, disable_env_checker=True, **options)
        env = AtariPreprocessing(env, noop_max=noop_max, frame_skip=frame_skip,
                                 screen_size=SCREEN_SIZE, terminal_on_life_loss=False,
                                 grayscale_obs=True, scale_obs=False)
        env = FrameStackObservation(env, stack_size=frame_stack)
    else:
        env = gym.make(env_id, obs_type="ram", frameskip=frame_skip, disable_env_checker=True,
                       **options)
        env = RamNoopReset(env, noop_max)
    # A step is frame_skip frames of the console's 60 Hz; the ALE says 30 fps whatever the
    # skip, and a video at that rate played Pong at twice real time.
    env.metadata = {**env.metadata, "render_fps": CONSOLE_HZ / frame_skip}
    return env if max_episode_steps is None else TimeLimit(env, max_episode_steps)

