"""Deadlines for Kubernetes calls: no request is sent, waited on or retried past the caller's deadline.

A Lambda invocation ends at its timeout whatever its calls are doing. An API server that accepts
connections and never answers (a hang, as a client sees it behind a stuck load balancer) holds each request
for its whole read timeout, and the client's retries multiply that (5 attempts of 30 s): the invocation
then dies at its timeout with nothing recorded. Inside :func:`deadline_scope` the client derives each
attempt's connect and read timeouts from the time left, sleeps no backoff that would end past it, and
raises :class:`KubeDeadlineExceededError` — a :class:`KubeConnectionError`, which every caller already
treats as an outage — while the caller still has time to record what happened.

The deadline lives in a context variable, as the AWS launch deadline does (``aws/deadline.py``): each
thread carries its own, and threads that outlive invocations (the cluster cache's watches) carry none.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from fleetwright.kube.errors import KubeConnectionError

# Below this much time left no request is worth sending: it could not get an answer and be acted on.
MIN_ATTEMPT_SECONDS = 0.05


class KubeDeadlineExceededError(KubeConnectionError):
    """A Kubernetes call abandoned at its caller's deadline (the API server did not answer in time)."""


@dataclass(frozen=True, slots=True)
class KubeDeadline:
    """A point in time (``at``, on ``clock``: monotonic seconds) after which no Kubernetes request waits."""

    at: float
    clock: Callable[[], float] = time.monotonic

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - self.clock()

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> KubeDeadline:
        """The deadline ``seconds`` from now on ``clock``."""
        return cls(clock() + seconds, clock)


_CURRENT: ContextVar[KubeDeadline | None] = ContextVar("fleetwright_kube_deadline", default=None)


@contextlib.contextmanager
def deadline_scope(deadline: KubeDeadline | None) -> Iterator[KubeDeadline | None]:
    """Bound every Kubernetes call made in this context (thread) by ``deadline`` (None: unbounded).
    A scope inside another keeps the earlier of the two deadlines."""
    outer = _CURRENT.get()
    if deadline is not None and outer is not None and outer.remaining() < deadline.remaining():
        deadline = outer
    token = _CURRENT.set(deadline if deadline is not None else outer)
    try:
        yield _CURRENT.get()
    finally:
        _CURRENT.reset(token)


def current_deadline() -> KubeDeadline | None:
    """The deadline of the calling context, if any."""
    return _CURRENT.get()


def attempt_timeouts(connect: float, read: float, what: str) -> tuple[float, float]:
    """The connect and read timeouts of one attempt: the client's own, cut to the time left; raises
    :class:`KubeDeadlineExceededError` when too little is left to send it."""
    deadline = _CURRENT.get()
    if deadline is None:
        return connect, read
    left = deadline.remaining()
    if left < MIN_ATTEMPT_SECONDS:
        raise KubeDeadlineExceededError(f"{what}: not sent, the caller's deadline has passed")
    return min(connect, left), min(read, left)


def check_backoff(delay: float, what: str, attempts: int) -> None:
    """Raise :class:`KubeDeadlineExceededError` when sleeping ``delay`` and trying again could not end
    before the deadline."""
    deadline = _CURRENT.get()
    if deadline is not None and deadline.remaining() < delay + MIN_ATTEMPT_SECONDS:
        raise KubeDeadlineExceededError(
            f"{what}: not retried, the next attempt could not end before the caller's deadline "
            f"({attempts} attempt{'s' if attempts != 1 else ''} made)"
        )
