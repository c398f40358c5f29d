"""Atari preprocessing: shapes, frame skip, seeding, sticky actions, argument errors."""

import numpy as np
import pytest

from es.rl.atari import make_atari_env

GAMES = ["ALE/Pong-v5", "ALE/Breakout-v5"]


def play(env, seed: int, steps: int) -> tuple[list[np.ndarray], list[float]]:
    """Observations and rewards of ``steps`` actions drawn from a fixed generator."""
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(123)
    observations, rewards = [obs.copy()], []
    for _ in range(steps):
        obs, reward, _, _, _ = env.step(int(rng.integers(env.action_space.n)))
        observations.append(obs.copy())
        rewards.append(float(reward))
    return observations, rewards


def episode_frame(env) -> int:
    return env.unwrapped.ale.getEpisodeFrameNumber()


@pytest.mark.parametrize("game", GAMES)
def test_pixel_observations_are_stacked_84x84_uint8(game):
    env = make_atari_env(game)
    assert env.observation_space.shape == (4, 84, 84)
    observations, _ = play(env, seed=0, steps=20)
    for obs in observations:
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        assert env.observation_space.contains(obs)
    # Oldest frame first: each step shifts the stack by one.
    np.testing.assert_array_equal(observations[-1][:-1], observations[-2][1:])


@pytest.mark.parametrize("game", GAMES)
def test_ram_observations_are_128_bytes(game):
    env = make_atari_env(game, obs="ram")
    observations, _ = play(env, seed=0, steps=20)
    for obs in observations:
        assert obs.shape == (128,) and obs.dtype == np.uint8
        assert env.observation_space.contains(obs)
    np.testing.assert_array_equal(observations[-1], env.unwrapped.ale.getRAM())


@pytest.mark.parametrize("obs", ["pixels", "ram"])
@pytest.mark.parametrize("frame_skip", [1, 4])
def test_one_step_advances_frame_skip_emulator_frames(obs, frame_skip):
    env = make_atari_env("ALE/Pong-v5", obs=obs, frame_skip=frame_skip)
    env.reset(seed=0)
    before = episode_frame(env)
    env.step(0)
    assert episode_frame(env) - before == frame_skip
    # A video plays in real time: the ALE's 30 fps made Pong's run at twice the speed.
    assert env.metadata["render_fps"] == 60 / frame_skip
    limited = make_atari_env("ALE/Pong-v5", obs=obs, frame_skip=frame_skip, max_episode_steps=10)
    assert limited.metadata["render_fps"] == 60 / frame_skip


@pytest.mark.parametrize("obs", ["pixels", "ram"])
def test_noop_starts_are_seeded_single_frames(obs):
    env = make_atari_env("ALE/Pong-v5", obs=obs, noop_max=30)
    starts = []
    for seed in range(8):
        env.reset(seed=seed)
        starts.append(episode_frame(env))
        env.reset(seed=seed)
        assert episode_frame(env) == starts[-1]
    assert all(1 <= n <= 30 for n in starts) and len(set(starts)) > 1
    env = make_atari_env("ALE/Pong-v5", obs=obs, noop_max=0)
    env.reset(seed=0)
    assert episode_frame(env) == 0


@pytest.mark.parametrize("obs", ["pixels", "ram"])
@pytest.mark.parametrize("game", GAMES)
def test_same_seed_same_episode_other_seed_differs(game, obs):
    env = make_atari_env(game, obs=obs)
    first_obs, first_rewards = play(env, seed=7, steps=60)
    again_obs, again_rewards = play(make_atari_env(game, obs=obs), seed=7, steps=60)
    other_obs, _ = play(env, seed=8, steps=60)
    np.testing.assert_array_equal(np.stack(first_obs), np.stack(again_obs))
    assert first_rewards == again_rewards
    assert not np.array_equal(np.stack(first_obs), np.stack(other_obs))


@pytest.mark.parametrize("obs", ["pixels", "ram"])
@pytest.mark.parametrize("sticky", [0.0, 0.25, 0.5])
def test_sticky_actions_reach_the_emulator(obs, sticky):
    env = make_atari_env("ALE/Breakout-v5", obs=obs, sticky_actions=sticky)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(sticky)


@pytest.mark.parametrize("obs", ["pixels", "ram"])
def test_max_episode_steps_counts_agent_steps(obs):
    env = make_atari_env("ALE/Pong-v5", obs=obs, max_episode_steps=5)
    env.reset(seed=0)
    truncations = [env.step(0)[3] for _ in range(5)]
    assert truncations == [False] * 4 + [True]


def test_render_mode_gives_full_rgb_frames():
    env = make_atari_env("ALE/Pong-v5", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8


@pytest.mark.parametrize(
    ("env_id", "kwargs", "message"),
    [
        ("ALE/Pong-v5", {"obs": "rgb"}, "obs 'rgb': allowed are 'pixels', 'ram'"),
        ("ALE/Pong-v5", {"frame_skip": 0}, "frame_skip 0: must be >= 1"),
        ("ALE/Pong-v5", {"frame_stack": 0}, "frame_stack 0: must be >= 1"),
        ("ALE/Pong-v5", {"noop_max": -1}, "noop_max -1: must be >= 0"),
        ("ALE/Pong-v5", {"sticky_actions": 1.5}, "sticky_actions 1.5: must be in [0, 1]"),
        ("ALE/Pong-v5", {"sticky_actions": -0.1}, "sticky_actions -0.1: must be in [0, 1]"),
        ("ALE/Pong-v5", {"max_episode_steps": 0}, "max_episode_steps 0: must be >= 1 or None"),
        ("ALE/Pong-v5", {"frameskip": 2}, "keyword 'frameskip': set by make_atari_env, use "),
        ("CartPole-v1", {}, "env id 'CartPole-v1': not an ALE game (e.g. 'ALE/Pong-v5')"),
        ("ALE/NoSuchGame-v5", {}, "env id 'ALE/NoSuchGame-v5': not an ALE game"),
    ],
)
def test_bad_arguments_give_one_line_errors(env_id, kwargs, message):
    with pytest.raises(ValueError) as error:
        make_atari_env(env_id, **kwargs)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)
