"""An expiring, fenced lease, so only one launcher acts at a time.

The lease is one item (``LEASE#<cluster>`` / name) holding the holder's id, an expiry and a
``generation`` that grows by one on every successful acquisition. Holder + generation are the fencing
token: every write a launcher makes to NodeClaims is a transaction that also checks the lease item still
names this holder and generation and has not expired (:meth:`Lease.check_op`). A holder that stalled past
its expiry and was overtaken therefore cannot write anything, even if it never noticed it lost the lease.

Taking the lease is a conditional update that succeeds when it is free, expired or already ours;
renewing and releasing are conditional on holder and generation. A holder that dies simply stops
renewing, and the lease is free again ``seconds`` later. The item is never deleted (releasing marks it
expired), so the generation only ever grows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from fleetwright.state.table import PARTITION_KEY, TTL_ATTRIBUTE, DynamoTable, Item, TransactOp

DEFAULT_LEASE_SECONDS = 30.0


class LeaseLostError(Exception):
    """The lease expired and someone else took it (or it was released): stop acting."""


class LeaseUnavailableError(Exception):
    """The lease could not be taken in time: another launcher is acting; nothing was done."""


class Lease:
    """One named lease for one holder.

    ``clock`` gives epoch seconds (all holders must agree on it, as Lambda clocks do within milliseconds).
    Safe to use from several threads (a pass's launches renew it in parallel).
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
        self._lock = threading.RLock()
        self.held = False
        self.expires_at = 0.0
        self.generation = 0

    def try_acquire(self) -> bool:
        """Take the lease if it is free, expired or already ours (a new generation either way)."""
        with self._lock:
            now = self._clock()
            expires = now + self.seconds
            response = self._update_returning(
                set_expression="#holder = :holder, #acq = :now, #exp = :exp, "
                "#gen = if_not_exists(#gen, :zero) + :one",
                condition="attribute_not_exists(#pk) OR #exp <= :now OR #holder = :holder",
                names={
                    "#pk": PARTITION_KEY,
                    "#exp": "expiresAtPrecise",
                    "#holder": "holder",
                    "#acq": "acquiredAt",
                    "#gen": "generation",
                    "#ttl": TTL_ATTRIBUTE,
                },
                values={":now": now, ":holder": self.holder, ":exp": expires, ":zero": 0, ":one": 1},
            )
            self.held = response is not None
            if response is not None:
                self.expires_at = expires
                self.generation = int(response.get("generation", 0))
            return self.held

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
        """Extend the lease by ``seconds`` from now; raises :class:`LeaseLostError` when it is not ours
        (someone took it, or it was released). Succeeding also proves no one else held it since."""
        with self._lock:
            now = self._clock()
            expires = now + self.seconds
            kept = self.held and self.table.update(
                self.pk,
                self.name,
                set_fields={"expiresAtPrecise": expires},
                condition="#holder = :holder AND #gen = :gen",
                names={"#holder": "holder", "#gen": "generation"},
                values={":holder": self.holder, ":gen": self.generation},
            )
            if not kept:
                self.held = False
                raise LeaseLostError(f"lease {self.name} (generation {self.generation}) is not ours any more")
            self.expires_at = expires

    def ensure(self, seconds: float) -> None:
        """Make sure the lease is ours for at least ``seconds`` more, renewing when it would expire
        sooner; raises :class:`LeaseLostError`."""
        with self._lock:
            if not self.held:
                raise LeaseLostError(f"lease {self.name} is not held")
            if self.remaining() < seconds:
                self.renew()

    def remaining(self) -> float:
        """Seconds until the lease expires by this holder's reckoning (≤ 0 when not held)."""
        return self.expires_at - self._clock() if self.held else 0.0

    def check_op(self) -> TransactOp:
        """The fence: a transaction condition that holds only while this holder, with this generation,
        holds an unexpired lease."""
        return self.table.check_op(
            self.pk,
            self.name,
            condition="#holder = :holder AND #gen = :gen AND #exp > :now",
            names={"#holder": "holder", "#gen": "generation", "#exp": "expiresAtPrecise"},
            values={":holder": self.holder, ":gen": self.generation, ":now": self._clock()},
        )

    def lost(self) -> LeaseLostError:
        """The error a failed fence raises (and the lease forgotten locally)."""
        self.held = False
        return LeaseLostError(f"lease {self.name} (generation {self.generation}) is not ours any more")

    def release(self) -> bool:
        """Give the lease up (only if still ours): it is marked expired, keeping its generation."""
        with self._lock:
            was_held = self.held
            self.held = False
            if not self.generation:
                return False
            released = self.table.update(
                self.pk,
                self.name,
                set_fields={"expiresAtPrecise": 0},
                condition="#holder = :holder AND #gen = :gen",
                names={"#holder": "holder", "#gen": "generation"},
                values={":holder": self.holder, ":gen": self.generation},
            )
            return released and was_held

    def current_holder(self) -> str | None:
        """Who holds the lease now (None when free or expired)."""
        item = self.table.get(self.pk, self.name)
        if not item or float(item.get("expiresAtPrecise", 0)) <= self._clock():
            return None
        return str(item.get("holder", ""))

    def _update_returning(
        self, *, set_expression: str, condition: str, names: dict[str, str], values: dict[str, object]
    ) -> Item | None:
        # The TTL attribute is dropped: a lease item must outlive its expiry so its generation is kept.
        return self.table.update_expression(
            self.pk,
            self.name,
            expression=f"SET {set_expression} REMOVE #ttl",
            condition=condition,
            names=names,
            values=values,
        )
