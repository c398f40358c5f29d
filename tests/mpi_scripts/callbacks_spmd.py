"""Run under mpiexec: every rank calls es.train and es.minimize with a callback. Rank 0's
callback stops training after generation 3 and minimisation after generation 4; the other
ranks' callbacks would stop at once, and are never asked. Then every rank calls es.resume,
which trains the run on to its 8 generations. Rank 0 prints what each rank got."""

import sys

import numpy as np

import es
from es.parallel.comm import MPIComm

comm = MPIComm()
seen: list[int] = []


def stop_training(row):
    seen.append(row["generation"])
    return comm.rank != 0 or row["generation"] < 3


run = es.train("configs/pendulum.toml", {"es.population": 10, "env.max_episode_steps": 50,
                                         "run.generations": 8, "run.eval_every": 2},
               run_dir=sys.argv[1], force=True, callback=stop_training)
result = es.minimize(lambda x: float(np.sum(x**2)), np.ones(4), 0.5, method="cma",
                     callback=lambda row: comm.rank != 0 or row["ngen"] < 4)
resumed = es.resume(sys.argv[1])
# Rank 0 prints every rank's line: lines printed by two ranks at once can interleave.
lines = comm.allgather_objects(f"RANK {comm.rank} train {run.generations} seen {seen} minimize "
                               f"{result.ngen} {result.stop_reason} {result.x.tobytes().hex()} "
                               f"resumed {resumed.generations} "
                               f"{resumed.saved.params.tobytes().hex()}")
if comm.rank == 0:
    print("\n".join(lines), flush=True)
