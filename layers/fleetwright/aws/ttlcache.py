"""Module-scope TTL caches that survive between warm Lambda invocations, on ``cachetools.TTLCache``.

cachetools keeps the entries and their expiry and reads the injected clock (``timer=``), so tests drive a
cache with a virtual clock. What this module adds: a lock (cachetools' caches are not thread-safe and the
launches run on threads), a value of ``None`` cached like any other, and :func:`clear_all_caches` for
tests and configuration changes. Importing cachetools costs about 1 ms (``docs/performance.md``).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar, cast

from cachetools import TTLCache

V = TypeVar("V")

DEFAULT_TTL_SECONDS = 300.0

_ALL: list[TtlCache[object]] = []
_MISSING: object = object()


class TtlCache(Generic[V]):
    """``key → value`` entries that expire ``ttl`` seconds after they were computed (unbounded in count:
    the keys are regions and queries, a handful per function)."""

    def __init__(self, ttl: float = DEFAULT_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._entries: TTLCache[Hashable, V] = TTLCache(maxsize=math.inf, ttl=ttl, timer=clock)
        self._lock = threading.Lock()
        _ALL.append(self)  # type: ignore[arg-type]

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The cached value for ``key``, computing (and caching) it when absent or expired. ``compute`` runs
        outside the lock, so a slow AWS call does not hold up the other keys."""
        with self._lock:
            found = self._entries.get(key, _MISSING)
        if found is not _MISSING:
            return cast(V, found)
        value = compute()
        self.put(key, value)
        return value

    def put(self, key: Hashable, value: V) -> None:
        """Store ``value`` for ``key`` (fresh for ``ttl`` seconds)."""
        with self._lock:
            self._entries[key] = value

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
