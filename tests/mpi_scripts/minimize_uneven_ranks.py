"""Run under mpiexec: es.minimize where the ranks are not alike. ``timeout``: rank 1's
evaluations are slower, so each rank's own clock would stop it at another generation (they
went on to return each other's results, then hung). ``raises``: fun raises on rank 1 alone
(the other ranks waited for its values for good). Rank 0 prints what each rank got."""

import sys
import time

import numpy as np

import es
from es.parallel.comm import MPIComm

comm = MPIComm()
calls = 0


def slower_on_rank_1(x):
    time.sleep(0.001 * (1 + 3 * comm.rank))
    return float(np.sum(x**2))


def fails_on_rank_1(x):
    global calls
    calls += 1
    if comm.rank == 1 and calls > 20:
        raise ValueError("rank 1's fun fails")
    return float(np.sum(x**2))


lines = []
if sys.argv[1] == "timeout":
    for run in range(3):
        result = es.minimize(slower_on_rank_1, np.ones(20), 0.5, seed=run, timeout_s=0.3,
                             tolfun=None, tolx=None, tolfunhist=None, stagnation=False,
                             flatfitness=False, maxiter=False)
        lines.append(f"{result.stop_reason} {result.ngen} {result.x.tobytes().hex()}")
else:
    try:
        es.minimize(fails_on_rank_1, np.ones(4), 0.5, seed=0, max_evals=3000)
    except Exception as error:
        lines.append(f"{type(error).__name__}: {error}")
# Rank 0 prints every rank's line: lines printed by two ranks at once can interleave.
said = comm.allgather_objects(f"RANK {comm.rank} " + " | ".join(lines))
if comm.rank == 0:
    print("\n".join(said), flush=True)
