"""Atari through the real CLI: pixel CNN + VBN training is bit-identical at any rank count,
every shipped config runs, and es-eval renders a video of the trained policy."""

from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, load_params, read_progress, run_cli

from es.config import apply_overrides, from_dict, read_toml
from es.parallel.comm import LocalComm
from es.rl.checkpoint import load_policy
from es.rl.cnn import vbn_statistics
from es.rl.trainer import Trainer

TINY_PONG = ["configs/pong.toml", "--set", "es.population=4", "--set", "run.generations=2",
             "--set", "env.max_episode_steps=25", "--set", "policy.vbn_batch=6",
             "--set", "run.eval_every=1", "--set", "run.eval_episodes=1",
             "--set", "es.noise_table_size=1000000"]


def test_pixel_cnn_training_is_bit_identical_on_one_and_two_ranks(tmp_path):
    saved = {}
    for ranks in (1, 2):
        run_dir = tmp_path / f"n{ranks}"
        done = run_cli(["es-train", *TINY_PONG, "--run-dir", str(run_dir), "--quiet"],
                       ranks=ranks)
        assert done.returncode == 0, done.stderr
        saved[ranks] = load_policy(run_dir / "policy.npz")
        assert [int(r["generation"]) for r in read_progress(run_dir)] == [1, 2]
    one, two = saved[1], saved[2]
    assert one.reference.shape == (6, 4, 84, 84) and one.reference.dtype == np.uint8
    assert np.array_equal(one.reference, two.reference)  # every rank collected the same batch
    assert np.array_equal(one.params, two.params)
    assert not np.array_equal(one.params, load_initial_params(tmp_path))  # it moved
    stats = [vbn_statistics(p.spec, p.params, p.reference) for p in (one, two)]
    for first, second in zip(stats[0].means + stats[0].variances,
                             stats[1].means + stats[1].variances, strict=True):
        assert np.array_equal(first, second)

    video = tmp_path / "pong.mp4"
    shown = run_cli(["es-eval", str(tmp_path / "n1"), "--episodes", "1", "--video", str(video),
                     "--video-steps", "10"])
    assert shown.returncode == 0, shown.stderr
    assert "wrote" in shown.stdout and video.stat().st_size > 1000
    baseline = run_cli(["es-eval", str(tmp_path / "n1"), "--episodes", "2", "--random"])
    assert baseline.returncode == 0 and "random policy: return" in baseline.stdout


def load_initial_params(tmp_path: Path) -> np.ndarray:
    data = apply_overrides(read_toml(REPO / "configs/pong.toml"), [
        "es.noise_table_size=1000000", "policy.vbn_batch=6", "env.max_episode_steps=25"])
    return Trainer(from_dict(data), LocalComm(), None).strategy.theta


def test_training_on_the_pixel_env_stays_parameters_only(tmp_path):
    """The reference batch costs one checksum row per rank at start-up, nothing per update."""
    run_dir = tmp_path / "run"
    done = run_cli(["es-train", *TINY_PONG, "--run-dir", str(run_dir), "--quiet"], ranks=2)
    assert done.returncode == 0, done.stderr
    for row in read_progress(run_dir):
        assert int(row["bytes_sent"]) < 1000
    assert load_params(run_dir).size > 600_000


SHIPPED = sorted(str(p.relative_to(REPO)) for p in (REPO / "configs").rglob("*.toml")
                 if p.parent.name not in ("baselines", "suites"))
# baselines: tests/baselines/test_baselines.py; suites (es-bench suite files):
# tests/bench/test_bench_suite.py


@pytest.mark.parametrize("path", SHIPPED)
def test_every_shipped_config_runs_one_tiny_generation(path):
    tiny = ["es.population=4", "es.noise_table_size=2000000", "env.max_episode_steps=20",
            "run.eval_episodes=1", "policy.vbn_batch=4", "ars.top=0"]  # all 2 directions
    config = from_dict(apply_overrides(read_toml(REPO / path), tiny))
    trainer = Trainer(config, LocalComm(), None)
    row = trainer._generation()
    assert row["generation"] == 1 and row["episodes"] == 4
    assert 4 <= row["timesteps"] <= 4 * 20
    assert np.isfinite(row["return_mean"])


def test_a_two_rank_atari_run_stopped_by_a_signal_exits_quietly(tmp_path):
    """Its ALE games were alive at interpreter exit (the run's objects in reference cycles),
    and nanobind printed "leaked" lines from every rank after the resume line."""
    import os
    import signal
    import subprocess
    import time

    from conftest import tool

    run_dir = tmp_path / "run"
    job = subprocess.Popen([tool("mpiexec"), "-n", "2", tool("es-train"), *TINY_PONG, "--set",
                            "run.generations=100000", "--run-dir", str(run_dir), "--quiet"],
                           cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True,
                           env={k: v for k, v in os.environ.items()
                                if k not in ("PMI_RANK", "PMI_SIZE", "ES_COMM")})
    deadline = time.monotonic() + 120
    while len(read_progress(run_dir) if (run_dir / "progress.csv").exists() else []) < 2:
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.2)
    os.killpg(job.pid, signal.SIGINT)
    _, stderr = job.communicate(timeout=120)
    assert job.returncode == 130 and "checkpoint saved" in stderr, stderr
    assert "nanobind" not in stderr, stderr


def test_a_python_run_builds_its_own_env_for_its_policy(tmp_path):
    """run.policy takes the preprocessed frames training saw; gym.make's raw ones it refused
    ("observation of shape (210, 160, 3)"), and nothing documented how to build them."""
    import es

    overrides = {"es.population": 4, "run.generations": 2, "env.max_episode_steps": 25,
                 "policy.vbn_batch": 6, "run.eval_every": 1, "run.eval_episodes": 1,
                 "es.noise_table_size": 1_000_000}  # TINY_PONG's
    run = es.train(REPO / "configs/pong.toml", overrides, run_dir=tmp_path / "run")
    env = run.make_env()
    observation, _ = env.reset(seed=0)
    assert observation.shape != (210, 160, 3)
    assert env.action_space.contains(run.policy(observation))
    # Printed in a notebook, a line: the generated repr held the CNN's reference frames.
    assert repr(run.best or run.saved) == (
        f"SavedPolicy(env='ALE/Pong-v5', policy=ConvNetSpec, generation="
        f"{(run.best or run.saved).generation}, params: {run.saved.params.size})")
    filmed = run.make_env(render_mode="rgb_array")
    filmed.reset(seed=0)
    assert filmed.render().shape == (210, 160, 3)
