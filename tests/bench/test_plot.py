"""es-plot: grouping seeds of one configuration and the mean ± std arithmetic."""

import numpy as np
import pytest

from es.bench.curves import group_runs, mean_and_std
from es.cli.plot import main
from es.rl.metrics import COLUMNS


def fake_run(folder, name, seed, evals):
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        f'[run]\nname = "{name}"\nseed = {seed}\n\n[env]\nid = "CartPole-v1"\n')
    rows = [",".join(COLUMNS)]
    for generation, value in enumerate(evals, start=1):
        row = dict.fromkeys(COLUMNS, "0")
        row |= {"generation": str(generation), "timesteps": str(100 * generation),
                "eval_return": str(value), "eval_std": "1.0"}
        rows.append(",".join(row[c] for c in COLUMNS))
    (folder / "progress.csv").write_text("\n".join(rows) + "\n")
    return folder


def test_seeds_are_grouped_and_averaged(tmp_path):
    runs = [fake_run(tmp_path / f"s{seed}", "cartpole", seed, [10.0 * seed, 20.0 * seed])
            for seed in (1, 3)]
    other = fake_run(tmp_path / "other", "tuned", 0, [5.0, 6.0])
    groups = group_runs([*runs, other])
    assert sorted(groups) == ["CartPole-v1 · cartpole", "CartPole-v1 · tuned"]
    assert len(groups["CartPole-v1 · cartpole"]) == 2
    grid, mean, std = mean_and_std([(np.array([100.0, 200.0]), np.array([10.0, 20.0]), None),
                                    (np.array([100.0, 200.0]), np.array([30.0, 60.0]), None)])
    assert grid[0] == 100.0 and grid[-1] == 200.0
    assert mean[0] == pytest.approx(20.0) and mean[-1] == pytest.approx(40.0)
    assert std[0] == pytest.approx(10.0) and std[-1] == pytest.approx(20.0)
    log_grid, _, _ = mean_and_std([(np.array([1.0, 100.0]), np.array([0.0, 1.0]), None)] * 2,
                                  log_grid=True)
    assert log_grid[0] == 1.0 and log_grid[-1] == pytest.approx(100.0)
    assert log_grid[100] == pytest.approx(10.0, rel=0.03)  # halfway on a log scale


def test_es_plot_writes_an_image_and_rejects_bad_input(tmp_path, capsys):
    runs = [fake_run(tmp_path / f"s{seed}", "cartpole", seed, [1.0, 2.0, 3.0])
            for seed in (0, 1)]
    out = tmp_path / "curve.png"
    assert main([*map(str, runs), "--figure", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    assert main([*map(str, runs), "-o", str(tmp_path / "log.svg"), "--log-x"]) == 0
    assert (tmp_path / "log.svg").read_text().lstrip().startswith("<?xml")
    assert main([str(runs[0]), "-o", str(tmp_path / "curve.jpg")]) == 2
    assert main([str(tmp_path), "-o", str(out)]) == 2
    assert "not a run folder" in capsys.readouterr().err
