"""scripts/policy_falls.py: a finished run's final and kept policy on the same fresh starts."""

import csv
import json
import subprocess
import sys

from conftest import REPO, tool

import es


def test_final_and_kept_policy_rows_agree_with_es_eval_on_the_same_starts(tmp_path):
    run_dir = tmp_path / "run"
    es.train("configs/pendulum.toml", {"run.generations": 4, "run.eval_every": 2,
                                       "run.best_episodes": 2, "es.population": 4},
             run_dir=run_dir)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "scripts/policy_falls.py", str(run_dir), "--episodes",
                           "5", "--workers", "2", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [row["policy"] for row in rows] == ["final", "kept"]
    for row in rows:
        # The same starts played by es-eval, one process: the same returns, in any order.
        which = "best" if row["policy"] == "kept" else "final"
        json_path = tmp_path / f"{which}.json"
        subprocess.run([tool("es-eval"), str(run_dir), "--policy", which,
                        "--episodes", "5", "--seed", "2000000000", "--json", str(json_path)],
                       cwd=REPO, check=True, capture_output=True, timeout=300)
        returns = json.loads(json_path.read_text())["returns"]
        assert row["episodes"] == "5" and float(row["worst"]) == min(returns)
        assert abs(float(row["mean"]) - sum(returns) / 5) < 1e-6
        median = sorted(returns)[2]
        # below the median by a fifth of its size (Pendulum's median is negative)
        assert int(row["falls"]) == sum(r < median - 0.2 * abs(median) for r in returns)
