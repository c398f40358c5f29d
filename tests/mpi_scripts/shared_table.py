"""Run under ``mpiexec -n 2``: checks the node-shared noise table and idle waiting."""

import time

import numpy as np

from es.core.noise import fill_table
from es.parallel.comm import MPIComm

comm = MPIComm()
fills = []


def fill(out: np.ndarray) -> None:
    fills.append(1)
    fill_table(out, seed=5)


table = comm.node_shared_array(100_000, np.float32, fill)
expected = np.empty(100_000, np.float32)
fill_table(expected, seed=5)
assert np.array_equal(table, expected), "rank sees a different table"
total_fills = comm.allreduce_sum(np.array([len(fills)], dtype=np.int64))[0]
assert total_fills == 1, f"table filled {total_fills} times on one node"

# One memory: a write by rank 1 is seen by rank 0.
if comm.rank == 1:
    table[0] = 1234.5
comm.barrier()
assert table[0] == 1234.5, "ranks hold separate copies"
comm.barrier()

# A rank waiting 1.5 s in a collective must sleep, not spin.
if comm.rank == 0:
    time.sleep(1.5)
cpu_before = time.process_time()
comm.barrier()
waited_cpu = time.process_time() - cpu_before
assert comm.rank == 0 or waited_cpu < 0.5, f"rank 1 burnt {waited_cpu:.2f} s CPU while waiting"

rows = comm.allgather_rows(np.full((comm.rank + 1, 3), float(comm.rank)))
assert rows.shape == (3, 3) and rows[0, 0] == 0 and rows[2, 0] == 1
if comm.rank == 0:
    print("ok", flush=True)
