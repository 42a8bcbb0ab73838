"""The loop's clocks: real time waits on the watch queue as the loop always did, the tests' virtual clock
lets batching windows pass without waiting and holds time while a promised signal is on its way."""

from __future__ import annotations

import queue
import threading

from fleetwright.provisioning.clock import RealClock
from tests.provisioning.virtual_clock import VirtualLoopClock


def test_the_real_clock_returns_a_waiting_signal_and_none_when_there_is_none() -> None:
    signals: queue.Queue[str] = queue.Queue()
    clock = RealClock()
    assert clock.wait(signals, 0.0) is None
    signals.put("pod")
    assert clock.wait(signals, 5.0) == "pod"  # already there: no wait


def test_a_virtual_wait_runs_what_is_due_and_stops_at_its_timeout() -> None:
    clock = VirtualLoopClock(start=100.0, signals_at_start=0)
    signals: queue.Queue[str] = queue.Queue()
    clock.at(2.0, lambda: (signals.put("late"), 1)[1])
    assert clock.wait(signals, 1.0) is None and clock.monotonic() == 101.0
    assert clock.wait(signals, 5.0) == "late" and clock.monotonic() == 102.0
    assert clock.wait(signals, 0.0) is None and clock.monotonic() == 102.0


def test_a_virtual_wait_holds_time_until_a_promised_signal_comes() -> None:
    clock = VirtualLoopClock(start=100.0, signals_at_start=1)
    signals: queue.Queue[str] = queue.Queue()
    sent = threading.Timer(0.05, signals.put, args=("listed",))  # the watch thread's first listing
    sent.start()
    assert clock.wait(signals, 10.0) == "listed"
    assert clock.monotonic() == 100.0  # no virtual time passed while it was on its way
    sent.join()


def test_sleep_moves_the_virtual_clock_and_runs_what_falls_due() -> None:
    clock = VirtualLoopClock(start=0.0, signals_at_start=0)
    ran: list[float] = []
    clock.at(1.0, lambda: (ran.append(clock.now), 0)[1])
    clock.at(3.0, lambda: (ran.append(clock.now), 0)[1])
    clock.sleep(2.0)
    assert ran == [1.0] and clock.monotonic() == 2.0
