"""Sweeps in one job: --seeds and several configs split the ranks into groups, one run each."""

import contextlib
import os

import numpy as np
import pytest
from conftest import load_params, read_progress, run_cli

from es.cli.args import parse_seeds

BASE = ["--set", "run.generations=4", "--set", "es.population=8", "--quiet"]


def test_seed_specs():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("1-2,7") == [1, 2, 7]
    for bad in ("", "a", "3-1", "1,1", "-2"):
        with pytest.raises(ValueError, match="expected seeds"):
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


def test_groups_side_by_side_each_print_their_runs_progress_labelled(tmp_path):
    """Only the first group's progress was printed: a sweep's other runs trained silently."""
    done = run_cli(["es-train", "configs/cartpole.toml", "--seeds", "0-1", "--run-dir",
                    str(tmp_path), *BASE[:-1]], ranks=2)
    assert done.returncode == 0, done.stderr
    for seed in (0, 1):
        lines = [line for line in done.stdout.splitlines()
                 if line.startswith(f"[cartpole seed {seed}] gen ")]
        assert len(lines) == 4, done.stdout
        (last,) = [line for line in done.stdout.splitlines() if f"__{seed}" in line]
        assert last.startswith(f"[cartpole seed {seed}] done: 4 generations"), done.stdout
        # Each group's line of where its ranks run is its run's: three alike said nothing.
        assert f"es-train: [cartpole seed {seed}] 1 node (" in done.stderr, done.stderr


def test_more_runs_than_ranks_run_in_turn_and_configs_combine_with_seeds(tmp_path):
    done = run_cli(["es-train", "configs/cartpole.toml", "configs/pendulum.toml", "--seeds",
                    "3,4", "--run-dir", str(tmp_path), *BASE], ranks=3)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "CartPole-v1__cartpole__3", "CartPole-v1__cartpole__4",
        "Pendulum-v1__pendulum__3", "Pendulum-v1__pendulum__4"]
    bad = run_cli(["es-train", "configs/cartpole.toml", "--seeds", "x"])
    assert bad.returncode == 2 and "--seeds: 'x'" in bad.stderr


def peak_rss_mb(args: list[str], ranks: int) -> float:
    """Largest resident set of any process of the job, measured in a fresh interpreter so no
    earlier child counts (shared-memory pages a rank touched are part of its resident set)."""
    import subprocess
    import sys

    from conftest import REPO, tool

    measure = ("import resource, subprocess, sys; "
               "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    command = [tool("mpiexec"), "-n", str(ranks), tool("es-train"), *args]
    out = subprocess.run([sys.executable, "-c", measure, *command], capture_output=True,
                         text=True, cwd=REPO, timeout=300).stdout.split()
    assert out[0] == "0", out
    return int(out[1]) / 1024


def test_a_group_training_runs_in_turn_frees_each_noise_table(tmp_path):
    """A 160 MB shared table per run: three runs in turn on one rank must not hold three."""
    table = ["--set", "es.noise_table_size=40000000", "--set", "run.generations=1",
             "--set", "es.population=4", "--quiet"]
    one = peak_rss_mb(["configs/cartpole.toml", "--seeds", "0", "--run-dir",
                       str(tmp_path / "one"), *table], ranks=1)
    three = peak_rss_mb(["configs/cartpole.toml", "--seeds", "0-2", "--run-dir",
                         str(tmp_path / "three"), *table], ranks=1)
    assert len(list((tmp_path / "three").iterdir())) == 3
    assert one > 160  # the table is resident while it trains
    assert three < one + 40, f"3 runs in turn peaked at {three:.0f} MB, one run at {one:.0f} MB"


def test_a_sweeps_later_runs_count_their_time_from_their_own_start(tmp_path):
    """Runs in turn in one process: the second counted its time_s, and run.max_seconds, from
    the process's launch, so it began with its budget spent and trained one generation."""
    done = run_cli(["es-train", "configs/pendulum.toml", "--seeds", "0-1", "--run-dir",
                    str(tmp_path), "--set", "run.max_seconds=2", "--set", "es.population=8",
                    "--quiet"])
    assert done.returncode == 0, done.stderr
    for seed in (0, 1):
        rows = read_progress(tmp_path / f"Pendulum-v1__pendulum__{seed}")
        times = [float(row["time_s"]) for row in rows]
        assert times[0] < 2 <= times[-1] < 2 + 1.5 and len(rows) >= 3, (seed, times)


@pytest.mark.parametrize(("seeds", "then"), [
    ("0-1", "each run's newest checkpoint is intact: on the ranks that are left, the same "
            "command resumes the sweep (exit code 76)"),
    ("0", "the newest checkpoint is intact: resume on the ranks that are left: the same "
          "command (exit code 76)")], ids=["two seeds", "one seed"])
def test_a_silent_rank_ends_a_sweep_of_one_rank_groups(tmp_path, seeds, then):
    """Each group's heartbeats watched its own ranks only: with one rank a group, a stopped
    rank was seen by no one, the other runs trained on and then waited for it at the sweep's
    end for good (and a lost rank in a group of two ended the job with 9, not 76). The
    sweep's heartbeats are between every rank of the job; a sweep of one seed is one run,
    with its own."""
    import signal
    import subprocess
    import time

    from conftest import REPO, tool

    process = subprocess.Popen(
        [tool("mpiexec"), "-n", "2", tool("es-train"), "configs/cartpole.toml", "--seeds",
         seeds, "--set", "env.id=es/Sleep-v0", "--set", "env.kwargs.step_ms=0.5", "--set",
         "run.generations=100000", "--set", "run.checkpoint_every=1", "--set",
         "run.peer_timeout_s=3", "--resume-or-start", str(tmp_path), "--quiet"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        last = tmp_path / f"es_Sleep-v0__cartpole__{seeds[-1]}" / "checkpoints"
        deadline = time.monotonic() + 60
        while not (last.is_dir() and any(last.iterdir())):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        # The job's ranks come before any run's lines; a note on MPICH segments that an
        # earlier killed job left in /dev/shm may come first.
        listed = process.stderr.readline()
        while listed.startswith("es-train: removed "):
            listed = process.stderr.readline()
        assert " 2 ranks: rank 0 = pid " in listed, listed
        pid = int(listed.split("rank 1 = pid ")[1].split("@")[0])
        os.kill(pid, signal.SIGSTOP)
        _, stderr = process.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 76, stderr
    assert f"peer lost: rank 1 (pid {pid} on " in stderr
    assert then in stderr
