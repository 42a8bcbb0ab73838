"""The hand-moved clock of the tests: epoch (or monotonic) seconds that move only when a test says so.

It is the one fake clock for code that reads the time through a ``() -> float`` callable. The provisioning
loop waits on a :class:`~fleetwright.provisioning.clock.LoopClock` instead (it sleeps and blocks on its
signal queue), so its tests use ``tests/provisioning/virtual_clock.py``, a clock of another kind: time there
moves when the loop waits, not when the test says.
"""

from __future__ import annotations

EPOCH = 1_800_000_000.0  # 2027-01-15T08:00:00Z


class FakeClock:
    """Seconds that tests move forward by hand: call it for the time, :meth:`advance` it or set ``now``."""

    def __init__(self, now: float = EPOCH) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
