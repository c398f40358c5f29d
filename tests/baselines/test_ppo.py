"""PPO: GAE against a hand computation, every loss gradient against central finite
differences (discrete and Gaussian policies), the running statistics, the time-limit
bootstrap in a real rollout, and the all-reduced update equal to one process on the same
rollouts."""

import gymnasium as gym
import numpy as np
import pytest
from conftest import load_params, numeric_grad, read_progress, run_cli

from es.baselines import nn
from es.baselines.ppo import (
    PPO,
    EnvSlot,
    Rollout,
    RunningStats,
    _play,
    categorical_entropy,
    clipped_surrogate,
    clipped_value_loss,
    gae,
)
from es.config import PPOConfig
from es.rl.policies import PolicySpec


def test_gae_against_a_hand_computation():
    gamma, lam = 0.9, 0.8
    rewards = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    values = np.array([0.5, 1.0, 1.5, 2.0, 2.5])
    # Step 1 is truncated (bootstrap from 7.0, but no advantage flows back from step 2);
    # step 3 terminates (no bootstrap); step 4 is cut by the rollout's end (bootstrap 9.0).
    next_values = np.array([1.0, 7.0, 2.0, 0.0, 9.0])
    terminated = np.array([0.0, 0.0, 0.0, 1.0, 0.0])
    ends = np.array([0.0, 1.0, 0.0, 1.0, 0.0])
    advantages, returns = gae(rewards, values, next_values, terminated, ends, gamma, lam)
    d4 = 5.0 + 0.9 * 9.0 - 2.5
    d3 = 4.0 - 2.0
    d2 = 3.0 + 0.9 * 2.0 - 1.5
    d1 = 2.0 + 0.9 * 7.0 - 1.0
    d0 = 1.0 + 0.9 * 1.0 - 0.5
    a4, a3 = d4, d3
    a2 = d2 + gamma * lam * a3
    a1 = d1
    a0 = d0 + gamma * lam * a1
    np.testing.assert_allclose(advantages, [a0, a1, a2, a3, a4])
    np.testing.assert_allclose(returns, advantages + values)


@pytest.mark.parametrize("advantage", [1.5, -0.7])
def test_clipped_surrogate_gradient(advantage):
    old = np.log(np.array([0.2, 0.5, 0.3, 0.9]))
    # ratios 0.5, 1.0, 1.3, 1.1: below, inside, above the clip range 0.2, and inside.
    new = old + np.log(np.array([0.5, 1.0, 1.3, 1.1]))
    adv = np.full(4, advantage)
    loss, grad = clipped_surrogate(new, old, adv, 0.2)
    np.testing.assert_allclose(grad, numeric_grad(
        lambda x: clipped_surrogate(x, old, adv, 0.2)[0], new), atol=1e-8)
    ratio = np.exp(new - old)
    assert loss == pytest.approx(np.sum(np.maximum(-adv * ratio,
                                                   -adv * np.clip(ratio, 0.8, 1.2))))


def test_clipped_value_loss_gradient_and_plain_squared_error():
    rng = np.random.default_rng(1)
    old, returns = rng.standard_normal(8), rng.standard_normal(8)
    values = old + np.array([-0.5, -0.1, 0.0, 0.05, 0.15, 0.3, 0.6, -0.25])
    for clip in (0.2, 0.0):
        loss, grad = clipped_value_loss(values, old, returns, clip)
        np.testing.assert_allclose(grad, numeric_grad(
            lambda v, c=clip: clipped_value_loss(v, old, returns, c)[0], values), atol=1e-7)
    assert clipped_value_loss(values, old, returns, 0.0)[0] == pytest.approx(
        0.5 * np.sum((values - returns) ** 2))


def test_categorical_entropy_gradient():
    logits = np.random.default_rng(2).standard_normal((5, 3))
    entropy, grad = categorical_entropy(logits)
    np.testing.assert_allclose(grad, numeric_grad(
        lambda z: categorical_entropy(z.reshape(5, 3))[0].sum(), logits.ravel()).reshape(5, 3),
        atol=1e-8)
    assert np.all(entropy > 0) and np.all(entropy <= np.log(3) + 1e-12)


@pytest.mark.parametrize("discrete", [True, False])
def test_whole_loss_gradient_matches_finite_differences(discrete):
    rng = np.random.default_rng(3)
    act_dim = 3 if discrete else 2
    bounds = {} if discrete else {"action_low": (-1.0, -1.0), "action_high": (1.0, 1.0)}
    spec = PolicySpec("mlp", 4, act_dim, discrete, (5,), "tanh", **bounds)
    cfg = PPOConfig(entropy_coef=0.05, value_coef=0.7, clip=0.2, clip_value=0.2)
    agent = PPO(spec, cfg, seed=0)
    agent.policy += 0.3 * rng.standard_normal(agent.policy.size)
    agent.value += 0.3 * rng.standard_normal(agent.value.size)
    n = 12
    obs = rng.standard_normal((n, 4))
    actions = (rng.integers(0, act_dim, n) if discrete
               else rng.standard_normal((n, act_dim)))
    out, _ = nn.forward(spec, agent.network, obs)
    old_log_probs = agent.log_prob(out, actions) + 0.3 * rng.standard_normal(n)
    batch = Rollout(obs, actions, old_log_probs, rng.standard_normal(n), rng.standard_normal(n),
                    rng.standard_normal(n), np.arange(n))
    rows = np.array([0, 2, 3, 5, 7, 8, 11])

    def loss(theta):
        policy, value = agent.policy.copy(), agent.value.copy()
        agent.policy, agent.value = theta[: policy.size], theta[policy.size:]
        _, info = agent.loss_gradient(batch, rows, 0.1, 1.3, total=20)
        agent.policy, agent.value = policy, value
        return info["surrogate"] + cfg.value_coef * info["value_loss"] \
            - cfg.entropy_coef * info["entropy"]

    grad, _ = agent.loss_gradient(batch, rows, 0.1, 1.3, total=20)
    theta = np.concatenate([agent.policy, agent.value])
    np.testing.assert_allclose(grad, numeric_grad(loss, theta), rtol=1e-5, atol=1e-8)


def test_networks_start_orthogonal_with_ppos_gains():
    spec = PolicySpec("mlp", 17, 6, False, (64, 64), "tanh")
    agent = PPO(spec, PPOConfig(), seed=0)
    first, hidden, out = spec.unpack(agent.network)
    np.testing.assert_allclose(first[0].T @ first[0], 2 * np.eye(17), atol=1e-12)  # 64 x 17
    np.testing.assert_allclose(hidden[0] @ hidden[0].T, 2 * np.eye(64), atol=1e-12)
    np.testing.assert_allclose(out[0] @ out[0].T, 1e-4 * np.eye(6), atol=1e-12)
    value_out = agent.value_spec.unpack(agent.value)[-1][0]
    assert np.linalg.norm(value_out) == pytest.approx(1.0)
    assert not np.any(np.concatenate([b for _, b in spec.unpack(agent.network)]))
    np.testing.assert_array_equal(agent.log_std, np.zeros(6))
    assert agent.optimizer.eps == 1e-5


class Recorded(gym.Wrapper):
    """Keeps each step's reward and the observation it led to."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.rewards: list[float] = []
        self.next_obs: list[np.ndarray] = []

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.rewards.append(float(reward))
        self.next_obs.append(np.asarray(obs, dtype=np.float64))
        return obs, reward, terminated, truncated, info


@pytest.mark.parametrize("bootstrap", [True, False])
def test_time_limit_bootstraps_from_the_next_value_or_ends(bootstrap):
    # Pendulum cut at 5 steps, a 12-step rollout: steps 4 and 9 are truncations, 11 the cut.
    cfg = PPOConfig(num_envs=1, steps_per_env=12, bootstrap_truncated=bootstrap,
                    reward_clip=100.0)
    spec = PolicySpec("mlp", 3, 1, False, (8,), "tanh", (-2.0,), (2.0,))
    learner = PPO(spec, cfg, seed=3)
    env = Recorded(gym.make("Pendulum-v1", max_episode_steps=5))
    played = _play(learner, [EnvSlot(0, env)], RunningStats.zeros(3), 1.0, seed=3, update=0)
    _, _, _, values, advantages, returns, _ = played.samples

    def value(obs: np.ndarray) -> float:
        # Zero mean, unit variance statistics: the policy sees the observation clipped.
        return float(nn.forward(learner.value_spec, learner.value,
                                np.clip(obs, -10, 10)[None])[0][0, 0])

    rewards = np.array(env.rewards)
    for t in (4, 9):
        later = cfg.gamma * value(env.next_obs[t]) if bootstrap else 0.0
        assert returns[t] == pytest.approx(rewards[t] + later)
        assert advantages[t] == pytest.approx(rewards[t] + later - values[t])
    # Within an episode the next step's value; the rollout's cut always bootstraps.
    assert returns[11] == pytest.approx(advantages[11] + values[11])
    assert advantages[11] == pytest.approx(rewards[11] + cfg.gamma * value(env.next_obs[11])
                                           - values[11])
    delta_3 = rewards[3] + cfg.gamma * values[4] - values[3]
    assert advantages[3] == pytest.approx(delta_3 + cfg.gamma * cfg.gae_lambda * advantages[4])


def test_running_stats_merge_equals_the_whole_stream():
    rng = np.random.default_rng(4)
    data = rng.standard_normal((300, 3)) * [1, 5, 0.1] + [2, -1, 7]
    stats = RunningStats(np.zeros(3), np.zeros(3), 0.0)
    for chunk in np.array_split(data, 7):
        stats.merge(len(chunk), chunk.sum(axis=0), np.square(chunk).sum(axis=0))
    np.testing.assert_allclose(stats.mean, data.mean(axis=0))
    np.testing.assert_allclose(stats.var, data.var(axis=0))


@pytest.mark.parametrize("config", ["configs/baselines/cartpole_ppo.toml",
                                    "configs/baselines/pendulum_ppo.toml"])
def test_all_reduced_updates_equal_one_process(tmp_path, config):
    small = ["--set", "run.generations=3", "--set", "run.eval_every=3", "--set",
             "run.eval_episodes=1", "--set", "ppo.num_envs=4", "--set", "ppo.steps_per_env=64",
             "--set", "ppo.minibatches=4", "--set", "ppo.epochs=2", "--set",
             "run.max_seconds=0", "--quiet"]
    params = {}
    for ranks in (None, 2, 3):
        run_dir = tmp_path / f"ranks{ranks}"
        done = run_cli(["es-baseline", "ppo", config, *small, "--run-dir", str(run_dir)],
                       ranks=ranks)
        assert done.returncode == 0, done.stderr
        params[ranks] = load_params(run_dir)
        rows = read_progress(run_dir)
        assert [r["timesteps"] for r in rows] == ["256", "512", "768"]
    # The same rollouts and minibatches; only the order of the sums over ranks differs.
    np.testing.assert_allclose(params[2], params[None], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params[3], params[None], rtol=1e-5, atol=1e-6)
