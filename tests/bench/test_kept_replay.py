"""scripts/kept_replay.py: the stop's race of another kept-policy rule, replayed on a
bench_kept run, keeps what a run trained with that rule keeps."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

BIN = Path(sys.executable).parent
TRAINING = ["--set", "es.population=4", "--set", "run.best_by=worst"]  # Pendulum, 20 generations


def run(command, cwd=REPO):
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Every evaluation of a run (every 2 generations, 3 episodes) nominated, none confirmed."""
    out = tmp_path_factory.mktemp("kept_replay") / "study"
    done = run([sys.executable, "scripts/bench_kept.py", "configs/pendulum.toml",
                "--max-timesteps", "16000", "--episodes", "1", "--set", "run.eval_every=2",
                "--set", "run.eval_episodes=3", *TRAINING, "--out", str(out)])
    assert done.returncode == 0, done.stderr[-2000:]
    return out / "seed0"


def replay(study, tmp_path, *flags):
    done = run([sys.executable, "scripts/kept_replay.py", str(study), *flags, "--judged", "2",
                "--out", str(tmp_path / "replay")])
    assert done.returncode == 0, done.stderr[-2000:]
    with (tmp_path / "replay" / "results.csv").open() as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("every, eval_episodes, best_episodes, pool, best_from",
                         [(4, 2, 3, 3, 0), (2, 3, 5, 16, 11), (6, 1, 4, 2, 0)])
def test_the_replay_keeps_what_a_run_of_that_rule_keeps(study, tmp_path, every, eval_episodes,
                                                        best_episodes, pool, best_from):
    (row,) = replay(study, tmp_path, "--eval-every", str(every),
                    "--eval-episode-counts", str(eval_episodes),
                    "--best-episode-counts", str(best_episodes),
                    "--pool", str(pool), "--best-from", str(best_from))  # 0: the runs' own
    assert int(row["best_from"]) == best_from
    trained = tmp_path / "trained"
    done = run([str(BIN / "es-train"), "configs/pendulum.toml", "--run-dir", str(trained),
                "--force", "--quiet", *TRAINING, "--set", "run.max_timesteps=16000",
                "--set", "run.generations=1000", "--set", "run.best_share=0",
                "--set", f"run.eval_every={every}", "--set", f"run.eval_episodes={eval_episodes}",
                "--set", f"run.best_episodes={best_episodes}", "--set", f"run.best_pool={pool}",
                "--set", f"run.best_from={best_from}"])
    assert done.returncode == 0, done.stderr[-2000:]
    kept = int(np.load(trained / "policy_best.npz")["generation"])
    with (trained / "stops.csv").open() as handle:
        (stop,) = list(csv.DictReader(handle))
    assert int(row["kept_generation"]) == kept >= best_from
    assert int(row["race_episodes"]) == int(stop["confirm_episodes"]) > 0
    assert int(row["train_steps"]) == int(stop["timesteps"])
    # the suite's judging episodes: what es-eval plays from seed 12345
    scored = run([str(BIN / "es-eval"), str(trained), "--policy", "best", "--episodes", "2",
                  "--seed", "12345", "--json", str(tmp_path / "kept.json")])
    assert scored.returncode == 0, scored.stderr
    returns = json.loads((tmp_path / "kept.json").read_text())["returns"]
    assert float(row["judged_mean"]) == pytest.approx(np.mean(returns), rel=1e-12)
    assert float(row["judged_worst"]) == min(returns)


def test_rules_differ_in_what_they_cost(study, tmp_path):
    rows = replay(study, tmp_path, "--eval-every", "2,4", "--eval-episode-counts", "3,1",
                  "--best-episode-counts", "3")
    cost = {(int(r["every"]), int(r["eval_episodes"])): r for r in rows}
    assert list(cost) == [(2, 3), (2, 1), (4, 3), (4, 1)]
    # half the evaluations, a third of their episodes: Pendulum's episodes all last 200 steps
    assert [int(cost[key]["eval_steps"]) for key in cost] == [6000, 2000, 3000, 1000]
    for r in rows:
        spent = int(r["eval_steps"]) + int(r["race_steps"])
        assert float(r["cost_share"]) == pytest.approx(spent / (spent + int(r["train_steps"])))
        assert int(r["race_steps"]) == 200 * int(r["race_episodes"])


def refusal(args, tmp_path):
    done = run([sys.executable, "scripts/kept_replay.py", *args, "--out", str(tmp_path / "o")])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert not (tmp_path / "o").exists()
    return line


def test_a_rule_the_run_cannot_answer_for_is_refused_in_one_line(study, tmp_path):
    line = refusal([str(study), "--eval-every", "3", "--best-episode-counts", "3"], tmp_path)
    assert "--eval-every 3" in line and "multiples of that" in line
    line = refusal([str(study), "--eval-every", "2", "--eval-episode-counts", "4",
                    "--best-episode-counts", "3"], tmp_path)
    assert "--eval-episode-counts 4" in line and "at most that" in line


def test_nominations_from_before_the_runs_own_best_from_are_refused(tmp_path):
    """A run that nominated from generation 6 on holds nothing to replay before it."""
    later = tmp_path / "later"
    done = run([sys.executable, "scripts/bench_kept.py", "configs/pendulum.toml",
                "--max-timesteps", "8000", "--episodes", "1", "--set", "run.eval_every=2",
                "--set", "run.best_from=6", *TRAINING, "--out", str(later)])
    assert done.returncode == 0, done.stderr[-2000:]
    line = refusal([str(later / "seed0"), "--eval-every", "2", "--best-episode-counts", "3",
                    "--best-from", "2"], tmp_path)
    assert "--best-from 2" in line and "nominated from generation 6" in line


def test_a_run_that_is_not_a_full_study_is_refused_in_one_line(study, tmp_path):
    """Confirmed while training, or a pool that dropped evaluations: no exact replay."""
    for overrides, named in ((["run.best_share=0.01"], "run.best_share = 0.01"),
                             (["run.best_share=0", "run.best_pool=3", "run.eval_every=1"],
                              "run.best_pool = 3")):
        trained = tmp_path / named.split()[0]
        done = run([str(BIN / "es-train"), "configs/pendulum.toml", "--run-dir", str(trained),
                    "--force", "--quiet", *TRAINING, "--set", "run.max_timesteps=8000",
                    *[part for item in overrides for part in ("--set", item)]])
        assert done.returncode == 0, done.stderr[-2000:]
        line = refusal([str(study), str(trained), "--eval-every", "2",
                        "--best-episode-counts", "3"], tmp_path)
        assert named in line and str(trained) in line
