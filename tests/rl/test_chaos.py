"""scripts/chaos.py, short: kill a random rank at random moments (one early in start-up, one
before the first checkpoint), resume on 1-3 ranks, and end bit-identical to an uninterrupted
run."""

import csv
import subprocess
import sys

from conftest import REPO


def test_chaos_cycles_survive_and_end_bit_identical(tmp_path):
    table = tmp_path / "chaos" / "results.csv"
    done = subprocess.run(
        [sys.executable, "scripts/chaos.py", "--config", "configs/pendulum.toml", "--set",
         "es.population=32", "--set", "run.eval_every=2", "--cycles", "4", "--generations",
         "30", "--chaos-seed", "1", "--forced", "pre-config,pre-checkpoint", "--hang-s", "20",
         "--timeout-s", "120", "--out", str(tmp_path / "chaos")],
        capture_output=True, text=True, timeout=240, cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cycles survived: 4/4" in done.stdout
    assert "parameters bit-identical to the uninterrupted run: yes" in done.stdout
    with table.open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["outcome"] for r in rows] == ["survived"] * 4
    phases = [r["kill_phase"] for r in rows]
    assert "before checkpoint" in phases, phases
    # A kill before the first checkpoint means the next launch starts over: the original
    # command (no config.toml yet) or a resume that restarts from generation 0.
    first_checkpoint = phases.index("before checkpoint")
    assert rows[first_checkpoint + 1]["launch"] in ("fresh", "restart")
