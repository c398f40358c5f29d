"""policy_best.npz: the mean policy with the best evaluation, kept only when a re-evaluation
on run.best_episodes fresh episodes confirms it; exact for any rank count and under resume.

The environment (tests/fault_envs.py, Lucky-v0) is one step whose return is mostly a draw
from the reset seed, so one-episode evaluations are often lucky and the test knows the
confirmation's episodes: it replays them."""

import json

import gymnasium as gym
import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli

from es.core.seeding import TAG_BEST, episode_seeds
from es.rl.checkpoint import load_policy
from es.rl.trainer import policy_score

LUCKY = {"PYTHONPATH": str(REPO / "tests")}
BASE = ["configs/pendulum.toml", "--set", "env.id=fault_envs:Lucky-v0", "--set",
        "policy.kind=linear", "--set", "policy.obs_norm=false", "--set", "es.population=10",
        "--set", "es.lr=0.05", "--set", "run.eval_every=1", "--set", "run.eval_episodes=1",
        "--quiet"]


def train(run_dir, *extra: str, ranks: int | None = None):
    done = run_cli(["es-train", *BASE, "--run-dir", str(run_dir), *extra], ranks=ranks,
                   extra_env=LUCKY)
    assert done.returncode == 0, done.stderr
    return done


def kept_scores(run_dir) -> list[float | None]:
    return [float(row["best_return"]) if row["best_return"] else None
            for row in read_progress(run_dir)]


def replay_confirmation(run_dir, episodes: int = 20, seed: int = 0) -> np.ndarray:
    """The kept policy's confirmation episodes, played again here on their reset seeds."""
    import fault_envs  # noqa: F401  (registers Lucky-v0)

    saved = load_policy(run_dir / "policy_best.npz")
    env = gym.make("fault_envs:Lucky-v0")
    returns = []
    for reset_seed in episode_seeds(seed, saved.generation, episodes, TAG_BEST):
        observation, _ = env.reset(seed=int(reset_seed))
        _, reward, *_ = env.step(saved.act(env)(observation))
        returns.append(float(reward))
    return np.array(returns)


def test_a_lucky_short_evaluation_is_not_kept(tmp_path):
    run_dir = tmp_path / "lucky"
    done = train(run_dir, "--set", "run.generations=30")
    rows = read_progress(run_dir)
    scores = kept_scores(run_dir)
    evals = [float(row["eval_return"]) for row in rows]
    # Rejected: an evaluation above the kept score whose confirmation did not beat it.
    rejected = [g for g in range(1, len(rows))
                if evals[g] > scores[g - 1] and scores[g] == scores[g - 1]]
    assert rejected, "no lucky evaluation in 30 generations: the test proves nothing"
    # The kept score only rises, and only a confirmation's 20-episode mean sets it: it is
    # never the one-episode evaluation that nominated the policy.
    assert all(b >= a for a, b in zip(scores, scores[1:], strict=False))
    changes = [g for g in range(1, len(rows)) if scores[g] != scores[g - 1]]
    assert changes and all(scores[g] != evals[g] for g in changes)
    assert max(evals) > max(scores)  # a one-episode evaluation outscored every kept one
    saved = load_policy(run_dir / "policy_best.npz")
    last_change = changes[-1]
    assert saved.generation == int(rows[last_change]["generation"])
    assert replay_confirmation(run_dir).mean() == pytest.approx(scores[-1], rel=1e-5)
    assert f"kept policy_best.npz {scores[-1]:.2f}" in done.stdout

    evaluated = run_cli(["es-eval", str(run_dir), "--policy", "best", "--episodes", "3"],
                        extra_env=LUCKY)
    assert evaluated.returncode == 0, evaluated.stderr
    assert f"best policy (generation {saved.generation})" in evaluated.stdout


def confirm_steps(run_dir) -> int:
    """What the run's confirmations have played, from its newest checkpoint."""
    newest = sorted((run_dir / "checkpoints").glob("ckpt-*.json"))[-1]
    return json.loads(newest.read_text())["confirm_steps"]


def test_the_best_policy_is_identical_for_any_rank_count_and_after_a_resume(tmp_path):
    # run.best_share = 0.3 skips some nominations: which ones depends on the confirmations'
    # cost so far, which a resume must carry on, and which every rank must count alike.
    generations = ["--set", "run.generations=16", "--set", "run.best_share=0.3"]
    plain = tmp_path / "plain"
    loud = run_cli(["es-train", *[arg for arg in BASE if arg != "--quiet"], "--run-dir",
                    str(plain), *generations], extra_env=LUCKY)
    assert loud.returncode == 0, loud.stderr
    assert "not confirmed: confirmations have played" in loud.stdout
    reference = load_params(plain), load_policy(plain / "policy_best.npz"), kept_scores(plain)
    assert reference[1].generation < 16  # the kept policy is not simply the last one
    for ranks in (2, 3):
        run_dir = tmp_path / f"n{ranks}"
        train(run_dir, *generations, ranks=ranks)
        best = load_policy(run_dir / "policy_best.npz")
        assert np.array_equal(best.params, reference[1].params), ranks
        assert best.generation == reference[1].generation
        assert kept_scores(run_dir) == reference[2]
        assert confirm_steps(run_dir) == confirm_steps(plain)
    # Stopped after generation 9 (a policy kept by then), resumed on another rank count:
    # the resumed run must know the kept score, or it would keep a worse one.
    split = tmp_path / "split"
    train(split, "--set", "run.generations=9", "--set", "run.checkpoint_every=1",
          "--set", "run.best_share=0.3", ranks=2)
    assert kept_scores(split)[-1] is not None
    resumed = run_cli(["es-train", "--resume", str(split), "--set", "run.generations=16",
                       "--quiet"], ranks=3, extra_env=LUCKY)
    assert resumed.returncode == 0, resumed.stderr
    assert np.array_equal(load_params(split), reference[0])
    best = load_policy(split / "policy_best.npz")
    assert np.array_equal(best.params, reference[1].params)
    assert best.generation == reference[1].generation
    assert kept_scores(split) == reference[2]
    assert confirm_steps(split) == confirm_steps(plain)


def test_best_share_caps_what_the_confirmations_cost(tmp_path, monkeypatch):
    """A confirmation starts only while the confirmations so far have played at most
    run.best_share of the trained env steps; other nominations are not confirmed. Without
    the cap, a nomination is always confirmed. (Lucky-v0 episodes are one step long.)"""
    import fault_envs  # noqa: F401  (registers Lucky-v0)

    import es
    from es.rl import trainer

    starts: list[tuple[int, int]] = []  # (confirm_steps, timesteps) as each one started
    play_mean = trainer.Trainer.play_mean

    def recorded(self, seeds):
        if len(seeds) == 20:  # a confirmation's (run.best_episodes), not an evaluation's
            starts.append((self.confirm_steps, self.timesteps))
        return play_mean(self, seeds)

    monkeypatch.setattr(trainer.Trainer, "play_mean", recorded)
    overrides = {"env.id": "fault_envs:Lucky-v0", "es.population": 10, "es.lr": 0.05,
                 "policy.kind": "linear", "policy.obs_norm": False, "run.generations": 40,
                 "run.eval_every": 1, "run.eval_episodes": 1}
    for share in (0.0, 0.5):
        starts.clear()
        run = es.train(REPO / "configs/pendulum.toml", overrides | {"run.best_share": share},
                       run_dir=tmp_path / f"share{share}", quiet=True)
        kept = [row["best_return"] for row in run.history]
        nominations = sum(row["eval_return"] > (before if before is not None else -np.inf)
                          for row, before in zip(run.history, [None, *kept], strict=False))
        assert confirm_steps(tmp_path / f"share{share}") == 20 * len(starts)
        if share:
            assert 1 < len(starts) < nominations
            assert all(spent <= share * trained for spent, trained in starts)
        else:
            assert len(starts) == nominations


def test_best_episodes_zero_keeps_no_best_policy(tmp_path):
    run_dir = tmp_path / "none"
    train(run_dir, "--set", "run.generations=3", "--set", "run.best_episodes=0")
    assert not (run_dir / "policy_best.npz").exists()
    assert kept_scores(run_dir) == [None, None, None]
    missing = run_cli(["es-eval", str(run_dir), "--policy", "best"], extra_env=LUCKY)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"es-eval: error: run folder {str(run_dir)!r}: no policy_best.npz in it (the run kept "
        "none: run.best_episodes = 0, or no evaluation yet)"]


def test_the_measures_of_a_policy_over_episodes():
    returns = np.array([5.0, -1.0, 4.0, 3.0, 9.0, 0.0, 7.0, 8.0])
    assert policy_score(returns, "mean") == pytest.approx(4.375)
    assert policy_score(returns, "worst") == -1.0
    for by in ("mean", "worst"):  # a failed episode fails the policy
        assert np.isnan(policy_score(np.array([1.0, np.nan, 2.0]), by))


def test_best_by_worst_keeps_the_policy_by_its_worst_episode(tmp_path):
    run_dir = tmp_path / "worst"
    train(run_dir, "--set", "run.generations=12", "--set", "run.best_by=worst")
    score = kept_scores(run_dir)[-1]
    assert score is not None
    replayed = replay_confirmation(run_dir)
    assert replayed.min() == pytest.approx(score, rel=1e-5)


def test_a_hopeless_confirmation_stops_early_with_the_same_choice(tmp_path, monkeypatch):
    """Judged by the worst episode, a confirmation ends at its first round of CONFIRM_ROUND
    episodes with one at or below the kept score: the kept policies are those of playing
    every episode, for fewer episodes."""
    import fault_envs  # noqa: F401  (registers Lucky-v0)

    import es
    from es.rl import trainer

    played: list[int] = []
    play_mean = trainer.Trainer.play_mean

    def counted(self, seeds):
        played.append(len(seeds))
        return play_mean(self, seeds)

    monkeypatch.setattr(trainer.Trainer, "play_mean", counted)
    overrides = {"env.id": "fault_envs:Lucky-v0", "es.population": 10, "es.lr": 0.05,
                 "policy.kind": "linear", "policy.obs_norm": False, "run.generations": 30,
                 "run.eval_every": 1, "run.eval_episodes": 1, "run.best_by": "worst",
                 "run.best_episodes": 40}
    runs, counts = {}, {}
    for name, round_size in (("all", 10**6), ("rounds", trainer.CONFIRM_ROUND)):
        monkeypatch.setattr(trainer, "CONFIRM_ROUND", round_size)
        played.clear()
        runs[name] = es.train(REPO / "configs/pendulum.toml", overrides,
                              run_dir=tmp_path / name, quiet=True)
        counts[name] = sum(played)
    assert [row["best_return"] for row in runs["rounds"].history] == [
        row["best_return"] for row in runs["all"].history]
    assert np.array_equal(runs["rounds"].best.params, runs["all"].best.params)
    assert runs["rounds"].best.generation == runs["all"].best.generation
    assert len({row["best_return"] for row in runs["all"].history}) > 2  # kept, then replaced
    assert counts["rounds"] < counts["all"]
