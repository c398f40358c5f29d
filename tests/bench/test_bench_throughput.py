"""scripts/bench_throughput.py --suite: each suite config trained as the suite runs it, then
stepped bare replaying the episodes it played and with its final policy; one row per config with
the rates and the shares of the run's wall time that evaluations and waits took."""

import csv
import importlib
import subprocess
import sys

import numpy as np
import pytest
from conftest import BIN, REPO, run_group

from es.config import load_config
from es.parallel.comm import LocalComm
from es.rl.checkpoint import read_checkpoint
from es.rl.rollout import run_episode
from es.rl.trainer import Trainer

SUITE = """
[tasks.cartpole]
thresholds = [475]
budget_s = 4
strategies.openai = "configs/cartpole.toml"
strategies.snes = { config = "configs/cartpole.toml", set = ["es.strategy=snes"] }

[tasks.cartpole_rare]
thresholds = [475]
budget_s = 4
strategies.snes = { config = "configs/cartpole.toml", set = [
    "es.strategy=snes", "run.eval_every=1000", "run.generations=100000", "run.max_seconds=1"] }
"""


def test_suite_mode_writes_one_row_per_config_with_rates_and_shares(tmp_path):
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    done = run_group([sys.executable, "scripts/bench_throughput.py", "--suite", str(suite),
                           "--tasks", "cartpole", "--strategies", "snes", "--budget-s", "1",
                           "--out", str(tmp_path / "out")], timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    with (tmp_path / "out" / "results.csv").open() as handle:
        (row,) = list(csv.DictReader(handle))  # --strategies left openai out
    assert (row["task"], row["config"], row["ranks"]) == ("cartpole", "cartpole.toml", "2")
    assert 3.5 <= float(row["train_s"]) < 30  # the task's 4-s budget, start-up aside
    assert int(row["train_steps"]) > 0 and int(row["bare_final_steps"]) > 0
    for bare, ratio in (("bare_steps_per_s", "ratio"), ("bare_final_steps_per_s", "ratio_final")):
        expected = float(row["train_steps_per_s"]) / float(row[bare])
        assert abs(float(row[ratio]) - expected) < 1e-3 * expected
    assert 0 < float(row["eval_share"]) < 1 and 0 <= float(row["wait_share"]) < 1
    assert 0 < float(row["confirm_share"]) < 1  # cartpole nominates: the stop confirms


def test_schedules_train_back_to_back_against_one_bare_run(tmp_path):
    """Both schedules train the same steps (identical parameters) and share the bare rate."""
    done = run_group([sys.executable, "scripts/bench_throughput.py", "--config",
                           "configs/cartpole.toml", "--generations", "4", "--repeats", "1",
                           "--budget-s", "1", "--schedules", "static,dynamic", "--out",
                           str(tmp_path / "out")], timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    with (tmp_path / "out" / "results.csv").open() as handle:
        static, dynamic = list(csv.DictReader(handle))
    assert (static["schedule"], dynamic["schedule"]) == ("static", "dynamic")
    assert static["train_steps"] == dynamic["train_steps"]
    assert static["bare_steps_per_s"] == dynamic["bare_steps_per_s"]
    for row in (static, dynamic):
        ratio = float(row["train_steps_per_s"]) / float(row["bare_steps_per_s"])
        assert abs(float(row["ratio"]) - ratio) < 1e-3 * ratio
        assert 0 <= float(row["wait_share"]) < 1
    assert "static: median ratio" in done.stdout and "dynamic: median ratio" in done.stdout


def test_the_bare_reference_replays_the_episodes_the_run_played(tmp_path):
    """The bare reference replays what training played: the generations after the
    checkpoints nearest the middles of equal step segments, each member with its parameters
    (SNES's adapted step sizes, not a sigma from the config), reset seed, action noise and
    step cap, so the replayed returns are the run's own, generation for generation."""
    run_dir = tmp_path / "run"
    done = subprocess.run([str(BIN / "es-train"), "configs/pendulum.toml",
                           "--run-dir", str(run_dir), "--quiet", "--set", "run.generations=12",
                           "--set", "run.checkpoint_every=2", "--set", "run.keep_checkpoints=100",
                           "--set", "policy.obs_norm=true", "--set", "es.strategy=snes",
                           "--set", "policy.action_noise=0.1", "--set", "es.train_steps=150"],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        bench = importlib.import_module("bench_throughput")
    finally:
        sys.path.remove(str(REPO / "scripts"))
    # 6 checkpoints, 150-step training episodes: 9,600 steps each, generations 2..12.
    chosen = [path.name for path in bench.played_checkpoints(run_dir, 5)]
    assert chosen == ["ckpt-00000002.json", "ckpt-00000004.json", "ckpt-00000006.json",
                      "ckpt-00000008.json", "ckpt-00000010.json"]
    # The final policy's reference, as training plays its members (it stepped uncapped
    # 1,000-step episodes of the mean plus the config's sigma, without action noise):
    assert [path.name for path in bench.played_checkpoints(run_dir, 1, last=True)] == [
        "ckpt-00000012.json"]
    with (run_dir / "progress.csv").open() as handle:
        rows = {int(row["generation"]): row for row in csv.DictReader(handle)}
    with Trainer(load_config(run_dir / "config.toml"), LocalComm(), None) as trainer:
        for checkpoint, generation in (("ckpt-00000002.json", 3), ("ckpt-00000010.json", 11)):
            state, _ = read_checkpoint(run_dir / "checkpoints" / checkpoint)
            plays, cap = bench.replayed_plays(trainer, state)
            assert cap == 150 and len(plays) == 64
            returns = [run_episode(trainer.env, trainer.member_act(params, trainer.norm, seed),
                                   seed, max_steps=cap).total_return for params, seed in plays]
            row = rows[generation]
            assert float(row["return_mean"]) == pytest.approx(np.mean(returns), rel=1e-5)
            assert float(row["return_min"]) == pytest.approx(min(returns), rel=1e-5)
            assert float(row["return_max"]) == pytest.approx(max(returns), rel=1e-5)


def test_interleave_alternates_each_generation_with_a_replay_of_its_episodes(tmp_path):
    """--interleave: every generation is followed by a bare replay of the very episodes the
    ranks played in it (the worker refuses a replay whose steps differ from training's), and
    the row's ratio is the replays' time over the training's. The trainer's own clock runs
    on through the replays, so the config's time budget (1 s) is off: spent, it would
    evaluate every generation; with ``run.eval_every = 1000`` none is evaluated."""
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    done = run_group([sys.executable, "scripts/bench_throughput.py", "--suite", str(suite),
                           "--tasks", "cartpole_rare", "--interleave", "--max-train-s", "3",
                           "--out", str(tmp_path / "out")], timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    with (tmp_path / "out" / "results.csv").open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["task"], row["config"], row["ranks"]) == ("cartpole_rare", "cartpole.toml", "2")
    assert int(row["generations"]) >= 2 and int(row["train_steps"]) > 0
    assert 3 <= float(row["train_s"]) < 30
    ratio = float(row["train_steps_per_s"]) / float(row["bare_steps_per_s"])
    assert abs(float(row["ratio"]) - ratio) < 1e-3 * ratio
    assert float(row["ratio_q1"]) <= float(row["ratio_median"]) <= float(row["ratio_q3"])
    assert float(row["eval_share"]) == 0 and float(row["confirm_share"]) == 0
    assert 0 <= float(row["wait_share"]) < 1
    assert float(row["ratio_synced"]) >= float(row["ratio"])  # waiting never speeds it up


@pytest.mark.parametrize("flags, message", [
    (["--tasks", "walker"], "--tasks 'walker': 'walker' is not in the suite"),
    (["--strategies", "cma"], "--strategies 'cma': task 'cartpole' has configs for openai, snes"),
])
def test_a_bad_task_or_strategy_is_one_line(tmp_path, flags, message):
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    done = run_group([sys.executable, "scripts/bench_throughput.py", "--suite", str(suite),
                           *flags], timeout=60)
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr


def test_interleave_needs_a_suite():
    done = run_group([sys.executable, "scripts/bench_throughput.py", "--interleave"], timeout=60)
    assert done.returncode == 2 and done.stderr == (
        "bench_throughput.py: error: --interleave: with --suite FILE only (without it, --config "
        "trains for --generations) (see bench_throughput.py --help)\n")
