"""scripts/run_costs.py: a run's evaluation, confirmation while training and stops' race as
shares of its running time, the suite's two shares split."""

import csv
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

PROGRESS = ["generation", "timesteps", "time_s", "eval_ranks_s", "confirm_ranks_s", "wait_s"]
# 10 s of training over three generations: 2 s evaluating, 1 s confirming, 0.5 s waiting.
ROWS = [[1, 1000, 3.0, 1.0, 0.0, 0.1], [2, 2000, 6.0, 0.0, 1.0, 0.2],
        [3, 3000, 10.0, 1.0, 0.0, 0.2]]
# Two stops (a signal, then the budget after a resume): 30 episodes in 2 s, 10 in 0.5 s.
STOPS = [[2, 2000, "SIGTERM", 30, 2.0], [3, 3000, "run.max_timesteps = 3000", 10, 0.5]]


def write_run(folder, kept: bool) -> None:
    folder.mkdir()
    shutil.copy(REPO / "configs/cartpole.toml", folder / "config.toml")
    with (folder / "progress.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([PROGRESS, *ROWS])
    with (folder / "stops.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows(
            [["generation", "timesteps", "ended_by", "confirm_episodes", "confirm_s"], *STOPS])
    if kept:
        np.savez(folder / "policy_best.npz", params=np.zeros(3), generation=np.array(2))


def test_shares_split_what_the_suite_sums(tmp_path):
    from es.bench.suite import cost_columns, read_progress, stops_confirm_s

    write_run(tmp_path / "kept", kept=True)
    write_run(tmp_path / "none", kept=False)
    done = subprocess.run([sys.executable, "scripts/run_costs.py", str(tmp_path / "kept"),
                           str(tmp_path / "none"), "--out", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with (tmp_path / "out" / "results.csv").open() as handle:
        kept, none = list(csv.DictReader(handle))
    ran = 10.0 + 2.5  # the stops' confirmations come after the last progress row
    assert float(kept["time_s"]) == ran and kept["steps"] == "3000"
    assert float(kept["eval_share"]) == pytest.approx(2 / ran)
    assert float(kept["confirm_share"]) == pytest.approx(1 / ran)
    assert kept["race_episodes"] == "40"
    assert float(kept["race_share"]) == pytest.approx(2.5 / ran)
    assert float(kept["total_share"]) == pytest.approx(5.5 / ran)
    assert float(kept["wait_share"]) == pytest.approx(0.5 / ran)
    assert kept["kept_generation"] == "2" and none["kept_generation"] == ""
    assert kept["seed"] == "0" and kept["run"] == "kept"
    # es-bench suite's confirm_share is the confirmations while training and the race.
    run = tmp_path / "kept"
    suite = cost_columns(read_progress(run), stops_confirm_s(run))
    assert suite["eval_share"] == pytest.approx(float(kept["eval_share"]))
    assert suite["confirm_share"] == pytest.approx(float(kept["confirm_share"])
                                                   + float(kept["race_share"]))


def test_a_folder_that_is_no_run_is_refused_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "scripts/run_costs.py", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"{tmp_path}: not a run folder (it needs config.toml and progress.csv)" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_run_killed_before_its_first_generation_is_refused_in_one_line(tmp_path):
    run = tmp_path / "run"
    write_run(run, kept=False)
    (run / "progress.csv").write_text(",".join(PROGRESS) + "\n")
    done = subprocess.run([sys.executable, "scripts/run_costs.py", str(run)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"{run}: no generation in its progress.csv yet" in done.stderr
    assert "Traceback" not in done.stderr
