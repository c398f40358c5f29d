"""Sweeps in one job: --seeds and several configs split the ranks into groups, one run each."""

import numpy as np
import pytest
from conftest import load_params, read_progress, run_cli

from es.cli import parse_seeds

BASE = ["--set", "run.generations=4", "--set", "es.population=8", "--quiet"]


def test_seed_specs():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("1-2,7") == [1, 2, 7]
    for bad in ("", "a", "3-1", "1,1", "-2"):
        with pytest.raises(ValueError, match="--seeds"):
            parse_seeds(bad)


def test_a_sweep_on_four_ranks_equals_separate_runs(tmp_path):
    done = run_cli(["es-train", "configs/cartpole.toml", "--seeds", "0-1", "--run-dir",
                    str(tmp_path / "sweep"), *BASE], ranks=4)
    assert done.returncode == 0, done.stderr
    folders = sorted(p.name for p in (tmp_path / "sweep").iterdir())
    assert folders == ["CartPole-v1__cartpole__0", "CartPole-v1__cartpole__1"]
    for seed in (0, 1):
        alone = tmp_path / f"alone{seed}"
        single = run_cli(["es-train", "configs/cartpole.toml", "--set", f"run.seed={seed}",
                          "--run-dir", str(alone), *BASE])
        assert single.returncode == 0, single.stderr
        swept = tmp_path / "sweep" / f"CartPole-v1__cartpole__{seed}"
        assert np.array_equal(load_params(swept), load_params(alone))
        assert len(read_progress(swept)) == 4
    assert not np.array_equal(load_params(tmp_path / "alone0"), load_params(tmp_path / "alone1"))


def test_more_runs_than_ranks_run_in_turn_and_configs_combine_with_seeds(tmp_path):
    done = run_cli(["es-train", "configs/cartpole.toml", "configs/pendulum.toml", "--seeds",
                    "3,4", "--run-dir", str(tmp_path), *BASE], ranks=3)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "CartPole-v1__cartpole__3", "CartPole-v1__cartpole__4",
        "Pendulum-v1__pendulum__3", "Pendulum-v1__pendulum__4"]
    bad = run_cli(["es-train", "configs/cartpole.toml", "--seeds", "x"])
    assert bad.returncode == 2 and "--seeds 'x'" in bad.stderr
