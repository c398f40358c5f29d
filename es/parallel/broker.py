"""The process that holds ``minimize(workers=N)``'s MPI workers, apart from the caller.

MPICH ends every process of a job when one of them dies: with the workers spawned by the
caller itself, a segfault in ``fun``'s C code killed the caller too (a notebook's kernel
restarted, no exception, no ``finally``). Spawned from here instead, a dying worker takes
this broker with it, and the caller, which never joins the MPI job, sees its connection
close and raises. A spawn that hangs (MPICH's ``MPI_Comm_spawn`` waits forever for a worker
whose interpreter died before ``MPI_Init``) is likewise ended by killing this process group,
where it used to leave the caller's own MPI stuck.

Run as ``python -m es.parallel.broker FD``: FD is its end of a socket pair with the caller
(``multiprocessing.connection`` messages). It gets ``(workers, options)``, answers
``("ready", None)`` once the workers are up, then for each ``(blob, rows, vectorized)``
answers ``("values", array)`` or ``("raised", the exception cloudpickled)``; ``None`` ends
it.
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection

import numpy as np

from es.parallel.evaluate import RaisedInWorker, evaluate_rows, pickled_error


def serve(conn: Connection) -> None:
    """Spawn the workers, then evaluate each generation the caller sends until ``None``."""
    from mpi4py.futures import MPIPoolExecutor

    from es.parallel.shm import remove_dead_segments

    workers, options = conn.recv()
    remove_dead_segments()  # what killed jobs left: the workers' job needs room in /dev/shm
    with MPIPoolExecutor(max_workers=workers, **options) as pool:
        pool.submit(os.getpid).result()  # the workers are up
        conn.send(("ready", None))
        while (message := conn.recv()) is not None:
            blob, rows, vectorized = message
            chunks = np.array_split(rows, min(workers, len(rows)))
            try:
                parts = pool.map(evaluate_rows, [blob] * len(chunks), chunks,
                                 [vectorized] * len(chunks))
                values = np.array([value for part in parts for value in part])
            except RaisedInWorker as raised:  # fun's own: the caller raises it
                conn.send(("raised", raised.args[0]))
                continue
            except Exception as error:  # the pool's
                conn.send(("raised", pickled_error(error)))
                continue
            conn.send(("values", values))


def main(argv: list[str]) -> int:
    conn = Connection(int(argv[0]))
    try:
        serve(conn)
    except (EOFError, OSError):  # the caller is gone: nothing to report to
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

