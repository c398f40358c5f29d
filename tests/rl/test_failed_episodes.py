"""Failed episodes are counted, never silently dropped: evaluation of the mean policy in
es-train, and the training and evaluation episodes of the baselines (tests/fault_envs.py
decides from each episode's reset seed whether it breaks, so the count is known exactly)."""

import re
import tracemalloc

import gymnasium as gym
import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli
from fault_envs import fails

from es.core.seeding import TAG_ENV, TAG_EVAL, episode_seeds

FAULTS = {"PYTHONPATH": str(REPO / "tests")}


def expected_failures(seed: int, index: int, count: int, tag: int) -> int:
    return sum(fails(int(s)) for s in episode_seeds(seed, index, count, tag))


@pytest.mark.parametrize("env", ["Flaky-v0", "Glitch-v0"])
def test_es_train_counts_and_shows_failed_evaluation_episodes(tmp_path, env):
    """Glitch-v0: one NaN or inf observation mid-episode, the state and the last observation
    finite again; evaluations looked at the last observation only, and counted none."""
    run_dir = tmp_path / "eval"
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", f"env.id=fault_envs:{env}",
                    "--set", "policy.kind=linear", "--set", "es.population=8", "--set",
                    "run.generations=4", "--set", "run.eval_every=1", "--set",
                    "run.eval_episodes=8", "--set", "run.max_failed_fraction=1",
                    "--run-dir", str(run_dir)], extra_env=FAULTS)
    assert done.returncode == 0, done.stderr
    rows = read_progress(run_dir)
    failed = [int(row["eval_failed"]) for row in rows]
    assert failed == [expected_failures(0, g, 8, TAG_EVAL) for g in (1, 2, 3, 4)]
    assert sum(failed) > 0
    shown = [line for line in done.stdout.splitlines() if "eval episodes failed" in line]
    assert len(shown) == sum(1 for f in failed if f)
    assert "evaluation episode" in done.stderr  # each distinct failure is also a warning
    for row, count in zip(rows, failed, strict=True):
        assert row["eval_return"] != "" or count == 8  # the mean of the episodes that finished


@pytest.mark.parametrize(("scale", "left_out"), [(1e6, False), (1e9, True)])
def test_large_observations_are_no_failed_episodes(tmp_path, scale, left_out):
    """An observation of 1e6 over 50 steps (sum of squares 5e13, beyond the 5.5e11 that the
    statistics took from any episode) failed every episode, with no word of why. Now an
    episode may add up to 2**54 / es.population; one beyond keeps its return, is left out
    of the statistics, and each rank that saw one says so once."""
    common = ["es-train", "configs/pendulum.toml", "--set", "env.id=fault_envs:Loud-v0",
              "--set", f"env.kwargs.scale={scale}", "--set", "policy.kind=linear", "--set",
              "es.population=8", "--set", "run.generations=3", "--quiet"]
    runs = {}
    for ranks in (None, 2):
        runs[ranks] = tmp_path / f"ranks{ranks}"
        done = run_cli([*common, "--run-dir", str(runs[ranks])], extra_env=FAULTS, ranks=ranks)
        assert done.returncode == 0, done.stderr
        assert all(int(r["failed_episodes"]) == 0 for r in read_progress(runs[ranks]))
        warned = done.stderr.count("observations are too large for policy.obs_norm's statistics")
        assert warned == ((ranks or 1) if left_out else 0), done.stderr  # once a rank
    assert np.array_equal(load_params(runs[None]), load_params(runs[2]))


def test_baseline_pg_measures_its_failed_training_episodes(tmp_path):
    run_dir = tmp_path / "pg"
    done = run_cli(["es-baseline", "pg", "configs/baselines/pendulum_pg.toml", "--set",
                    "env.id=fault_envs:Flaky-v0", "--set", "policy.kind=linear", "--set",
                    "pg.episodes_per_update=8", "--set", "run.generations=3", "--set",
                    "run.eval_every=1", "--set", "run.eval_episodes=8", "--quiet",
                    "--run-dir", str(run_dir)], extra_env=FAULTS, ranks=2)
    assert done.returncode == 0, done.stderr
    rows = read_progress(run_dir)
    assert [int(r["failed_episodes"]) for r in rows] == [
        expected_failures(0, update, 8, TAG_ENV) for update in (0, 1, 2)]
    assert [int(r["eval_failed"]) for r in rows] == [
        expected_failures(0, update, 8, TAG_EVAL) for update in (1, 2, 3)]
    assert all(int(r["episodes"]) == 8 for r in rows)
    assert sum(int(r["failed_episodes"]) for r in rows) > 0
    assert np.isfinite(load_params(run_dir)).all()


def test_baseline_dqn_and_gorila_keep_broken_steps_out_of_replay(tmp_path):
    common = ["configs/baselines/cartpole_dqn.toml", "--set",
              "env.id=fault_envs:FlakyDiscrete-v0", "--set", "policy.kind=linear", "--set",
              "dqn.steps_per_round=400", "--set", "dqn.learning_starts=100", "--set",
              "dqn.train_every=50", "--set", "dqn.gradient_steps=10", "--set",
              "run.generations=3", "--set", "run.eval_every=3", "--quiet"]
    for algorithm, ranks in (("dqn", None), ("gorila", 3)):
        run_dir = tmp_path / algorithm
        extra = ["--set", "dqn.gorila_lead=0"] if algorithm == "gorila" else []
        done = run_cli(["es-baseline", algorithm, *common, *extra, "--run-dir", str(run_dir)],
                       extra_env=FAULTS, ranks=ranks)
        assert done.returncode == 0, done.stderr
        rows = read_progress(run_dir)
        failed = sum(int(r["failed_episodes"]) for r in rows)
        # 400 steps of 20-step episodes a round, one in four breaks at its 5th step.
        assert failed >= 5, (algorithm, [r["failed_episodes"] for r in rows])
        for row in rows:
            finished = int(row["episodes"]) - int(row["failed_episodes"])
            assert finished >= 0 and (finished == 0) == (row["return_mean"] == "")
        assert np.isfinite(load_params(run_dir)).all()  # no NaN reached the Q-network


def test_a_confirmation_with_failed_episodes_says_so(tmp_path):
    """It said "not kept: worst of 10 confirmation episodes nan"."""
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", "env.id=fault_envs:Flaky-v0",
                    "--set", "policy.kind=linear", "--set", "es.population=8", "--set",
                    "run.generations=3", "--set", "run.eval_every=1", "--set",
                    "run.eval_episodes=4", "--set", "run.best_episodes=10", "--set",
                    "run.max_failed_fraction=1", "--run-dir", str(tmp_path / "run")],
                   extra_env=FAULTS)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if "not kept" in line]
    assert said and all(re.search(r"not kept: \d+ of 10 confirmation episodes failed$", line)
                        for line in said), said
    assert "nan" not in done.stdout


@pytest.mark.parametrize("env", ["Flaky-v0", "Glitch-v0"])
def test_es_eval_counts_failed_episodes_and_keeps_them_out_of_the_mean(tmp_path, env):
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", "configs/pendulum.toml", "--set", f"env.id=fault_envs:{env}",
                    "--set", "policy.kind=linear", "--set", "es.population=8", "--set",
                    "run.generations=1", "--set", "run.max_failed_fraction=1", "--quiet",
                    "--run-dir", str(run_dir)], extra_env=FAULTS)
    assert done.returncode == 0, done.stderr
    episodes, seed = 12, 100
    expected = sum(fails(seed + i) for i in range(episodes))
    assert 0 < expected < episodes
    shown = run_cli(["es-eval", str(run_dir), "--episodes", str(episodes), "--seed", str(seed)],
                    extra_env=FAULTS)
    assert shown.returncode == 0, shown.stderr
    assert (f"over {episodes - expected} episodes" in shown.stdout
            and f"{expected} of {episodes} episodes failed" in shown.stdout), shown.stdout
    assert "nan" not in shown.stdout
    # A NaN observation was "non-finite return": the return is NaN because of it.
    assert ": failed: a non-finite reward or observation (NaN or inf)" in shown.stderr, \
        shown.stderr


class Endless(gym.Env):
    """No time limit: its episodes end only at run_episode's max_steps."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (100,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(100, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(100, self.t % 7, np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("record", [False, True])
def test_a_long_episode_keeps_one_observation_s_memory_with_exact_sums(record):
    """Recorded episodes kept every observation (for their sums): 20,000 steps of 100 floats
    held 16 MB, and an env with no time limit grew without bound."""
    from es.rl.rollout import run_episode

    tracemalloc.start()
    episode = run_episode(Endless(), lambda obs: np.zeros(1), seed=0, record_obs=record,
                          max_steps=20_000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert episode.length == 20_000 and peak < 200_000, peak
    if record:
        acted_on = np.arange(20_000) % 7  # the observations before each step
        np.testing.assert_array_equal(episode.obs_sum, np.full(100, acted_on.sum(), float))
        np.testing.assert_array_equal(episode.obs_sumsq, np.full(100, (acted_on**2).sum(), float))


def test_failures_alike_are_told_once_with_their_count(caplog):
    """A broken environment fails every member alike: a generation of 64 printed 64 identical
    warnings. Within ``failures_told_once`` the first of each distinct failure is shown and
    the rest counted, in the order first seen; outside it, every one."""
    from fault_envs import FlakyEnv

    from es.rl.rollout import failures_told_once, safe_episode

    env = FlakyEnv(fail_every=1)  # every episode raises, or goes NaN, at step 5
    modes = {}
    for seed in range(40):
        env.reset(seed=seed)
        modes[seed] = env.mode
    raising = [seed for seed, mode in modes.items() if mode == "raise"][:3]
    non_finite = [seed for seed, mode in modes.items() if mode != "raise"][:2]
    seeds = [raising[0], raising[1], non_finite[0], raising[2], non_finite[1]]

    def play() -> None:
        for seed in seeds:
            safe_episode(env, lambda obs: np.ones(1, np.float32), seed, f"member {seed}")

    def shown() -> list[str]:
        return [record.getMessage() for record in caplog.records]

    raised = "episode raised RuntimeError: simulator exploded"
    nan = "failed: a non-finite reward or observation (NaN or inf)"
    with caplog.at_level("WARNING", logger="es"):
        with failures_told_once("rank 0"):
            play()
        assert shown() == [f"member {raising[0]}: {raised}",
                           f"member {non_finite[0]}: {nan}",
                           f"rank 0: 2 more episodes alike: {raised}",
                           f"rank 0: 1 more episode alike: {nan}"]
        caplog.clear()
        play()
        assert len(shown()) == 5
