"""Run across fake hosts: one noise table per node. Every rank checks its table; rank 0 prints
the number of fills and whether a write on one host is seen on its own host and not on the
other (separate memory per host, shared within it)."""

import socket

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
assert np.array_equal(table, expected), "a rank sees a different table"
total_fills = int(comm.allreduce_sum(np.array([len(fills)], dtype=np.int64))[0])
comm.barrier()
if comm.rank == 0:
    table[0] = 1234.5  # rank 0's host only
comm.barrier()
seen = comm.allgather_objects((socket.gethostname(), bool(table[0] == 1234.5)))
nodes = comm.node_ranks()  # a collective: every rank calls it
if comm.rank == 0:
    print(f"FILLS {total_fills} NODES {nodes} SEEN {seen}", flush=True)
comm.release_shared(table)  # before MPI finalises: libfabric refuses to close a live window
