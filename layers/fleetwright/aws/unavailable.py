"""The unavailable-offerings cache: (instance type, zone, capacity type) that EC2 recently refused.

After an ``InsufficientInstanceCapacity`` (or a quota error) for an offering, asking again within a few
minutes only fails again; every launch and every scheduling pass skips it until the entry expires.
The cache sits behind :class:`~fleetwright.cloud.offerings.UnavailableOfferings` so a shared store
(DynamoDB) can replace the in-memory one when many Lambdas must agree.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from fleetwright.cloud.offerings import DEFAULT_TTL_SECONDS, UnavailableOffering


class InMemoryUnavailableOfferings:
    """:class:`UnavailableOfferings` in process memory (shared by a warm Lambda's invocations)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[tuple[str, str, str], UnavailableOffering] = {}
        self._lock = threading.Lock()

    def mark(
        self, instance_type: str, zone: str, capacity_type: str, reason: str, ttl: float = DEFAULT_TTL_SECONDS
    ) -> None:
        """Remember that the offering is unavailable for ``ttl`` seconds."""
        entry = UnavailableOffering(instance_type, zone, capacity_type, reason, self._clock() + ttl)
        with self._lock:
            self._entries[(instance_type, zone, capacity_type)] = entry

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        """True while the offering is remembered as unavailable."""
        key = (instance_type, zone, capacity_type)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False
            if entry.expires_at <= self._clock():
                del self._entries[key]
                return False
            return True

    def entries(self) -> list[UnavailableOffering]:
        """The offerings currently remembered (expired ones are dropped)."""
        now = self._clock()
        with self._lock:
            for key in [k for k, e in self._entries.items() if e.expires_at <= now]:
                del self._entries[key]
            return list(self._entries.values())

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()


_DEFAULT = InMemoryUnavailableOfferings()


def default_cache() -> InMemoryUnavailableOfferings:
    """The process-wide in-memory cache."""
    return _DEFAULT
