"""Policies, episodes and observation statistics."""

import gymnasium as gym
import numpy as np
import pytest

from es.rl.checkpoint import load_policy, save_policy
from es.rl.envs import check_env_id, make_env, policy_spec_for
from es.rl.policies import ObsNorm, PolicySpec, act_fn
from es.rl.rollout import ObsStats, run_episode


def test_parameter_count_and_unpacking():
    spec = PolicySpec("mlp", obs_dim=3, act_dim=2, discrete=False, hidden=(4, 5),
                      action_low=(-1, -1), action_high=(1, 1))
    assert spec.num_params == 3 * 4 + 4 + 4 * 5 + 5 + 5 * 2 + 2
    params = np.arange(spec.num_params, dtype=np.float32)
    layers = spec.unpack(params)
    assert [w.shape for w, _ in layers] == [(4, 3), (5, 4), (2, 5)]
    assert layers[1][0][0, 0] == 16  # views into the flat vector, in order
    with pytest.raises(ValueError, match="parameters given"):
        spec.unpack(params[:-1])


def test_linear_discrete_policy_is_argmax_of_normalised_obs():
    spec = PolicySpec("linear", obs_dim=2, act_dim=3, discrete=True)
    weights = np.array([[1, 0], [0, 1], [-1, -1]], np.float32)
    params = np.concatenate([weights.ravel(), np.zeros(3, np.float32)])
    norm = ObsNorm(np.array([10.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32), 5.0)
    act = act_fn(spec, params, norm)
    assert act(np.array([14.0, 1.0])) == 0  # normalised (2, 1)
    assert act(np.array([10.0, 3.0])) == 1  # normalised (0, 3)
    assert act(np.array([-100.0, -100.0])) == 2  # clipped to (-5, -5)


def test_continuous_actions_are_clipped_to_the_box():
    spec = PolicySpec("mlp", 2, 1, False, (4,), "tanh", (-2.0,), (2.0,))
    params = np.full(spec.num_params, 3.0, np.float32)
    act = act_fn(spec, params, ObsNorm.identity(2))
    assert act(np.array([1.0, 1.0]))[0] == 2.0


def test_unclipped_actions_pay_the_control_cost_of_the_whole_action():
    """policy.clip_actions = false: the papers' code sends W obs as it is, and MuJoCo charges
    its control cost on it (a policy trained clipped scores lower there: Humanoid's kept
    policies, 7,026 clipped against 6,043 unclipped on seed 0)."""
    env = make_env("HalfCheetah-v5", None, {})
    params = np.full(PolicySpec("linear", 17, 6, False).num_params, 5.0, dtype=np.float32)
    observation, _ = env.reset(seed=0)
    for clip, largest in ((True, 1.0), (False, None)):
        spec = policy_spec_for(env, "linear", (), "tanh", clip_actions=clip)
        action = act_fn(spec, params, ObsNorm.identity(17))(observation)
        if largest is not None:
            assert np.abs(action).max() == largest
        else:
            assert np.abs(action).max() > 1.0
        _, _, _, _, info = env.step(action)
        assert info["reward_ctrl"] == pytest.approx(-0.1 * float(np.sum(action ** 2)))


def test_mlp_initialisation_is_seeded_and_small_at_the_output():
    spec = PolicySpec("mlp", 17, 6, False, (64, 64))
    a = spec.initial_params(np.random.default_rng(0))
    np.testing.assert_array_equal(a, spec.initial_params(np.random.default_rng(0)))
    out_w = spec.unpack(a)[-1][0]
    np.testing.assert_allclose(np.linalg.norm(out_w, axis=1), 0.01, rtol=1e-5)


def test_obs_stats_merge_exactly_whatever_the_partition():
    """Two ranks' increments sum to exactly the one-rank increment (int64 fixed point)."""
    rng = np.random.default_rng(0)
    episodes, seen = [], []
    for _ in range(9):
        obs = rng.normal(3.0, 2.0, size=(50, 4)) * 1e3
        seen.append(obs)
        episodes.append(type("E", (), {"obs_sum": obs.sum(0), "obs_sumsq": (obs**2).sum(0),
                                        "length": 50})())
    stats = ObsStats(4, 9)
    whole = stats.empty_increment()
    for e in episodes:
        stats.add_episode(whole, e)
    for split in (2, 3, 5):
        parts = [stats.empty_increment() for _ in range(split)]
        for i, e in enumerate(episodes):
            stats.add_episode(parts[i % split], e)
        np.testing.assert_array_equal(sum(parts), whole)
    stats.apply(whole)
    norm = stats.norm(clip=5.0)
    assert stats.count == 450
    everything = np.concatenate(seen)
    np.testing.assert_allclose(norm.mean, everything.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(norm.std, everything.std(axis=0), rtol=1e-6)


def test_obs_stats_skip_non_finite_episodes():
    stats = ObsStats(2, 1)
    increment = stats.empty_increment()
    bad = type("E", (), {"obs_sum": np.array([np.nan, 1.0]), "obs_sumsq": np.ones(2), "length": 3})
    assert not stats.add_episode(increment, bad())
    assert not increment.any()


def test_obs_stats_take_larger_episodes_from_smaller_generations_within_an_int64():
    episode = type("E", (), {"obs_sum": np.array([1.0]), "obs_sumsq": np.array([2.0**45]),
                             "length": 1})()
    assert ObsStats(1, 64).add_episode(ObsStats(1, 64).empty_increment(), episode)
    assert not ObsStats(1, 2**10).add_episode(ObsStats(1, 2**10).empty_increment(), episode)
    stats = ObsStats(1, 64)
    increment = stats.empty_increment()
    at_limit = type("E", (), {"obs_sum": np.array([stats.limit]),
                              "obs_sumsq": np.array([stats.limit]), "length": 1})()
    for _ in range(64):
        assert stats.add_episode(increment, at_limit)
    stats.apply(increment)
    assert stats.sum[0] == 64 * stats.limit  # no int64 wrapped


def test_episodes_are_reproducible_from_their_seed():
    env = make_env("Pendulum-v1", None, {})
    spec = policy_spec_for(env, "linear", (), "tanh")
    params = np.random.default_rng(0).normal(size=spec.num_params).astype(np.float32)
    act = act_fn(spec, params, ObsNorm.identity(spec.obs_dim))
    a, b = run_episode(env, act, 7, record_obs=True), run_episode(env, act, 7, record_obs=True)
    assert a.total_return == b.total_return and a.length == b.length == 200
    np.testing.assert_array_equal(a.obs_sum, b.obs_sum)
    assert run_episode(env, act, 8).total_return != a.total_return


def test_policy_spec_follows_the_action_space():
    spec = policy_spec_for(make_env("CartPole-v1", None, {}), "mlp", (8,), "tanh")
    assert spec.discrete and spec.act_dim == 2 and spec.obs_dim == 4
    spec = policy_spec_for(make_env("Pendulum-v1", None, {}), "linear", (), "tanh")
    assert not spec.discrete and spec.action_high == (2.0,)


def test_unknown_env_id_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"env.id 'CartPol-v1': not a registered Gymnasium id "
                                         r"\(did you mean CartPole-v1\?\)"):
        check_env_id("CartPol-v1")
    # A wrong version or case points at the newest version, the one that runs (v2 and v3
    # need mujoco-py, gone since Gymnasium 1.0).
    for typo in ("HalfCheetah-v9", "halfcheetah-v5", "HalfCheetah"):
        with pytest.raises(ValueError, match=r"\(did you mean HalfCheetah-v5\?\)$"):
            check_env_id(typo)
    check_env_id("ALE/Pong-v5")  # ale-py's ids are registered on demand
    assert gym.spec("ALE/Pong-v5") is not None
    # gym's old Atari ids: unknown without a hint, or (registered by ale-py once loaded, as
    # here) made without the Atari preprocessing, 210 x 160 RGB frames reaching the policy
    for old_id, game in (("PongNoFrameskip-v4", "Pong"), ("Breakout-ram-v0", "Breakout"),
                         ("SpaceInvadersDeterministic-v4", "SpaceInvaders")):
        with pytest.raises(ValueError, match=rf"^env.id '{old_id}': gym's old Atari id; here "
                           rf"an ALE game is ALE/{game}-v5, with its frame skip, frame stack and "
                           r"RAM observations in atari.frame_skip, atari.frame_stack and "
                           r"atari.obs \(the v4 ids' no sticky actions: atari.sticky_actions = "
                           r"0\)$"):
            check_env_id(old_id)
    with pytest.raises(ValueError, match=r"^env.id 'NoSuchGame-v4': not a registered "
                       r"Gymnasium id$"):
        check_env_id("NoSuchGame-v4")


def test_policy_file_round_trips_without_pickle(tmp_path):
    spec = PolicySpec("mlp", 3, 2, False, (4,), "tanh", (-1.0, -1.0), (1.0, 1.0))
    params = np.random.default_rng(0).normal(size=spec.num_params).astype(np.float32)
    norm = ObsNorm(np.ones(3, np.float32), np.full(3, 2.0, np.float32), 4.0)
    save_policy(tmp_path / "policy.npz", spec, params, norm, "Pendulum-v1", 7)
    saved = load_policy(tmp_path / "policy.npz")
    spec2, params2, norm2, env_id = saved.spec, saved.params, saved.norm, saved.env_id
    assert spec2 == spec and env_id == "Pendulum-v1" and norm2.clip == 4.0
    np.testing.assert_array_equal(params2, params)
    np.testing.assert_array_equal(norm2.std, norm.std)
    assert list(tmp_path.iterdir()) == [tmp_path / "policy.npz"]  # no temp file left behind
