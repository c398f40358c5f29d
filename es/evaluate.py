"""Evaluating a generation of candidates with a Python callable: here, on spawned MPI
workers, or on the ranks of an ``mpiexec`` job. Every way returns the values in candidate
order, so the optimiser sees the same numbers whichever is used.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator

import numpy as np

from es.comm import MPIComm, under_mpi_launcher
from es.exchange import spread

Evaluate = Callable[[np.ndarray], np.ndarray]
_LOADED: dict[bytes, Callable[[np.ndarray], float]] = {}  # per worker: functions by digest


def _evaluate_rows(blob: bytes, rows: np.ndarray) -> list[float]:
    """Worker side: unpickle the function once (cloudpickle), evaluate each row."""
    key = hashlib.sha256(blob).digest()
    if key not in _LOADED:
        import cloudpickle

        _LOADED[key] = cloudpickle.loads(blob)
    function = _LOADED[key]
    return [float(function(row)) for row in rows]


def _serial(fun: Callable[[np.ndarray], float]) -> Evaluate:
    return lambda rows: np.array([float(fun(row)) for row in rows])


def _ranks(fun: Callable[[np.ndarray], float], comm: MPIComm) -> Evaluate:
    """Under mpiexec: rank r evaluates rows r, r + size, ...; one gather of the values."""

    def evaluate(rows: np.ndarray) -> np.ndarray:
        return spread(comm, len(rows), lambda i: fun(rows[i]))

    return evaluate


@contextlib.contextmanager
def make_evaluator(fun: Callable[[np.ndarray], float], workers: int = 1) -> Iterator[Evaluate]:
    """The evaluator for ``workers`` (spawned worker processes; 1: this process), or the
    ranks of the enclosing ``mpiexec`` job when there is one."""
    if workers < 1:
        raise ValueError(f"workers {workers}: must be >= 1")
    if under_mpi_launcher():
        comm = MPIComm()
        if comm.size > 1:
            yield _ranks(fun, comm)
            return
    if workers == 1:
        yield _serial(fun)
        return
    import cloudpickle
    from mpi4py.futures import MPIPoolExecutor

    blob = cloudpickle.dumps(fun)
    with MPIPoolExecutor(max_workers=workers) as pool:

        def evaluate(rows: np.ndarray) -> np.ndarray:
            chunks = np.array_split(rows, min(workers, len(rows)))
            parts = pool.map(_evaluate_rows, [blob] * len(chunks), chunks)
            return np.array([value for part in parts for value in part])

        yield evaluate
