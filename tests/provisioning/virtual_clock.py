"""A virtual :class:`~fleetwright.provisioning.clock.LoopClock` for the provisioning loop's tests: time moves
only when the loop waits or sleeps, and what a test makes happen meanwhile (pods arriving) happens at a
virtual moment.

The pod watch runs on a thread of its own and delivers its signals a little later in real time, so the clock
is told how many signals each watch will deliver (``signals_at_start``: the watch's first listing; an
action's return value: the pods it made unschedulable) and does not let virtual time pass while one of them
is still on its way: the loop then sees the same signals at the same virtual moments on any machine.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

SETTLE_SECONDS = 30.0  # how long a signal the clock was promised may take to come (a failure guard only)


class VirtualLoopClock:
    """Monotonic seconds starting at ``start`` that move only in :meth:`sleep` and :meth:`wait`; one clock
    may be shared by several loops on several threads (each sleep or wait moves it for all)."""

    def __init__(self, start: float = 1_000.0, *, signals_at_start: int = 1) -> None:
        self.now = start
        self.signals_at_start = signals_at_start
        self._lock = threading.RLock()
        self._actions: list[tuple[float, int, Callable[[], int]]] = []
        self._seq = itertools.count()
        self._expected: dict[int, int] = {}  # per queue: signals promised and not yet taken

    def monotonic(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            until = self.now + max(0.0, seconds)
            while self._advance(until):
                pass

    def at(self, delay: float, action: Callable[[], int]) -> None:
        """Run ``action`` ``delay`` virtual seconds from now; it returns how many watch signals it causes
        (each watching loop's queue gets that many)."""
        with self._lock:
            heapq.heappush(self._actions, (self.now + delay, next(self._seq), action))

    def wait(self, signals: queue.Queue[T], timeout: float) -> T | None:
        key = id(signals)
        with self._lock:
            self._expected.setdefault(key, self.signals_at_start)
            end = self.now + max(0.0, timeout)
        while True:
            try:
                return self._took(key, signals.get_nowait())
            except queue.Empty:
                pass
            with self._lock:
                promised = self._expected[key] > 0
                if not promised:
                    if self.now >= end or not self._advance(end):
                        self.now = max(self.now, end)
                        return None
                    continue  # an action ran before ``end``: look again
            try:
                return self._took(key, signals.get(timeout=SETTLE_SECONDS))
            except queue.Empty:
                raise AssertionError(f"a watch signal promised to the clock never came ({key})") from None

    def _took(self, key: int, item: T) -> T:
        with self._lock:
            self._expected[key] = max(0, self._expected[key] - 1)
        return item

    def _advance(self, until: float) -> bool:
        """Move to the next action due by ``until`` and run it (True), or to ``until`` (False)."""
        if self._actions and self._actions[0][0] <= until:
            when, _, action = heapq.heappop(self._actions)
            self.now = max(self.now, when)
            caused = action()
            for key in self._expected:
                self._expected[key] += caused
            return True
        self.now = max(self.now, until)
        return False


def arrivals(clock: VirtualLoopClock, delays: list[float], arrive: Callable[[int], Any]) -> None:
    """Schedule ``arrive(i)`` at each of ``delays`` (seconds from now): one pod made unschedulable each."""
    for index, delay in enumerate(delays):
        clock.at(delay, lambda index=index: (arrive(index), 1)[1])
