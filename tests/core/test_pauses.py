"""The pause ledger: which late heartbeats are a stopped process (SIGSTOP, then SIGCONT) and
which are not."""

import threading

import pytest

from es.core.pauses import PauseClock, PauseLedger


def ledger() -> PauseLedger:
    return PauseLedger(now=0.0, interval=0.1, tolerance=0.5, confirm_s=10.0)


def test_a_stop_whose_sigcont_came_first_counts_its_lateness():
    clock = ledger()
    clock.beat(0.1, continued=0)
    clock.beat(5.2, continued=1)  # 5.1 s after the last beat, 0.1 s of it the usual sleep
    assert clock.paused_s == pytest.approx(5.0)


def test_a_stop_whose_sigcont_is_handled_after_the_heartbeat_counts_then():
    clock = ledger()
    clock.beat(3.1, continued=0)  # the heartbeat woke first
    assert clock.paused_s == 0.0
    clock.beat(3.2, continued=1)
    assert clock.paused_s == pytest.approx(3.0)


def test_a_stall_without_sigcont_is_not_a_pause_even_if_one_comes_later():
    clock = PauseLedger(now=0.0, interval=0.1, tolerance=0.5, confirm_s=1.0)
    clock.beat(2.1, continued=0)  # a long call held the interpreter: no SIGCONT follows
    for tick in range(1, 13):  # heartbeats on time until confirm_s has passed: forgotten
        clock.beat(2.1 + 0.1 * tick, continued=0)
    clock.beat(3.4, continued=1)  # a SIGCONT sent to a running process
    assert clock.paused_s == 0.0


def test_a_sigcont_to_a_running_process_does_not_make_a_later_stall_a_pause():
    clock = ledger()
    clock.beat(0.1, continued=1)
    clock.beat(0.2, continued=1)
    clock.beat(3.2, continued=1)
    assert clock.paused_s == 0.0


def test_lateness_within_the_tolerance_is_not_a_pause_and_pauses_add_up():
    clock = ledger()
    clock.beat(0.5, continued=0)  # 0.4 s late: a busy machine
    assert clock.paused_s == 0.0
    clock.beat(2.6, continued=1)
    clock.beat(2.7, continued=1)
    clock.beat(6.8, continued=2)
    assert clock.paused_s == pytest.approx(2.0 + 4.0)


def test_a_clock_started_off_the_main_thread_counts_nothing_and_stops_cleanly():
    clock = PauseClock()
    worker = threading.Thread(target=lambda: (clock.start(), clock.stop()))
    worker.start()
    worker.join()
    assert clock.paused_s == 0.0
