"""Evaluating a generation of candidates with a Python callable: here, on spawned MPI
workers, or on the ranks of an ``mpiexec`` job. Every way returns the values in candidate
order, so the optimiser sees the same numbers whichever is used.

Spawned workers must start wherever users call ``minimize``: a Jupyter kernel or an IDE that
runs the venv's Python without activating the venv, a script read from stdin, a script with
no ``if __name__ == "__main__":`` guard. They must also never hang the caller, and a worker
that dies must not take the caller with it: a broker process spawns and holds them
(``es.parallel.broker``), and the caller never joins their MPI job.
"""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from es.parallel.comm import MPIComm, outside_the_job, under_mpi_launcher
from es.parallel.exchange import gather_in_order, round_robin

Evaluate = Callable[[np.ndarray], np.ndarray]
_LOADED: dict[bytes, Callable[[np.ndarray], Any]] = {}  # per worker: functions by digest

LAUNCHER = "mpiexec"
#: Workers start in ~0.5 s; a spawn still waiting after this long has failed (MPICH's
#: MPI_Comm_spawn waits forever for a worker whose interpreter died before MPI_Init).
SPAWN_TIMEOUT_S = 60.0
#: How long the broker may take to end its workers after the last generation.
SHUTDOWN_TIMEOUT_S = 30.0
#: One BLAS thread per worker, as ``es.cli`` does for ranks: parallelism comes from workers.
BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: The folder where each worker's ``faulthandler`` writes (a file per worker), which the
#: caller reads into its ``WorkerDiedError``: written to standard error, the traceback went
#: through MPICH's output forwarding, which a dying job cut short (a CI run kept 'File "'), and
#: under Jupyter to the server's log.
FAULTS_VARIABLE = "ES_WORKER_FAULTS"
#: Each worker's open fault file (faulthandler writes to it from a signal handler).
_FAULT_FILE: list[Any] = []


class WorkerStartError(RuntimeError):
    """Spawned workers could not start; the message says what to do instead."""


class WorkerDiedError(RuntimeError):
    """A spawned worker died while evaluating (a crash in ``fun``'s C code, ``os._exit``, a
    kill): the generation's values are lost, the calling process is not."""


def one_value(value: Any) -> float:
    """``fun``'s value at one point as a float, or an error that says what it returned (a
    vector from a non-vectorized ``fun`` would otherwise read "only 0-dimensional arrays")."""
    if np.ndim(value) != 0:
        raise ValueError(f"fun returned shape {np.shape(value)} for one point: it must return "
                         "one number (or pass vectorized=True for a function of all rows)")
    return float(value)


def masked_as_failed(values: Any, who: str) -> np.ndarray:
    """``values`` as float64, a masked array's masked entries as NaN (failed evaluations,
    with a warning): ``np.asarray`` dropped the mask, and the values under it counted."""
    if not np.ma.isMaskedArray(values):
        return np.asarray(values, dtype=np.float64)
    masked = int(np.ma.count_masked(values))
    if masked:
        many = masked != 1
        warnings.warn(f"{who}: {masked} masked value{'s' * many} count{'s' * (not many)} as "
                      "failed evaluations (NaN)", stacklevel=3)
    return np.ma.filled(values.astype(np.float64), np.nan)


def values_of(fun: Callable[[np.ndarray], Any], rows: np.ndarray,
              vectorized: bool) -> np.ndarray:
    """``fun`` of each row, as float64: one call per row, or with ``vectorized`` one call on
    all rows that must return one value per row."""
    if not vectorized:
        return np.array([one_value(fun(row)) for row in rows], dtype=np.float64)
    if len(rows) == 0:  # a rank with no share (fewer members than ranks): no call, where a
        return np.empty(0)  # batch simulator or np.stack failed on an empty batch
    values = masked_as_failed(fun(rows), "vectorized fun")
    if values.shape not in ((len(rows),), (len(rows), 1)):
        what = (f"{values.size} values" if values.ndim <= 1 else f"shape {values.shape}")
        raise ValueError(f"vectorized fun returned {what} for {len(rows)} rows: it must "
                         f"return one value per row, shape ({len(rows)},) or ({len(rows)}, 1)")
    return values.ravel()


class RaisedInWorker(Exception):
    """``fun``'s exception in a worker, cloudpickled (its one argument). Its class may live
    only in the caller's ``__main__`` (a notebook's), which plain pickle cannot send back
    ("Can't pickle <class '__main__.MyError'>"); cloudpickle gives the caller its own class
    again, so ``except MyError`` catches it there."""


class RemoteTraceback(Exception):
    """Where a worker's exception was raised: its traceback as the worker printed it, the
    cause of the exception raised again here (whose own traceback ends in this module), as
    ``concurrent.futures`` shows a process pool's."""

    def __str__(self) -> str:
        return f'\n"""\n{self.args[0]}"""'


def pickled_error(error: BaseException) -> bytes:
    """``error`` and its formatted traceback, cloudpickled; a RuntimeError saying what it was
    in its place if it does not pickle."""
    import cloudpickle

    text = "".join(traceback.format_exception(error))
    try:
        return cloudpickle.dumps((error, text))
    except Exception:
        return cloudpickle.dumps((RuntimeError(f"{type(error).__name__}: {error}"), text))


def raise_pickled(payload: bytes) -> NoReturn:
    """Raise the exception of ``pickled_error``, caused by its worker's traceback."""
    import cloudpickle

    error, text = cloudpickle.loads(payload)
    raise error from RemoteTraceback(text)


def evaluate_rows(blob: bytes, rows: np.ndarray, vectorized: bool) -> list[float]:
    """Worker side: unpickle the function once (cloudpickle), evaluate the rows. A crash
    in ``fun``'s C code writes the worker's Python traceback (``faulthandler``) before the
    worker dies, into ``FAULTS_VARIABLE``'s folder: the caller's ``WorkerDiedError`` is
    caused by it."""
    import cloudpickle

    key = hashlib.sha256(blob).digest()
    if key not in _LOADED:
        faults = os.environ.get(FAULTS_VARIABLE)
        if faults and not _FAULT_FILE:
            _FAULT_FILE.append(open(Path(faults) / f"{os.getpid()}.txt", "w"))  # noqa: SIM115
        faulthandler.enable(*_FAULT_FILE)
        _LOADED[key] = cloudpickle.loads(blob)
    try:
        return values_of(_LOADED[key], rows, vectorized).tolist()
    except Exception as error:
        raise RaisedInWorker(pickled_error(error)) from None


def _ranks(fun: Callable[[np.ndarray], Any], comm: MPIComm, vectorized: bool) -> Evaluate:
    """Under mpiexec: rank r evaluates rows r, r + size, ... (in one call if ``vectorized``);
    one gather of the values, each rank's share followed by whether ``fun`` raised there.
    Then a rank whose ``fun`` raised (an error, a Ctrl-C to that rank alone) raises its own
    error and every other rank a ``RuntimeError`` naming it, where they would have waited
    for its values for good."""

    def evaluate(rows: np.ndarray) -> np.ndarray:
        shares = round_robin(len(rows), comm.size)
        mine, failure = np.full(len(shares[comm.rank]), np.nan), None
        try:
            mine = (values_of(fun, rows[shares[comm.rank]], True) if vectorized else
                    np.array([one_value(fun(rows[i])) for i in shares[comm.rank]]))
        except BaseException as error:  # KeyboardInterrupt too: each rank has its own
            failure = error
        # Each rank's flag is one more item, after the rows: len(rows) + rank.
        flagged = [[*share, len(rows) + rank] for rank, share in enumerate(shares)]
        gathered = gather_in_order(comm, flagged, np.append(mine, float(failure is not None)))
        if failed := np.flatnonzero(gathered[len(rows):]).tolist():
            said = comm.allgather_objects(
                None if failure is None else f"{type(failure).__name__}: {failure}")
            if failure is not None:
                raise failure
            raise RuntimeError(f"fun raised on rank {failed[0]} of {comm.size}: "
                               f"{said[failed[0]]}")
        return gathered[:len(rows)]

    return evaluate


def _path_with_launcher(workers: int) -> str | None:
    """The PATH the broker needs: it spawns through MPICH's singleton init, which execs
    ``mpiexec`` found on PATH. A venv's Python run without activating the venv has the mpich
    wheel's ``mpiexec`` beside it but not on PATH: that folder goes first. With no launcher
    anywhere, MPICH would abort inside the spawn and hang: fail now instead, saying what to
    do."""
    before = os.environ.get("PATH")
    if shutil.which(LAUNCHER) is not None:
        return before
    beside = dict.fromkeys((Path(sys.executable).parent, Path(sys.prefix) / "bin"))
    folder = next((str(f) for f in beside if shutil.which(LAUNCHER, path=str(f))), None)
    if folder is None:
        raise WorkerStartError(
            f"workers={workers} needs {LAUNCHER}, which is neither on PATH nor beside "
            f"{sys.executable}: activate the environment (or put the folder holding "
            f"{LAUNCHER} on PATH), or use workers=1, or run the script under "
            f"{LAUNCHER} -n N python script.py")
    return os.pathsep.join(filter(None, (folder, before)))


def _worker_options() -> dict[str, Any]:
    """The workers do not import the caller's ``__main__``: it may be ``<stdin>``, a kernel,
    or a script without a ``__main__`` guard whose top level would run again in every worker
    (cloudpickle ships ``__main__``'s functions by value anyway). They see the caller's
    modules (its ``sys.path`` and working folder) and run BLAS on one thread (set before
    they load NumPy)."""
    path = [entry or os.getcwd() for entry in sys.path]
    env = {name: os.environ.get(name, "1") for name in BLAS_VARIABLES}
    return {"main": False, "path": path, "wdir": os.getcwd(), "env": env,
            "python_exe": sys.executable}


class _Broker:
    """The caller's side of ``es.parallel.broker``: a process in a session of its own (a
    terminal's Ctrl-C reaches the caller alone, which then ends it), so that killing its
    process group ends the broker, its ``mpiexec`` and the workers, whatever state they are
    in."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        path = _path_with_launcher(workers)
        self.faults = Path(tempfile.mkdtemp(prefix="es-worker-faults-"))
        env = outside_the_job(os.environ)
        if path is not None:
            env["PATH"] = path
        mine, theirs = socket.socketpair()
        with mine, theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "es.parallel.broker", str(theirs.fileno())],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
            self.conn = Connection(os.dup(mine.fileno()))
        #: Up and waiting for the next generation: ended by asking, where killing it (a
        #: generation under way) leaves its MPI job's shared memory in /dev/shm.
        self.idle = False

    def start(self) -> None:
        """Workers up within ``SPAWN_TIMEOUT_S``, or ``WorkerStartError``."""
        options = _worker_options()
        options["env"][FAULTS_VARIABLE] = str(self.faults)
        self.conn.send((self.workers, options))
        if not self.conn.poll(SPAWN_TIMEOUT_S):
            self.kill()
            raise WorkerStartError(
                f"the {self.workers} MPI workers did not start within {SPAWN_TIMEOUT_S:g} s "
                f"({sys.executable} -m mpi4py.futures.server); use workers=1 or run under "
                f"{LAUNCHER} -n N")
        try:
            self.conn.recv()
            self.idle = True
        except (EOFError, OSError):
            code = self.kill()
            raise WorkerStartError(f"the {self.workers} MPI workers could not start: their "
                                   f"starter ended with {_ended(code)}; its messages are "
                                   "above") from None

    def evaluate(self, blob: bytes, rows: np.ndarray, vectorized: bool) -> np.ndarray:
        try:
            self.idle = False
            self.conn.send((blob, rows, vectorized))
            what, payload = self.conn.recv()
            self.idle = True
        except (EOFError, OSError):
            # Read first: kill() removes the folder. The dead worker wrote before it died,
            # and its death ended the broker (MPICH ends a job with it): nothing writes now.
            written = "".join(path.read_text(errors="replace")
                              for path in sorted(self.faults.glob("*.txt")))
            self.kill()
            raise WorkerDiedError(
                f"a worker of workers={self.workers} died while evaluating, e.g. a crash in "
                "fun's C code or os._exit; this generation's values are lost, this process "
                "is unharmed" + ("" if written else " (the worker wrote no traceback)")
            ) from (RemoteTraceback(written) if written else None)
        if what == "raised":
            raise_pickled(payload)
        return payload

    def close(self) -> None:
        """End the workers: asked, then killed if they do not end in time."""
        with contextlib.suppress(OSError):
            self.conn.send(None)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(SHUTDOWN_TIMEOUT_S)
        self.kill()

    def kill(self) -> int | None:
        """Kill the broker's whole group; its exit code (negative: the signal)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.conn.close()
        code = self.process.wait()
        shutil.rmtree(self.faults, ignore_errors=True)  # no worker is left to write there
        return code


def _ended(code: int | None) -> str:
    """'exit code 1' or 'SIGKILL'."""
    if code is not None and code < 0:
        return signal.Signals(-code).name
    return f"exit code {code}"


@contextlib.contextmanager
def make_evaluator(fun: Callable[[np.ndarray], Any], workers: int = 1,
                   vectorized: bool = False) -> Iterator[Evaluate]:
    """The evaluator for ``workers`` (spawned worker processes; 1: this process), or the
    ranks of the enclosing ``mpiexec`` job when there is one. ``vectorized``: ``fun`` takes a
    block of rows and returns one value per row (each worker or rank calls it once on its
    share)."""
    if workers < 1:
        raise ValueError(f"workers {workers}: must be >= 1")
    if under_mpi_launcher():
        comm = MPIComm()
        if comm.size > 1:
            from threadpoolctl import threadpool_limits

            # One BLAS thread per rank, as spawned workers and es.train have: the ranks are
            # the parallelism. The caller's own setting is back when the evaluator closes.
            with threadpool_limits(limits=1):
                yield _ranks(fun, comm, vectorized)
            return
    if workers == 1:
        yield lambda rows: values_of(fun, rows, vectorized)
        return
    import cloudpickle

    try:
        blob = cloudpickle.dumps(fun)
    except Exception as error:  # anything the function holds may refuse (a lock, a socket)
        raise TypeError(f"workers={workers}: fun cannot be sent to the worker processes "
                        f"({type(error).__name__}: {error}); evaluate it in this process "
                        "(workers=1) or give a function that builds what it holds when "
                        "called") from None
    broker = _Broker(workers)
    try:
        broker.start()
        yield lambda rows: broker.evaluate(blob, rows, vectorized)
    except BaseException:  # Ctrl-C, fun's error: a generation under way is not waited for
        if broker.idle:  # fun's error, returned; the caller's own between generations
            broker.close()
        else:
            broker.kill()
        raise
    broker.close()
