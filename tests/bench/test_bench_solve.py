"""scripts/bench_solve.py takes what it is given: --thresholds on a built-in target replace
the target's own (they were ignored without a word), and --only beside config files is
refused rather than dropped."""

import csv
import subprocess
import sys

from conftest import REPO


def solve(*args: str, out) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/bench_solve.py", *args, "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_thresholds_replace_a_built_in_targets_own(tmp_path):
    done = solve("--only", "cartpole", "--thresholds", "15,20", "--ranks", "1",
                 out=tmp_path / "out")
    assert done.returncode == 0, done.stderr[-2000:]
    with (tmp_path / "out/results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["config"], float(r["threshold"])) for r in rows] == [("cartpole", 15.0),
                                                                    ("cartpole", 20.0)]
    assert all(r["reached_at_steps"] for r in rows), rows
    # One line per run (it printed a Python dict), and no text in the number columns.
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("cartpole: ")]
    assert line.startswith("cartpole: 15 at ") and ", 20 at " in line, line
    # Long enough for a loaded CI machine to start Python and train a generation.
    done = solve("--only", "cartpole", "--thresholds", "1e9", "--ranks", "1",
                 "--set", "run.generations=100000", "--budget-s", "12", out=tmp_path / "never")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cartpole: 1e+09 not reached; best evaluation " in done.stdout
    with (tmp_path / "never/results.csv").open() as handle:
        (row,) = csv.DictReader(handle)
    assert (row["reached_at_s"], row["reached_at_steps"]) == ("", "")


def test_a_budget_that_ends_in_start_up_asks_for_a_longer_one(tmp_path):
    """SIGINT before es-train's handler kills it by the signal: still the budget's doing."""
    done = solve("--only", "cartpole", "--thresholds", "1e9", "--ranks", "1",
                 "--budget-s", "0.05", out=tmp_path / "out")
    assert done.returncode == 1
    assert done.stderr == (f"bench_solve.py: es-train {REPO / 'configs/cartpole.toml'}: the "
                           "budget of 0.05 s ended it before its first generation; give a "
                           "longer --budget-s\n"), done.stderr
    assert not (tmp_path / "out").exists()


def test_config_files_and_only_together_are_refused(tmp_path):
    done = solve("configs/cartpole.toml", "--only", "cartpole", "--thresholds", "20",
                 out=tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr == ("bench_solve.py: error: --only picks built-in targets: give config "
                           "files or --only, not both (see bench_solve.py --help)\n")
    assert not (tmp_path / "out").exists()
