"""Run under mpiexec: every rank calls es.minimize; rank 0 prints the result's bits."""

import hashlib

import numpy as np

import es

offset = 0.5  # a closure, as a notebook user would write
result = es.minimize(lambda x: float(np.sum((x - offset) ** 2)), x0=np.zeros(6), sigma0=0.3,
                     seed=4, max_generations=30)
digest = hashlib.sha256(result.x.tobytes() + result.x_mean.tobytes()).hexdigest()
print(f"RESULT {digest} {result.nfev} {result.fun!r}", flush=True)
