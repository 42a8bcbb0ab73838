"""Finalizing a terminated node's NodeClaim record (``fleetwright.state``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Protocol

from fleetwright.state.nodeclaims import ACTIVE, ClaimStatus, NodeClaimStore

TERMINATED_CLAIM_TTL_SECONDS = 86400.0


class ClaimBook(Protocol):
    """Where NodeClaims are recorded."""

    def finalize(self, claim_id: str, reason: str) -> bool:
        """Mark the claim terminated; False when there is no active claim by that id."""
        ...

    def active_instances(self, claim_ids: Iterable[str]) -> dict[str, str]:
        """Instance ids of the active claims among ``claim_ids`` ("" while still launching); failed,
        terminated and unknown claims are left out."""
        ...


class StoreClaimBook:
    """:class:`ClaimBook` over the state table's NodeClaims: an active claim moves to ``Terminated`` with
    the reason, and expires from the table after ``ttl_seconds``."""

    def __init__(
        self,
        store: NodeClaimStore,
        *,
        clock: Callable[[], float] = time.time,
        ttl_seconds: float = TERMINATED_CLAIM_TTL_SECONDS,
    ) -> None:
        self.store = store
        self.clock = clock
        self.ttl_seconds = ttl_seconds

    def finalize(self, claim_id: str, reason: str) -> bool:
        """Mark the claim terminated; False when there is no active claim by that id."""
        return self.store.transition(
            claim_id,
            ACTIVE,
            ClaimStatus.TERMINATED,
            reason=reason[:1000],
            expires_at=int(self.clock() + self.ttl_seconds),
        )

    def active_instances(self, claim_ids: Iterable[str]) -> dict[str, str]:
        """Instance ids of the active claims among ``claim_ids`` ("" while still launching)."""
        wanted = set(claim_ids)
        if not wanted:
            return {}
        return {r.id: r.instance_id for r in self.store.list() if r.id in wanted and r.active}
