"""Injected failures: an API outage and error answers for chosen verbs and resources.

Tests use them to show what Fleetwright does when the control plane restarts (every connection is reset,
as a client sees while the EKS endpoint's load balancer has no healthy API server behind it) or when the
server answers 409 Conflict / 429 Too Many Requests (priority-and-fairness throttling, a PDB refusing an
eviction). The switches are read on every request, so they take effect on the running server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from fleetwright.local.apiserver.errors import ApiError

_REASONS = {
    403: "Forbidden",
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class Injection:
    """``status`` answered to the next ``times`` requests ``verb resource[/subresource]``; ``hits`` counts
    the answers given so far. ``verb`` is the HTTP method (``PATCH`` nodes is a cordon, ``POST``
    pods/eviction an eviction); ``None`` matches any."""

    status: int
    verb: str | None
    resource: str | None
    subresource: str | None
    times: int
    retry_after: float | None = None
    hits: int = 0

    def matches(self, verb: str, resource: str, subresource: str | None) -> bool:
        return (
            self.hits < self.times
            and self.verb in (None, verb)
            and self.resource in (None, resource)
            and self.subresource == subresource
        )

    def error(self, resource: str, name: str | None) -> ApiError:
        reason = _REASONS.get(self.status, "InternalError")
        what = f"{resource} {name!r}" if name else resource
        if self.status == 409:
            message = f"Operation cannot be fulfilled on {what}: the object has been modified"
        elif self.status == 429:
            message = "Too many requests, please try again later."
        else:
            message = f"injected {self.status} on {what}"
        return ApiError(self.status, reason, message)


class Faults:
    """The fault switches of one ``ApiServer`` (``server.faults``).

    ``outage(seconds)`` resets every connection until ``clock()`` has moved ``seconds`` on (``clock``
    defaults to ``time.monotonic``; pass a test's fake clock to make the outage last virtual time), and
    ``down()`` / ``up()`` do the same without an end. ``hang()`` accepts every request and answers none
    until ``unhang()`` (what a client sees behind a stuck load balancer: its read timeout, not a reset).
    ``inject(status, verb=..., resource=..., times=N)`` answers the next N matching requests with that
    status instead of executing them. ``reset_connections`` counts the requests refused by an outage,
    ``hung_requests`` those held by a hang.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._down_until: float | None = None
        self._injections: list[Injection] = []
        self._answering = threading.Event()
        self._answering.set()
        self.reset_connections = 0
        self.hung_requests = 0

    # -- hang ------------------------------------------------------------------------------------------

    def hang(self) -> None:
        """Hold every request from now on without answering, until :meth:`unhang`."""
        self._answering.clear()

    def unhang(self) -> None:
        """Answer again: the held requests go on (their clients may have given up on them)."""
        self._answering.set()

    def hold_if_hung(self, longest: float = 120.0) -> bool:
        """Block the request's thread while the server hangs (at most ``longest`` real seconds); True when
        it held the request (which is then never answered: its client gave up on it)."""
        if self._answering.is_set():
            return False
        with self._lock:
            self.hung_requests += 1
        self._answering.wait(longest)
        return True

    # -- outage ----------------------------------------------------------------------------------------

    def outage(self, seconds: float, clock: Callable[[], float] | None = None) -> None:
        """Go down now for ``seconds`` of ``clock`` (which replaces the current clock when given)."""
        with self._lock:
            if clock is not None:
                self.clock = clock
            self._down_until = self.clock() + seconds

    def down(self) -> None:
        """Go down until ``up()``."""
        with self._lock:
            self._down_until = float("inf")

    def up(self) -> None:
        """End an outage now."""
        with self._lock:
            self._down_until = None

    def is_down(self) -> bool:
        """Whether a request arriving now is refused."""
        with self._lock:
            if self._down_until is None:
                return False
            if self.clock() >= self._down_until:
                self._down_until = None
                return False
            return True

    def count_reset(self) -> None:
        with self._lock:
            self.reset_connections += 1

    # -- error answers ---------------------------------------------------------------------------------

    def inject(
        self,
        status: int,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        times: int = 1,
        retry_after: float | None = None,
    ) -> Injection:
        """Answer the next ``times`` requests matching ``verb`` (HTTP method) on ``resource`` (plural,
        e.g. ``nodes``) and ``subresource`` (e.g. ``eviction``; ``None`` = the object itself) with
        ``status``; a 429 carries ``Retry-After`` when ``retry_after`` is given."""
        injection = Injection(
            status, verb.upper() if verb else None, resource, subresource, times, retry_after
        )
        with self._lock:
            self._injections.append(injection)
        return injection

    def take(self, verb: str, resource: str, subresource: str | None) -> Injection | None:
        """The injection that answers this request (counted as used), if any."""
        with self._lock:
            for injection in self._injections:
                if injection.matches(verb, resource, subresource):
                    injection.hits += 1
                    return injection
        return None

    def clear(self) -> None:
        """Drop every injection and end any outage."""
        with self._lock:
            self._injections.clear()
            self._down_until = None
