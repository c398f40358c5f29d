"""es.minimize under mpiexec: the ranks' evaluations run BLAS on one thread, and the caller's
own setting is back afterwards. Rank 0 prints one BLAS line per rank."""

import numpy as np
from mpi4py import MPI
from threadpoolctl import threadpool_info

import es


def blas_threads() -> int:
    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")


before = blas_threads()
result = es.minimize(lambda x: float(blas_threads()), x0=np.zeros(2), sigma0=1.0, popsize=4,
                     max_generations=2)
line = (f"BLAS {before} {result.fun} {max(row['f_median'] for row in result.history)} "
        f"{blas_threads()}")
lines = MPI.COMM_WORLD.gather(line)  # printed by one rank: the ranks' output would interleave
if MPI.COMM_WORLD.rank == 0:
    print("\n".join(lines), flush=True)
