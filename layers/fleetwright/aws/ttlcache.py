"""A small thread-safe TTL cache: module-scope caches survive between warm Lambda invocations."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

DEFAULT_TTL_SECONDS = 300.0

_ALL: list[TtlCache[object]] = []


class TtlCache(Generic[V]):
    """``key → value`` entries that expire ``ttl`` seconds after they were computed."""

    def __init__(self, ttl: float = DEFAULT_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()
        _ALL.append(self)  # type: ignore[arg-type]

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The cached value for ``key``, computing (and caching) it when absent or expired."""
        now = self._clock()
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found[0] > now:
                return found[1]
        value = compute()
        self.put(key, value)
        return value

    def put(self, key: Hashable, value: V) -> None:
        """Store ``value`` for ``key`` (fresh for ``ttl`` seconds)."""
        with self._lock:
            self._entries[key] = (self._clock() + self.ttl, value)

    def invalidate(self, key: Hashable | None = None) -> None:
        """Drop one key, or every key when ``key`` is None."""
        with self._lock:
            if key is None:
                self._entries.clear()
            else:
                self._entries.pop(key, None)


def clear_all_caches() -> None:
    """Empty every :class:`TtlCache` of the process (tests; after a configuration change)."""
    for cache in _ALL:
        cache.invalidate()
