"""An expiring lease, so only one provisioner acts at a time.

The lease is one item (``LEASE#<cluster>`` / name) holding the holder's id and an expiry. Taking it is a
conditional put that succeeds when no one holds it, the holder's time ran out, or the caller already
holds it; renewing and releasing are conditional on still being the holder. A holder that dies simply
stops renewing, and the lease is free again ``seconds`` later.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable

DEFAULT_LEASE_SECONDS = 30.0


class LeaseLostError(Exception):
    """The lease expired and someone else took it: stop acting."""


class Lease:
    """One named lease for one holder.

    ``clock`` gives epoch seconds (all holders must agree on it, as Lambda clocks do within milliseconds).
    """

    def __init__(
        self,
        table: DynamoTable,
        cluster: str,
        holder: str,
        *,
        name: str = "provisioner",
        seconds: float = DEFAULT_LEASE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = table
        self.pk = f"LEASE#{cluster}"
        self.name = name
        self.holder = holder
        self.seconds = seconds
        self._clock = clock
        self.held = False
        self.expires_at = 0.0

    def try_acquire(self) -> bool:
        """Take the lease if it is free, expired or already ours."""
        now = self._clock()
        expires = now + self.seconds
        taken = self.table.put(
            {
                PARTITION_KEY: self.pk,
                SORT_KEY: self.name,
                "holder": self.holder,
                "acquiredAt": now,
                "expiresAtPrecise": expires,
                TTL_ATTRIBUTE: math.ceil(expires),
            },
            condition="attribute_not_exists(#pk) OR #exp <= :now OR #holder = :holder",
            names={"#pk": PARTITION_KEY, "#exp": "expiresAtPrecise", "#holder": "holder"},
            values={":now": now, ":holder": self.holder},
        )
        self.held = taken
        if taken:
            self.expires_at = expires
        return taken

    def acquire(
        self,
        until: float,
        *,
        poll_seconds: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] | None = None,
    ) -> bool:
        """Try until ``until`` (on ``clock``, default the lease's clock); True once held."""
        now = clock or self._clock
        while True:
            if self.try_acquire():
                return True
            left = until - now()
            if left <= 0:
                return False
            sleep(min(poll_seconds, left))

    def renew(self) -> None:
        """Extend the lease by ``seconds`` from now; raises :class:`LeaseLostError` when it is not ours."""
        now = self._clock()
        expires = now + self.seconds
        kept = self.table.update(
            self.pk,
            self.name,
            set_fields={"expiresAtPrecise": expires, TTL_ATTRIBUTE: math.ceil(expires)},
            condition="#holder = :holder",
            names={"#holder": "holder"},
            values={":holder": self.holder},
        )
        if not kept:
            self.held = False
            raise LeaseLostError(f"lease {self.name} is held by someone else now")
        self.held = True
        self.expires_at = expires

    def release(self) -> bool:
        """Give the lease up (only if still ours)."""
        self.held = False
        return self.table.delete(
            self.pk,
            self.name,
            condition="#holder = :holder",
            names={"#holder": "holder"},
            values={":holder": self.holder},
        )

    def current_holder(self) -> str | None:
        """Who holds the lease now (None when free or expired)."""
        item = self.table.get(self.pk, self.name)
        if not item or float(item.get("expiresAtPrecise", 0)) <= self._clock():
            return None
        return str(item.get("holder", ""))
