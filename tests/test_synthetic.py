"""The synthetic sleeping environment: its timing contract and seeded episode lengths."""

import time

import gymnasium as gym
import numpy as np
import pytest

from es.envs import check_env_id, make_env


def lengths(env, seeds):
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out.append(env.unwrapped.length)
    return np.array(out)


def test_steps_take_at_least_step_ms_and_episodes_end_at_their_length():
    check_env_id("es/Sleep-v0")
    env = make_env("es/Sleep-v0", None, {"step_ms": 5.0, "mean_length": 20})
    env.reset(seed=0)
    started, steps, done = time.perf_counter(), 0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        done = terminated or truncated
        assert np.isfinite(reward)
    assert steps == 20
    assert time.perf_counter() - started >= 20 * 0.005


def test_sleeping_uses_no_cpu():
    env = make_env("es/Sleep-v0", None, {"step_ms": 10.0, "mean_length": 10})
    env.reset(seed=0)
    cpu = time.process_time()
    for _ in range(10):
        env.step(np.zeros(2, np.float32))
    assert time.process_time() - cpu < 0.05  # 100 ms of steps


def test_heavy_tailed_lengths_are_seeded_with_the_requested_mean():
    env = gym.make("es/Sleep-v0", step_ms=0, lengths="pareto", mean_length=100,
                   max_length=100_000, disable_env_checker=True)
    drawn = lengths(env, range(4000))
    np.testing.assert_array_equal(drawn[:50], lengths(env, range(50)))
    assert 80 < drawn.mean() < 120
    assert drawn.max() > 10 * np.median(drawn)  # a heavy tail: stragglers
    assert (lengths(make_env("es/Sleep-v0", None, {"step_ms": 0}), range(5)) == 100).all()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="lengths 'zipf'"):
        make_env("es/Sleep-v0", None, {"lengths": "zipf"})
