"""The provisioning loop's clock: where the loop reads the time, sleeps, and waits for watch signals.

Deadlines, batching windows and the lease wait are all read from one :class:`LoopClock`, and every wait of
the loop (for the next pod signal, for the lease) goes through it, so the same loop runs on real time in a
function and on a virtual clock in tests and replays, with no real-time window anywhere.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class LoopClock(Protocol):
    """Monotonic seconds, a sleep, and a wait for the next item of a queue; a virtual clock moves its time
    when the loop sleeps or waits instead of blocking."""

    def monotonic(self) -> float:
        """Seconds on a monotonic scale (deadlines, batching windows)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass (the lease wait, retry back-offs)."""
        ...

    def wait(self, signals: queue.Queue[T], timeout: float) -> T | None:
        """The next item of ``signals``, waiting at most ``timeout`` seconds for it (0: only one already
        there); None when none came."""
        ...


class RealClock:
    """Real time: ``time.monotonic`` and ``time.sleep`` unless others are given, and a blocking wait on the
    queue (what the loop did before it took a clock)."""

    def __init__(
        self,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._monotonic = monotonic
        self._sleep = sleep

    def monotonic(self) -> float:
        """The given monotonic reading."""
        return self._monotonic()

    def sleep(self, seconds: float) -> None:
        """The given sleep."""
        self._sleep(seconds)

    def wait(self, signals: queue.Queue[T], timeout: float) -> T | None:
        """Block on ``signals`` for up to ``timeout`` real seconds."""
        try:
            if timeout <= 0:
                return signals.get_nowait()
            return signals.get(timeout=timeout)
        except queue.Empty:
            return None
