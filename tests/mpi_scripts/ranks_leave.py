"""Run under mpiexec -n 2 with a mode: ranks that make different es calls. ``minimize`` and
``train``: rank 0 makes one call more than rank 1, which has ended by then. ``alone``: rank
0 alone calls es.train; rank 1, whose MPI its own import of mpi4py started, ends at once.
argv[2]: a run folder for es.train."""

import sys

import numpy as np
from mpi4py import MPI

import es
import es.parallel.comm

es.parallel.comm.START_UP_HINT_S = 1.0  # said after 1 s, not a minute
mode, run_dir = sys.argv[1], sys.argv[2]
rank = MPI.COMM_WORLD.Get_rank()


def minimize() -> None:
    es.minimize(es.functions.sphere, np.ones(4), 0.5, seed=1, max_evals=200)


def train() -> None:
    es.train("configs/cartpole.toml", {"run.generations": 2}, run_dir=run_dir, force=True)


if mode in ("minimize", "train"):
    call = minimize if mode == "minimize" else train
    call()
    if rank == 1:
        sys.exit(0)
    call()
elif rank == 0:
    train()
print(f"rank {rank} done", flush=True)
