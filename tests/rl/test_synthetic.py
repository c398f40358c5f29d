"""The synthetic sleeping environment: its timing contract and seeded episode lengths."""

import time

import gymnasium as gym
import numpy as np
import pytest

from es.rl.envs import check_env_id, make_env


def lengths(env, seeds):
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out.append(env.unwrapped.length)
    return np.array(out)


def test_steps_take_at_least_step_ms_and_episodes_end_at_their_length():
    check_env_id("es/Sleep-v0")
    env = make_env("es/Sleep-v0", None, {"step_ms": 5.0, "mean_length": 20})
    started = time.perf_counter()
    env.reset(seed=0)
    steps, done = 0, False
    while not done:
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        done = terminated or truncated
        assert np.isfinite(reward)
        assert time.perf_counter() - started >= steps * 0.005
    assert steps == 20


class FakeClock:
    """Time that moves only when the env sleeps or the test says the caller worked."""

    def __init__(self):
        self.now, self.slept = 0.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_pacing_absorbs_the_callers_time_between_steps_but_not_a_stall():
    env = make_env("es/Sleep-v0", None, {"step_ms": 5.0, "mean_length": 6}).unwrapped
    clock = FakeClock()
    env.clock, env.sleep = clock, clock.sleep
    env.reset(seed=0)
    work = [0.001, 0.002, 0.012, 0.0, 0.001, 0.0]  # the caller's time before each step
    for spent in work:
        clock.now += spent
        env.step(np.zeros(2, np.float32))
    # Deadlines 5, 10 ms; the caller stalls until 22 ms (no sleep, deadlines restart there):
    # 27, 32, 37 ms. The 12 ms stall costs the episode 7 ms beyond 6 steps of 5 ms.
    np.testing.assert_allclose(clock.slept, [0.004, 0.003, 0.005, 0.004, 0.005])
    assert clock.now == pytest.approx(0.037)


def test_coalesced_sleeps_keep_the_episode_duration():
    env = make_env("es/Sleep-v0", None,
                   {"step_ms": 2.0, "mean_length": 10, "min_sleep_ms": 5.0}).unwrapped
    clock = FakeClock()
    env.clock, env.sleep = clock, clock.sleep
    env.reset(seed=0)
    for _ in range(10):
        env.step(np.zeros(2, np.float32))
    # Deadlines 2, 4, 6 ms... are coalesced into sleeps of >= 5 ms: at steps 3, 6, 9, and the
    # last step sleeps up to the episode's 20 ms.
    np.testing.assert_allclose(clock.slept, [0.006, 0.006, 0.006, 0.002])
    assert clock.now == pytest.approx(0.020)


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
