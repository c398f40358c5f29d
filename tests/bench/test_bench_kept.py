"""scripts/bench_kept.py: every evaluation's mean policy of a run, played on fresh episodes."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

SCRIPT = [sys.executable, "scripts/bench_kept.py", "configs/pendulum.toml", "--max-timesteps",
          "4000", "--episodes", "4", "--set", "run.eval_every=2", "--set", "es.population=4"]


def read(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_one_row_per_evaluation_and_every_episode_in_returns_csv(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([*SCRIPT, "--out", str(out)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read(out / "results.csv")
    progress = read(out / "seed0" / "progress.csv")
    evaluated = [int(r["generation"]) for r in progress if r["eval_return"]]
    assert [int(r["generation"]) for r in rows] == evaluated  # every evaluation nominated
    episodes = read(out / "seed0" / "returns.csv")
    assert len(episodes) == 4 * len(rows)
    for row in rows:
        returns = [float(e["return"]) for e in episodes
                   if e["generation"] == row["generation"]]
        assert float(row["worst"]) == min(returns) and 0 <= int(row["falls"]) <= 4
    # every policy meets the same starts
    assert len({e["reset_seed"] for e in episodes}) == 4
    again = subprocess.run([*SCRIPT, "--out", str(out)], cwd=REPO, capture_output=True,
                           text=True, timeout=300)  # the finished run is reused: same table
    assert again.returncode == 0 and read(out / "results.csv") == rows
    # Pendulum's returns are negative: a fall is 20% of the median's size below it (0.8 x a
    # negative median counted every episode a fall).
    for row in rows:
        returns = [float(e["return"]) for e in episodes if e["generation"] == row["generation"]]
        median = float(row["median"])
        assert int(row["falls"]) == sum(r < median - 0.2 * abs(median) for r in returns) < 4
    # A finished run of another budget or --set was studied under this command's title.
    for changed in (["--max-timesteps", "2000"], ["--set", "es.sigma=0.3"]):
        other = subprocess.run([*SCRIPT, *changed, "--out", str(out)], cwd=REPO,
                               capture_output=True, text=True, timeout=300)
        assert (other.returncode, other.stdout) == (2, ""), other.stderr
        assert other.stderr == (f"bench_kept.py: error: {out / 'seed0'} holds a run of another "
                                "config, budget or --set (its config.toml): give another --out, "
                                "or remove the folder to train it again (see bench_kept.py "
                                "--help)\n")
    assert read(out / "results.csv") == rows


def test_judged_episodes_are_the_ones_the_suite_scores_on(tmp_path):
    """--judged N: each policy's mean and worst over es-eval's N episodes from the suite's
    seed; the last evaluation's policy is the final one, so es-eval scores it the same."""
    out = tmp_path / "out"
    done = subprocess.run([*SCRIPT, "--judged", "3", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read(out / "results.csv")
    scored = subprocess.run([str(Path(sys.executable).parent / "es-eval"), str(out / "seed0"),
                             "--episodes", "3", "--seed", "12345", "--json",
                             str(tmp_path / "final.json")], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert scored.returncode == 0, scored.stderr
    returns = json.loads((tmp_path / "final.json").read_text())["returns"]
    assert float(rows[-1]["judged_mean"]) == pytest.approx(sum(returns) / 3, rel=1e-12)
    assert float(rows[-1]["judged_worst"]) == min(returns)
    assert len({row["judged_mean"] for row in rows}) == len(rows)  # each policy its own


def test_a_run_that_dies_is_one_line_naming_it_and_its_exit_code(tmp_path):
    done = subprocess.run([*SCRIPT, "--set", "env.id=NoSuchEnv-v0", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    line, = done.stderr.strip().splitlines()
    assert "es-train configs/pendulum.toml (seed 0) exited with 2" in line
    assert "NoSuchEnv-v0" in line
