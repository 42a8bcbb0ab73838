"""What bounds a runaway launcher, shared by every invocation through the state table: the cluster's
launch count over a rolling window (the launch-rate cap) and, per NodePool, the registration timeouts
that open its circuit breaker.

Both are one item each, read and rewritten whole under an optimistic ``version`` condition. A write that
finds the item changed by someone else fails *closed*: the launch-rate cap then grants nothing (the pass
launches nothing and tries again later); a timeout is read again and recorded once more (it must count).

Launch rate: item ``LAUNCHRATE#<cluster>`` / ``launches``, ``buckets`` (bucket start → launches granted
then, ``BUCKETS_PER_WINDOW`` buckets per window). Every bucket overlapping the window counts whole, so the
count over-estimates, never under-estimates: at most ``limit`` launches are granted in any span of
``window`` seconds.

Breakers: items ``BREAKER#<cluster>`` / NodePool name: ``timeouts`` (when claims of the NodePool timed out,
within the window and since one of its nodes last became Ready), ``opens`` (consecutive openings with no
node of the NodePool Ready since), ``openedAt``, ``openUntil``, ``reason``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable, Item

BUCKETS_PER_WINDOW: Final = 10
# Recording a timeout is retried this many times when another writer changed the breaker meanwhile.
RECORD_ATTEMPTS: Final = 4
# Breaker items left alone this long (no timeout) are collected by the TTL.
BREAKER_TTL_SECONDS: Final = 7 * 86400.0


class LaunchRateConflictError(Exception):
    """The launch-rate record changed between its read and its write: nothing was granted."""


@dataclass(frozen=True, slots=True)
class LaunchRate:
    """The launches counted in the window ending now, and what was granted of a request."""

    used: int
    granted: int
    limit: int


@dataclass(slots=True)
class Breaker:
    """One NodePool's registration breaker. Open while ``now < open_until``."""

    nodepool: str
    timeouts: list[float] = field(default_factory=list)
    opens: int = 0
    opened_at: float = 0.0
    open_until: float = 0.0
    reason: str = ""

    def is_open(self, now: float) -> bool:
        """True while launches for the NodePool are held back."""
        return now < self.open_until


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """When a NodePool's breaker opens: ``threshold`` registration timeouts within ``window_seconds`` with
    no node of the NodePool Ready within that window. It stays open ``cool_off_seconds``, doubled at each
    opening that follows with still no registration (a half-open probe that failed), up to
    ``max_cool_off_seconds``."""

    threshold: int = 3
    window_seconds: float = 3600.0
    cool_off_seconds: float = 1800.0
    max_cool_off_seconds: float = 4 * 3600.0

    def cool_off(self, opens: int) -> float:
        """How long the ``opens``-th consecutive opening lasts."""
        return min(self.max_cool_off_seconds, self.cool_off_seconds * 2.0 ** max(0, opens - 1))


class LaunchGuardStore:
    """The launch-rate record and the registration breakers of one cluster."""

    def __init__(self, table: DynamoTable, cluster: str) -> None:
        self.table = table
        self.rate_pk = f"LAUNCHRATE#{cluster}"
        self.breaker_pk = f"BREAKER#{cluster}"

    # -- the launch-rate cap -----------------------------------------------------------------------------

    def reserve(self, wanted: int, *, limit: int, window: float, now: float) -> LaunchRate:
        """Grant up to ``wanted`` launches so that no span of ``window`` seconds holds more than ``limit``
        (counted across every launcher of the cluster). Raises :class:`LaunchRateConflictError` when
        another writer changed the record meanwhile (nothing granted: fail closed)."""
        item = self.table.get(self.rate_pk, "launches") or {}
        bucket = max(1.0, window / BUCKETS_PER_WINDOW)
        buckets = _live_buckets(item.get("buckets") or {}, bucket, window, now)
        used = sum(buckets.values())
        granted = max(0, min(wanted, limit - used))
        if granted == 0:
            return LaunchRate(used, 0, limit)
        start = str(int(now // bucket * bucket))
        buckets[start] = buckets.get(start, 0) + granted
        version = int(item.get("version", 0))
        written = self.table.put(
            {
                PARTITION_KEY: self.rate_pk,
                SORT_KEY: "launches",
                "buckets": buckets,
                "version": version + 1,
                TTL_ATTRIBUTE: math.ceil(now + window + bucket),
            },
            condition="attribute_not_exists(#pk) OR #v = :v",
            names={"#pk": PARTITION_KEY, "#v": "version"},
            values={":v": version},
        )
        if not written:
            raise LaunchRateConflictError("the launch-rate record changed meanwhile")
        return LaunchRate(used, granted, limit)

    def launches(self, *, window: float, now: float) -> int:
        """The launches counted in the window ending ``now``."""
        item = self.table.get(self.rate_pk, "launches") or {}
        bucket = max(1.0, window / BUCKETS_PER_WINDOW)
        return sum(_live_buckets(item.get("buckets") or {}, bucket, window, now).values())

    # -- registration breakers ---------------------------------------------------------------------------

    def breakers(self, *, consistent: bool = True) -> dict[str, Breaker]:
        """Every NodePool's breaker, by NodePool (one Query; ``consistent=False`` costs half)."""
        found = (_breaker(item) for item in self.table.query(self.breaker_pk, consistent=consistent))
        return {b.nodepool: b for b in found}

    def open_breakers(self, now: float) -> dict[str, Breaker]:
        """The breakers open at ``now``, by NodePool."""
        return {name: b for name, b in self.breakers().items() if b.is_open(now)}

    def record_timeouts(
        self,
        nodepool: str,
        times: Sequence[float],
        *,
        last_registered: float | None,
        policy: BreakerPolicy,
        reason: str,
    ) -> Breaker:
        """Count registration timeouts of ``nodepool`` at ``times`` (``last_registered``: when a node of
        the NodePool last became Ready, as the claims show it) and open its breaker when ``policy`` says so,
        with ``reason`` (``{count}`` in it replaced by the timeouts counted); the breaker as written."""
        for _ in range(RECORD_ATTEMPTS):
            item = self.table.get(self.breaker_pk, nodepool)
            breaker = _breaker(item) if item else Breaker(nodepool)
            version = int(item.get("version", 0)) if item else 0
            for now in sorted(times):
                _count_timeout(breaker, now, last_registered, policy, reason)
            if self._write_breaker(breaker, version, max(times)):
                return breaker
        raise LaunchRateConflictError(f"the breaker of NodePool {nodepool} kept changing meanwhile")

    def _write_breaker(self, breaker: Breaker, version: int, now: float) -> bool:
        return self.table.put(
            {
                PARTITION_KEY: self.breaker_pk,
                SORT_KEY: breaker.nodepool,
                "timeouts": breaker.timeouts,
                "opens": breaker.opens,
                "openedAt": breaker.opened_at,
                "openUntil": breaker.open_until,
                "reason": breaker.reason,
                "version": version + 1,
                TTL_ATTRIBUTE: math.ceil(max(now, breaker.open_until) + BREAKER_TTL_SECONDS),
            },
            condition="attribute_not_exists(#pk) OR #v = :v",
            names={"#pk": PARTITION_KEY, "#v": "version"},
            values={":v": version},
        )


def _live_buckets(raw: dict[str, int], bucket: float, window: float, now: float) -> dict[str, int]:
    """The buckets overlapping the window ending ``now`` (each counted whole)."""
    return {start: int(count) for start, count in raw.items() if float(start) + bucket > now - window}


def _breaker(item: Item) -> Breaker:
    return Breaker(
        nodepool=str(item.get(SORT_KEY, "")),
        timeouts=[float(t) for t in item.get("timeouts") or []],
        opens=int(item.get("opens", 0)),
        opened_at=float(item.get("openedAt", 0.0)),
        open_until=float(item.get("openUntil", 0.0)),
        reason=str(item.get("reason", "")),
    )


def _count_timeout(
    breaker: Breaker, now: float, last_registered: float | None, policy: BreakerPolicy, reason: str
) -> None:
    """One timeout at ``now`` (``last_registered``: when a node of the NodePool last became Ready): a node
    Ready since resets the count (and the doubling), as does a window without a timeout after the breaker
    closed; a breaker already open stays as it is; a half-open breaker (opened before, no node Ready
    since) opens again at once, for twice as long; a closed one opens at ``threshold`` timeouts within the
    window if no node of the NodePool became Ready within it."""
    if last_registered is not None:
        breaker.timeouts = [t for t in breaker.timeouts if t > last_registered]
        if last_registered >= breaker.opened_at:
            breaker.opens = 0
    if breaker.opens and now > breaker.open_until + policy.window_seconds:
        breaker.opens = 0  # closed again a whole window ago: this is a new run of failures
    breaker.timeouts = [t for t in breaker.timeouts if t > now - policy.window_seconds] + [now]
    if breaker.is_open(now):
        return
    # A NodePool with a node Ready within the window works: its timeouts are the hosts' own faults.
    works = last_registered is not None and last_registered > now - policy.window_seconds
    if breaker.opens or (len(breaker.timeouts) >= policy.threshold and not works):
        breaker.opens += 1
        breaker.opened_at = now
        breaker.open_until = now + policy.cool_off(breaker.opens)
        breaker.reason = reason.replace("{count}", str(len(breaker.timeouts)))
