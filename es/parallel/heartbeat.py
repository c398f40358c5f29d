"""A deadline on silence: every rank of a job hears from its peers at least once a second, so
a rank that stops answering (a stopped process, a hung or cut-off node) is noticed within
``timeout_s``, while one that is merely busy (a long episode, a loaded machine, an uneven
schedule) is not: its heartbeat thread keeps beating while its main thread works. A whole job
stopped and continued (Slurm's suspend and resume, SIGSTOP then SIGCONT to every rank) goes
on: a rank that finds it was itself stopped counts its peers' silence from its waking.

Heartbeats run in a star on a private communicator: rank 0 beats to every rank and every
rank beats to rank 0, two messages per rank and period however large the job. Rank 0 thus
hears of any silent rank; the others hear of a silent rank 0, and give it
``HUB_MARGIN_PERIODS`` more, so that when rank 0 is alive it names the lost rank first. Rank
0 likewise gives ``NEIGHBOUR_MARGIN_PERIODS`` more to a silent rank it sees running on its
own node, which may be waiting for MPI's lock behind a send to the lost rank.
Whoever notices calls ``on_lost`` with its one-line report (the caller prints it and aborts
the job), whatever the main thread is waiting in: a collective, the work-stealing server, a
broadcast, file I/O.

The deadline is kept by a watchdog thread that makes no MPI call, apart from the thread that
beats. Between nodes, MPI's send to a peer that died can spin inside the call for good
(MPICH's TCP netmod, seen with a SIGKILLed rank on another host) while holding MPI's lock,
and every other MPI call of the process then waits for it: a deadline checked between MPI
calls is never checked again. The watchdog sees the silence all the same, and names the peer
that the stuck send was for.

MPI under a launcher that kills the whole job when one process dies (Hydra, srun with
--kill-on-bad-exit) covers a dead rank by itself; this covers the ranks that do not die.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from es.core.exit_codes import PEER_LOST

#: Seconds between two heartbeats of a rank.
PERIOD_S = 1.0
#: Periods that a rank other than 0 adds to its deadline for rank 0: rank 0 may itself be
#: stuck sending to the rank that was lost, its silence then starting up to a period after
#: that rank's; two let rank 0's watchdog name the lost rank before anyone blames rank 0.
HUB_MARGIN_PERIODS = 2
#: Periods that rank 0 adds for a peer on its own node that it sees alive and not stopped:
#: such a rank may be silent only because its main thread holds MPI's lock, stuck sending to
#: a rank on another node that was lost, and its last beat may have come up to a period
#: before the lost rank's; two let the lost rank cross its deadline first.
NEIGHBOUR_MARGIN_PERIODS = 2
_TAG = 7


def peer_lost(report: str, comm: Any, then: Callable[[], str], program: str) -> None:
    """A peer is silent: say which (``report``) and ``then()`` (what the user can do next),
    and end the job with ``PEER_LOST`` (``comm.abort``). Called from the watchdog thread; the
    main thread may be waiting in a collective that would never end."""
    print(f"{program}: {report}; {then()} (exit code {PEER_LOST})", file=sys.stderr,
          flush=True)
    comm.abort(PEER_LOST)  # after a moment for the line to pass the launcher's proxy


class Heartbeat:
    """Heartbeats on a duplicate of ``world`` (an mpi4py communicator), started on entry and
    stopped on exit; entering and a normal exit are collective (every rank, together).

    ``names``: each rank's "pid@host", for the report. ``where``: what the rank is doing,
    e.g. "generation 12", read when a report is made.
    """

    def __init__(self, world: Any, mpi: Any, names: Sequence[str], timeout_s: float,
                 on_lost: Callable[[str], None], where: Callable[[], str] = lambda: "",
                 period_s: float = PERIOD_S) -> None:
        if timeout_s <= period_s:
            raise ValueError(f"timeout_s {timeout_s}: must exceed the heartbeat period "
                             f"{period_s} s")
        self._world, self._mpi, self.names = world, mpi, list(names)
        self.timeout_s, self.period_s = timeout_s, period_s
        self._on_lost, self._where = on_lost, where
        self.rank, self.size = world.Get_rank(), world.Get_size()
        self.peers = list(range(1, self.size)) if self.rank == 0 else [0]
        self.deadline_s = timeout_s + (HUB_MARGIN_PERIODS * period_s if self.rank else 0.0)
        self._comm: Any = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.sent = 0  # heartbeats sent to each peer
        self.heard = dict.fromkeys(self.peers, 0)  # heartbeats received from each peer
        self._pending: list[Any] = []
        self._sending: tuple[int, float] | None = None  # (peer, since) while in a send
        self.reported = False

    def __enter__(self) -> Heartbeat:
        self._comm = self._world.Dup()
        now = time.monotonic()
        self._last_heard = dict.fromkeys(self.peers, now)
        self._threads = [threading.Thread(target=target, name=name, daemon=True)
                         for target, name in ((self._beat, "es-heartbeat"),
                                              (self._watch, "es-heartbeat-watchdog"))]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.stop()
        else:  # a way out that not every rank may take: no collective, only quiet
            self._stop.set()
            # Ended now, not later: they hold ``where``'s objects (a run's games), which must
            # not outlive the caller's collection. A thread stuck in MPI is left behind.
            for thread in self._threads:
                thread.join(timeout=2 * self.period_s)

    def _beat(self) -> None:
        """Send a beat to each peer every period and take in theirs: the only MPI calls."""
        beat = np.zeros(1, dtype=np.int64)
        inbox = np.empty(1, dtype=np.int64)
        status = self._mpi.Status()
        next_beat = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_beat:
                self.sent += 1
                beat[0] = self.sent
                self._pending = [request for request in self._pending if not request.Test()]
                for peer in self.peers:
                    self._sending = (peer, time.monotonic())
                    self._pending.append(self._comm.Isend(beat.copy(), dest=peer, tag=_TAG))
                self._sending = None
                next_beat = now + self.period_s
            while self._comm.Iprobe(source=self._mpi.ANY_SOURCE, tag=_TAG, status=status):
                source = status.Get_source()
                self._comm.Recv(inbox, source=source, tag=_TAG)
                self.heard[source] += 1
                self._last_heard[source] = time.monotonic()
            self._stop.wait(min(0.1, self.period_s / 4))

    def _watch(self) -> None:
        """Keep the deadline without MPI: it holds while the beating thread is stuck in an MPI
        call, and so is every MPI call of this process."""
        last_look = time.monotonic()
        while not self._stop.wait(min(0.1, self.period_s / 4)):
            now = time.monotonic()
            if now - last_look > self.timeout_s / 2:
                # This process itself was stopped (SIGSTOP to the whole job: Slurm's suspend,
                # a user pausing a run) and its peers most likely with it: their beats are
                # only now resuming, so count their silence from here, not from before.
                self._last_heard = dict.fromkeys(self.peers, now)
            last_look = now
            silent = {peer: now - heard for peer, heard in self._last_heard.items()
                      if now - heard > self.deadline_s}
            silent = {peer: seconds for peer, seconds in silent.items()  # /proc read only
                      if seconds > self.deadline_s + self._margin(peer)}  # past the deadline
            if not silent:
                continue
            sending = self._sending
            if sending is not None and sending[0] in silent and now - sending[1] > self.period_s:
                # Stuck sending to that peer: the others fell silent only because this
                # process cannot take in their beats while the send holds MPI's lock.
                silent = {sending[0]: silent[sending[0]]}
            self.reported = True
            self._on_lost(self.report(silent))
            return

    def _margin(self, peer: int) -> float:
        """Seconds more for a silent ``peer`` that rank 0 sees running on its own node (its
        ``/proc`` entry there, in a state other than stopped or dead)."""
        pid, _, host = self.names[peer].partition("@")
        if self.rank != 0 or host != self.names[0].partition("@")[2]:
            return 0.0
        try:
            with open(f"/proc/{int(pid)}/stat") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except (OSError, ValueError, IndexError):  # gone, or not a pid this node can see
            return 0.0
        return 0.0 if state in ("T", "t", "Z", "X") else NEIGHBOUR_MARGIN_PERIODS * self.period_s

    def report(self, silent: dict[int, float]) -> str:
        """'rank 3 (pid 4242 on node1) silent for 61 s' for each silent peer, in one line."""
        where = self._where()
        # Whole seconds, rounded down: a peer found silent 3.6 s into a 3-s deadline was
        # silent "for 3 s", the deadline it broke, not for 4.
        peers = ", ".join(f"rank {rank} ({self._name(rank)}) silent for {int(seconds)} s"
                          for rank, seconds in sorted(silent.items()))
        return (f"peer lost: {peers} (no heartbeat within run.peer_timeout_s = "
                f"{self.timeout_s:g} s: stopped, hung or cut off)"
                + (f" while rank {self.rank} was in {where}" if where else ""))

    def _name(self, rank: int) -> str:
        pid, _, host = self.names[rank].partition("@")
        return f"pid {pid} on {host}"

    def stop(self) -> None:
        """Stop beating, every rank together: each rank then receives every heartbeat its
        peers sent it, so none is left unmatched when MPI finalizes."""
        barrier = self._world.Ibarrier()  # the thread still watches while peers arrive
        while not barrier.Test():
            time.sleep(0.001)
        self._stop.set()
        for thread in self._threads:
            thread.join()
        if self.reported:
            return
        counts = np.array(self._comm.allgather(self.sent), dtype=np.int64)
        inbox = np.empty(1, dtype=np.int64)
        for peer in self.peers:
            for _ in range(int(counts[peer]) - self.heard[peer]):
                self._comm.Recv(inbox, source=peer, tag=_TAG)
        self._mpi.Request.Waitall(self._pending)
        self._comm.Free()
