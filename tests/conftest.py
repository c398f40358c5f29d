"""Helpers to run the real command-line tools, as a user types them."""

import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent


#: The mark of the test files that build clusters of their own (network namespaces, a real
#: Slurm's daemons, the scripts that start them): ``pytestmark = ONE_WORKER``. With
#: ``--dist loadgroup`` (pyproject.toml), pytest-xdist runs them one after another on one
#: worker, so two clusters never meet, beside the other worker's tests.
ONE_WORKER = pytest.mark.xdist_group("clusters")


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} not found beside {sys.executable}: install with pip install -e .")
    return str(path)


def without_cleanup_lines(stderr: str) -> str:
    """``stderr`` less es-train's line about the MPICH segments it removed from ``/dev/shm``:
    the tests that kill jobs on purpose leave them, so whether a later job's stderr holds
    that line depends on which tests ran before it and when, not on the job."""
    return "".join(line for line in stderr.splitlines(keepends=True)
                   if not (line.startswith("es-train: removed ")
                           and "MPICH shared-memory segment" in line))


def run_cli(args: list[str], ranks: int | None = None, timeout: float = 300,
            cwd: Path | None = None, extra_env: dict | None = None,
            cleanup_lines: bool = False) -> subprocess.CompletedProcess:
    """Run a console script; under ``mpiexec -n ranks`` when ranks is given. Its stderr
    without es-train's line about other jobs' leftover segments unless ``cleanup_lines``."""
    command = [tool(args[0]), *args[1:]]
    if ranks is not None:
        command = [tool("mpiexec"), "-n", str(ranks), *command]
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_RANK", "PMI_SIZE", "ES_COMM")}
    env |= extra_env or {}
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd or REPO, env=env)
    if not cleanup_lines:
        done.stderr = without_cleanup_lines(done.stderr)
    return done


def start_terminal_job(command: list[str], **popen: object) -> subprocess.Popen:
    """``command`` in a process group of its own with SIGINT at its default, as a terminal's
    job has it (a background job, CI's pytest, starts with SIGINT ignored)."""
    return subprocess.Popen(command, cwd=REPO, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **popen)


def interrupt_job(process: subprocess.Popen, stop: str, ready: Callable[[], bool],
                  timeout: float = 60) -> str:
    """Once ``ready()``, Ctrl-C (``stop="ctrl-c"``: SIGINT to the whole group, as a terminal
    sends it) or a SIGTERM to ``process`` alone; its stderr, once it and every process of its
    group ended (within ``timeout`` s each, or the test fails). Whatever happens, nothing it
    started outlives the test."""
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert process.poll() is None and time.monotonic() < deadline, "never ready"
            time.sleep(0.1)
        if stop == "ctrl-c":
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=timeout)
        deadline = time.monotonic() + timeout
        while subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True).stdout:
            assert time.monotonic() < deadline, f"a process it started outlived it: {err}"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    return err


def run_group(command: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``subprocess.run`` for a program that launches others (a script's ``mpiexec``): in a
    process group of its own, ended whole at the timeout. Killing the script alone left its
    mpiexec and ranks (each in a session of its own) running beside the tests after it."""
    process = subprocess.Popen(command, cwd=REPO, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # mpiexec ends its job on SIGTERM
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


@contextlib.contextmanager
def stopping_a_rank(job: subprocess.Popen, deadline_s: float) -> Iterator[Callable[[int], str]]:
    """For ``job`` (an ``mpiexec``, started in a session of its own, stderr piped): a function
    that SIGSTOPs one of its ranks by pid and returns the job's one "peer lost" line, once
    the job ended with exit code 76 within the heartbeats' deadline ``deadline_s`` and 10 s
    more (or the test fails). Whatever happens, the job's group is killed on leaving."""
    def stop(pid: int) -> str:
        stopped_at = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        _, err = job.communicate(timeout=deadline_s + 30)
        ended_after = time.monotonic() - stopped_at
        assert job.returncode == 76 and ended_after < deadline_s + 10, (ended_after, err)
        (line,) = [line for line in err.splitlines() if "peer lost" in line]
        return line

    try:
        yield stop
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)


def wait_for_a_checkpoint(job: subprocess.Popen, run_dir: Path, timeout: float = 120) -> None:
    """Until ``run_dir`` holds a checkpoint; the test fails if ``job`` ends first."""
    deadline = time.monotonic() + timeout
    while not list((run_dir / "checkpoints").glob("ckpt-*.json")):
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()
        time.sleep(0.2)


def read_progress(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open() as handle:
        return list(csv.DictReader(handle))


def load_params(run_dir: Path) -> np.ndarray:
    with np.load(run_dir / "policy.npz", allow_pickle=False) as data:
        return data["params"].copy()


def numeric_grad(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central finite differences of the scalar ``f`` at ``x``."""
    grad = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        grad[i] = (f(up) - f(down)) / (2 * h)
    return grad


def minimize_spmd_reference() -> list[list[str]]:
    """What ``tests/mpi_scripts/minimize_spmd.py`` prints, computed in one process: the
    digest, evaluations and restarts of its two es.minimize runs."""
    import hashlib

    import es

    reference = []
    for restarts in (0, 2):
        result = es.minimize(lambda x: float(np.sum((x - 0.5) ** 2)), x0=np.zeros(6),
                             sigma0=0.3, method="cma", seed=4, restarts=restarts, tolx=1e-4,
                             max_generations=30 if restarts == 0 else 400)
        digest = hashlib.sha256(result.x.tobytes() + result.x_mean.tobytes()).hexdigest()
        reference.append([digest, str(result.nfev), str(result.restarts)])
    return reference
