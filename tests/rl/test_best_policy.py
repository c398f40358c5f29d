"""policy_best.npz: an evaluation that beats the kept score nominates the mean policy, which
is kept only when run.best_episodes fresh episodes confirm it; confirmation rounds are played
beside the generations' members within run.best_share of the trained steps, the rest at every
stop; exact for any rank count and under resume.

The environment (tests/fault_envs.py, Lucky-v0) is one step whose return is mostly a draw
from the reset seed, so one-episode evaluations are often lucky and the test knows the
confirmation's episodes: it replays them. With ``env.kwargs.luck=0`` it has no luck at all:
a policy's confirmation scores exactly what its evaluation did."""

import csv
import json
import re
import shutil

import gymnasium as gym
import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli

from es.core.seeding import TAG_BEST, episode_seeds
from es.rl.checkpoint import load_latest_checkpoint, load_policy
from es.rl.metrics import read_stops

LUCKY = {"PYTHONPATH": str(REPO / "tests")}
BASE = ["configs/pendulum.toml", "--set", "env.id=fault_envs:Lucky-v0", "--set",
        "policy.kind=linear", "--set", "policy.obs_norm=false", "--set", "es.population=10",
        "--set", "es.lr=0.05", "--set", "run.eval_every=1", "--set", "run.eval_episodes=1"]
OVERRIDES = {"env.id": "fault_envs:Lucky-v0", "es.population": 10, "es.lr": 0.05,
             "policy.kind": "linear", "policy.obs_norm": False, "run.eval_every": 1,
             "run.eval_episodes": 1}


def train(run_dir, *extra: str, ranks: int | None = None, quiet: bool = True):
    done = run_cli(["es-train", *BASE, *(["--quiet"] if quiet else []), "--run-dir",
                    str(run_dir), *extra], ranks=ranks, extra_env=LUCKY)
    assert done.returncode == 0, done.stderr
    return done


def kept_scores(run_dir) -> list[float | None]:
    return [float(row["best_return"]) if row["best_return"] else None
            for row in read_progress(run_dir)]


def final_kept(done) -> float:
    """The kept score es-train's last line reports (after the stop's confirmations)."""
    return float(re.search(r"kept policy_best.npz (-?[\d.]+)", done.stdout).group(1))


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
    done = train(run_dir, "--set", "run.generations=30", "--set", "run.best_share=0.5",
                 quiet=False)
    rows = read_progress(run_dir)
    scores = kept_scores(run_dir)
    evals = [float(row["eval_return"]) for row in rows]
    assert "not kept" in done.stdout  # a nomination whose confirmation did not hold
    # The kept score only rises, only in a generation that played a confirmation round, and
    # only a confirmation's 20-episode mean sets it: never the one-episode evaluation.
    known = [s for s in scores if s is not None]
    assert known and all(b >= a for a, b in zip(known, known[1:], strict=False))
    changes = [g for g in range(len(rows))
               if scores[g] is not None and (g == 0 or scores[g] != scores[g - 1])]
    assert changes and all(int(rows[g]["confirm_steps"]) > 0 for g in changes)
    assert not set(known) & set(evals)
    final = final_kept(done)
    assert final >= known[-1]
    assert max(evals) > final  # a one-episode evaluation outscored the kept policy
    assert replay_confirmation(run_dir).mean() == pytest.approx(final, abs=0.01)

    saved = load_policy(run_dir / "policy_best.npz")
    evaluated = run_cli(["es-eval", str(run_dir), "--policy", "best", "--episodes", "3"],
                        extra_env=LUCKY)
    assert evaluated.returncode == 0, evaluated.stderr
    assert f"best policy (generation {saved.generation})" in evaluated.stdout


def confirm_steps(run_dir) -> int:
    """What the run's confirmations have played while training, from its newest checkpoint."""
    newest = sorted((run_dir / "checkpoints").glob("ckpt-*.json"))[-1]
    return json.loads(newest.read_text())["confirm_steps"]


def test_the_best_policy_is_identical_for_any_rank_count_and_after_a_resume(tmp_path):
    # run.best_share = 0.3 plays a round every few generations: which nominations wait and
    # which go first depends on the confirmations' cost so far and on the waiting pool, which
    # a resume must carry on, and which every rank must count alike.
    generations = ["--set", "run.generations=16", "--set", "run.best_share=0.3"]
    plain = tmp_path / "plain"
    reference_run = train(plain, *generations)
    reference = load_params(plain), load_policy(plain / "policy_best.npz"), kept_scores(plain)
    assert reference[1].generation < 16  # the kept policy is not simply the last one
    assert any(int(row["confirm_steps"]) for row in read_progress(plain))
    for ranks in (2, 3):
        run_dir = tmp_path / f"n{ranks}"
        done = train(run_dir, *generations, ranks=ranks)
        best = load_policy(run_dir / "policy_best.npz")
        assert np.array_equal(best.params, reference[1].params), ranks
        assert best.generation == reference[1].generation
        assert kept_scores(run_dir) == reference[2]
        assert confirm_steps(run_dir) == confirm_steps(plain)
        assert final_kept(done) == final_kept(reference_run)
    # Stopped after generation 9 with nominations waiting, resumed on another rank count: the
    # stop confirms them (a kept policy now), but the resumed run goes on from the state
    # before that, as the plain run did.
    split = tmp_path / "split"
    train(split, "--set", "run.generations=9", "--set", "run.checkpoint_every=1",
          "--set", "run.best_share=0.3", ranks=2)
    newest = sorted((split / "checkpoints").glob("ckpt-*.json"))[-1]
    assert json.loads(newest.read_text())["nominations"]
    assert (split / "policy_best.npz").exists()
    resumed = run_cli(["es-train", "--resume", str(split), "--set", "run.generations=16",
                       "--quiet"], ranks=3, extra_env=LUCKY)
    assert resumed.returncode == 0, resumed.stderr
    assert np.array_equal(load_params(split), reference[0])
    best = load_policy(split / "policy_best.npz")
    assert np.array_equal(best.params, reference[1].params)
    assert best.generation == reference[1].generation
    assert kept_scores(split) == reference[2]
    assert confirm_steps(split) == confirm_steps(plain)
    assert final_kept(resumed) == final_kept(reference_run)


def test_a_budgets_last_evaluation_is_not_played_again_by_the_resumed_run(tmp_path):
    """A budget that ends between evaluations (here at generation 2, evaluations every 3)
    evaluates the generation it ends at: the stopped run's final figure, and its kept policy.
    Resumed past it, the run must not play that evaluation again: a run that never stopped
    does not evaluate generation 2. It did, and nominated it: another kept policy, and with
    run.target_score an earlier end (generation 5, not 9: another policy.npz)."""
    config = ["configs/cartpole.toml", "--set", "run.seed=2", "--set", "run.eval_every=3",
              "--set", "run.target_score=190", "--quiet"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    done = run_cli(["es-train", *config, "--set", "run.generations=12", "--run-dir",
                    str(whole)])
    assert done.returncode == 0, done.stderr
    assert "ended by run.target_score = 190" in done.stdout
    stopped = run_cli(["es-train", *config, "--set", "run.generations=2", "--run-dir",
                       str(split)], ranks=2)
    assert stopped.returncode == 0, stopped.stderr
    assert read_progress(split)[-1]["eval_return"]  # the budget's end evaluates generation 2
    resumed = run_cli(["es-train", "--resume", str(split), "--set", "run.generations=12",
                       "--quiet"], ranks=3)
    assert resumed.returncode == 0, resumed.stderr
    assert np.array_equal(load_params(split), load_params(whole))
    kept, reference = load_policy(split / "policy_best.npz"), load_policy(whole / "policy_best.npz")
    assert np.array_equal(kept.params, reference.params)
    assert kept.generation == reference.generation
    training = ("generation", "timesteps", "return_mean", "eval_return", "best_return")
    assert [[row[key] for key in training] for row in read_progress(split)] == \
        [[row[key] for key in training] for row in read_progress(whole)]


def test_best_share_caps_what_the_confirmations_cost_while_training(tmp_path):
    """While training, the confirmations (one-step episodes here) never cost more than
    run.best_share of the trained env steps; with 0 they wait for the stop, which still
    keeps a policy."""
    import es

    for share in (0.0, 0.2):
        run = es.train(REPO / "configs/pendulum.toml",
                       OVERRIDES | {"run.generations": 30, "run.best_share": share},
                       run_dir=tmp_path / f"share{share}", quiet=True)
        spent = np.cumsum([row["confirm_steps"] for row in run.history])
        trained = np.array([row["timesteps"] for row in run.history])
        assert np.all(spent <= share * trained)
        assert (spent[-1] > 0) == (share > 0)
        assert run.best is not None and run.best_return is not None
        assert run.ended_by == "run.generations = 30"


def test_the_last_line_says_what_the_stops_confirmations_played(tmp_path):
    """Exact evaluations, judged by the mean: the stop confirms the best waiting nomination in
    run.best_episodes episodes, it holds, and nothing else is played."""
    done = train(tmp_path / "run", "--set", "run.generations=6", "--set", "run.best_share=0",
                 "--set", "env.kwargs.luck=0", "--set", "run.best_episodes=20")
    assert re.search(r"kept policy_best.npz .*, 20 episodes in [\d.]+ s confirming at the "
                     r"stop;", done.stdout), done.stdout


def test_each_stop_keeps_what_its_confirmations_played_in_stops_csv(tmp_path):
    """The stop's confirmations come after the last progress row: ``stops.csv`` keeps them,
    a row per stop, a resumed run's stop added to the first one's."""
    run_dir = tmp_path / "run"
    train(run_dir, "--set", "run.generations=6", "--set", "run.best_share=0",
          "--set", "env.kwargs.luck=0", "--set", "run.best_episodes=20")
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=8",
                       "--quiet"], extra_env=LUCKY)
    assert resumed.returncode == 0, resumed.stderr
    with (run_dir / "stops.csv").open() as handle:
        first, second = list(csv.DictReader(handle))
    assert (first["generation"], first["ended_by"]) == ("6", "run.generations = 6")
    assert int(first["confirm_episodes"]) == 20 and float(first["confirm_s"]) > 0
    assert (second["generation"], second["ended_by"]) == ("8", "run.generations = 8")
    assert int(second["timesteps"]) > int(first["timesteps"])
    # What es-train's last line says the resumed stop played.
    assert re.search(rf", {second['confirm_episodes']} episodes in [\d.]+ s confirming at "
                     r"the stop;", resumed.stdout), resumed.stdout


def folder_bytes(run_dir) -> dict[str, bytes]:
    return {str(path.relative_to(run_dir)): path.read_bytes()
            for path in sorted(run_dir.rglob("*")) if path.is_file() and path.name != "es.lock"}


@pytest.mark.parametrize("ranks", [None, 2])
def test_a_run_resumed_after_its_end_plays_nothing_and_adds_no_stop(tmp_path, ranks):
    """A requeued sweep resumes its finished runs too: each replayed its stop's race (the
    same episodes again, on HalfCheetah seconds each) and added a second stop row, whose
    seconds es-bench suite counts. Now nothing is played or written, and the last line is
    the first session's; another run.target_score (which the race reads) replays it."""
    run_dir = tmp_path / "run"
    first = train(run_dir, "--set", "run.generations=6", "--set", "run.best_share=0",
                  "--set", "run.best_episodes=20", ranks=ranks)
    before = folder_bytes(run_dir)
    with (run_dir / "stops.csv").open() as handle:
        (stop,) = list(csv.DictReader(handle))
    assert int(stop["kept_generation"]) == load_policy(run_dir / "policy_best.npz").generation
    assert float(stop["kept_return"]) == pytest.approx(final_kept(first), abs=0.005)
    again = run_cli(["es-train", "--resume", str(run_dir)], ranks=ranks, extra_env=LUCKY)
    assert again.returncode == 0, again.stderr
    assert ("ended already at generation 6 (run.generations = 6), its kept policy confirmed "
            "then: nothing to train or confirm") in again.stderr + again.stdout
    assert "confirming" not in again.stderr + again.stdout
    assert folder_bytes(run_dir) == before
    assert again.stdout.splitlines()[-1] == first.stdout.splitlines()[-1].replace(
        re.search(r", \d+ episodes in [\d.]+ s confirming at the stop", first.stdout).group(0),
        "")
    # A smaller budget than the run spent: ended already as well, under that budget's name.
    smaller = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=4"],
                      ranks=ranks, extra_env=LUCKY)
    assert smaller.returncode == 0, smaller.stderr
    assert ("ended already at generation 6 (run.generations = 4), its kept policy confirmed "
            "then: nothing to train or confirm") in smaller.stderr + smaller.stdout
    assert folder_bytes(run_dir) == before
    # The race reads run.target_score: with another, the stop is played again.
    other = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.target_score=1e9",
                     "--quiet"], ranks=ranks, extra_env=LUCKY)
    assert other.returncode == 0, other.stderr
    assert "confirming at the stop" in other.stdout
    assert len(read_stops(run_dir)) == 2


def test_a_stops_csv_without_the_kept_columns_gains_them(tmp_path):
    """A run folder from before stops.csv kept the kept policy: its resumed stop is played
    again (nothing says what it kept), and the file gains the columns, the old rows' cells
    empty."""
    run_dir = tmp_path / "run"
    train(run_dir, "--set", "run.generations=3", "--set", "run.best_episodes=20")
    path = run_dir / "stops.csv"
    (old,) = read_stops(run_dir)
    old_columns = ["generation", "timesteps", "ended_by", "confirm_episodes", "confirm_s"]
    path.write_text(",".join(old_columns) + "\n" + ",".join(old[c] for c in old_columns) + "\n")
    again = run_cli(["es-train", "--resume", str(run_dir), "--quiet"], extra_env=LUCKY)
    assert again.returncode == 0, again.stderr
    assert "confirming at the stop" in again.stdout
    earlier, replayed = read_stops(run_dir)
    assert earlier == {**{c: old[c] for c in old_columns}, "kept_return": "",
                       "kept_generation": ""}
    del replayed["confirm_s"], old["confirm_s"]
    assert replayed == old  # the same race, decided the same


def test_a_later_better_nomination_is_kept_although_earlier_ones_spent_the_share(tmp_path):
    """The starvation case of a capped share, without luck: every evaluation is exact, so
    the kept policy must be the best-evaluated one. Improving evaluations nominate at almost
    every generation and confirmation rounds of earlier ones spend the share; the best,
    later ones go ahead of them in the pool, and the stop confirms them."""
    import es

    run = es.train(REPO / "configs/pendulum.toml",
                   OVERRIDES | {"env.kwargs": {"luck": 0.0}, "run.generations": 40,
                                "run.best_share": 0.1, "run.best_episodes": 20},
                   run_dir=tmp_path / "exact", quiet=True)
    evals = np.array([row["eval_return"] for row in run.history])
    best = int(np.flatnonzero(evals == evals.max())[-1]) + 1  # generations count from 1
    spent = [row["confirm_steps"] for row in run.history]
    assert sum(spent) > 0, "no confirmation round while training: the share was never spent"
    kept_during = [row["best_return"] for row in run.history if row["best_return"] is not None]
    assert not kept_during or kept_during[-1] < evals.max()  # the best came later
    assert run.best.generation == best
    assert run.best_return == pytest.approx(evals.max(), abs=1e-6)


def test_best_episodes_zero_keeps_no_best_policy(tmp_path):
    run_dir = tmp_path / "none"
    train(run_dir, "--set", "run.generations=3", "--set", "run.best_episodes=0")
    assert not (run_dir / "policy_best.npz").exists()
    assert kept_scores(run_dir) == [None, None, None]
    missing = run_cli(["es-eval", str(run_dir), "--policy", "best"], extra_env=LUCKY)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"es-eval: error: run folder {str(run_dir)!r}: no policy_best.npz in it (the run keeps "
        "none: run.best_episodes = 0; play --policy final)"]
    # A run that keeps one but has not yet: it was blamed on run.best_episodes = 0 too.
    (run_dir / "config.toml").write_text((run_dir / "config.toml").read_text().replace(
        "best_episodes = 0", "best_episodes = 20"))
    not_yet = run_cli(["es-eval", str(run_dir), "--policy", "best"], extra_env=LUCKY)
    assert not_yet.returncode == 2 and "(none kept yet: a nomination is kept once it holds its " \
        "confirmation episodes" in not_yet.stderr, not_yet.stderr


def test_best_from_lets_only_later_evaluations_nominate(tmp_path):
    """``run.best_from``: the evaluations before it nominate nothing, whatever they score;
    the kept policy is of that generation or later."""
    early, late = tmp_path / "early", tmp_path / "late"
    train(early, "--set", "run.generations=8")
    train(late, "--set", "run.generations=8", "--set", "run.best_from=7")
    assert load_policy(early / "policy_best.npz").generation < 7  # else the test shows nothing
    assert load_policy(late / "policy_best.npz").generation >= 7
    assert all(score is None for score in kept_scores(late)[:6])


def kept_generation_before(rows: list[dict]) -> int:
    """The generation whose confirmation set the last row's kept score (luck = 0: the
    evaluation that scored it)."""
    score = rows[-1]["best_return"]
    return next(int(row["generation"]) for row in rows if row["eval_return"] == score)


def test_best_by_worst_keeps_the_policy_by_its_worst_episode(tmp_path):
    run_dir = tmp_path / "worst"
    done = train(run_dir, "--set", "run.generations=12", "--set", "run.best_by=worst")
    replayed = replay_confirmation(run_dir)
    assert replayed.min() == pytest.approx(final_kept(done), abs=0.01)


@pytest.mark.parametrize("record", [0, 1])
def test_a_run_stops_once_its_kept_policy_reaches_run_target_score(tmp_path, record):
    """Exact evaluations, no share for confirmations: a nomination that reaches the target is
    confirmed beside training anyway, and the run ends there, its rows those of the run
    without a target, on any rank count. At the stop, past the target, the run's last
    policy replaces the kept one if it holds the target too (the first record's run: its
    last evaluation is above the target), else the stop's race decides (the second's)."""
    exact = ["--set", "env.kwargs.luck=0", "--set", "run.best_share=0", "--set",
             "run.best_episodes=20"]
    free = tmp_path / "free"
    train(free, *exact, "--set", "run.generations=30")
    evals = [float(row["eval_return"]) for row in read_progress(free)]
    # Records a few generations in: the target, reached there first.
    first = [g for g in range(4, len(evals)) if evals[g - 1] > max(evals[:g - 1])][record]
    # Generations count from 1; a hair below the record, which progress.csv rounds.
    target = evals[first - 1] - 1e-6
    for ranks in (None, 2, 3):
        run_dir = tmp_path / f"target{ranks}"
        done = train(run_dir, *exact, "--set", "run.generations=30",
                     "--set", f"run.target_score={target!r}", ranks=ranks, quiet=False)
        rows = read_progress(run_dir)
        # It ends at the first generation whose kept score reaches the target: nominated
        # when its evaluation is played (beside the next generation), confirmed in two rounds
        # of 10 beside the two after, though a better nomination came in between (it goes
        # to the stop's race).
        kept = [float(row["best_return"]) if row["best_return"] else None for row in rows]
        assert kept[-1] is not None and kept[-1] >= target
        assert all(score is None or score < target for score in kept[:-1])
        assert len(rows) == first + 3, (len(rows), first)
        assert max(evals[:len(rows)]) > target  # the better nomination that came in between
        assert [float(row["eval_return"]) for row in rows] == evals[:len(rows)]
        assert sum(int(row["confirm_steps"]) for row in rows) == 20
        assert final_kept(done) >= target
        last = len(rows)
        holds = evals[last - 1] >= target
        assert holds == (record == 0)  # both ways, on these seeds
        best = last if holds else evals.index(max(evals[:len(rows)])) + 1
        assert load_policy(run_dir / "policy_best.npz").generation == best
        # The last policy kept is in the state too: a resume with another target goes on
        # from it (a race's winner waits in the checkpoint's pool instead).
        state = load_latest_checkpoint(run_dir / "checkpoints")[0]
        assert state.best_generation == (last if holds else kept_generation_before(rows))
        # Judged by the mean (the default), all 20 of its episodes are played.
        assert f"the last policy (generation {last}) {'holds' if holds else 'does not hold'} " \
            f"run.target_score = {target:g}: mean of 20 confirmation episodes " \
            f"{evals[last - 1]:.2f}" in done.stdout + done.stderr
        with (run_dir / "stops.csv").open() as handle:
            stop = list(csv.DictReader(handle))[-1]
        ended_by = f"run.target_score = {target:g}"
        assert stop["ended_by"] == ended_by
        assert int(stop["confirm_episodes"]) >= 20
    if not holds:  # judged by the worst episode, its first round below the target ends it
        done = train(tmp_path / "worst", *exact, "--set", "run.generations=30", "--set",
                     f"run.target_score={target!r}", "--set", "run.best_by=worst", quiet=False)
        assert f"the last policy (generation {last}) does not hold run.target_score = " \
            f"{target:g}: worst of 10 confirmation episodes" in done.stdout + done.stderr
        assert load_policy(tmp_path / "worst" / "policy_best.npz").generation == best
    # Resumed as it is, it has ended: a larger budget would not go on, a higher target would.
    ended = run_cli(["es-train", "--resume", str(tmp_path / "target3"), "--set",
                     "run.generations=60"], extra_env=LUCKY)
    assert ended.returncode == 0, ended.stderr
    assert f"({ended_by}), its kept policy confirmed then: nothing to train or confirm (a " \
        "higher run.target_score goes on)" in ended.stderr + ended.stdout
    # A stop resumed decides the same (played again: its stops.csv gone, nothing says what
    # it kept).
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "targetNone", resumed)
    (resumed / "stops.csv").unlink()
    again = run_cli(["es-train", "--resume", str(resumed)], extra_env=LUCKY)
    assert again.returncode == 0, again.stderr
    assert np.array_equal(load_params(resumed), load_params(tmp_path / "targetNone"))
    assert load_policy(resumed / "policy_best.npz").generation == best
    assert np.array_equal(load_policy(resumed / "policy_best.npz").params,
                          load_policy(tmp_path / "target3" / "policy_best.npz").params)
    import es  # from Python: what ended the run is in what es.train returns

    run = es.train(REPO / "configs/pendulum.toml",
                   OVERRIDES | {"env.kwargs": {"luck": 0.0}, "run.best_share": 0,
                                "run.best_episodes": 20, "run.generations": 30,
                                "run.target_score": target},
                   run_dir=tmp_path / "python", quiet=True)
    assert run.ended_by == f"run.target_score = {target:g}"
    assert len(run.history) == first + 3 and run.best_return >= target
    assert run.best.generation == best


def test_run_target_score_needs_a_kept_policy(tmp_path):
    done = run_cli(["es-train", *BASE, "--run-dir", str(tmp_path / "run"), "--set",
                    "run.target_score=5", "--set", "run.best_episodes=0"], extra_env=LUCKY)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "run.target_score = 5 needs a kept policy: run.best_episodes = 0 keeps none (set it "
        "to 1 or more)")


def test_a_run_ended_before_run_best_from_says_why_it_kept_no_policy(tmp_path):
    """halfcheetah_ars.toml (run.best_from = 106) under a small budget ended without a
    policy_best.npz, and its last line did not say why."""
    done = train(tmp_path / "run", "--set", "run.generations=3", "--set", "run.best_from=10")
    assert ", no policy_best.npz: it is nominated from generation 10 on (run.best_from); " \
        "run folder" in done.stdout.splitlines()[-1]
    assert not (tmp_path / "run" / "policy_best.npz").exists()
