"""Run under mpiexec -n 2: each rank gives es.minimize, es.train and es.resume an argument of
its own (an unseeded random x0, a popsize, a seed; an override or a run folder that depends on
the rank; one that rank 1 alone refuses), then the same ones (a run folder spelled two
ways among them). Rank 0 prints every rank's
outcome, one line per call and rank."""

import os
import sys

import numpy as np

import es
from es.parallel.comm import MPIComm

comm = MPIComm()
rank = comm.rank
sphere = es.functions.sphere
calls = {
    "x0": lambda: es.minimize(sphere, np.random.default_rng().normal(size=4), 0.5,
                              max_evals=200),
    "popsize": lambda: es.minimize(sphere, np.ones(4), 0.5, popsize=8 + 2 * rank,
                                   max_evals=200),
    "seed": lambda: es.minimize(sphere, np.ones(4), 0.5, seed=rank, max_evals=200),
    "same": lambda: es.minimize(sphere, np.ones(4), 0.5, max_evals=200).fun,
    "train": lambda: es.train("configs/cartpole.toml", {"run.generations": 4 + 40 * rank},
                              run_dir=sys.argv[1], force=True),
    "fun": lambda: es.minimize(None if rank else sphere, np.ones(4), 0.5, max_evals=200),
    "override": lambda: es.train("configs/cartpole.toml",
                                 {"run.generations": "many" if rank else 4},
                                 run_dir=sys.argv[1], force=True),
    "run_dir": lambda: es.train("configs/cartpole.toml", {"run.generations": 4},
                                run_dir=f"{sys.argv[1]}_{rank}", force=True),
    "spelled": lambda: es.train("configs/cartpole.toml", {"run.generations": 2},
                                run_dir=f"{sys.argv[1]}_spelled" if rank == 0
                                else f"{os.path.dirname(sys.argv[1])}/./run_spelled/").generations,
    "resume": lambda: es.resume(sys.argv[1], {"run.generations": 10 + rank}),
}
lines = []
for name, call in calls.items():
    try:
        lines.append(f"{name} {rank} returned {call()}")
    except (TypeError, ValueError) as error:
        lines.append(f"{name} {rank} {type(error).__name__}: {error}")
every = comm.allgather_objects(lines)
if rank == 0:
    print("\n".join(line for mine in every for line in mine), flush=True)
