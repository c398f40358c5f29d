"""The seconds a process stood stopped (SIGSTOP, a scheduler's suspend such as Slurm's
``scontrol suspend``), so that a run's wall-time budget and its ``time_s`` count running time,
as Slurm's time limit does, and a measurement that pauses a run beside it leaves its figures
alone.

A stopped process cannot see the stop begin, only its end: a heartbeat thread wakes every
``interval`` seconds, and a wake that comes much later than asked is a gap; the SIGCONT that
every stop ends with tells a pause from a stall (a long call that held the interpreter lock
also delays the heartbeat, but no SIGCONT follows it). The handler may run before or after the
heartbeat sees the gap, so a gap waits up to ``confirm_s`` for its SIGCONT.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass


@dataclass
class _Gap:
    seconds: float
    continued_before: int  # SIGCONTs counted before the gap
    seen_at: float


class PauseLedger:
    """The bookkeeping, apart from threads and signals: heartbeats in (their time and the
    SIGCONTs counted so far), paused seconds out."""

    def __init__(self, now: float, interval: float, tolerance: float, confirm_s: float) -> None:
        """A gap counts when a heartbeat comes over ``tolerance`` seconds late and a SIGCONT
        arrives by ``confirm_s`` after it; its length is the lateness (to ``interval``)."""
        self.interval, self.tolerance, self.confirm_s = interval, tolerance, confirm_s
        self.paused_s = 0.0
        self._last, self._continued = now, 0
        self._pending: _Gap | None = None

    def beat(self, now: float, continued: int) -> None:
        """A heartbeat at ``now``, with ``continued`` SIGCONTs counted so far."""
        pending = self._pending
        if pending is not None:
            if continued > pending.continued_before:
                self.paused_s += pending.seconds
                self._pending = None
            elif now - pending.seen_at > self.confirm_s:
                self._pending = None  # a stall, not a stop: no SIGCONT came
        late = now - self._last - self.interval
        if late > self.tolerance:
            if continued > self._continued:  # its SIGCONT was handled first
                self.paused_s += late
            else:
                self._pending = _Gap(late, self._continued, now)
        self._last, self._continued = now, continued


class PauseClock:
    """The ledger fed by a daemon heartbeat thread and a SIGCONT handler, between ``start``
    and ``stop``. Signal handlers can only be set from the main thread: started elsewhere (a
    run inside a worker thread), it counts no pauses."""

    def __init__(self, interval: float = 0.1, tolerance: float = 0.5,
                 confirm_s: float = 10.0) -> None:
        self._settings = (interval, tolerance, confirm_s)
        self._ledger: PauseLedger | None = None
        self._continued = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # one beat at a time; the handler never takes it
        self._thread: threading.Thread | None = None
        self._previous: object = None

    @property
    def paused_s(self) -> float:
        """Seconds counted as stopped since ``start``. Read, it beats too: just after a stop
        the reader (the main thread, whose SIGCONT handler has run by then) may be ahead of the
        heartbeat thread, which a busy machine schedules late."""
        if self._ledger is None:
            return 0.0
        if self._thread is not None:
            self._tick()
        return self._ledger.paused_s

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous = signal.signal(signal.SIGCONT, self._on_continue)
        interval, tolerance, confirm_s = self._settings
        self._ledger = PauseLedger(time.monotonic(), interval, tolerance, confirm_s)
        self._stopping.clear()
        self._thread = threading.Thread(target=self._beat, name="es-pause-clock", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the heartbeat and give SIGCONT its previous handler back."""
        if self._thread is None:
            return
        self._stopping.set()
        self._thread.join()
        self._thread = None
        signal.signal(signal.SIGCONT,
                      signal.SIG_DFL if self._previous is None else self._previous)

    def _on_continue(self, signum: int, frame: object) -> None:
        self._continued += 1

    def _tick(self) -> None:
        with self._lock:
            self._ledger.beat(time.monotonic(), self._continued)

    def _beat(self) -> None:
        while not self._stopping.wait(self._settings[0]):
            self._tick()
