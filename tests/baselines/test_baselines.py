"""The baselines: replay memory, target network, DQN/PG gradients, the MPI all-reduce PG,
Gorila under mpiexec, es-compare, and the CLI as a user types it."""

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli, stopping_a_rank, tool
from test_baselines_nn import numeric_grad

from es.baselines import nn
from es.baselines.dqn import QLearner, ReplayBuffer, epsilon_at, lr_at, pack_transition
from es.baselines.pg import TRACE_BUDGET_BYTES, PolicyGradient, Trajectory, returns_to_go
from es.config import SHIPPED_CONFIGS, DQNConfig, PGConfig
from es.rl.cnn import ConvNetSpec
from es.rl.envs import make_env
from es.rl.metrics import COLUMNS
from es.rl.policies import PolicySpec


def test_replay_buffer_overwrites_the_oldest_and_samples_only_what_it_holds():
    memory = ReplayBuffer(capacity=3, obs_dim=2)
    for i in range(5):
        memory.add(np.full(2, i), i % 2, float(i), np.full(2, i + 1), terminated=i == 4)
    assert memory.size == 3
    assert sorted(memory.rewards.tolist()) == [2.0, 3.0, 4.0]  # 0 and 1 were overwritten
    batch = memory.sample(200, np.random.default_rng(0))
    assert set(batch["rewards"].tolist()) == {2.0, 3.0, 4.0}
    np.testing.assert_array_equal(batch["next_obs"][:, 0], batch["obs"][:, 0] + 1)
    assert batch["terminated"].tolist() == (batch["rewards"] == 4.0).tolist()

    partial = ReplayBuffer(capacity=10, obs_dim=2)
    partial.add(np.zeros(2), 1, 7.0, np.ones(2), False)
    assert set(partial.sample(50, np.random.default_rng(1))["rewards"].tolist()) == {7.0}
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(4, 2).sample(1, np.random.default_rng(0))


def test_packed_transitions_round_trip_through_the_buffer():
    memory = ReplayBuffer(capacity=4, obs_dim=3)
    rows = np.array([pack_transition(np.arange(3) + k, k % 2, -k, np.arange(3) * 2, k == 1)
                     for k in range(2)])
    memory.add_rows(rows)
    assert memory.size == 2
    np.testing.assert_array_equal(memory.obs[1], [1, 2, 3])
    assert memory.actions.tolist()[:2] == [0, 1] and memory.rewards[1] == -1
    assert memory.terminated.tolist()[:2] == [False, True]


def test_epsilon_falls_linearly_then_stays():
    cfg = DQNConfig(epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_steps=100)
    assert [epsilon_at(s, cfg) for s in (0, 50, 100, 10_000)] == pytest.approx(
        [1.0, 0.55, 0.1, 0.1])


def test_lr_falls_linearly_then_stays_and_the_learner_uses_it():
    cfg = DQNConfig(lr=1e-3, lr_end=1e-4, lr_decay_steps=1000)
    assert [lr_at(s, cfg) for s in (0, 500, 1000, 50_000)] == pytest.approx(
        [1e-3, 5.5e-4, 1e-4, 1e-4])
    assert lr_at(10**6, DQNConfig(lr=3e-4)) == 3e-4  # no decay by default
    learner = small_learner(lr_end=0.0, lr_decay_steps=100)
    learner.learn(random_batch(np.random.default_rng(2)), 100)
    assert learner.optimizer.lr == 0.0


def small_learner(**options) -> QLearner:
    spec = PolicySpec("mlp", 3, 2, True, (5,), "tanh")
    learner = QLearner(spec, DQNConfig(lr=0.01, **options), seed=0)
    learner.online = learner.online.astype(np.float64)
    learner.target = learner.target.astype(np.float64)
    return learner


def random_batch(rng, size=8):
    return {"obs": rng.standard_normal((size, 3)), "actions": rng.integers(0, 2, size),
            "rewards": rng.standard_normal(size), "next_obs": rng.standard_normal((size, 3)),
            "terminated": rng.random(size) < 0.3}


def test_target_network_stays_until_synced_and_tau_blends():
    learner = small_learner()
    before = learner.target.copy()
    for _ in range(3):
        learner.learn(random_batch(np.random.default_rng(0)), 0)
    np.testing.assert_array_equal(learner.target, before)  # learning leaves it alone
    assert not np.array_equal(learner.online, before)
    learner.sync_target()
    np.testing.assert_array_equal(learner.target, learner.online)

    soft = small_learner(tau=0.25)
    start = soft.target.copy()
    soft.learn(random_batch(np.random.default_rng(1)), 0)
    soft.sync_target()
    np.testing.assert_allclose(soft.target, 0.25 * soft.online + 0.75 * start)


@pytest.mark.parametrize("double", [False, True])
def test_td_targets_bootstrap_from_the_target_network(double):
    learner = small_learner(double=double, gamma=0.9)
    learner.target = learner.target + 0.3  # make the two networks disagree
    batch = random_batch(np.random.default_rng(2), size=16)
    next_online, _ = nn.forward(learner.spec, learner.online, batch["next_obs"])
    next_target, _ = nn.forward(learner.spec, learner.target, batch["next_obs"])
    chooser = next_online if double else next_target
    chosen = next_target[np.arange(16), chooser.argmax(axis=1)]
    expected = batch["rewards"] + 0.9 * chosen * ~batch["terminated"]
    np.testing.assert_allclose(learner.td_targets(batch), expected)
    terminal = batch["terminated"]
    np.testing.assert_array_equal(learner.td_targets(batch)[terminal], batch["rewards"][terminal])


def test_dqn_loss_gradient_matches_finite_differences():
    learner = small_learner(huber_delta=0.5)
    batch = random_batch(np.random.default_rng(3))
    targets = learner.td_targets(batch)

    def loss(params):
        q, _ = nn.forward(learner.spec, params, batch["obs"])
        return nn.huber(q[np.arange(len(targets)), batch["actions"]], targets, 0.5)[0]

    _, grad = learner.loss_and_grad(batch)
    np.testing.assert_allclose(grad, numeric_grad(loss, learner.online), rtol=1e-5, atol=1e-8)


def test_returns_to_go_discount():
    np.testing.assert_allclose(returns_to_go(np.array([1.0, 2.0, 3.0]), 0.5),
                               [1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3])


def pg_learner(discrete: bool) -> tuple[PolicyGradient, list[Trajectory]]:
    env = make_env("CartPole-v1" if discrete else "Pendulum-v1", 30, {})
    from es.rl.envs import policy_spec_for

    spec = policy_spec_for(env, "mlp", (6,), "tanh")
    learner = PolicyGradient(spec, PGConfig(), seed=0)
    return learner, [learner.play(env, seed) for seed in range(4)]


@pytest.mark.parametrize("discrete", [True, False])
def test_policy_gradient_matches_finite_differences_of_the_surrogate(discrete):
    learner, episodes = pg_learner(discrete)
    batch = learner.prepare(episodes)
    stats = batch.statistics()
    steps = int(stats[2])
    mean = stats[0] / steps
    std = float(np.sqrt(stats[1] / steps - mean**2))
    weights = (batch.advantages - mean) / (std + 1e-8) / steps
    obs, actions, n = batch.obs, batch.actions, learner.spec.num_params

    def surrogate(policy):  # -(1/N) sum_t A_t log pi(a_t | s_t), advantages held fixed
        out, _ = nn.forward(learner.spec, policy[:n], obs)
        if discrete:
            return -nn.categorical_log_prob(out, actions.astype(int), weights)[0]
        return -nn.gaussian_log_prob(out, policy[n:], actions, weights)[0]

    gradient = learner.gradient_sums(batch, mean, std, steps)
    np.testing.assert_allclose(gradient[: learner.policy.size],
                               numeric_grad(surrogate, learner.policy), rtol=1e-5, atol=1e-8)


def test_gradients_of_two_halves_add_up_to_the_whole_batch():
    """What the all-reduce relies on: each rank's share, summed, is the batch gradient."""
    learner, episodes = pg_learner(discrete=True)
    stats = learner.prepare(episodes).statistics()
    steps, mean = int(stats[2]), stats[0] / stats[2]
    std = float(np.sqrt(stats[1] / steps - mean**2))
    halves = learner.prepare(episodes[:1]).statistics() + learner.prepare(episodes[1:]).statistics()
    np.testing.assert_allclose(halves, stats)
    whole = learner.gradient_sums(learner.prepare(episodes), mean, std, steps)
    split = (learner.gradient_sums(learner.prepare(episodes[::2]), mean, std, steps)
             + learner.gradient_sums(learner.prepare(episodes[1::2]), mean, std, steps))
    np.testing.assert_allclose(split, whole, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("discrete", [True, False])
def test_a_batch_in_several_passes_has_the_gradient_of_one(discrete):
    """A CNN's batch goes through in passes (its traces in one took ~30 GB for 16 Pong
    episodes): the passes' gradients add up to the one pass's, and the values agree."""
    learner, episodes = pg_learner(discrete)
    whole_batch = learner.prepare(episodes)
    stats = whole_batch.statistics()
    steps, mean = int(stats[2]), stats[0] / stats[2]
    std = float(np.sqrt(stats[1] / steps - mean**2))
    whole = learner.gradient_sums(whole_batch, mean, std, steps)
    assert learner.passes(steps) == [slice(0, learner.pass_steps)]  # an MLP: one pass
    learner.pass_steps = 7
    assert len(learner.passes(steps)) == -(-steps // 7) > 1
    batch = learner.prepare(episodes)
    np.testing.assert_allclose(batch.values, whole_batch.values, rtol=1e-12)
    np.testing.assert_allclose(learner.gradient_sums(batch, mean, std, steps), whole,
                               rtol=1e-10, atol=1e-14)


def test_a_cnn_pass_takes_as_many_steps_as_its_traces_budget_holds():
    spec = ConvNetSpec(n_outputs=6, vbn=False)  # the Nature torso on 4 x 84 x 84 frames
    learner = PolicyGradient(spec, PGConfig(), seed=0)
    per_step = nn.trace_bytes_per_row(spec, learner.network)
    assert 1_000_000 < per_step < 3_000_000  # its patch matrices, float64
    assert learner.pass_steps == TRACE_BUDGET_BYTES // per_step


PG_SHORT = ["--set", "run.generations=4", "--set", "run.eval_every=2",
            "--set", "run.eval_episodes=2", "--set", "run.max_seconds=0", "--quiet"]


def test_allreduce_pg_on_two_ranks_makes_the_single_process_update(tmp_path):
    config = "configs/baselines/cartpole_pg.toml"
    one = run_cli(["es-baseline", "pg", config, "--run-dir", str(tmp_path / "one"), *PG_SHORT])
    two = run_cli(["es-baseline", "pg", config, "--run-dir", str(tmp_path / "two"), *PG_SHORT],
                  ranks=2)
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr
    assert "warning" not in one.stderr + two.stderr  # the config has its [pg] section
    # Same episodes, same summed gradient up to the order of float64 additions.
    np.testing.assert_allclose(load_params(tmp_path / "two"), load_params(tmp_path / "one"),
                               rtol=1e-5, atol=1e-7)
    rows_one, rows_two = read_progress(tmp_path / "one"), read_progress(tmp_path / "two")
    assert [r["return_mean"] for r in rows_one] == [r["return_mean"] for r in rows_two]
    assert [r["timesteps"] for r in rows_one] == [r["timesteps"] for r in rows_two]
    # The gradient travels: two float64 vectors of the networks' size per update.
    assert int(rows_two[0]["bytes_sent"]) > int(rows_one[0]["bytes_sent"]) > 8 * 2 * 4000


def test_a_config_without_the_algorithms_section_trains_on_defaults_and_says_so(tmp_path):
    """es-baseline pg with es-train's CartPole config: legal, but its [es] tunes nothing here;
    nor does another baseline's setting."""
    plain = run_cli(["es-baseline", "pg", "configs/cartpole.toml", "--run-dir",
                     str(tmp_path / "plain"), *PG_SHORT])
    assert plain.returncode == 0, plain.stderr
    assert ("es-baseline: warning: configs/cartpole.toml has no [pg] section: pg trains with "
            "its defaults (its [es] are es-train's)") in plain.stderr
    given = run_cli(["es-baseline", "pg", "configs/cartpole.toml", "--set", "pg.lr=1e-3",
                     "--set", "dqn.lr=0.1", "--run-dir", str(tmp_path / "given"), *PG_SHORT])
    assert given.returncode == 0, given.stderr
    warned = [line for line in given.stderr.splitlines() if "warning" in line]
    # es-train's configs normalise observations by default: PG trained without it, unsaid.
    assert warned == ["es-baseline: warning: dqn.lr: [dqn] is es-baseline dqn's; pg ignores "
                      "it", "es-baseline: warning: policy.obs_norm = true: es-baseline pg does "
                      "not normalise observations; ignored",
                      "es-baseline: warning: es.population, es.sigma, es.lr, es.l2, "
                      "es.noise_table_size: es-train's; pg ignores them"], given.stderr
    # Nor do a strategy's section, [atari] off an ALE game or the CNN's settings.
    more = run_cli(["es-baseline", "dqn", "configs/baselines/cartpole_dqn.toml", "--set",
                    "snes.lr_mean=2", "--set", "atari.frame_skip=2", "--set",
                    "policy.torso=small", "--run-dir", str(tmp_path / "more"), "--set",
                    "run.max_timesteps=300"])
    assert more.returncode == 0, more.stderr
    assert [line for line in more.stderr.splitlines() if "warning" in line] == [
        "es-baseline: warning: atari.frame_skip: CartPole-v1 is not an ALE game; ignored",
        "es-baseline: warning: policy.torso: a setting of the built-in CNN, but policy.kind "
        "= 'mlp'; ignored", "es-baseline: warning: snes.lr_mean: es-train's; dqn ignores them"]


def test_es_trains_run_and_policy_settings_a_baseline_does_not_read_are_named(tmp_path):
    """run.target_score (the eval passed it, the run went on), the kept policy's and the
    checkpoints' settings, and PPO's policy.obs_norm (it reads ppo.normalize_obs) were
    recorded in config.toml and read by nothing, without a word."""
    dqn = run_cli(["es-baseline", "dqn", "configs/baselines/cartpole_dqn.toml", "--set",
                   "run.target_score=20", "--set", "run.checkpoint_every=5", "--set",
                   "policy.action_noise=0.1", "--set", "policy.clip_actions=false", "--set",
                   "run.max_timesteps=300", "--run-dir", str(tmp_path / "dqn")])
    assert dqn.returncode == 0, dqn.stderr
    assert [line for line in dqn.stderr.splitlines() if "warning" in line] == [
        "es-baseline: warning: run.target_score, run.checkpoint_every, policy.action_noise, "
        "policy.clip_actions: es-train's; dqn ignores them"]
    ppo = run_cli(["es-baseline", "ppo", "configs/baselines/cartpole_ppo.toml", "--set",
                   "policy.obs_norm=false", "--set", "run.generations=1", "--run-dir",
                   str(tmp_path / "ppo"), "--quiet"])
    assert ppo.returncode == 0, ppo.stderr
    assert [line for line in ppo.stderr.splitlines() if "warning" in line] == [
        "es-baseline: warning: policy.obs_norm = false: es-baseline ppo normalises "
        "observations as ppo.normalize_obs = true says; ignored"]


def test_ppo_refuses_a_cnn_in_one_line_that_names_what_takes_pixels(tmp_path):
    """It said to drop VBN, then refused the CNN anyway; and a refused run printed its
    config's warnings before the refusal."""
    refused = run_cli(["es-baseline", "ppo", "configs/pong.toml", "--run-dir",
                       str(tmp_path / "run")])
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "es-baseline: error: policy.kind = 'cnn': es-baseline ppo trains linear and MLP "
        "policies on vector observations; train pixels with es-baseline dqn or pg")
    assert not (tmp_path / "run").exists()


def test_dqn_run_folder_matches_es_train_and_es_eval_plays_it(tmp_path):
    run_dir = tmp_path / "dqn"
    result = run_cli(["es-baseline", "dqn", "configs/baselines/cartpole_dqn.toml",
                      "--run-dir", str(run_dir), "--set", "run.generations=3",
                      "--set", "dqn.steps_per_round=500", "--set", "dqn.learning_starts=200",
                      "--set", "run.eval_every=1", "--set", "run.eval_episodes=2"])
    assert result.returncode == 0, result.stderr
    assert "done: dqn, 3 rounds, 1500 steps" in result.stdout
    rows = read_progress(run_dir)
    assert list(rows[0]) == list(COLUMNS) and len(rows) == 3
    assert all(r["eval_return"] for r in rows) and rows[-1]["grad_norm"]
    played = run_cli(["es-eval", str(run_dir), "--episodes", "2"])
    assert played.returncode == 0, played.stderr
    assert "CartPole-v1, mean policy (generation 3)" in played.stdout


def test_gorila_smoke_two_actors_one_learner(tmp_path):
    run_dir = tmp_path / "gorila"
    result = run_cli(["es-baseline", "gorila", "configs/baselines/cartpole_dqn.toml",
                      "--run-dir", str(run_dir), "--set", "run.generations=4",
                      "--set", "dqn.steps_per_round=500", "--set", "dqn.learning_starts=200",
                      "--set", "dqn.gorila_chunk=50", "--set", "run.eval_every=2",
                      "--set", "run.eval_episodes=2"], ranks=3, timeout=180)
    assert result.returncode == 0, result.stderr
    rows = read_progress(run_dir)
    assert [int(r["generation"]) for r in rows] == [1, 2, 3, 4]
    assert int(rows[-1]["timesteps"]) >= 2000  # transitions the learner received
    # Not counting the actors' last chunks, which came in after the last row: never trained on.
    assert f"done: gorila, 4 rounds, {rows[-1]['timesteps']} steps," in result.stdout
    assert all(int(r["bytes_sent"]) > 0 for r in rows)
    assert "B of parameters to 2 actors" in result.stdout
    assert load_params(run_dir).size == 4 * 120 + 120 + 120 * 84 + 84 + 84 * 2 + 2


@pytest.mark.parametrize("args, ranks, message", [
    (["dqn", "configs/pendulum.toml"], None, "needs discrete actions"),
    (["gorila", "configs/baselines/cartpole_dqn.toml"], None, "at least 2 ranks"),
    (["dqn", "configs/baselines/cartpole_dqn.toml"], 2, "one process"),
    (["pg", "configs/pong.toml"], None, "--set policy.vbn=false"),
    # Not first told to drop VBN, which the next try then refused for the observations.
    (["dqn", "configs/baselines/cartpole_dqn.toml", "--set", "policy.kind=cnn"], None,
     "policy.kind = 'cnn' needs stacked image observations"),
    (["gorila", "configs/pong.toml", "--set", "policy.vbn=false"], 2, "policy.kind = 'cnn'"),
    (["pg", "configs/baselines/cartpole_pg.toml", "--set", "pg.lr=-1"], None, "pg.lr = -1"),
    # An AttributeError ('Discrete' object has no attribute 'low') or a ValueError, exit 1.
    (["dqn", "configs/baselines/cartpole_dqn.toml", "--set", "env.id=FrozenLake-v1"], None,
     "observation space Discrete(16): the baselines' networks take Box observations"),
    (["ppo", "configs/baselines/cartpole_ppo.toml", "--set", "env.id=FrozenLake-v1"], None,
     "observation space Discrete(16): the baselines' networks take Box observations"),
    (["pg", "configs/baselines/cartpole_pg.toml", "--set", "env.id=Blackjack-v1"], 2,
     "observation space Tuple("),
    (["dqn", "configs/baselines/cartpole_dqn.toml", "--set", "policy.kind=cnn", "--set",
      "policy.vbn=false"], None, "policy.kind = 'cnn' needs stacked image observations"),
])
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, args, ranks, message):
    result = run_cli(["es-baseline", *args, "--run-dir", str(tmp_path / "run")], ranks=ranks)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert "error on rank" not in result.stderr


@pytest.mark.parametrize("args, ranks", [
    (["dqn", "configs/baselines/pendulum_pg.toml"], None),
    (["ppo", "configs/baselines/cartpole_ppo.toml", "--set", "policy.kind=cnn", "--set",
      "policy.obs_norm=false"], None),
    (["ppo", "configs/baselines/pendulum_ppo.toml", "--set", "ppo.num_envs=1"], 2),
], ids=["dqn on continuous actions", "ppo with a cnn", "ppo with fewer envs than ranks"])
def test_a_refused_force_leaves_the_earlier_run_in_the_folder(tmp_path, args, ranks):
    """The folder was cleared for the new run before the baseline checked its config: each
    of these refusals left nothing of the earlier run (the folder was gone)."""
    run_dir = tmp_path / "run"
    earlier = run_cli(["es-baseline", "pg", "configs/baselines/cartpole_pg.toml", "--run-dir",
                       str(run_dir), *PG_SHORT])
    assert earlier.returncode == 0, earlier.stderr
    files = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}
    assert {"config.toml", "progress.csv", "policy.npz"} <= set(files)
    refused = run_cli(["es-baseline", *args, "--run-dir", str(run_dir), "--force"],
                      ranks=ranks)
    assert refused.returncode == 2, refused.stderr
    assert {path.name: path.read_bytes() for path in run_dir.iterdir()
            if path.is_file()} == files


def test_es_compare_writes_table_csv_and_plot(tmp_path):
    out = tmp_path / "my cmp"  # the commands it prints, pasted, ran another (unquoted)
    result = run_cli(["es-compare", "--env", "CartPole-v1", "--budget-s", "4", "--seeds", "0-1",
                      "--jobs", "2", "--methods", "es,pg", "--eval-episodes", "2", "--out",
                      str(out)], timeout=120)
    assert result.returncode == 0, result.stderr
    table = (out / "compare.md").read_text()
    assert "| es |" in table and "| pg |" in table and "bytes per update" in table
    assert "second half's evals at it (per seed)" in table
    rows = (out / "compare.csv").read_text().splitlines()
    assert rows[0].startswith("method,seed,run_dir,final_mean") and len(rows) == 5
    assert (out / "compare.png").stat().st_size > 1000
    for method in ("es", "pg"):
        for seed in (0, 1):
            (shown,) = [line.split(": ", 1)[1] for line in result.stdout.splitlines()
                        if line.startswith(f"es-compare: {method} seed {seed}: ")]
            assert shlex.split(shown)[shlex.split(shown).index("--run-dir") + 1] == str(
                out / method / f"seed{seed}")
            progress = read_progress(out / method / f"seed{seed}")
            assert 3.0 <= float(progress[-1]["time_s"]) < 30  # the budget ended the run


def test_es_compare_refuses_a_bad_method_config_before_any_run(tmp_path):
    """A typo in the last method's config was found after the earlier methods had trained
    their whole budgets, and then no table was written."""
    bad = tmp_path / "pg.toml"
    bad.write_text("[pg]\nlrr = 0.01\n")
    out = tmp_path / "cmp"
    refused = run_cli(["es-compare", "--env", "CartPole-v1", "--methods", "es,pg",
                       "--method-config", f"pg={bad}", "--budget-s", "60", "--seeds", "0",
                       "--out", str(out)], timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(f"es-compare: error: config {str(bad)!r} of pg: unknown "
                                     "key pg.lrr: allowed in [pg] are ")
    assert not (out / "es").exists()
    twice = run_cli(["es-compare", "--env", "CartPole-v1", "--methods", "es,pg",
                     "--method-config", f"pg={bad}", "--method-config", "pg=other.toml",
                     "--out", str(out)], timeout=60)
    assert twice.returncode == 2 and twice.stderr.strip() == (
        "es-compare: error: --method-config 'pg=other.toml': pg has one already "
        f"({bad}); give each method one"), twice.stderr
    short = run_cli(["es-compare", "--env", "CartPole-v1", "--budget-s", "0.5", "--out", str(out)],
                    timeout=60)
    assert short.returncode == 2 and short.stderr.startswith(
        "es-compare: error: argument --budget-s: '0.5': expected a finite number of seconds "
        ">= 1 (a run's budget counts from"), short.stderr
    # PPO's environments split over the ranks: refused after ES had spent its budget.
    crowded = run_cli(["es-compare", "--env", "Pendulum-v1", "--methods", "es,ppo", "--ranks",
                       "5", "--out", str(out)], timeout=60)
    assert crowded.returncode == 2 and crowded.stderr.strip() == (
        f"es-compare: error: config {str(SHIPPED_CONFIGS / 'baselines/pendulum_ppo.toml')!r} of "
        "ppo: 5 ranks: ppo.num_envs = 4 environments are split over the ranks, at least one "
        "each")
    # Annealing over a step budget es-compare's runs never have: every PPO run failed.
    annealing = tmp_path / "anneal.toml"
    annealing.write_text((REPO / "configs/baselines/cartpole_ppo.toml").read_text()
                         .replace("[ppo]\n", "[ppo]\nanneal_lr = true\n"))
    annealed = run_cli(["es-compare", "--env", "CartPole-v1", "--methods", "es,ppo",
                        "--method-config", f"ppo={annealing}", "--out", str(out)], timeout=60)
    assert annealed.returncode == 2 and annealed.stderr.strip() == (
        f"es-compare: error: config {str(annealing)!r} of ppo: ppo.anneal_lr = true anneals "
        "over run.max_timesteps, which es-compare's runs leave 0 (--budget-s ends them); set "
        "ppo.anneal_lr = false"), annealed.stderr
    # DQN named on a continuous env: left out without a word when it was in a list.
    named = run_cli(["es-compare", "--env", "Pendulum-v1", "--methods", "es,dqn", "--out",
                     str(out)], timeout=60)
    assert named.returncode == 2 and named.stderr.strip() == (
        "es-compare: error: --methods es,dqn: Pendulum-v1 has continuous actions, DQN needs "
        "discrete ones; leave dqn out"), named.stderr
    # A user's policy acting outside the action space: every ES run failed at its start.
    outside = tmp_path / "outside.toml"
    outside.write_text('[policy]\nkind = "user_policies:outside"\n')
    probed = run_cli(["es-compare", "--env", "CartPole-v1", "--methods", "pg,es",
                      "--method-config", f"es={outside}", "--out", str(out)], timeout=60,
                     extra_env={"PYTHONPATH": str(REPO / "tests")})
    assert probed.returncode == 2 and probed.stderr.startswith(
        f"es-compare: error: config {str(outside)!r} of es: policy.kind = "
        "'user_policies:outside': action 5 is outside the action space"), probed.stderr
    # A policy its env cannot take: every run of the method failed, each after its start.
    pixels = run_cli(["es-compare", "--env", "CartPole-v1", "--methods", "pg,es",
                      "--method-config", "es=configs/pong.toml", "--out", str(out)], timeout=60)
    assert pixels.returncode == 2 and pixels.stderr.startswith(
        "es-compare: error: config 'configs/pong.toml' of es: policy.kind = 'cnn' needs stacked "
        "image observations (C, H, W), got Box("), pixels.stderr
    assert not (out / "es").exists() and not (out / "pg").exists()
    # A run's folder as --out: the comparison's folders and logs went in beside its files.
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.toml").write_text("")
    into_a_run = run_cli(["es-compare", "--env", "CartPole-v1", "--out", str(tmp_path / "run")],
                         timeout=60)
    assert into_a_run.returncode == 2 and into_a_run.stderr.strip() == (
        f"es-compare: error: --out {str(tmp_path / 'run')!r}: holds a run (its config.toml), "
        "not a comparison; give another folder"), into_a_run.stderr
    assert sorted(path.name for path in (tmp_path / "run").iterdir()) == ["config.toml"]


def test_es_compare_keeps_earlier_runs_unless_forced_and_tables_what_ended(tmp_path):
    """A second es-compare into one --out replaced the first's runs without a word (with
    other seeds or methods even with no --force, its table then holding only the new runs and
    its plot both); and one failed run left no table of those that ended."""
    failing = tmp_path / "es.toml"  # acts outside the space after the start-up probe
    failing.write_text('[policy]\nkind = "user_policies:LaterOutside"\n')
    out = tmp_path / "cmp"
    args = ["es-compare", "--env", "CartPole-v1", "--methods", "es,pg", "--method-config",
            f"es={failing}", "--budget-s", "2", "--seeds", "0", "--eval-episodes", "2",
            "--out", str(out)]
    user_module = {"PYTHONPATH": str(REPO / "tests")}
    first = run_cli(args, timeout=120, extra_env=user_module)
    assert first.returncode == 1, first.stderr
    assert "es-compare: error: runs failed: es seed 0 (exit 1, see " in first.stderr
    assert first.stderr.rstrip().endswith("; the table holds the others")
    rows = (out / "compare.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[1].startswith("pg,0,")
    other = ["es-compare", "--env", "CartPole-v1", "--methods", "pg", "--budget-s", "2",
             "--seeds", "1", "--eval-episodes", "2", "--out", str(out)]
    again = run_cli(other, timeout=60)
    assert again.returncode == 2, again.stderr
    assert again.stderr.strip() == (
        f"es-compare: error: --out {str(out)!r} holds an earlier comparison (es, pg, "
        "compare.csv, compare.md, ...): pass --force to replace it, or another --out")
    forced = run_cli([*other, "--force", "--method-config", "pg=configs/cartpole.toml"],
                     timeout=120)
    assert forced.returncode == 0, forced.stderr
    # A run's warnings were in its log alone: an es-train config tunes nothing of pg.
    assert "es-compare: pg seed 1: es-baseline: warning: " in forced.stderr, forced.stderr
    assert "has no [pg] section" in forced.stderr
    assert sorted(path.relative_to(out).as_posix() for path in out.glob("*/*")) == ["pg/seed1"]
    assert [row.split(",")[:2] for row in (out / "compare.csv").read_text().splitlines()[1:]] \
        == [["pg", "1"]]
    # Marked as es-compare's, its folder is refused to other commands, and theirs to it.
    assert (out / "es-bench.txt").read_text() == "es-compare\n"
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "es-bench.txt").write_text("es-bench suite\n")
    into_a_suite = run_cli([*other[:-1], str(tmp_path / "suite"), "--force"], timeout=60)
    assert into_a_suite.returncode == 2 and into_a_suite.stderr.strip() == (
        f"es-compare: error: --out {str(tmp_path / 'suite')!r} holds the results of es-bench "
        "suite; pass another --out")


def test_es_compare_tables_no_count_without_a_threshold_and_finds_its_configs_anywhere():
    """Without a threshold the count of seeds reaching it read 0/1; the shipped configs were
    looked for in the folder es-compare ran in."""
    from es.bench.compare import RunSummary, config_for, markdown_table

    run = RunSummary("es", 0, "r", 10.0, 0.0, 100, 2, float("nan"), float("nan"),
                     float("nan"), 0.0)
    assert "| es | 10.0 ± 0.0 | — | — | — | — | 0 |" in markdown_table([run], None, 2)
    assert "| es | 10.0 ± 0.0 | 0/1 | — |" in markdown_table([run], 475.0, 2)
    for env_id, discrete in [("CartPole-v1", True), ("Acrobot-v1", True),
                             ("MountainCarContinuous-v0", False)]:
        config, _ = config_for("pg", env_id, discrete, {})
        assert Path(config).is_absolute() and Path(config).is_file()


def test_held_share_counts_the_second_half_by_time():
    from es.bench.compare import held_share

    evals = [(1.0, 500.0), (4.0, 100.0), (5.0, 480.0), (7.0, 200.0), (10.0, 475.0)]
    assert held_share(evals, 475.0) == pytest.approx(2 / 3)  # 5, 7, 10 s: 480 and 475
    assert held_share(evals, 600.0) == 0.0
    assert np.isnan(held_share(evals, None)) and np.isnan(held_share([], 475.0))


def test_input_scaling_maps_bounded_dimensions_to_unit_range():
    import gymnasium as gym

    from es.baselines.common import input_scaling

    ram = input_scaling(gym.spaces.Box(0, 255, (128,), np.uint8))
    np.testing.assert_allclose((np.array([0.0, 255.0]) - ram.mean[:2]) / ram.std[:2], [-1, 1])
    cartpole = input_scaling(make_env("CartPole-v1", None, {}).observation_space)
    np.testing.assert_allclose(cartpole.std, [4.8, 1.0, 0.41887903, 1.0], rtol=1e-6)
    np.testing.assert_array_equal(cartpole.mean, np.zeros(4))


def test_dqn_trains_on_atari_ram_and_es_eval_plays_it(tmp_path):
    run_dir = tmp_path / "breakout"
    result = run_cli(["es-baseline", "dqn", "configs/breakout_ram.toml", "--run-dir",
                      str(run_dir), "--set", "run.generations=2", "--set",
                      "dqn.steps_per_round=300", "--set", "dqn.learning_starts=200",
                      "--set", "env.max_episode_steps=200", "--set", "run.eval_episodes=1"])
    assert result.returncode == 0, result.stderr
    with np.load(run_dir / "policy.npz") as policy:
        assert policy["obs_mean"].shape == (128,) and float(policy["obs_std"][0]) == 127.5
    played = run_cli(["es-eval", str(run_dir), "--episodes", "1"])
    assert played.returncode == 0 and "ALE/Breakout-v5" in played.stdout, played.stderr


def test_dqn_from_pixels_trains_the_cnn_and_es_eval_plays_it(tmp_path):
    run_dir = tmp_path / "pong"
    result = run_cli(["es-baseline", "dqn", "configs/pong.toml", "--run-dir", str(run_dir),
                      "--set", "policy.vbn=false", "--set", "dqn.buffer_size=300",
                      "--set", "dqn.batch_size=4", "--set", "dqn.steps_per_round=60",
                      "--set", "dqn.learning_starts=30", "--set", "dqn.train_every=8",
                      "--set", "dqn.gradient_steps=1", "--set", "run.generations=2",
                      "--set", "run.eval_episodes=1", "--set", "env.max_episode_steps=40"])
    assert result.returncode == 0, result.stderr
    rows = read_progress(run_dir)
    assert len(rows) == 2 and float(rows[-1]["grad_norm"]) > 0
    played = run_cli(["es-eval", str(run_dir), "--episodes", "1"])
    assert played.returncode == 0 and "ALE/Pong-v5" in played.stdout, played.stderr


BASELINE_CONFIGS = sorted(p.name for p in (REPO / "configs" / "baselines").glob("*.toml"))


@pytest.mark.parametrize("name", BASELINE_CONFIGS)
def test_every_baseline_config_runs_a_tiny_round(name):
    from es.baselines import dqn, pg, ppo
    from es.config import apply_overrides, from_dict, read_toml
    from es.parallel.comm import LocalComm

    algorithm = name.removesuffix(".toml").rsplit("_", 1)[-1]
    tiny = ["run.generations=1", "run.max_seconds=0", "run.eval_episodes=1",
            "env.max_episode_steps=20", "dqn.steps_per_round=60", "dqn.learning_starts=20",
            "dqn.batch_size=8", "dqn.train_every=10", "dqn.gradient_steps=1",
            "pg.episodes_per_update=2", "ppo.num_envs=2", "ppo.steps_per_env=16",
            "ppo.minibatches=2", "ppo.epochs=1"]
    config = from_dict(apply_overrides(read_toml(REPO / "configs" / "baselines" / name), tiny))
    result = {"dqn": dqn.train, "pg": pg.train, "ppo": ppo.train}[algorithm](config,
                                                                              LocalComm(), None)
    assert result.rounds == 1 and result.timesteps > 0
    assert result.eval_return is not None and np.isfinite(result.eval_return)


def test_a_baseline_run_stood_stopped_keeps_its_budget_as_es_train_does(tmp_path):
    """es-compare gives ES and the baselines one wall budget: time stopped (SIGSTOP) is left
    out of both, so a pause beside a comparison cannot shorten one method's run. The pause
    is twice the budget: a round slowed by a loaded machine (3.5 s seen beside a full test
    run and three trainings) stays far from a gap that holds the pause."""
    run_dir, stopped_s = tmp_path / "pg", 8.0
    process = subprocess.Popen(
        [tool("es-baseline"), "pg", "configs/baselines/cartpole_pg.toml", "--run-dir",
         str(run_dir), "--set", "run.generations=100000", "--set", "run.max_seconds=4",
         "--quiet"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not (run_dir / "progress.csv").exists() or \
            len((run_dir / "progress.csv").read_text().splitlines()) < 3:
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.05)
    process.send_signal(signal.SIGSTOP)
    time.sleep(stopped_s)
    os.kill(process.pid, signal.SIGCONT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    rows = read_progress(run_dir)
    assert stopped_s - 1.0 <= float(rows[-1]["paused_s"]) <= stopped_s + 1.0
    times = [float(row["time_s"]) for row in rows]
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) < stopped_s - 1.5
    assert 4.0 <= times[-1] < 4.0 + stopped_s - 1.5


@pytest.mark.parametrize(("algorithm", "ranks"), [("dqn", None), ("gorila", 2)])
def test_dqn_time_budget_ends_the_round_under_way(tmp_path, algorithm, ranks):
    """The budget was checked between rounds only: a round of pixels (a 250-step round of
    Pong took 19 s) ran past ``run.max_seconds`` by minutes. Here a round longer than any
    budget: the clock ends it."""
    run_dir = tmp_path / algorithm
    done = run_cli(["es-baseline", algorithm, "configs/baselines/cartpole_dqn.toml",
                    "--run-dir", str(run_dir), "--set", "dqn.steps_per_round=100000000",
                    "--set", "run.max_seconds=5", "--set", "run.eval_episodes=1", "--quiet"],
                   ranks=ranks, timeout=120)  # 5 s: a loaded machine took 2 s to start gorila
    assert done.returncode == 0, done.stderr
    (row,) = read_progress(run_dir)
    assert 0 < int(row["timesteps"]) < 100_000_000 and row["eval_return"]
    assert 5.0 <= float(row["time_s"]) < 60


@pytest.mark.parametrize("algorithm, config", [
    ("pg", "configs/baselines/cartpole_pg.toml"), ("gorila", "configs/baselines/cartpole_dqn.toml"),
])
def test_a_stopped_rank_ends_a_baseline_job_naming_it(tmp_path, algorithm, config):
    """es-baseline had no heartbeat: a stopped rank left the others waiting for it in the
    next all-reduce (pg), or the learner for its transitions (gorila), for good."""
    run_dir = tmp_path / "run"
    job = subprocess.Popen(
        [tool("mpiexec"), "-n", "2", tool("es-baseline"), algorithm, config, "--run-dir",
         str(run_dir), "--set", "run.peer_timeout_s=3", "--set", "run.max_seconds=600",
         "--set", "run.generations=100000", "--quiet"], cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    with stopping_a_rank(job, 3) as stop:
        rank1 = rank_one_once_training(job, run_dir)
        line = stop(rank1)
    assert re.fullmatch(rf"es-baseline: peer lost: rank 1 \(pid {rank1} on \S+\) silent for 3 s "
                        r"\(no heartbeat within run.peer_timeout_s = 3 s: stopped, hung or cut "
                        r"off\); a baseline keeps no checkpoint: start the run again on the "
                        r"ranks that are left \(exit code 76\)", line), line


def rank_one_once_training(job: subprocess.Popen, run_dir: Path) -> int:
    """The pid of rank 1 of ``job`` (an ``mpiexec`` training in ``run_dir``), once its first
    progress row is written."""
    deadline = time.monotonic() + 60
    while not (run_dir / "progress.csv").is_file():
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()
        time.sleep(0.1)
    return next(int(pid.name) for pid in Path("/proc").iterdir() if pid.name.isdigit()
                and str(run_dir) in _read(pid / "cmdline")
                and "PMI_RANK=1\0" in _read(pid / "environ"))


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:  # ended meanwhile, or not ours to read
        return ""


def test_a_sigterm_ends_a_baseline_in_one_line_as_ctrl_c_does(tmp_path):
    """A kill (SIGTERM) ended es-baseline with no word (exit -15), where es-train stops."""
    from conftest import interrupt_job, start_terminal_job

    run_dir = tmp_path / "run"
    job = start_terminal_job([tool("es-baseline"), "pg", "configs/baselines/cartpole_pg.toml",
                              "--run-dir", str(run_dir), "--set", "run.max_seconds=600",
                              "--set", "run.generations=100000", "--quiet"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = interrupt_job(job, "sigterm", ready=(run_dir / "progress.csv").is_file)
    assert job.returncode == 130, err
    # What it leaves, since it cannot be resumed: the line said nothing of it.
    if (run_dir / "policy.npz").is_file():
        with np.load(run_dir / "policy.npz") as policy:
            generation = int(policy["generation"])
        assert err.strip() == (f"es-baseline: interrupted on rank 0; {run_dir / 'policy.npz'} "
                               f"is round {generation}'s, the last evaluated (es-eval plays "
                               "it; a baseline run cannot be resumed)")
    else:
        assert err.strip() == (f"es-baseline: interrupted on rank 0; no policy.npz in "
                               f"{run_dir}: the run ended before its first evaluation")


def test_a_sigterm_on_one_rank_ends_a_baseline_job_at_once(tmp_path):
    """The signalled rank stopped, and the others waited for it in the next all-reduce until
    the heartbeat's deadline: exit 76, blaming the rank that was asked to stop."""
    run_dir = tmp_path / "run"
    job = subprocess.Popen(
        [tool("mpiexec"), "-n", "2", tool("es-baseline"), "pg",
         "configs/baselines/cartpole_pg.toml", "--run-dir", str(run_dir), "--set",
         "run.peer_timeout_s=600", "--set", "run.max_seconds=600", "--set",
         "run.generations=100000", "--quiet"], cwd=REPO, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        os.kill(rank_one_once_training(job, run_dir), signal.SIGTERM)
        _, err = job.communicate(timeout=60)  # not the heartbeat's 600 s
    finally:  # a job that hangs must not outlive the test
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 130, err
    assert "es-baseline: interrupted on rank 1" in err and "peer lost" not in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_es_compare_alone_stops_its_runs_too(tmp_path, signum):
    """A kill reaches es-compare alone (not its process group, as a terminal's Ctrl-C does):
    on SIGTERM it exited 143, on SIGINT it waited, and its runs went on without a word to the
    end of their budgets."""
    out = tmp_path / "cmp"
    job = subprocess.Popen([tool("es-compare"), "--env", "CartPole-v1", "--methods", "es,pg",
                            "--budget-s", "600", "--seeds", "0", "--jobs", "2", "--out",
                            str(out)], cwd=REPO, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not all((out / method / "seed0" / "progress.csv").is_file()
                      for method in ("es", "pg")):
            assert job.poll() is None and time.monotonic() < deadline, job.communicate()
            time.sleep(0.1)
        job.send_signal(signum)
        _, err = job.communicate(timeout=60)  # its runs stopped, not their 600 s
        left = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True).stdout
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
    assert job.returncode == 130, err
    assert "es-compare: interrupted: 2 of the runs stopped or ended, 0 not started" in err
    assert left == ""


def test_a_baseline_run_folder_says_what_made_it(tmp_path):
    """Its lock said "es-train pid N"; es-train --resume said its checkpoints were "gone" (a
    baseline never writes any); es-eval --policy best blamed run.best_episodes = 0."""
    run_dir = tmp_path / "run"
    done = run_cli(["es-baseline", "pg", "configs/baselines/cartpole_pg.toml", "--run-dir",
                    str(run_dir), *PG_SHORT])
    assert done.returncode == 0, done.stderr
    assert (run_dir / "trained_by.txt").read_text() == "es-baseline pg\n"
    assert (run_dir / "es.lock").read_text().startswith("es-baseline pg pid ")
    resumed = run_cli(["es-train", "--resume", str(run_dir)])
    assert resumed.returncode == 2 and resumed.stderr.strip() == (
        f"es-train: error: --resume {str(run_dir)!r}: trained by es-baseline pg, which keeps "
        "no checkpoints: a baseline run cannot be resumed; start it again (its command with "
        "--force)"), resumed.stderr
    # The error named --resume, which the user had not typed.
    either = run_cli(["es-train", "configs/cartpole.toml", "--resume-or-start", str(run_dir)])
    assert either.returncode == 2 and either.stderr.startswith(
        f"es-train: error: --resume-or-start {str(run_dir)!r}: trained by es-baseline pg, "), \
        either.stderr
    best = run_cli(["es-eval", str(run_dir), "--policy", "best"])
    assert best.returncode == 2 and best.stderr.strip() == (
        f"es-eval: error: run folder {str(run_dir)!r}: no policy_best.npz in it (es-baseline "
        "pg keeps no best policy: play --policy final)"), best.stderr
