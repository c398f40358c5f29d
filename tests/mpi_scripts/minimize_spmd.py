"""Run under mpiexec: every rank calls es.minimize (method cma, without and with IPOP
restarts); rank 0 prints each result's bits. The function draws from NumPy's global RNG, a
rank-dependent number of times: pycma's samples must not depend on it."""

import hashlib

import numpy as np

import es
from es.parallel.comm import MPIComm

comm = MPIComm()
np.random.seed(comm.rank)
offset = 0.5  # a closure, as a notebook user would write


def fun(x):
    np.random.rand(1 + comm.rank)
    return float(np.sum((x - offset) ** 2))


for restarts in (0, 2):
    result = es.minimize(fun, x0=np.zeros(6), sigma0=0.3, method="cma", seed=4,
                         restarts=restarts, tolx=1e-4,
                         max_generations=30 if restarts == 0 else 400)
    digest = hashlib.sha256(result.x.tobytes() + result.x_mean.tobytes()).hexdigest()
    if comm.rank == 0:
        print(f"RESULT {digest} {result.nfev} {result.restarts}", flush=True)
