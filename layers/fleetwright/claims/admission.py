"""Which claims may launch now: the bounds on a runaway that every launcher shares.

A NodePool whose registration breaker is open launches nothing until it closes, and the cluster launches
at most ``launch_rate_limit`` instances in any ``launch_rate_window_seconds`` (both kept in the state table,
so every invocation of every launcher sees the same count: ``fleetwright.state.launchguard``). A claim held
back is not recorded, so nothing is in flight for its pods: they stay pending, are told why
(``FailedScheduling``) when a provisioning pass opened the claim, and the next pass tries again. The cap
fails closed: when its record cannot be updated, nothing launches in that pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fleetwright.claims.reports import PassReport
from fleetwright.kube import reasons
from fleetwright.observability import metrics as obs
from fleetwright.scheduling.types import NewNodeClaim
from fleetwright.state.launchguard import Breaker, BreakerPolicy, LaunchRateConflictError
from fleetwright.state.nodeclaims import NodeClaimRecord

if TYPE_CHECKING:
    from fleetwright.claims.lifecycle import ClaimLifecycle

MAX_LOGGED_CLAIMS = 20
# The longest a breaker stays open after repeated failed retries (its cool-off doubles up to this).
MAX_COOL_OFF_SECONDS = 4 * 3600.0


def breaker_message(breaker: Breaker) -> str:
    """Why a NodePool is not launching, for logs, Events and its status."""
    from datetime import UTC, datetime

    until = datetime.fromtimestamp(breaker.open_until, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"NodePool {breaker.nodepool} launches nothing until {until}: "
        f"{breaker.reason or 'its nodes did not register'} (registration breaker)"
    )


class Admission:
    """Holds back the claims of NodePools whose breaker is open and those past the launch-rate cap."""

    def __init__(self, life: ClaimLifecycle) -> None:
        self.life = life

    def admit(
        self, claims: Sequence[NewNodeClaim], report: PassReport, *, nominate: bool
    ) -> list[NewNodeClaim]:
        """The claims that may launch now; the others go to ``report.failed`` (and ``report.held``) with
        the reason, logged, counted and, with ``nominate``, told to their pods."""
        life = self.life
        now = life.wall_clock()
        held: dict[str, str] = {}
        open_breakers = life.state.launchguard.open_breakers(now)
        for claim in claims:
            breaker = open_breakers.get(claim.nodepool)
            if breaker is not None:
                held[claim.name] = breaker_message(breaker)
                life.metrics.add(obs.REGISTRATION_BREAKER_HELD, 1, obs.COUNT, {"NodePool": claim.nodepool})
        candidates = [c for c in claims if c.name not in held]
        granted = self._granted(len(candidates), now)
        admitted, capped = candidates[:granted], candidates[granted:]
        if capped:
            reason = self._cap_message()
            held.update((c.name, reason) for c in capped)
            life.metrics.add(obs.LAUNCH_RATE_CAPPED, len(capped), obs.COUNT)
        if held:
            self._hold(claims, held, report, nominate=nominate)
        return admitted

    def _granted(self, wanted: int, now: float) -> int:
        """How many launches the cap grants now (none when its record changed meanwhile: fail closed)."""
        if wanted == 0:
            return 0
        life, config = self.life, self.life.config
        try:
            rate = life.state.launchguard.reserve(
                wanted, limit=config.launch_rate_limit, window=config.launch_rate_window_seconds, now=now
            )
        except LaunchRateConflictError as conflict:
            life.log.warning(
                "launch-rate record changed by another writer; nothing launched this pass",
                extra={"claims": wanted, "error": str(conflict)},
            )
            return 0
        if rate.granted < wanted:
            life.log.warning(
                "launch-rate cap reached; claims held back",
                extra={
                    "reason": "LaunchRateCapped",
                    "launchedInWindow": rate.used,
                    "limit": rate.limit,
                    "windowSeconds": config.launch_rate_window_seconds,
                    "granted": rate.granted,
                    "heldBack": wanted - rate.granted,
                },
            )
        return rate.granted

    def _cap_message(self) -> str:
        config = self.life.config
        return (
            f"launch-rate cap reached: at most {config.launch_rate_limit} instances are launched in "
            f"{config.launch_rate_window_seconds:.0f} s cluster-wide; the pod waits for a later pass"
        )

    def _hold(
        self, claims: Sequence[NewNodeClaim], held: Mapping[str, str], report: PassReport, *, nominate: bool
    ) -> None:
        life = self.life
        for name, reason in held.items():
            report.failed[name] = reason
            report.held[name] = reason
        by_reason: dict[str, list[str]] = {}
        for name, reason in held.items():
            by_reason.setdefault(reason, []).append(name)
        for reason, names in by_reason.items():
            life.log.warning(
                "claims held back",
                extra={"reason": reason, "count": len(names), "claims": names[:MAX_LOGGED_CLAIMS]},
            )
        if nominate:
            life.events.publish(
                *(
                    reasons.failed_scheduling(pod, held[claim.name])
                    for claim in claims
                    if claim.name in held
                    for pod in claim.pods
                )
            )


def count_timeouts(
    life: ClaimLifecycle, timed_out: Sequence[NodeClaimRecord], records: Sequence[NodeClaimRecord]
) -> None:
    """Count claims whose node never registered (or initialized) against their NodePool's breaker, and
    say so when one opens. ``records``: the claims as this reconciliation read them (the last node of a
    NodePool that became Ready resets its count). Never raises: a breaker not updated is logged and counted
    as a pass error, and the timeouts still terminated their instances."""
    config = life.config
    policy = BreakerPolicy(
        threshold=config.breaker_threshold,
        window_seconds=config.breaker_window_seconds,
        cool_off_seconds=config.breaker_cool_off_seconds,
        max_cool_off_seconds=max(config.breaker_cool_off_seconds, MAX_COOL_OFF_SECONDS),
    )
    by_pool: dict[str, list[NodeClaimRecord]] = {}
    for record in timed_out:
        by_pool.setdefault(record.nodepool, []).append(record)
    for pool, pool_records in sorted(by_pool.items()):
        # A node of the NodePool that became Ready resets the count, and one within the window keeps the
        # breaker closed (a node registered but never Ready does neither: it times out too).
        ready = [r.initialized_at for r in records if r.nodepool == pool and r.initialized_at]
        now = life.wall_clock()
        times = [now] * len(pool_records)
        reason = (
            "{count} of its nodes did not register or become Ready within "
            f"{config.registration_timeout_seconds:.0f} s and none was Ready in the last "
            f"{config.breaker_window_seconds / 60:.0f} min (last: NodeClaim {pool_records[-1].id})"
        )
        try:
            breaker = life.state.launchguard.record_timeouts(
                pool, times, last_registered=max(ready, default=None), policy=policy, reason=reason
            )
        except Exception as error:
            life.metrics.add(obs.PASS_ERRORS, 1)
            life.log.error(
                "registration breaker not updated",
                extra={"nodePool": pool, "error": f"{type(error).__name__}: {error}"},
            )
            continue
        if breaker.is_open(now) and breaker.opened_at >= now:  # opened by these timeouts
            life.metrics.add(obs.REGISTRATION_BREAKER_OPENED, 1, obs.COUNT, {"NodePool": pool})
            life.events.publish(reasons.registration_breaker_open(pool, breaker_message(breaker)))
            life.log.warning(
                "registration breaker opened; the NodePool launches nothing meanwhile",
                extra={
                    "nodePool": pool,
                    "reason": breaker_message(breaker),
                    "openUntil": breaker.open_until,
                    "consecutiveOpenings": breaker.opens,
                },
            )
