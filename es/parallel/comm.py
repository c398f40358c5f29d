"""Communication between ranks: a tiny interface, a single-process and an MPI implementation.

This is the only module that imports ``mpi4py`` (lazily, so a plain ``es-train`` never loads
MPI). The trainer exchanges per-member scalars and one small integer block of observation
statistics per generation; both implementations count the payload bytes, so the invariant
"parameters never travel" is visible in ``progress.csv``.

MPICH busy-polls inside blocking collectives, which halves the speed of oversubscribed runs.
``MPIComm`` therefore starts each collective non-blocking and sleeps between tests. A
non-blocking collective, though, advances only while each rank tests it, one round of its
algorithm per test: a rank asleep between tests holds the others up for each round. So in
worlds of up to ``POINT_TO_POINT_RANKS`` ranks the small exchanges of a generation go
point-to-point instead (``MPIComm._exchange``), where a message arrives without its sender's
help.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from es.parallel.heartbeat import Heartbeat

#: How long a collective's wait spins before it sleeps between tests (see MPIComm._wait).
SPIN_S = 200e-6
#: Worlds of at most this many ranks gather rows, and sum small arrays, point-to-point: each
#: rank sends its part to every other (``size - 1`` messages a rank, few enough here).
POINT_TO_POINT_RANKS = 32
#: The largest all-reduce that goes point-to-point; larger ones (the gradient baselines'
#: vectors) keep MPI's algorithms, whose traffic grows slower with the ranks.
POINT_TO_POINT_BYTES = 1 << 16
#: A point-to-point part of unknown size arrives in one message up to this many bytes (its
#: size first): the dynamic schedule's (member, return) rows of up to 1,023 members a rank.
HEAD_BYTES = 1 << 14
#: Seconds between a rank's last words and its abort of the job (``MPIComm.abort``).
ABORT_GRACE_S = 0.5
#: Environment variables that MPI launchers (Hydra/MPICH, Open MPI, PMIx, Intel MPI) set.
LAUNCHER_VARIABLES = (
    "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"
)
#: After this long at a call's first exchange a rank says what may be wrong, once, and waits
#: on: a rank that ended without making the call never comes. (It cannot know: a rank's
#: last message, sent at its exit to say so, was left unmatched wherever no rank waited for
#: it, and MPICH's mpiexec then killed 4 to 5 in 8 finished 4-rank sweeps, exit status 9.)
START_UP_HINT_S = 60.0
WAITING_HINT = ("a rank still loading (a slow shared file system) comes late, but one that "
                "ends without making the same es calls (a script's call under "
                "`if rank == 0:`) never comes: under mpiexec every rank must make them; "
                "still waiting")
#: Where MPI launchers tell each process how many they started (Hydra/MPICH's PMI, Open MPI).
LAUNCHER_SIZES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
#: Every variable a launcher sets for its processes begins so (``PMI_FD``: the socket to
#: Hydra, which a child not started by the launcher does not hold).
LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPI_LOCAL")


def outside_the_job(environment: Mapping[str, str]) -> dict[str, str]:
    """``environment`` without the launcher's variables (and ``ES_COMM``): a process started
    with it is MPI's singleton, not a stray member of this job (under ``mpiexec -n 1`` one
    that kept ``PMI_FD`` failed in ``PMI_Init`` on a socket it did not have)."""
    return {name: value for name, value in environment.items()
            if not name.startswith(LAUNCHER_PREFIXES) and name != "ES_COMM"}


class Comm(Protocol):
    rank: int
    size: int
    bytes_sent: int  # payload bytes this process has put into collectives
    world_bytes_sent: int  # payload bytes all processes together have put into collectives
    wait_s: float  # wall seconds this process spent inside collectives (stragglers + transfer)

    def allgather_rows(
        self, rows: np.ndarray, counts: Sequence[int] | None = None
    ) -> np.ndarray: ...
    def allreduce_sum(self, values: np.ndarray) -> np.ndarray: ...
    def broadcast(self, obj: Any) -> Any: ...
    def allgather_objects(self, obj: Any) -> list[Any]: ...
    def work_units(self, count: int) -> Iterator[int]: ...
    def serve(self) -> None: ...
    def node_shared_array(
        self, size: int, dtype: np.dtype, fill: Callable[[np.ndarray], None]
    ) -> np.ndarray: ...
    def node_ranks(self) -> list[list[int]]: ...
    def release_shared(self, array: np.ndarray) -> None: ...
    def barrier(self) -> None: ...
    def abort(self, code: int) -> None: ...
    def split(self, color: int) -> Comm: ...
    def isend(self, array: np.ndarray, dest: int, tag: int) -> Pending: ...
    def irecv(self, buffer: np.ndarray, source: int, tag: int) -> Pending: ...
    def heartbeat(self, names: Sequence[str], timeout_s: float, on_lost: Callable[[str], None],
                  where: Callable[[], str]) -> AbstractContextManager[object]: ...


class Pending:
    """A non-blocking send or receive in flight (point-to-point, for actor/learner set-ups
    such as Gorila). ``done`` never blocks; ``wait`` sleeps between tests, as the
    collectives do, so a waiting rank leaves its core to the others."""

    def __init__(self, request: Any, buffer: np.ndarray, poll_interval_s: float,
                 mpi: Any) -> None:
        self._request, self.buffer, self._poll, self._mpi = request, buffer, poll_interval_s, mpi
        self._status, self._finished = mpi.Status(), False
        self.count = 0  # elements received (a receive), once done

    def done(self) -> bool:
        if not self._finished and self._request.Test(self._status):
            self._finished = True
            self.count = self._status.Get_count(self._mpi._typedict[self.buffer.dtype.char])
        return self._finished

    def wait(self, while_waiting: Callable[[], None] | None = None) -> None:
        """Block until done, calling ``while_waiting`` between tests (e.g. to keep serving
        other messages, so two ranks waiting on each other cannot deadlock)."""
        while not self.done():
            if while_waiting is not None:
                while_waiting()
            time.sleep(self._poll)

    def cancel(self) -> None:
        """Withdraw a receive nobody will match (a send is never cancelled)."""
        if not self._finished:
            self._request.Cancel()
            self._request.Wait()
            self._finished = True


class LocalComm:
    """One process: every collective is the identity, but bytes are counted the same way."""

    rank = 0
    size = 1

    def __init__(self) -> None:
        self.bytes_sent = 0
        self.world_bytes_sent = 0
        self.wait_s = 0.0

    def _count(self, nbytes: int) -> None:
        self.bytes_sent += nbytes
        self.world_bytes_sent += nbytes

    def allgather_rows(
        self, rows: np.ndarray, counts: Sequence[int] | None = None
    ) -> np.ndarray:
        rows = np.ascontiguousarray(rows)
        self._count((8 if counts is None else 0) + rows.nbytes)
        return rows.copy()

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        self._count(values.nbytes)
        return np.array(values, copy=True)

    def broadcast(self, obj: Any) -> Any:
        return obj

    def allgather_objects(self, obj: Any) -> list[Any]:
        return [obj]

    def work_units(self, count: int) -> Iterator[int]:
        return iter(range(count))

    def serve(self) -> None:
        """Nothing to hand out: one process takes every unit itself."""

    def node_shared_array(
        self, size: int, dtype: np.dtype, fill: Callable[[np.ndarray], None]
    ) -> np.ndarray:
        array = np.empty(size, dtype=dtype)
        fill(array)
        return array

    def node_ranks(self) -> list[list[int]]:
        return [[0]]

    def release_shared(self, array: np.ndarray) -> None:
        """Nothing to do: a plain array is freed with its last reference."""

    def barrier(self) -> None:
        pass

    def abort(self, code: int) -> None:
        sys.exit(code)

    def split(self, color: int) -> LocalComm:
        return self

    def isend(self, array: np.ndarray, dest: int, tag: int) -> Pending:
        raise ValueError("point-to-point messages need at least 2 ranks (mpiexec -n 2 or more)")

    def irecv(self, buffer: np.ndarray, source: int, tag: int) -> Pending:
        raise ValueError("point-to-point messages need at least 2 ranks (mpiexec -n 2 or more)")

    def heartbeat(self, names: Sequence[str], timeout_s: float, on_lost: Callable[[str], None],
                  where: Callable[[], str]) -> AbstractContextManager[object]:
        """Nothing to watch: one process has no peers."""
        return contextlib.nullcontext()


class MPIComm:
    """MPI over ``COMM_WORLD`` (or a part of it); collectives wait without burning a core."""

    def __init__(self, poll_interval_s: float = 0.0005, world: Any = None) -> None:
        with warnings.catch_warnings(), stop_signals_end_mpi_init():
            # mpi4py's own multi-line warning for copies; make_comm says it in one line.
            warnings.filterwarnings("ignore", "suspicious MPI execution environment")
            from mpi4py import MPI

        self._mpi = MPI
        self.world = MPI.COMM_WORLD if world is None else world
        self.rank = self.world.Get_rank()
        self.size = self.world.Get_size()
        self.poll_interval_s = poll_interval_s
        self.bytes_sent = 0
        self.world_bytes_sent = 0
        self.wait_s = 0.0
        self._node = None
        self._scheduler = None  # a private communicator for work_units
        self._peers = None  # a private communicator for _exchange
        self._server: _UnitServer | None = None  # rank 0, during a round of work_units
        self._rounds = itertools.count()
        self._windows: list[tuple[np.ndarray, Any]] = []  # (array, the window it lives on)

    def _wait(self, *requests: Any, start_up: bool = False) -> None:
        """Until every request is done: spin on ``Test`` for up to ``SPIN_S`` (ranks that
        arrive together finish a small exchange in microseconds, and the gradient baselines
        make two per minibatch: a sleep each would cost them most of their time), then test
        between sleeps so that a rank waiting for slower ones leaves its core to them.
        ``start_up``: an exchange at a call's start, where a long wait is said once."""
        pending, started = list(requests), time.perf_counter()
        spin_until = started + SPIN_S
        hint_at = started + START_UP_HINT_S if start_up else float("inf")
        while not self._mpi.Request.Testall(pending):
            now = time.perf_counter()
            if now > spin_until:
                time.sleep(self.poll_interval_s)
            if now > hint_at:
                hint_at = float("inf")
                print(f"es: rank {self.rank} has waited {START_UP_HINT_S:g} s for the other "
                      f"ranks at the start of an es call; {WAITING_HINT}", file=sys.stderr,
                      flush=True)
        self.wait_s += time.perf_counter() - started

    def _exchange(self, mine: np.ndarray, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
        """Every rank's ``mine``, as bytes, in rank order, in one round of messages to and
        from each other rank. ``sizes``: each rank's byte count, where every rank knows them;
        otherwise each message starts with its part's size, and a part longer than
        ``HEAD_BYTES`` sends the rest in a second round.

        The rank that arrives last finds every other's message waiting and leaves at once,
        where a collective (or a second round) needed the others' tests. ``es-bench comm
        --late-ms 3`` (a generation's returns and step count, from the last rank's arrival
        until every rank has them): 0.9-1.0 ms against 2.0-2.1 ms through MPI's collectives
        on 2 ranks, 0.5-1.6 ms against 3.7 ms on 3."""
        payload = np.ascontiguousarray(mine).reshape(-1).view(np.uint8)
        if sizes is not None:
            parts = [np.empty(sizes[rank], dtype=np.uint8) for rank in range(self.size)]
            self._round(payload, parts)
            parts[self.rank] = payload
            return parts
        cut = HEAD_BYTES - 8
        head = np.concatenate((np.array([payload.size], dtype=np.int64).view(np.uint8),
                               payload[:cut]))
        heads = [np.empty(HEAD_BYTES, dtype=np.uint8) for _ in range(self.size)]
        self._round(head, heads)  # a message may be shorter than its receive
        heads[self.rank] = head
        sizes = [int(part[:8].view(np.int64)[0]) for part in heads]
        rests = [np.empty(max(size - cut, 0), dtype=np.uint8) for size in sizes]
        if any(rest.size for rest in rests):
            self._round(payload[cut:], rests)
        rests[self.rank] = payload[cut:]
        return [np.concatenate((part[8:8 + min(size, cut)], rest))
                for part, size, rest in zip(heads, sizes, rests, strict=True)]

    def _round(self, mine: np.ndarray, parts: list[np.ndarray]) -> None:
        """Send ``mine`` to each other rank and receive its message into ``parts[rank]``, on a
        private communicator; empty ones are neither sent nor received (every rank knows
        which). The receives are posted before the wait: MPICH's probes did not see a message
        that had arrived until a later test, a poll interval lost per exchange. Messages
        between two ranks keep their order, so successive rounds cannot mix."""
        byte = self._mpi.BYTE
        if self._peers is None:
            self._peers = self.world.Dup()
        requests = []
        for rank in range(self.size):
            if rank != self.rank and parts[rank].size:
                requests.append(self._peers.Irecv([parts[rank], byte], source=rank))
            if rank != self.rank and mine.size:
                requests.append(self._peers.Isend([mine, byte], dest=rank))
        self._wait(*requests)

    def allgather_rows(
        self, rows: np.ndarray, counts: Sequence[int] | None = None
    ) -> np.ndarray:
        """Concatenate every rank's rows (same dtype and width) in rank order.

        ``counts``, the number of rows each rank sends, saves a round of row counts when
        every rank already knows them (the static schedule).
        """
        rows = np.ascontiguousarray(rows)
        row_shape = rows.shape[1:]
        known = counts is not None
        if counts is not None and counts[self.rank] != len(rows):
            raise ValueError(
                f"rank {self.rank} sends {len(rows)} rows, expected {counts[self.rank]}"
            )
        if self.size <= POINT_TO_POINT_RANKS:
            row_bytes = rows.dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
            sizes = None if counts is None else [count * row_bytes for count in counts]
            gathered = np.concatenate([part.view(rows.dtype).reshape(-1, *row_shape)
                                       for part in self._exchange(rows, sizes)])
        else:
            if counts is None:
                counts = np.empty(self.size, dtype=np.int64)
                self._wait(self.world.Iallgather(np.array([len(rows)], dtype=np.int64),
                                                 counts))
            counts = np.asarray(counts, dtype=np.int64)
            gathered = np.empty((int(counts.sum()), *row_shape), dtype=rows.dtype)
            sizes = counts * int(np.prod(row_shape, dtype=np.int64))
            displacements = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            self._wait(self.world.Iallgatherv(
                rows, [gathered, (sizes.tolist(), displacements.tolist())]))
        self.bytes_sent += (0 if known else 8) + rows.nbytes
        self.world_bytes_sent += (0 if known else 8 * self.size) + gathered.nbytes
        return gathered

    def allreduce_sum(self, values: np.ndarray) -> np.ndarray:
        """The element-wise sum over the ranks; point-to-point (small arrays, small worlds)
        the ranks' arrays added in rank order, the same on every rank."""
        values = np.ascontiguousarray(values)
        if self.size <= POINT_TO_POINT_RANKS and values.nbytes <= POINT_TO_POINT_BYTES:
            parts = [part.view(values.dtype).reshape(values.shape)
                     for part in self._exchange(values, [values.nbytes] * self.size)]
            result = parts[0].copy()
            for part in parts[1:]:
                result += part
        else:
            result = np.empty_like(values)
            self._wait(self.world.Iallreduce(values, result, op=self._mpi.SUM))
        self.bytes_sent += values.nbytes
        self.world_bytes_sent += values.nbytes * self.size
        return result

    def broadcast(self, obj: Any) -> Any:
        """Small Python objects: the run folder's name at start-up, a callback's answer."""
        return self.world.bcast(obj, root=0)

    def allgather_objects(self, obj: Any) -> list[Any]:
        """Start-up only (small Python objects, e.g. each rank's pid and host): every es
        call's first exchange, so its wait says once if it is long (``START_UP_HINT_S``)."""
        import pickle

        payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        sizes = np.empty(self.size, dtype=np.int64)
        self._wait(self.world.Iallgather(np.array([payload.size], dtype=np.int64), sizes),
                   start_up=True)
        gathered = np.empty(int(sizes.sum()), dtype=np.uint8)
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        self._wait(self.world.Iallgatherv(
            payload, [gathered, (sizes.tolist(), offsets.tolist())]))
        return [pickle.loads(gathered[start:start + size].tobytes())
                for start, size in zip(offsets.tolist(), sizes.tolist(), strict=True)]

    def work_units(self, count: int) -> Iterator[int]:
        """Dynamic self-scheduling: each rank takes the next unit of ``range(count)`` as soon as
        it is free, so a rank stuck in a long episode does not hold the others up.

        Rank r starts with unit r, unasked (they all start together, so asking would only
        cost the first request's wait: rank 1 of 2 lost 0.9 ms of each 60-ms Swimmer
        generation to it). After that, rank 0 hands out unit numbers to the other ranks (8-byte
        messages on a private communicator, one unit per request) and takes its own from the
        same counter without a message. It answers requests whenever the caller lets it
        (``serve``, between env steps) and, once the units are gone, until every rank has
        heard so. With no more units than ranks nobody asks. An earlier
        design served from a thread on rank 0: its wake-ups every poll interval, and the
        interpreter lock handed back and forth with rank 0's episodes, cost rank 0 about a
        tenth of its stepping speed on 2 cores (Hopper ARS: 13.3 s of rollouts against
        12.0 s under the static schedule), which ate what the schedule saved. Every rank
        must call this once per round, and exhaust it, in the same order.
        """
        if self._scheduler is None:
            self._scheduler = self.world.Dup()
        round_ = next(self._rounds)
        request_tag, reply_tag = 2 * (round_ % 16000), 2 * (round_ % 16000) + 1
        if self.rank == 0:
            yield from self._units_on_rank_zero(count, request_tag, reply_tag)
            return
        if self.rank < count:
            yield self.rank
        if count <= self.size:
            return
        ask, unit = np.array([self.rank], dtype=np.int64), np.empty(1, dtype=np.int64)
        while True:
            received = self._scheduler.Irecv(unit, source=0, tag=reply_tag)
            self._wait(self._scheduler.Isend(ask, dest=0, tag=request_tag))
            self._wait(received)
            self.bytes_sent += 8
            if unit[0] < 0:
                break
            yield int(unit[0])

    def _units_on_rank_zero(self, count: int, request_tag: int,
                            reply_tag: int) -> Iterator[int]:
        server = _UnitServer(self._scheduler, count, self.size, request_tag, reply_tag,
                             self.poll_interval_s)
        self._server = server
        try:
            while (unit := server.take()) >= 0:
                yield unit
            # Every rank's last request answered (no more units) before the exchange. Only
            # on this way out: after an exception here (a second Ctrl-C, a crash) the ranks
            # whose requests it waited for may be gone, and it waited for them until the
            # heartbeat's deadline.
            started = time.perf_counter()
            while not server.answered_all():
                server.answer()
                time.sleep(self.poll_interval_s)
            self.wait_s += time.perf_counter() - started
            # A request and its reply per unit served: what the schedule adds to the traffic.
            self.world_bytes_sent += 16 * server.replies
        finally:
            self._server = None

    def serve(self) -> None:
        """Answer the dynamic schedule's waiting unit requests (rank 0, while it hands out
        units; otherwise nothing). Cheap enough to call every env step: it looks for
        requests at most once per poll interval."""
        server = self._server
        if server is not None and time.perf_counter() >= server.next_look:
            server.answer()

    @property
    def node(self) -> Any:
        if self._node is None:
            self._node = self.world.Split_type(self._mpi.COMM_TYPE_SHARED)
        return self._node

    def node_shared_array(
        self, size: int, dtype: np.dtype, fill: Callable[[np.ndarray], None]
    ) -> np.ndarray:
        """One array per node in an MPI shared window; the node's first rank fills it."""
        MPI = self._mpi
        dtype = np.dtype(dtype)
        leader = self.node.Get_rank() == 0
        window = MPI.Win.Allocate_shared(
            size * dtype.itemsize if leader else 0, dtype.itemsize, comm=self.node
        )
        buffer, _ = window.Shared_query(0)
        array = np.ndarray(buffer=buffer, dtype=dtype, shape=(size,))
        self._windows.append((array, window))
        if leader:
            fill(array)
        self._wait(self.node.Ibarrier())
        return array

    def node_ranks(self) -> list[list[int]]:
        """The ranks of each node, as MPI's shared-memory split groups them (the split that
        gives each node one noise table), in rank order. Start-up only (a collective)."""
        leaders = self.world.allgather(self.node.bcast(self.rank, root=0))
        nodes: dict[int, list[int]] = {}
        for rank, leader in enumerate(leaders):
            nodes.setdefault(leader, []).append(rank)
        return list(nodes.values())

    def release_shared(self, array: np.ndarray) -> None:
        """Free the window under ``array`` (every rank of the node calls this, together).
        Without it a sweep that trains runs in turn would keep one table per run. The array
        must not be used afterwards: its memory is gone."""
        for index, (held, window) in enumerate(self._windows):
            if held is array:
                del self._windows[index]
                # The ranks arrive together, so Free's own (busy-polling) barrier is short.
                self._wait(self.node.Ibarrier())
                window.Free()
                return
        raise ValueError("release_shared: this array is not a shared window of this comm")

    def barrier(self) -> None:
        self._wait(self.world.Ibarrier())

    def split(self, color: int) -> MPIComm:
        """The ranks that pass the same ``color``, as a communicator of their own (one run of
        a sweep); ranks keep their order."""
        return MPIComm(self.poll_interval_s, self.world.Split(color, self.rank))

    def isend(self, array: np.ndarray, dest: int, tag: int) -> Pending:
        """Start sending ``array`` (kept alive until done) to rank ``dest``."""
        array = np.ascontiguousarray(array)
        self.bytes_sent += array.nbytes
        self.world_bytes_sent += array.nbytes
        return Pending(self.world.Isend(array, dest=dest, tag=tag), array,
                       self.poll_interval_s, self._mpi)

    def irecv(self, buffer: np.ndarray, source: int, tag: int) -> Pending:
        """Start receiving into ``buffer`` (at most its size) from rank ``source``."""
        return Pending(self.world.Irecv(buffer, source=source, tag=tag), buffer,
                       self.poll_interval_s, self._mpi)

    def heartbeat(self, names: Sequence[str], timeout_s: float, on_lost: Callable[[str], None],
                  where: Callable[[], str]) -> Heartbeat:
        """Heartbeats between the ranks while the context lasts (``es.parallel.heartbeat``):
        ``on_lost`` gets a one-line report when a peer is silent for ``timeout_s``."""
        from es.parallel.heartbeat import Heartbeat

        return Heartbeat(self.world, self._mpi, names, timeout_s, on_lost, where)

    def abort(self, code: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        # The lines said before it travel through the launcher's proxy, which the abort kills
        # at once: on a busy machine Hydra lost both ranks' "interrupted on rank" lines in 4
        # of 80 aborts, none of 40 with this pause.
        time.sleep(ABORT_GRACE_S)
        # The whole job's communicator, whatever this one is: aborting a sweep's group ended
        # the job as well, but mpiexec then reported the other ranks' SIGKILL (9), not
        # ``code``.
        self._mpi.COMM_WORLD.Abort(code)


class _UnitServer:
    """Rank 0's side of one round of ``MPIComm.work_units``: the counter, and the requests of
    the other ranks answered from it. One receive is posted per asking rank, never one from
    ``ANY_SOURCE``: with MPICH's UCX netmod between hosts a wildcard receive, re-posted after
    each match, missed requests that had arrived (a rank waiting for its reply forever, seen
    with a hostfile of two names on a loaded machine, 5 of 5 runs)."""

    def __init__(self, scheduler: Any, count: int, ranks: int, request_tag: int,
                 reply_tag: int, poll_interval_s: float) -> None:
        self._scheduler, self._count = scheduler, count
        self._request_tag, self._reply_tag = request_tag, reply_tag
        self._poll = poll_interval_s
        # Unit 0 is rank 0's and unit r rank r's, unasked; the counter hands out the rest,
        # asked for only if there are more units than ranks.
        self._next, self._others_first = 0, min(count, ranks)
        askers = ranks - 1 if count > ranks else 0
        # Rank r's request lands in row r - 1; its receive stays posted until r hears -1,
        # and the rank leaves the round.
        self._asked = np.empty((askers, 1), dtype=np.int64)
        self._requests = {rank: self._listen(rank) for rank in range(1, askers + 1)}
        self.replies = 0
        self.next_look = 0.0

    def _listen(self, rank: int) -> Any:
        return self._scheduler.Irecv(self._asked[rank - 1], source=rank, tag=self._request_tag)

    def take(self) -> int:
        """The next unit, or -1 when none is left."""
        if self._next >= self._count:
            return -1
        unit = self._next
        self._next = self._others_first if unit == 0 else unit + 1
        return unit

    def answered_all(self) -> bool:
        return not self._requests

    def answer(self) -> None:
        """Reply to every request that has arrived (8-byte sends complete at once)."""
        self.next_look = time.perf_counter() + self._poll
        for rank, request in list(self._requests.items()):
            if not request.Test():
                continue
            reply = self.take()
            self.replies += 1
            self._scheduler.Send(np.array([reply], dtype=np.int64), dest=rank,
                                 tag=self._reply_tag)
            if reply < 0:
                del self._requests[rank]
            else:
                self._requests[rank] = self._listen(rank)


def disagreement(comm: Comm, settings: dict[str, str]) -> str | None:
    """Under a launcher every rank computes the same run from the same arguments; ranks
    given different ones (an unseeded random ``x0``, an override that depends on the rank)
    return different results without a word, or wait for good in an exchange of another
    size. ``settings``: each argument's name and a short summary of its value (an array's
    hash). None where every rank has rank 0's; else what differs, e.g. "seed (rank 0: 0,
    rank 1: 1)". Every rank gets the same answer (a collective: call it on all ranks)."""
    if comm.size == 1:
        return None
    every = comm.allgather_objects(settings)
    names = sorted({name for mine in every for name in mine})
    differing = [name for name in names if any(mine.get(name) != every[0].get(name)
                                                for mine in every)]
    if not differing:
        return None
    parts = []
    for name in differing:
        rank = next(rank for rank, mine in enumerate(every)
                    if mine.get(name) != every[0].get(name))
        shown = [every[0].get(name), every[rank].get(name)]
        if all(value is not None and len(value) <= 40 for value in shown):
            parts.append(f"{name} (rank 0: {shown[0]}, rank {rank}: {shown[1]})")
        else:
            parts.append(f"{name} (rank {rank}'s differs from rank 0's)")
    return ", ".join(parts)


@contextlib.contextmanager
def refused_together(comm: Comm, caller: str,
                     error_type: type[Exception] = ValueError) -> Iterator[None]:
    """Around a call's checks of its arguments: a rank that refused its own (an override or
    function that depends on the rank) raised alone while the others went on to their first
    exchange and waited for it for good. Here every rank says whether it refused; the one
    that did raises its error, the others ``error_type`` naming it, so that no rank goes on.
    A collective: every rank enters it, and only ``Exception``s are shared (an interrupt is
    the user's, not an argument's)."""
    refusal: Exception | None = None
    try:
        yield
    except Exception as error:
        refusal = error
    if comm.size > 1:
        said = comm.allgather_objects(
            None if refusal is None else f"{type(refusal).__name__}: {refusal}")
        refused = [(rank, text) for rank, text in enumerate(said) if text is not None]
        if refusal is None and refused:
            rank, text = refused[0]
            raise error_type(f"{caller} under mpiexec: rank {rank} refused its arguments "
                             f"({text}); every rank must be given the same ones")
    if refusal is not None:
        raise refusal


def rank_zero_decides(comm: Comm, callback: Callable[[Any], object], row: Any) -> bool:
    """Rank 0 calls ``callback(row)`` (a user's) and every rank gets its answer: False only if
    it returned False (NumPy's ``False`` too: a comparison of NumPy numbers gives one). If it
    raises, rank 0 raises that error and the other ranks a ``RuntimeError`` naming it, rather
    than waiting forever for an answer; ``sys.exit`` there ends every rank with its exit
    status, a ``KeyboardInterrupt`` interrupts every rank (the others, blocked in the
    exchange, would not see a Ctrl-C before rank 0's answer)."""
    answer = None
    if comm.rank == 0:
        try:
            returned = callback(row)
            answer = ("answered", not (returned is False or returned is np.False_))
        except Exception as error:
            comm.broadcast(("raised", f"{type(error).__name__}: {error}"))
            raise
        except SystemExit as exit_:  # a message (sys.exit("...")) is rank 0's to print
            code = exit_.code
            comm.broadcast(("exited", code if code is None or isinstance(code, int) else 1))
            raise
        except KeyboardInterrupt:
            comm.broadcast(("interrupted", None))
            raise
    kind, value = comm.broadcast(answer)
    if kind == "raised":
        raise RuntimeError(f"the callback raised on rank 0: {value}")
    if kind == "exited":
        raise SystemExit(value)
    if kind == "interrupted":
        raise KeyboardInterrupt("interrupted on rank 0, in the callback")
    return value


def under_mpi_launcher() -> bool:
    """MPI where a launcher's variables say so, or where ``ES_COMM`` forces it either way;
    another ``ES_COMM`` is a LaunchError (a typo would have run alone, silently)."""
    forced = os.environ.get("ES_COMM")
    if forced is None:
        return any(name in os.environ for name in LAUNCHER_VARIABLES)
    if forced not in ("mpi", "local"):
        raise LaunchError(f"ES_COMM={forced!r}: allowed are 'mpi' and 'local', or leave it "
                          "unset to follow the launcher")
    return forced == "mpi"


class LaunchError(RuntimeError):
    """The processes were started so that they cannot form one job."""


def launcher_copies() -> int:
    """How many separate one-process copies a launcher started where one job was meant; 0
    when this process is not one of them (to be asked only where MPI sees a single process).

    A launcher whose process manager this MPI does not speak starts every process as its own
    one-rank job: N copies of the same run, writing the same folder. ``srun`` without an MPI
    plugin that this MPI speaks (MpiDefault=none, or PMIx for the ``mpich`` wheel) still tells
    each of them the step's task count; an ``mpiexec`` of another MPI than mpi4py's (a
    cluster's Open MPI module before the ``mpich`` wheel's, or the reverse) tells them its
    process count. A PMI that says the job has one process (Hydra's ``mpiexec -n 1`` inside
    an allocation) is not that case.
    """
    for name in (*LAUNCHER_SIZES, "SLURM_STEP_NUM_TASKS"):
        count = os.environ.get(name, "")
        if count.isdigit():
            return int(count) if int(count) > 1 else 0
    return 0


@contextlib.contextmanager
def stop_signals_end_mpi_init() -> Iterator[bool]:
    """Around MPI's start (``MPIComm``'s first, and es-train's check before it); yields
    whether MPI is still to start here under a launcher. MPI_Init (mpi4py's import) waits in
    C for every rank, and a Python signal handler runs only once it returns. A rank that a
    Ctrl-C ended while it was still loading never comes (MPICH's Hydra waits for every
    process), and the ranks already waiting sat in MPI_Init for good, burning a core, their
    SIGINT and SIGTERM held by handlers that could not run. During the wait the two signals
    keep their default action: they end the process, which has run nothing yet."""
    import signal
    import threading

    if ("mpi4py.MPI" in sys.modules or not under_mpi_launcher()
            or threading.current_thread() is not threading.main_thread()):
        yield False
        return
    saved = {signum: signal.signal(signum, signal.SIG_DFL)  # an ignored one stays ignored
             for signum in (signal.SIGINT, signal.SIGTERM)
             if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        yield True
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def make_comm() -> Comm:
    """MPI when started by ``mpiexec``/``srun`` (or ``ES_COMM=mpi``), else one process.
    Raises LaunchError for processes that a launcher started as copies, each alone
    (``launcher_copies``)."""
    comm = MPIComm() if under_mpi_launcher() else LocalComm()
    copies = launcher_copies() if comm.size == 1 else 0
    if not copies:
        return comm
    if os.environ.get("ES_COMM") == "local":
        raise LaunchError(f"ES_COMM=local: the launcher started {copies} processes, and each "
                          "would train alone; unset ES_COMM to run them as one job")
    if not any(name in os.environ for name in LAUNCHER_SIZES):  # srun's count alone
        raise LaunchError(
            f"srun started {copies} separate one-rank copies, not one {copies}-rank job (the "
            "MPI found no process manager it speaks): use srun --mpi=pmi2 for the mpich "
            "wheel, or your site's MPI with its srun plugin (docs/cluster.md)")
    from mpi4py import MPI

    library = MPI.Get_library_version().splitlines()[0].strip()
    raise LaunchError(
        f"the launcher started {copies} processes, but each one's MPI ({library}) sees only "
        f"itself: the mpiexec is another MPI's; use the mpiexec of mpi4py's MPI (for the "
        f"mpich wheel: {Path(sys.executable).parent / 'mpiexec'}), or build mpi4py against "
        "your site's MPI (docs/cluster.md)")
