"""run.tensorboard / --tensorboard: the event files hold every progress.csv column against env
steps and the config, read back with TensorBoard's own reader and served by a real
``tensorboard`` process; a resume replaces the steps it trains again; the baselines write them
too; without the extra, a one-line error."""

import json
import math
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, read_progress, run_cli, tool
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from es.rl.metrics import COLUMNS

PENDULUM = ["configs/pendulum.toml", "--set", "es.population=10", "--set", "run.eval_every=2",
            "--set", "run.eval_episodes=1", "--set", "env.max_episode_steps=50"]


def events(run_dir: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0,
                                                                       "tensors": 0})
    accumulator.Reload()
    return accumulator


def series(accumulator: EventAccumulator, column: str) -> dict[int, float]:
    """The column's points by step; each step once (a resumed session replaces, not adds)."""
    points = accumulator.Scalars(f"progress/{column}")
    assert len({event.step for event in points}) == len(points), column
    return {event.step: event.value for event in points}


def csv_series(rows: list[dict[str, str]], column: str) -> dict[int, float]:
    return {int(r["timesteps"]): float(r[column]) for r in rows if r[column]}


def assert_matches_progress(run_dir: Path) -> None:
    """Every non-empty progress.csv cell is the scalar at that row's env steps (float32)."""
    accumulator, rows = events(run_dir), read_progress(run_dir)
    tags = set(accumulator.Tags()["scalars"])
    assert tags == {f"progress/{c}" for c in COLUMNS if c != "timesteps"
                    and any(r[c] for r in rows)}
    for column in COLUMNS:
        if column == "timesteps" or f"progress/{column}" not in tags:
            continue
        got, want = series(accumulator, column), csv_series(rows, column)
        assert got.keys() == want.keys(), column
        for step, value in want.items():
            assert got[step] == pytest.approx(value, rel=1e-5, abs=1e-6), (column, step)


def test_train_writes_every_progress_column_and_the_config(tmp_path):
    run_dir = tmp_path / "tb"
    done = run_cli(["es-train", *PENDULUM, "--set", "run.generations=4", "--tensorboard",
                    "--run-dir", str(run_dir)], ranks=2)
    assert done.returncode == 0, done.stderr
    assert_matches_progress(run_dir)
    assert len(series(events(run_dir), "eval_return")) == 2  # generations 2 and 4
    (text,) = events(run_dir).Tensors("config/text_summary")
    config = text.tensor_proto.string_val[0].decode()
    assert 'id = "Pendulum-v1"' in config and "tensorboard = true" in config


def test_resume_replaces_the_steps_it_trains_again(tmp_path):
    run_dir = tmp_path / "resumed"
    assert run_cli(["es-train", *PENDULUM, "--set", "run.generations=4", "--set",
                    "run.checkpoint_every=2", "--set", "run.tensorboard=true", "--run-dir",
                    str(run_dir)]).returncode == 0
    # As if killed after generation 4's row but before its checkpoint: resume from 2.
    for newest in (run_dir / "checkpoints").glob("ckpt-00000004.*"):
        newest.unlink()
    resumed = run_cli(["es-train", "--resume", str(run_dir), "--set", "run.generations=5",
                       "--quiet"])
    assert resumed.returncode == 0, resumed.stderr
    rows = read_progress(run_dir)
    assert [int(r["generation"]) for r in rows] == [1, 2, 3, 4, 5]
    # One point per generation: the first session's generations 3 and 4 are gone, and the
    # time of the resumed ones is the second session's.
    assert_matches_progress(run_dir)


def test_tensorboard_serves_the_run(tmp_path):
    run_dir = tmp_path / "served"
    assert run_cli(["es-train", *PENDULUM, "--set", "run.generations=3", "--tensorboard",
                    "--quiet", "--run-dir", str(run_dir)]).returncode == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([tool("tensorboard"), "--logdir", str(run_dir / "tb"), "--host",
                               "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    query = urllib.parse.urlencode({"run": ".", "tag": "progress/return_mean"})
    url = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?{query}"
    try:
        deadline, points = time.monotonic() + 90, None
        while points is None and time.monotonic() < deadline:
            assert server.poll() is None, server.stderr.read()
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    points = json.loads(response.read())
            except (OSError, ValueError):  # not listening yet, or not loaded the run yet
                time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert points is not None, "tensorboard did not serve the scalars within 90 s"
    want = csv_series(read_progress(run_dir), "return_mean")
    assert [step for _, step, _ in points] == list(want)
    assert all(math.isclose(value, want[step], rel_tol=1e-5) for _, step, value in points)


def test_baselines_write_event_files_too(tmp_path):
    run_dir = tmp_path / "pg"
    done = run_cli(["es-baseline", "pg", "configs/baselines/cartpole_pg.toml", "--set",
                    "run.generations=3", "--set", "run.eval_every=1", "--tensorboard",
                    "--run-dir", str(run_dir)])
    assert done.returncode == 0, done.stderr
    assert_matches_progress(run_dir)
    assert series(events(run_dir), "eval_return")


def test_without_the_extra_a_one_line_error_before_training(tmp_path):
    blocked = ("import sys; sys.modules['tensorboardX'] = None; from es.cli.train import main; "
               "sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", blocked, *PENDULUM, "--tensorboard",
                           "--run-dir", str(tmp_path / "no")], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 2
    # The checkout's own path: the hint works from any folder (".[x]" only inside it).
    assert done.stderr == ("es-train: error: run.tensorboard = true: needs the tensorboard "
                           f"extra (pip install -e \"{REPO}[tensorboard]\")\n")
    assert not (tmp_path / "no").exists()
