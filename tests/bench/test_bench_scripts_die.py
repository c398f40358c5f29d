"""A benchmark script whose launched run dies says so in one line (the run, its exit code, the
last lines of its stderr) and exits 1: never a traceback of the script itself."""

import subprocess
import sys

import pytest
from conftest import REPO

BAD_ENV = "env.id=NoSuchEnv-v0"  # passes the config check, fails when es-train makes it
SUITE = f"""
[tasks.pendulum]
thresholds = [0]
budget_s = 30
strategies.openai = {{ config = "{REPO}/configs/pendulum.toml", set = ["{BAD_ENV}"] }}
"""


@pytest.mark.parametrize("args, what", [
    (["scripts/bench_solve.py", "configs/pendulum.toml", "--thresholds", "0", "--budget-s", "30",
      "--set", BAD_ENV], "es-train configs/pendulum.toml exited with 2"),
    (["scripts/bench_throughput.py", "--config", "configs/pendulum.toml", "--generations", "3",
      "--repeats", "1", "--set", BAD_ENV],
     f"es-train configs/pendulum.toml {BAD_ENV} exited with 2"),
    (["scripts/bench_throughput.py", "--suite", "SUITE"], "pendulum-openai-seed0: es-train "
     "exited with 2"),
    (["scripts/bench_pg_allreduce.py", "--config", "PG", "--ranks", "1", "--seeds", "0"],
     "es-baseline pg PG exited with 2"),
], ids=["bench_solve", "bench_throughput", "bench_throughput --suite", "bench_pg_allreduce"])
def test_a_run_that_dies_is_one_line_naming_it_and_its_exit_code(tmp_path, args, what):
    suite, pg = tmp_path / "suite.toml", tmp_path / "pg.toml"
    suite.write_text(SUITE)
    pg.write_text('[env]\nid = "NoSuchEnv-v0"\n[pg]\nepisodes_per_update = 2\n')
    args = [{"SUITE": str(suite), "PG": str(pg)}.get(arg, arg) for arg in args]
    what = what.replace("PG", str(pg))
    done = subprocess.run([sys.executable, *args, "--out", str(tmp_path / "out")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    line, = done.stderr.strip().splitlines()
    assert what in line and "NoSuchEnv-v0" in line, line
    assert line.startswith(args[0].rsplit("/", 1)[-1] + ": ")


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_an_interrupted_script_stops_its_run_in_one_line(tmp_path, stop):
    """bench_solve.py printed a traceback on Ctrl-C, and a SIGTERM to it alone left its
    es-train training into a deleted temporary folder."""
    import time

    from conftest import interrupt_job, start_terminal_job

    process = start_terminal_job(
        [sys.executable, "scripts/bench_solve.py", "configs/pendulum.toml", "--thresholds",
         "1000", "--budget-s", "120", "--out", str(tmp_path)], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    started: list[float] = []

    def training() -> bool:
        """For 2 s, es-train."""
        if not started and subprocess.run(["pgrep", "-g", str(process.pid), "-f", "es-train"],
                                          capture_output=True).stdout:
            started.append(time.monotonic())
        return bool(started) and time.monotonic() - started[0] > 2

    err = interrupt_job(process, stop, ready=training)
    assert process.returncode == 130
    assert err.strip() == "bench_solve.py: interrupted (exit code 130)", err[-3000:]


def test_a_python_worker_that_fails_on_one_rank_ends_the_job(tmp_path):
    """The benchmarks' Python workers run under mpi4py's runner (``python_on_ranks``): rank
    1's exception aborts rank 0, which waits for it in a barrier, where plain ``python`` left
    rank 0 there until the test's timeout killed the job."""
    from es.bench.launch import python_on_ranks

    worker = tmp_path / "worker.py"
    worker.write_text("from mpi4py import MPI\n"
                      "if MPI.COMM_WORLD.rank == 1:\n"
                      "    raise RuntimeError('rank 1 broke')\n"
                      "MPI.COMM_WORLD.Barrier()\n")
    done = subprocess.run(python_on_ranks(2, str(worker)), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and "rank 1 broke" in done.stderr
