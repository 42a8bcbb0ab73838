"""The unavailable-offerings cache shared through DynamoDB, so every provisioner invocation (and every warm
Lambda) skips the offerings EC2 refused recently.

Each entry is one item with a TTL. Reads are served from a local copy refreshed with one Query at most
every ``refresh_seconds``: the scheduler asks about thousands of offerings per pass, and a few seconds of
staleness only costs one refused CreateFleet override. Entries this process marks are visible to it at
once. A failed refresh keeps the last copy (the cache fails open: at worst EC2 refuses again).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from fleetwright.cloud.offerings import DEFAULT_TTL_SECONDS, UnavailableOffering
from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable

log = logging.getLogger(__name__)

DEFAULT_REFRESH_SECONDS = 5.0


def offering_key(instance_type: str, zone: str, capacity_type: str) -> str:
    """The sort key of an entry: ``<type>#<zone>#<capacity type>``."""
    return f"{instance_type}#{zone}#{capacity_type}"


class DynamoUnavailableOfferings:
    """:class:`fleetwright.cloud.offerings.UnavailableOfferings` backed by the state table.

    Partition ``UNAVAILABLE#<cluster>``; ``expiresAt`` (epoch seconds) is both the entry's expiry, checked
    on read, and the table's TTL attribute, which removes the item later.
    """

    def __init__(
        self,
        table: DynamoTable,
        cluster: str,
        *,
        refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = table
        self.pk = f"UNAVAILABLE#{cluster}"
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, str], UnavailableOffering] = {}
        self._loaded_at: float | None = None

    def mark(
        self, instance_type: str, zone: str, capacity_type: str, reason: str, ttl: float = DEFAULT_TTL_SECONDS
    ) -> None:
        """Remember that the offering is unavailable for ``ttl`` seconds (written through to the table)."""
        expires = self._clock() + ttl
        entry = UnavailableOffering(instance_type, zone, capacity_type, reason, expires)
        with self._lock:
            self._entries[(instance_type, zone, capacity_type)] = entry
        self.table.put(
            {
                PARTITION_KEY: self.pk,
                SORT_KEY: offering_key(instance_type, zone, capacity_type),
                "instanceType": instance_type,
                "zone": zone,
                "capacityType": capacity_type,
                "reason": reason[:500],
                "expiresAtPrecise": expires,
                TTL_ATTRIBUTE: math.ceil(expires),
            }
        )

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        """True while the offering is remembered as unavailable."""
        self._refresh_if_stale()
        with self._lock:
            entry = self._entries.get((instance_type, zone, capacity_type))
        return entry is not None and entry.expires_at > self._clock()

    def entries(self) -> list[UnavailableOffering]:
        """The offerings currently remembered (expired ones are dropped)."""
        self._refresh_if_stale()
        now = self._clock()
        with self._lock:
            return sorted(
                (e for e in self._entries.values() if e.expires_at > now),
                key=lambda e: (e.instance_type, e.zone, e.capacity_type),
            )

    def refresh(self) -> None:
        """Read every entry from the table now."""
        items = self.table.query(self.pk)
        now = self._clock()
        fresh: dict[tuple[str, str, str], UnavailableOffering] = {}
        for item in items:
            expires = float(item.get("expiresAtPrecise") or item.get(TTL_ATTRIBUTE) or 0)
            if expires <= now:
                continue  # TTL deletion runs late; an expired item is not an entry
            key = (str(item["instanceType"]), str(item["zone"]), str(item["capacityType"]))
            fresh[key] = UnavailableOffering(*key, str(item.get("reason", "")), expires)
        with self._lock:
            # Keep what this process marked after the Query started.
            for key, entry in self._entries.items():
                if key not in fresh and entry.expires_at > now:
                    fresh[key] = entry
            self._entries = fresh
            self._loaded_at = now

    def _refresh_if_stale(self) -> None:
        loaded = self._loaded_at
        if loaded is not None and self._clock() - loaded < self.refresh_seconds:
            return
        try:
            self.refresh()
        except Exception as error:  # fail open: keep the last copy
            log.warning("cannot read the unavailable-offerings cache: %s", error)
            with self._lock:
                self._loaded_at = self._clock()
