"""scripts/soak.py: a peak belongs to a process, so a resumed run gives one row per process,
each judged from its own start, never a growth across two processes' peaks."""

import csv
import sys

from conftest import read_progress, run_cli, run_group


def test_a_resumed_run_gives_one_row_per_process(tmp_path):
    run_dir = tmp_path / "run"
    first = run_cli(["es-train", "configs/cartpole.toml", "--set", "run.generations=3",
                     "--quiet", "--run-dir", str(run_dir)])
    assert first.returncode == 0, first.stderr
    again = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=6",
                     "--quiet"])
    assert again.returncode == 0, again.stderr
    progress = read_progress(run_dir)
    assert [row["resumed_from"] for row in progress] == ["0"] * 3 + ["3"] * 3
    done = run_group([sys.executable, "scripts/soak.py", str(run_dir), "--warmup-s", "0",
                           "--out", str(tmp_path / "out")], timeout=60)
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out" / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["resumed_from"], r["warmup_generation"], r["end_generation"]) for r in rows] \
        == [("0", "1", "3"), ("3", "4", "6")]
    for row, own in zip(rows, (progress[:3], progress[3:]), strict=True):
        assert float(row["warmup_peak_mb"]) == float(own[0]["peak_rss_mb"])
        assert float(row["end_peak_mb"]) == float(own[-1]["peak_rss_mb"])
