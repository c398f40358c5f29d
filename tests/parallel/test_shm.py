"""The MPICH segments that killed jobs leave in /dev/shm: a new job removes them, and only
them (es.parallel.shm)."""

import mmap
import os
import signal
import subprocess
import time

import pytest
from conftest import REPO, run_cli, tool

from es.parallel.shm import MIN_AGE_S, PREFIX, SHM_FOLDER, remove_dead_segments


def segment(folder, name: str, size: int, age_s: float):
    path = folder / name
    path.write_bytes(b"\0" * size)
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_only_old_unmapped_segments_of_mpich_are_removed(tmp_path):
    dead = segment(tmp_path, f"{PREFIX}dead_0", 4096, age_s=MIN_AGE_S + 50)
    dead_too = segment(tmp_path, f"{PREFIX}dead_1", 8192, age_s=3600)
    just_made = segment(tmp_path, f"{PREFIX}new_0", 4096, age_s=0)  # not mapped yet
    other = segment(tmp_path, "psm3_shm.1", 4096, age_s=3600)  # not MPICH's
    live = segment(tmp_path, f"{PREFIX}live_0", 4096, age_s=3600)
    with open(live, "r+b") as file, mmap.mmap(file.fileno(), 0):  # a running job's
        assert remove_dead_segments(tmp_path) == (2, 4096 + 8192)
        assert live.exists()
        assert remove_dead_segments(tmp_path) == (0, 0)  # the next job finds nothing
    assert not dead.exists() and not dead_too.exists()
    assert just_made.exists() and other.exists()
    assert remove_dead_segments(tmp_path) == (1, 4096)  # the job that mapped it was killed
    assert remove_dead_segments(tmp_path / "absent") == (0, 0)  # no /dev/shm: nothing


@pytest.mark.skipif(not SHM_FOLDER.is_dir(), reason="no /dev/shm (not Linux)")
def test_the_next_job_removes_what_a_killed_job_left(tmp_path):
    """A job whose ranks are all killed (SIGKILL: they never finalize) leaves its segment;
    the next es-train under mpiexec removes it."""
    before = set(SHM_FOLDER.glob(f"{PREFIX}*"))
    run_dir = tmp_path / "killed"
    job = subprocess.Popen([tool("mpiexec"), "-n", "2", tool("es-train"), "configs/pendulum.toml",
                            "--run-dir", str(run_dir), "--quiet",
                            "--set", "run.generations=100000"],
                           cwd=REPO, start_new_session=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "progress.csv").exists():
            assert job.poll() is None and time.monotonic() < deadline, "it never trained"
            time.sleep(0.1)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    left = set(SHM_FOLDER.glob(f"{PREFIX}*")) - before
    assert left, "the killed job left nothing: nothing to test"
    for path in left:  # as if killed a while ago (a just-made segment is spared)
        os.utime(path, (time.time() - 2 * MIN_AGE_S,) * 2)
    done = run_cli(["es-train", "configs/pendulum.toml", "--run-dir", str(tmp_path / "next"),
                    "--set", "run.generations=1"], ranks=2, cleanup_lines=True)
    assert done.returncode == 0, done.stderr
    assert not any(path.exists() for path in left)
    # Another test's job may have removed them first; if this one did, it said so.
    assert all(line.startswith("es-train: removed ") and "MPICH shared-memory segment" in line
               for line in done.stderr.splitlines() if "removed" in line)
