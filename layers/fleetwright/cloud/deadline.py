"""The launch deadline, part of the cloud contract: a caller bounds the cloud calls it makes in a context
(a thread) by running them inside :func:`deadline_scope`, and the provider reads :func:`current_deadline` to
send no request, and sleep no retry, past it (``fleetwright.aws.deadline`` does so for boto3's clients).

The deadline lives in a context variable, so parallel launches in a thread pool each see their own; calls
made outside any scope are not bounded by it. A provider that sends a request which may take effect without
an answer sets :attr:`Deadline.uncertain`, so the caller does not conclude that nothing was launched.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(eq=False, slots=True)
class Deadline:
    """A point in time (``at``, on ``clock``: epoch seconds) after which no cloud request goes out."""

    at: float
    clock: Callable[[], float] = time.time
    uncertain: bool = False  # set when a request may have reached the cloud without an answer

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - self.clock()


_CURRENT: ContextVar[Deadline | None] = ContextVar("fleetwright_cloud_deadline", default=None)


@contextlib.contextmanager
def deadline_scope(deadline: Deadline) -> Iterator[Deadline]:
    """Bound every cloud call made in this context (thread) by ``deadline``."""
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


def current_deadline() -> Deadline | None:
    """The deadline of the calling context, if any."""
    return _CURRENT.get()
