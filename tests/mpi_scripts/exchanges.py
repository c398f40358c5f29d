"""Run under ``mpiexec -n 2`` or ``-n 3``: the small exchanges of ``MPIComm`` (point-to-point
in worlds this size) give every rank the same rank-ordered result whatever each sends, keep
successive exchanges apart, and let the last rank to arrive leave without the others' help.
Prints "ok" on rank 0."""

import time

import numpy as np

from es.parallel.comm import HEAD_BYTES, POINT_TO_POINT_BYTES, MPIComm

comm = MPIComm()
rank, size = comm.rank, comm.size


def same_everywhere(values: np.ndarray) -> bool:
    everyone = comm.allgather_rows(values.reshape(1, -1).view(np.uint8))
    return bool((everyone == everyone[0]).all())


# Unknown and known counts, a rank with no rows, a dtype other than float64.
rows = np.full((2 * rank, 3), rank, dtype=np.float32)
expected = np.concatenate([np.full((2 * r, 3), r, dtype=np.float32) for r in range(size)])
for counts in (None, [2 * r for r in range(size)]):
    gathered = comm.allgather_rows(rows, counts=counts)
    assert gathered.dtype == np.float32 and np.array_equal(gathered, expected), gathered

# Sums: integers exactly; floats added in rank order, the same bits on every rank; a vector
# too large for point-to-point goes through MPI's all-reduce.
total = comm.allreduce_sum(np.array([rank, 2**53 + rank], dtype=np.int64))
assert total.tolist() == [sum(range(size)), size * 2**53 + sum(range(size))], total
floats = comm.allreduce_sum(np.array([0.1 * (rank + 1), 1e16 * (-1) ** rank, 3.0]))
in_order = np.zeros(3)
for r in range(size):
    in_order += np.array([0.1 * (r + 1), 1e16 * (-1) ** r, 3.0])
assert np.array_equal(floats, in_order) and same_everywhere(floats), floats
large = np.full(POINT_TO_POINT_BYTES // 8 + 1, rank + 1.0)
assert np.array_equal(comm.allreduce_sum(large), np.full(large.size, size * (size + 1) / 2))

# A part too long for one message of unknown size: its rest follows.
long = np.arange(HEAD_BYTES // 8 * (rank + 1), dtype=np.float64).reshape(-1, 1) + rank
gathered = comm.allgather_rows(long)
assert np.array_equal(gathered, np.concatenate(
    [np.arange(HEAD_BYTES // 8 * (r + 1), dtype=np.float64).reshape(-1, 1) + r
     for r in range(size)]))

# Successive exchanges of different sizes, some ranks ahead of others, never mix.
for step in range(40):
    count = (step * 7 + rank * 3) % 5
    if (step + rank) % 4 == 0:
        time.sleep(0.002)
    gathered = comm.allgather_rows(np.full((count, 2), 100 * step + rank, dtype=np.int64))
    parts = [np.full(((step * 7 + r * 3) % 5, 2), 100 * step + r) for r in range(size)]
    assert np.array_equal(gathered, np.concatenate(parts)), (step, gathered)

# The last rank to arrive finds every other's message there: it does not wait for the others,
# which test only every 2 s here. MPI's collectives needed their tests (about 1.7 s) for rows
# of unknown count (a gather of the counts first), and for any rows on 3 ranks.
last = size - 1
slow = MPIComm()
slow.allgather_rows(np.zeros((1, 1)), counts=[1] * size)  # its private communicator, made
comm.barrier()
if rank == last:
    time.sleep(0.3)
else:
    slow.poll_interval_s = 2.0
before = slow.wait_s
gathered = slow.allgather_rows(np.array([[float(rank)]]))
waited = slow.wait_s - before
assert gathered.ravel().tolist() == [float(r) for r in range(size)]
late = comm.allgather_rows(np.array([[waited]]), counts=[1] * size)[last, 0]
assert late < 0.5, f"the last rank waited {late:.2f} s for the others' tests"
if rank == 0:
    print("ok", flush=True)
