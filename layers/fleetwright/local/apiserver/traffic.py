"""What the emulator has answered: requests, bytes each way and the CPU its request threads used, so a
bench can tell the cost of the API traffic from the cost of the code under test."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Traffic:
    """Counters the HTTP front end adds to; ``snapshot()`` reads them consistently."""

    requests: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    cpu_seconds: float = 0.0
    by_verb: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def request(self, verb: str, bytes_in: int) -> None:
        """Count one request (``verb``: list, watch, get, create, update, patch, delete, ...)."""
        with self._lock:
            self.requests += 1
            self.bytes_in += bytes_in
            self.by_verb[verb] = self.by_verb.get(verb, 0) + 1

    def sent(self, count: int) -> None:
        """Count ``count`` bytes of response body."""
        with self._lock:
            self.bytes_out += count

    def cpu(self, seconds: float) -> None:
        """Add the CPU time a request thread spent on one request."""
        with self._lock:
            self.cpu_seconds += seconds

    def snapshot(self) -> Traffic:
        """A copy of the counters at this moment."""
        with self._lock:
            return Traffic(self.requests, self.bytes_in, self.bytes_out, self.cpu_seconds, dict(self.by_verb))
