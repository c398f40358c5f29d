"""The paper's MuJoCo options: action noise in training only, and the episode-length caps."""

import dataclasses

import numpy as np

from es.config import from_dict
from es.parallel.comm import LocalComm
from es.rl.policies import with_action_noise
from es.rl.rollout import run_episode
from es.rl.trainer import Trainer


def test_action_noise_is_seeded_gaussian_and_stays_in_the_box():
    low, high = (-1.0, -1.0), (1.0, 1.0)
    base = lambda obs: np.array([0.0, 0.99])  # noqa: E731
    draws = [with_action_noise(base, low, high, 0.1, np.random.default_rng(7))(None)
             for _ in range(2)]
    np.testing.assert_array_equal(draws[0], draws[1])  # same seed, same noise
    noisy = with_action_noise(base, low, high, 0.1, np.random.default_rng(0))
    actions = np.array([noisy(None) for _ in range(4000)])
    assert actions.max() <= 1.0 and actions[:, 1].max() == 1.0  # clipped, and clipping happens
    assert abs(actions[:, 0].std() - 0.1) < 0.01 and abs(actions[:, 0].mean()) < 0.01


def pendulum(**es_and_policy):
    return from_dict({"run": {"generations": 3, "eval_every": 100, "eval_episodes": 2},
                      "env": {"id": "Pendulum-v1"},
                      "policy": {"kind": "linear", **es_and_policy.get("policy", {})},
                      "es": {"population": 4, "noise_table_size": 10_000,
                             **es_and_policy.get("es", {})}})


def twin_trainers(section: str, key: str, values: tuple) -> list[Trainer]:
    """Pendulum trainers that differ only in one option, starting from the same parameters."""
    trainers = [Trainer(pendulum(**{section: {key: value}}), LocalComm(), None)
                for value in values]
    theta = np.random.default_rng(1).standard_normal(trainers[0].policy.num_params)
    for trainer in trainers:
        trainer.strategy.theta = theta.astype(np.float32)
    return trainers


def test_action_noise_changes_training_episodes_but_never_evaluation(tmp_path):
    quiet, noisy = twin_trainers("policy", "action_noise", (0.0, 0.5))
    np.testing.assert_array_equal(quiet.evaluate_mean(0), noisy.evaluate_mean(0))
    generation = quiet.strategy.ask()
    assert not np.array_equal(quiet.evaluate_population(generation).returns,
                              noisy.evaluate_population(noisy.strategy.ask()).returns)


def test_episode_cap_follows_the_previous_generations_mean_length():
    trainer = Trainer(pendulum(es={"episode_cap": 1.5}), LocalComm(), None)
    assert trainer.episode_cap() is None  # nothing measured yet: the env's own limit (200)
    trainer._generation()
    assert trainer.mean_episode_length == 200
    assert trainer.episode_cap() == 300
    trainer.mean_episode_length = 10.2
    assert trainer.episode_cap() == 16
    episode = run_episode(trainer.env, lambda obs: np.zeros(1), seed=0, max_steps=16)
    assert episode.length == 16


def test_train_steps_cuts_training_episodes_but_never_evaluation():
    full, short = twin_trainers("es", "train_steps", (0, 50))
    np.testing.assert_array_equal(full.evaluate_mean(0), short.evaluate_mean(0))
    assert short.episode_cap() == 50 and full.episode_cap() is None
    results = short.evaluate_population(short.strategy.ask())
    assert results.steps == 50 * 4  # four members, 50 steps each (Pendulum's own limit: 200)
    both = Trainer(pendulum(es={"train_steps": 50, "episode_cap": 1.5}), LocalComm(), None)
    both.mean_episode_length = 20
    assert both.episode_cap() == 30  # the smaller cap
    both.mean_episode_length = 200
    assert both.episode_cap() == 50


def test_train_steps_until_cuts_only_the_first_env_steps(tmp_path):
    """Four members of 50 steps (200 a generation) while the run has taken fewer than 500
    steps, then Pendulum's whole 200-step episodes (800 a generation); resumed in between,
    the switch comes at the same generation."""
    def trainer(generations: int) -> Trainer:
        config = pendulum(es={"train_steps": 50, "train_steps_until": 500})
        return Trainer(dataclasses.replace(config, run=dataclasses.replace(
            config.run, generations=generations)), LocalComm(), None)

    whole = trainer(5)
    whole.run()
    assert whole.timesteps == 200 * 3 + 800 * 2  # 0, 200, 400 < 500 <= 600, 1400
    halfway = trainer(3)
    halfway.run()
    resumed = trainer(5)
    resumed.restore(halfway.state())
    resumed.run()
    assert resumed.timesteps == whole.timesteps
    np.testing.assert_array_equal(resumed.strategy.mean, whole.strategy.mean)


def test_reward_shift_lowers_training_returns_by_the_length_but_never_evaluation():
    plain, shifted = twin_trainers("es", "reward_shift", (0.0, 1.5))
    np.testing.assert_array_equal(plain.evaluate_mean(0), shifted.evaluate_mean(0))
    base = plain.evaluate_population(plain.strategy.ask()).returns
    lowered = shifted.evaluate_population(shifted.strategy.ask()).returns
    np.testing.assert_allclose(lowered, base - 1.5 * 200, rtol=1e-6)  # Pendulum: 200 steps


def test_gymnasiums_own_model_deprecation_is_not_printed_and_other_warnings_are():
    """HalfCheetah's XML uses MuJoCo's deprecated ``settotalmass``: a line per env built, on
    every rank, that no user can act on."""
    import subprocess
    import sys

    made = subprocess.run([sys.executable, "-c", "from es.rl.envs import make_env; "
                           "make_env('HalfCheetah-v5', None, {}).reset(seed=0)"],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert "settotalmass" not in made.stderr + made.stdout
    other = subprocess.run([sys.executable, "-c", "from es.rl.envs import make_env, "
                            "_mujoco_warning; make_env('Hopper-v5', None, {}); "
                            "_mujoco_warning('Nan, Inf or huge value in QACC at DOF 0')"],
                           capture_output=True, text=True, timeout=120)
    assert other.stderr.strip() == "WARNING: Nan, Inf or huge value in QACC at DOF 0"
